"""The run directory: the contract between measuring, inventory and reporting.

Layout (each JSON file carries a ``schema``)::

    run.json          command line, times, version, launcher, options, status
    env.json          per host: python, torch, NCCL, CUDA ... and NCCL_* variables
    inventory.jsonl   one NodeInventory per host
    results.jsonl     one ResultRow per measurement, appended + flushed + fsync'd as measured
    findings.json     derived (netbench report): netbench.common.findings
    report.html       derived (netbench report)

Rows are fsync'd one by one because the point of a benchmark that dies half way is to keep the
half it measured; a truncated last line (power cut, kill -9) is skipped on load, not fatal.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.common.errors import UsageError

if TYPE_CHECKING:  # pandas is heavy; only load_results imports it
    import pandas as pd

RUN_SCHEMA = "netbench.run/1"
ENV_SCHEMA = "netbench.env/1"
PLAN_SCHEMA = "netbench.plan/1"
DEFAULT_ROOT = Path("netbench-runs")
RUN_ID_PLACEHOLDER = "{id}"  # in --out: a fresh run directory per run (a Slurm prolog's fixed path)
# any of these makes a directory a run directory, which a new run must not write into
RUN_FILES = ("run.json", "results.jsonl", "inventory.jsonl", "plan.json", "env.json", "findings.json")


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


def atomic_write(path: str | Path, text: str) -> None:
    """Write then rename: a reader (a browser, node_exporter, a CI step) never sees half a file. The
    temporary name carries the pid, so two writers of one path never share a temporary file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _write_json(path: Path, data: Any) -> None:
    """Write atomically (tmp + rename) so a reader never sees half a run.json."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read JSON lines, skipping a truncated or corrupt line instead of failing the whole file."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


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
        path = Path(str(out).replace(RUN_ID_PLACEHOLDER, run_id)) if out else DEFAULT_ROOT / run_id
        held = [name for name in RUN_FILES if (path / name).exists()]
        if held:
            raise RunDirTaken(path, held[0])
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd = os.open(path / "run.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise RunDirTaken(path, "run.json") from None
        except OSError as exc:
            raise UsageError(f"--out {path}: cannot create the run directory: {exc.strerror}") from None
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps({"schema": RUN_SCHEMA, "run_id": run_id, "status": "starting"}) + "\n")
        return cls(path=path, run_id=run_id)

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"no run directory at {path}")
        run = path / "run.json"
        run_id = path.name
        if run.exists():
            try:
                run_id = json.loads(run.read_text()).get("run_id", run_id)
            except json.JSONDecodeError:
                pass
        return cls(path=path, run_id=run_id)

    # -- files ---------------------------------------------------------------------------------
    @property
    def results_path(self) -> Path:
        return self.path / "results.jsonl"

    @property
    def inventory_path(self) -> Path:
        return self.path / "inventory.jsonl"

    def write_run(self, **fields: Any) -> dict[str, Any]:
        """Create or update run.json, keeping fields written earlier."""
        path = self.path / "run.json"
        data: dict[str, Any] = {}
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except json.JSONDecodeError:
                data = {}
        data.setdefault("schema", RUN_SCHEMA)
        data.setdefault("run_id", self.run_id)
        data.setdefault("argv", sys.argv)
        data.update(fields)
        _write_json(path, data)
        return data

    def read_run(self) -> dict[str, Any]:
        path = self.path / "run.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def write_env(self, hosts: dict[str, dict[str, Any]]) -> None:
        _write_json(self.path / "env.json", {"schema": ENV_SCHEMA, "hosts": hosts})

    def read_env(self) -> dict[str, Any]:
        path = self.path / "env.json"
        return json.loads(path.read_text()) if path.exists() else {"hosts": {}}

    def write_plan(self, plan: dict[str, Any]) -> None:
        """plan.json: the plan exactly as the ranks receive it through the store (a ``WorkerPlan`` as
        a dict; this layer does not know the class)."""
        _write_json(self.path / "plan.json", {"schema": PLAN_SCHEMA, **plan})

    def write_json(self, name: str, data: Any) -> Path:
        path = self.path / name
        _write_json(path, data)
        return path

    def write_inventory(self, nodes: list[Any]) -> None:
        """Write every NodeInventory (reachable or not) as one JSON line each."""
        with self.inventory_path.open("w") as fh:
            for n in nodes:
                fh.write(json.dumps(n.to_dict() if hasattr(n, "to_dict") else n, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def read_inventory(self) -> list[dict[str, Any]]:
        return read_jsonl(self.inventory_path)

    def read_rows(self) -> list[dict[str, Any]]:
        return read_jsonl(self.results_path)

    def writer(self) -> ResultWriter:
        return ResultWriter(self.results_path)


class ResultWriter:
    """Appends rows to results.jsonl; each row is flushed and fsync'd before the call returns."""

    def __init__(self, path: Path):
        self.path = path
        self._fh = path.open("a", encoding="utf-8")
        self.count = 0

    def write(self, row: dict[str, Any] | Any) -> None:
        data = row.to_dict() if hasattr(row, "to_dict") else row
        self._fh.write(json.dumps(data, default=str) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.count += 1

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_results(path: str | Path) -> pd.DataFrame:
    """Load a run directory's results.jsonl into a pandas DataFrame, one row per measurement.

    Public API: ``netbench.load_results("netbench-runs/<id>")``. A truncated last line is skipped.
    """
    import pandas as pd

    rows = RunDir.open(path).read_rows()
    return pd.DataFrame(rows)
