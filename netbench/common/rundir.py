"""The run directory: the contract between measuring, inventory and reporting.

Layout (each JSON file carries a ``schema``)::

    run.json          command line, times, version, launcher, options, status
    env.json          per host: python, torch, NCCL, CUDA ... and NCCL_* variables
    inventory.jsonl   one NodeInventory per host
    counters.jsonl    port counters of every host before and after the run (a line per host and phase)
    results.parquet/  the ResultRows as Parquet parts, fsync'd as measured (older runs: results.jsonl)
    findings.json     derived (netbench report): netbench.common.findings
    report.html       derived (netbench report)

Rows are fsync'd as they come because the point of a benchmark that dies half way is to keep the
half it measured; a truncated last line (power cut, kill -9) is skipped on load, not fatal.
The bounded readers of these files are ``netbench.common.jsonread``'s, re-exported here.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from netbench.common import files
from netbench.common.errors import UsageError
from netbench.common.interrupts import DiskFull, disk_full
from netbench.common.jsonread import MAX_JSON_BYTES as MAX_JSON_BYTES
from netbench.common.jsonread import MAX_LINE_BYTES as MAX_LINE_BYTES
from netbench.common.jsonread import JsonlRead, JsonRead, Unreadable, read_json_object, read_jsonl
from netbench.common.jsonread import RunDirError as RunDirError
from netbench.common.jsonread import decode_json as decode_json
from netbench.common.jsonread import open_regular as open_regular
from netbench.common.jsontext import dumps

if TYPE_CHECKING:  # pandas is heavy; only load_results imports it
    import pandas as pd


RUN_SCHEMA = "netbench.run/1"
ENV_SCHEMA = "netbench.env/1"
PLAN_SCHEMA = "netbench.plan/2"  # compact: collectives/planfile.py (plan/1, the group records, still read)
COUNTERS_SCHEMA = "netbench.counters/1"
DEFAULT_ROOT = Path("netbench-runs")
LATEST = "latest"
"""``netbench-runs/latest``: a link to the newest run made under ``DEFAULT_ROOT``, which ``report``,
``compare`` and ``baseline save`` take as ``latest`` (``resolve_run``)."""


def resolve_run(text: str) -> Path:
    """A run-directory argument: ``latest`` is ``netbench-runs/latest``'s run (unless a directory of
    that name is here), anything else the path it names."""
    path = Path(text)
    if text != LATEST or path.is_dir():
        return path
    link = DEFAULT_ROOT / LATEST
    if not link.is_dir():
        raise UsageError(f"no latest run: {link} names the newest run made under {DEFAULT_ROOT}/ here, "
                         "and there is none")
    return link.resolve()


def _point_latest(path: Path) -> None:
    """Make ``netbench-runs/latest`` name ``path`` when the run lives there (a run elsewhere, --out
    /data/x, leaves it alone): a relative link, swapped in whole (two runs at once: the last wins).
    Best effort: a file system without links, or a real directory called latest, keeps its own."""
    try:
        if path.parent.resolve() != DEFAULT_ROOT.resolve():
            return
        tmp = path.parent / f".{LATEST}-{os.getpid()}-{path.name}"
        os.symlink(path.name, tmp)
        try:
            os.replace(tmp, path.parent / LATEST)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError:
        pass
# The run directory's files, named once (readers and writers everywhere use these names)
RUN_JSON = "run.json"
RESULTS_JSONL = "results.jsonl"
RESULTS_PARQUET = "results.parquet"
"""The rows, columnar: Parquet parts and the tail of the part being filled (``reports.rowstore``
says how and why); with it there, a results.jsonl beside it is an export, not the rows."""
PART_NAME = re.compile(r"(_?)part-(\d{6})\.(parquet|jsonl)")
ARRIVALS_JSONL = "arrivals.jsonl"
PER_ITER_GZ = "per_iter.jsonl.gz"  # --per-iter: every rank's every sample, a line per point
INVENTORY_JSONL = "inventory.jsonl"
COUNTERS_JSONL = "counters.jsonl"
PLAN_JSON = "plan.json"
ENV_JSON = "env.json"
FINDINGS_JSON = "findings.json"
REPORT_HTML = "report.html"
TRUTH_JSON = "truth.json"
"""What a simulated fabric had planted (``netbench simulate``): read by tests and benchmarks only."""
FOLLOW_UP_PLAN = "confirm-plan.json"
"""The plan of a later launch of the same run (sweep's re-tests); plan.json stays the run's own."""
SLURM_TOPOLOGY = "topology.conf"
"""``scontrol show topology``'s text as Slurm said it; run.json's ``topology`` is the parsed form."""
RESERVE = ".netbench-reserve"
"""Space a measuring run holds back in its directory until it ends (``RunDir.hold_reserve``): on a
full disk it is given up so that run.json can still say how the run ended (its atomic rewrite needs
room for a copy)."""
RESERVE_BYTES = 1 << 20
COUNTER_LIMIT = 1 << 64
"""Port counters (sysfs, ``ethtool -S``) are unsigned 64-bit at most: a value past it is damage."""
RUN_ID_PLACEHOLDER = "{id}"  # in --out: a fresh run directory per run (a Slurm prolog's fixed path)
RUN_FILES = (RUN_JSON, RESULTS_JSONL, RESULTS_PARQUET, INVENTORY_JSONL, COUNTERS_JSONL, PLAN_JSON, ENV_JSON,
             FINDINGS_JSON)  # any of these makes a run directory, which a new run must not write into


def _check_directory(path: Path) -> None:
    """``--out`` must be (or become) a directory: a file, a device (``/dev/null``) or a FIFO there,
    or a file where one of its parents should be, is named as such (exit 2), never "already holds a
    run"."""
    for part in (path, *path.parents):
        try:
            mode = os.stat(part).st_mode
        except OSError:
            continue  # not there (yet): made by create; one that cannot be reached fails there
        if not stat.S_ISDIR(mode):
            what = "a regular file" if stat.S_ISREG(mode) else files.file_kind(mode)
            where = "is" if part == path else f"is inside {part}, which is"
            raise UsageError(f"--out {path}: {where} {what}, not a directory; give a directory for the run")
        return


class RunDirTaken(UsageError):
    """``--out`` names a directory that already holds a run."""

    def __init__(self, path: Path, found: str):
        super().__init__(
            f"--out {path}: already holds a run ({found}); give a new directory, or put {{id}} in "
            f"the path (e.g. --out {path}/{{id}}) for a fresh run inside it"
        )


def new_run_id() -> str:
    """``<UTC timestamp>-<short id>``: sorts by time, unique across concurrent runs."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def atomic_write(path: str | Path, text: str | Iterable[str]) -> None:
    """Write then rename: a reader (a browser, node_exporter, a CI step) never sees half a file. The
    temporary name carries the pid, so two writers of one path never share a temporary file, and it
    is made fresh (O_EXCL | O_NOFOLLOW): a link planted at that predictable name fails the open
    instead of sending the text through it; a stale temporary of a dead writer is removed first, as a
    name (never followed). ``text`` in pieces: written as they come (a large plan is never one string)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if isinstance(text, str):
                fh.write(text)
            else:
                for piece in text:
                    fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())  # the data is on disk before the name points at it
        os.replace(tmp, path)
    except OSError as exc:  # the old file stays whole; a disk that is full stops the run (DiskFull)
        tmp.unlink(missing_ok=True)
        raise disk_full(exc, path) or exc from None


