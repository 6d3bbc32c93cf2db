"""The history store: a folder of Parquet files, one file a table and run, that any warehouse reads.

    <root>/runs/<run_id>.parquet       the catalog: one row a run (start, command, hosts, rows)
    <root>/nodes/<run_id>.parquet      a node's effect (log busbw against the fleet), partners, switch
    <root>/links/<run_id>.parquet      a pair's busbw at each large size and its residual (the link's)
    <root>/switches/<run_id>.parquet   a leaf's cross-switch pairs against their class
    <root>/fleet/<run_id>.parquet      median busbw per collective, pattern and size
    <root>/findings/<run_id>.parquet   the run's findings (rule, severity, subject, title)
    <root>/env/<run_id>.parquet        each host's environment, ``host, field, value``

Root: ``--history DIR``, else ``$NETBENCH_HISTORY``, else ``$XDG_DATA_HOME/netbench/history``, else
``~/.local/share/netbench/history``. The query engine is pyarrow.dataset over each folder (no new
dependency: a 90-night history of 256 nodes reads a node's timeline in well under a second,
benchmarks/README.md "History"); DuckDB, Spark or pandas read the same folders as they are
(``SELECT * FROM 'history/nodes/*.parquet'``).

Writes are atomic and idempotent: each file is written under a temporary name made fresh (O_EXCL |
O_NOFOLLOW) and renamed over ``<run_id>.parquet``, so the same run added twice is one run, its newer
tables; the catalog's file is renamed last, so a run half added (a crash) is not listed and the next
add completes it. Adds hold the root's ``flock``. A folder of the store that is a symbolic link
(netbench makes none) is refused, never written through.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from netbench.common.errors import NetbenchError, UsageError
from netbench.history.folderlock import locked_folder
from netbench.history.ingest import RunTables

TABLES = ("nodes", "links", "switches", "fleet", "findings", "env", "runs")
CATALOG = "runs"


def default_root() -> Path:
    if os.environ.get("NETBENCH_HISTORY"):
        return Path(os.environ["NETBENCH_HISTORY"])
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "netbench" / "history"


class HistoryStore:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_root()

    # -- writing ------------------------------------------------------------------------------------
    def add(self, run: RunTables) -> bool:
        """Write ``run``'s tables; whether the run was in the history already (then replaced)."""
        with self._locked():
            known = (self.root / CATALOG / f"{run.run_id}.parquet").is_file()
            tables = run.tables()
            for name in TABLES:  # the catalog last: a run is listed only once all of it is there
                folder = self._folder(name, make=True)
                _write_atomic(tables[name], folder / f"{run.run_id}.parquet")
        return known

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The root made (a real folder, not a link) and held exclusively for one add."""
        self._check_not_link(self.root)
        with locked_folder(self.root, "history store", "--history or NETBENCH_HISTORY"):
            yield

    def _folder(self, name: str, make: bool = False) -> Path:
        folder = self.root / name
        self._check_not_link(folder)
        if make:
            folder.mkdir(exist_ok=True)
        return folder

    def _check_not_link(self, path: Path) -> None:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise NetbenchError(f"the history store {path}: {exc.strerror or exc}") from None
        if stat.S_ISLNK(mode):
            raise UsageError(f"the history store's {path} is a symbolic link, which netbench never makes: "
                             "refusing to read or write through it (give the real folder)")

    # -- reading ------------------------------------------------------------------------------------
    def exists(self) -> bool:
        return (self.root / CATALOG).is_dir()

    def runs(self) -> pa.Table:
        """The catalog, oldest run first (empty when nothing was added)."""
        table = self.table(CATALOG)
        if table.num_rows == 0:
            return table
        return table.sort_by([("started", "ascending"), ("run_id", "ascending")])

    def table(self, name: str, columns: list[str] | None = None, where: ds.Expression | None = None,
              runs: Collection[str] | None = None) -> pa.Table:
        """Every listed run's rows of table ``name`` (runs half added left out), ``where`` applied
        while reading (only the row groups and columns it needs are read); ``runs``: only these
        runs' files are opened."""
        folder = self._folder(name)
        files = sorted(str(p) for p in folder.glob("*.parquet") if not p.name.startswith(".")) \
            if folder.is_dir() else []
        if name != CATALOG:
            listed = {f"{r}.parquet" for r in self.run_ids() if runs is None or r in runs}
            files = [f for f in files if Path(f).name in listed]
        if not files:
            return pa.table({})
        try:
            data = ds.dataset(files, format="parquet")
            # by path, on one thread: no Python file object for a pool thread to free after exit began
            return data.to_table(columns=columns, filter=where, use_threads=False)
        except (pa.ArrowInvalid, OSError) as exc:
            raise NetbenchError(f"the history store {self.root}: table {name} unreadable: {exc}") from None

    def run_ids(self) -> list[str]:
        folder = self._folder(CATALOG)
        if not folder.is_dir():
            return []
        return sorted(p.name[: -len(".parquet")] for p in folder.glob("*.parquet")
                      if not p.name.startswith("."))

    def bytes(self) -> int:
        return sum(p.stat().st_size for name in TABLES if (self.root / name).is_dir()
                   for p in (self.root / name).glob("*.parquet"))


def _write_atomic(table: pa.Table, path: Path) -> None:
    """``table`` as ``path``, whole or not at all: a fresh temporary name (never a file or a link
    someone left there), fsync'd, renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise NetbenchError(f"cannot write {path}: {exc.strerror or exc}") from None