def _write_json(path: Path, data: Any) -> None:
    """Write atomically (tmp + rename) so a reader never sees half a run.json."""
    atomic_write(path, dumps(data, indent=2, sort_keys=False, default=str) + "\n")


#: run.json fields the report shows or reads, with the types they must have
_RUN_FIELDS: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("run_id", str, "a string"),
    ("argv", list, "a list"),
    ("status", str, "a string"),
    ("launcher", str, "a string"),
    ("started", str, "a string"),
    ("ended", str, "a string"),
    ("finished", str, "a string"),
    ("netbench_version", str, "a string"),
    ("options", dict, "an object"),
    ("topology", (dict, str), "an object or a path"),
)


@dataclass
class RunDir:
    """A run directory on disk. Create with :meth:`create`, open an existing one with :meth:`open`."""

    path: Path
    run_id: str

    @classmethod
    def create(cls, out: str | Path | None = None, run_id: str | None = None) -> RunDir:
        """A new run directory: ``out`` (``{id}`` in it becomes the run id), else under
        ``netbench-runs/``. A directory that already holds a run is refused (``RunDirTaken``, exit
        2): rows appended to an old results.jsonl would be judged as one run with the old ones.
        run.json is claimed with O_EXCL, so two commands given the same ``--out`` at the same
        moment cannot both write into it."""
        run_id = run_id or new_run_id()
        path = cls.check_free(out, run_id)
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd = os.open(path / RUN_JSON, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            _check_directory(path)  # a file made there since check_free: not a run, not a directory
            raise RunDirTaken(path, RUN_JSON) from None
        except OSError as exc:
            raise UsageError(f"--out {path}: cannot create the run directory: {exc.strerror}") from None
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps({"schema": RUN_SCHEMA, "run_id": run_id, "status": "starting"}) + "\n")
        _point_latest(path)
        return cls(path=path, run_id=run_id)

    def hold_reserve(self) -> None:
        """RESERVE_BYTES written (not a sparse file: its pages are the disk's) for run.json's last
        words on a full disk, until ``release_reserve`` (a measuring command's end); a disk too full
        for it already goes without."""
        try:
            with open(self.path / RESERVE, "wb") as fh:
                fh.write(bytes(RESERVE_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:
            self.release_reserve()

    def release_reserve(self) -> None:
        """Give the reserve back (the run's end, or a full disk)."""
        (self.path / RESERVE).unlink(missing_ok=True)

    @staticmethod
    def check_free(out: str | Path | None, run_id: str) -> Path:
        """The run directory ``create`` would make, or ``RunDirTaken`` (exit 2) when it already holds
        a run: asked before minutes of inventory, not after (``create`` claims it for good)."""
        path = Path(str(out).replace(RUN_ID_PLACEHOLDER, run_id)) if out else DEFAULT_ROOT / run_id
        _check_directory(path)
        links = [name for name in RUN_FILES if (path / name).is_symlink()]
        if links:  # dangling or not, someone else's: the run's rows would go wherever it points
            raise UsageError(f"--out {path}: {links[0]} is a symbolic link; a run never writes through a "
                             "link it did not make: give a new directory")
        held = [name for name in RUN_FILES if (path / name).exists()]
        if held:
            raise RunDirTaken(path, held[0])
        return path

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"no run directory at {path}")
        run_id = read_json_object(path / RUN_JSON).data.get("run_id")
        return cls(path=path, run_id=run_id if isinstance(run_id, str) else path.name)

    # -- files ---------------------------------------------------------------------------------
    @property
    def results_path(self) -> Path:
        return self.path / RESULTS_JSONL

    def row_files(self) -> list[Path]:
        """The files of the rows in order: results.parquet's parts (a tail where its part is not
        made yet; the part wins over its tail), else an older run's results.jsonl."""
        store = self.path / RESULTS_PARQUET
        if not store.is_dir():
            return [self.results_path] if self.results_path.exists() or self.results_path.is_symlink() else []
        parts: dict[int, Path] = {}
        for p in store.iterdir():
            m = PART_NAME.fullmatch(p.name)
            if m and (m[1] == "" or int(m[2]) not in parts):
                parts[int(m[2])] = p
        return [parts[k] for k in sorted(parts)]

    @property
    def inventory_path(self) -> Path:
        return self.path / INVENTORY_JSONL

    def write_run(self, **fields: Any) -> dict[str, Any]:
        """Create or update run.json, keeping fields written earlier; only RunRecord's fields."""
        from netbench.common.runrecord import check_fields

        check_fields(set(fields))
        path = self.path / RUN_JSON
        data = read_json_object(path).data
        data.setdefault("schema", RUN_SCHEMA)
        data.setdefault("run_id", self.run_id)
        data.setdefault("argv", sys.argv)
        data.update(fields)
        try:
            _write_json(path, data)
        except DiskFull:
            self.release_reserve()  # the room kept for this: run.json says how the run ended
            _write_json(path, data)
        return data

    def read_run(self) -> dict[str, Any]:
        return self.load_run().data

    def load_run(self) -> JsonRead:
        """run.json as an object, with a field of the wrong type left out and named (the report
        shows these fields; the analysis reads ``topology``, checked where it is used)."""
        doc = read_json_object(self.path / RUN_JSON)
        for name, types, expected in _RUN_FIELDS:
            value = doc.data.get(name)
            if value is not None and not isinstance(value, types):
                why = f"field {name!r} is not {expected}; left out"
                doc.unreadable.append(Unreadable(str(self.path / RUN_JSON), None, why))
                del doc.data[name]
        return doc

    def write_env(self, hosts: dict[str, dict[str, Any]]) -> None:
        _write_json(self.path / ENV_JSON, {"schema": ENV_SCHEMA, "hosts": hosts})

    def load_env(self) -> JsonRead:
        """env.json as ``{"hosts": {host: {...}}}``; a host whose entry is not an object is left out
        and named."""
        doc = read_json_object(self.path / ENV_JSON)
        hosts = doc.data.get("hosts", {})
        if not isinstance(hosts, dict):
            doc.unreadable.append(Unreadable(str(self.path / ENV_JSON), None, "'hosts' is not an object"))
            hosts = {}
        kept = {h: v for h, v in hosts.items() if isinstance(v, dict)}
        for h in hosts.keys() - kept.keys():
            doc.unreadable.append(
                Unreadable(str(self.path / ENV_JSON), None, f"host {h!r}: entry is not an object; left out")
            )
        doc.data["hosts"] = kept
        return doc

    def write_plan(self, plan_json: Iterable[str], name: str = PLAN_JSON) -> None:
        """plan.json: the plan the ranks receive through the store, the JSON object
        ``collectives.planfile`` writes in pieces (this layer does not know the class), streamed to
        disk with the schema as its first key. ``name``: a later launch's plan beside it
        (``confirm-plan.json``: the re-tests of ``sweep --hosts``)."""

        def pieces() -> Iterator[str]:
            chunks = iter(plan_json)
            first = next(chunks)
            if not first.startswith("{") or first.startswith("{}"):
                raise ValueError("a plan is a JSON object with members")
            yield '{"schema": ' + json.dumps(PLAN_SCHEMA) + ", " + first[1:]
            yield from chunks
            yield "\n"

        atomic_write(self.path / name, pieces())

    def write_json(self, name: str, data: Any) -> Path:
        path = self.path / name
        _write_json(path, data)
        return path

    def write_inventory(self, nodes: list[Any]) -> None:
        """Write every NodeInventory (reachable or not) as one JSON line each, replacing the file
        atomically: a reader (or a run killed half way) never sees half an inventory."""
        lines = (dumps(n.to_dict() if hasattr(n, "to_dict") else n, default=str) + "\n" for n in nodes)
        atomic_write(self.inventory_path, "".join(lines))

    def read_inventory(self) -> list[dict[str, Any]]:
        return self.load_inventory().records

    def load_inventory(self, check: Callable[[Any], str | None] | None = None) -> JsonlRead:
        """inventory.jsonl; ``check`` (the inventory model's shape, which this layer does not know)
        refuses a node that does not fit, named with its line."""
        return read_jsonl(self.inventory_path, check)

    @property
    def counters_path(self) -> Path:
        return self.path / COUNTERS_JSONL

    def write_counters(self, phase: str, snapshots: list[dict[str, Any]]) -> None:
        """Append one snapshot of every host's port counters (``phase``: before | after the run),
        one line per host: {schema, phase, host, status, error, collected_at, ports}. The before
        lines are on disk before any traffic, so an interrupted run keeps them."""
        try:
            with open(self.counters_path, "a", encoding="utf-8") as fh:
                for snap in snapshots:
                    line = {"schema": COUNTERS_SCHEMA, "phase": phase, **snap}
                    fh.write(dumps(line, default=str) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise disk_full(exc, self.counters_path) or exc from None

    def load_counters(self) -> JsonlRead:
        """counters.jsonl: snapshots that name a phase and a host, whose counters are whole numbers a
        port counter can hold (a 1e40 is no error count); others are left out, named."""

        def check(rec: Any) -> str | None:
            if not isinstance(rec, dict) or rec.get("phase") not in ("before", "after"):
                return "not a counters snapshot (no phase before/after)"
            if not isinstance(rec.get("host"), str) or not isinstance(rec.get("ports", []), list):
                return "counters snapshot without a host name or with ports that are not a list"
            for port in rec.get("ports", []):
                counters = port.get("counters") if isinstance(port, dict) else None
                for name, value in (counters.items() if isinstance(counters, dict) else ()):
                    if type(value) is not int or not 0 <= value < COUNTER_LIMIT:
                        shown = str(value) if len(str(value)) <= 24 else f"a {len(str(value))}-digit number"
                        return (f"port {str(port.get('port'))[:40]!r} counter {str(name)[:60]!r}: "
                                f"{shown} is no value a 64-bit port counter can hold")
            return None

        return read_jsonl(self.counters_path, check)

    def read_rows(self) -> list[dict[str, Any]]:
        """The usable rows (``load_rows`` also says which were left out)."""
        return self.load_rows().records

    def load_rows(self) -> JsonlRead:
        """The rows that fit the row contract (``netbench.common.rows``), of either layout, and every
        line or part row that did not, with its number (a part's: its row) and why."""
        from netbench.common.rows import row_problem

        reads = [read_part(p, row_problem) if p.suffix == ".parquet" else read_jsonl(p, row_problem)
                 for p in self.row_files()]
        return JsonlRead([r for x in reads for r in x.records], [u for x in reads for u in x.unreadable])

    def writer(self) -> ResultWriter:
        return ResultWriter(self.results_path)

    @property
    def arrivals_path(self) -> Path:
        return self.path / ARRIVALS_JSONL

    def arrivals_writer(self) -> ResultWriter:
        """arrivals.jsonl: one ``collectives.arrivals.ArrivalRecord`` per world/ring/intra point,
        appended as measured (the same appending as the rows)."""
        return ResultWriter(self.arrivals_path)

    def append_samples(self, record: dict[str, Any], samples: Any) -> None:
        """per_iter.jsonl.gz (``--per-iter``): one line per point, its arrivals record's key fields and
        every rank's samples; a gzip member per line, so a run cut short keeps every line before."""
        import gzip

        keys = ("group", "hosts", "ranks", "collective", "bytes", "in_place", "engine", "iters",
                "clock_err_us")
        line = {k: record.get(k) for k in keys} | {"samples": samples}
        try:
            with gzip.open(self.path / PER_ITER_GZ, "at", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
        except OSError as exc:
            raise disk_full(exc, self.path / PER_ITER_GZ) or exc from None




def read_parquet(fh: IO[bytes], columns: list[str] | None = None) -> Any:
    """A Parquet file opened by netbench (``open_regular``), read on this thread alone. Not
    ``pq.read_table``: it reads through the dataset scanner, whose continuations on arrow's thread
    pool may drop the last reference to this Python file object after the interpreter began to exit;
    that thread cannot take the GIL then and the process aborts ("terminate called without an active
    exception", 134: 10 of 16 ``netbench simulate --no-report`` runs here, 26 of 30 scripts, and
    benchmarks/gpu/check.sh's smoke check on the lent H100)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(fh, pre_buffer=False).read(columns=columns, use_threads=False)


def read_part(path: Path, check: Callable[[Any], str | None]) -> JsonlRead:
    """A Parquet part's rows as records (``part_records``); a part that is no Parquet file is named."""
    import pyarrow as pa

    try:
        with open_regular(path) as fh:
            table = read_parquet(fh)
    except (pa.ArrowException, OSError) as exc:
        return JsonlRead([], [Unreadable(str(path), None, f"not a Parquet part of rows ({exc}); left out")])
    return part_records(path, table.to_pylist(), 0, check)


def part_records(path: Path, records: list[Any], at: int, check: Callable[[Any], str | None]) -> JsonlRead:
    """A part's records from row ``at + 1`` on (``extra`` decoded), those ``check`` refuses named."""
    got = JsonlRead([], [])
    for number, rec in enumerate(records, start=at + 1):
        try:
            rec["extra"] = decode_json(rec["extra"].encode()) if isinstance(rec.get("extra"), str) else {}
            why = check(rec)
        except ValueError as exc:
            why = f"field 'extra': {exc}"
        got.unreadable.append(Unreadable(str(path), number, why)) if why else got.records.append(rec)
    return got


class ResultWriter:
    """Appends rows to a JSON-lines file (an older layout's results.jsonl, a Parquet part's tail);
    each row is written whole or not at all, and fsync'd before the call returns."""

    def __init__(self, path: Path):
        self.path = path
        self._fh = path.open("ab", buffering=0)  # no buffer a failed write could flush later
        self.count = 0

    def write(self, row: dict[str, Any] | Any) -> None:
        """Append one row; DiskFull when the disk has no room for it (nothing of it is left then)."""
        data = row.to_dict() if hasattr(row, "to_dict") else row
        self._append(dumps(data, default=str) + "\n")
        self.count += 1

    def write_many(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append rows with one fsync at the end, not one a row: an import, whose rows a re-run
        writes again (its run.json says ``completed`` only after this returned)."""
        lines = [json.dumps(data, default=str) + "\n" for data in rows]
        self._append("".join(lines))
        self.count += len(lines)

    def _append(self, text: str) -> None:
        """``text`` at the file's end, fsync'd; on a refusal (a full disk) the file is cut back to
        where it was, so no row is left half-written (issue 45: a disk that filled mid-run cut the
        row being written)."""
        fd = self._fh.fileno()
        start = os.fstat(fd).st_size
        try:
            view = memoryview(text.encode("utf-8"))
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass  # the reader skips a cut last line
            raise disk_full(exc, self.path) or exc from None

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_results(path: str | Path) -> pd.DataFrame:
    """Load a run directory's rows (results.parquet, or an older run's results.jsonl) into a pandas
    DataFrame, one row per measurement.

    Public API: ``netbench.load_results("netbench-runs/<id>")``. A line that is not a valid row (a
    truncated last line, a damaged one) is left out with a warning that names it.
    """
    import warnings

    import pandas as pd

    loaded = RunDir.open(path).load_rows()
    if loaded.unreadable:
        first = loaded.unreadable[0]
        warnings.warn(
            f"{first.file}: {len(loaded.unreadable)} line(s) left out (line {first.line}: {first.reason})",
            stacklevel=2,
        )
    return pd.DataFrame(loaded.records)
