"""Named baselines: a copy of a run's data files kept under a per-user directory, so ``netbench
compare RUN --baseline nightly`` works from any working directory and survives run cleanup.

Root: ``$NETBENCH_BASELINES``, else ``$XDG_DATA_HOME/netbench/baselines``, else
``~/.local/share/netbench/baselines``. A baseline is ``<root>/<name>/`` holding run.json, env.json,
inventory.jsonl and the rows: results.parquet's parts, or an older run's results.jsonl (what compare
needs; not the derived report).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from netbench.common.errors import UsageError
from netbench.common.rundir import ENV_JSON, INVENTORY_JSONL, RESULTS_JSONL, RESULTS_PARQUET, RUN_JSON, RunDir

FILES = (RUN_JSON, ENV_JSON, INVENTORY_JSONL, RESULTS_JSONL)


def holds_rows(run_dir: Path) -> bool:
    """Whether ``run_dir`` has a run's rows: results.parquet (a directory of parts) or an older
    run's results.jsonl."""
    return (run_dir / RESULTS_PARQUET).is_dir() or (run_dir / RESULTS_JSONL).is_file()
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def default_root() -> Path:
    if os.environ.get("NETBENCH_BASELINES"):
        return Path(os.environ["NETBENCH_BASELINES"])
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "netbench" / "baselines"


def validate_name(name: str) -> str:
    """Names become directory names: letters, digits, ``._-``, no leading dot, at most 64 chars."""
    if not _NAME_RE.match(name or "") or name in (".", ".."):
        raise UsageError(f"bad baseline name {name!r}: use letters, digits, '.', '_' or '-' (max 64, "
                         "not starting with '.' or '-')")
    return name


@dataclass
class BaselineInfo:
    name: str
    path: Path
    run_id: str | None
    started: str | None
    rows: int
    """Rows the reader kept (``reports.context.load_baseline``: the report's and compare's reader)."""
    left_out: int = 0
    """Rows (lines of results.jsonl, rows of a part) it could not read."""


@dataclass
class Saved:
    """What ``BaselineStore.save`` did: the baseline's directory, the run it holds, the baseline it
    replaced (``--overwrite``) and what was wrong with the run that ``--force`` saved anyway."""

    path: Path
    info: BaselineInfo
    replaced: BaselineInfo | None
    forced: list[str]


def run_problems(run_dir: Path) -> tuple[BaselineInfo, list[str]]:
    """The run as a baseline would hold it, and why it should not be one: no measured row, a run that
    ended early or never recorded its end, lines or files the reader could not read, and what it
    read but cannot vouch for (``common.runcheck``: mixed runs, unknown schemas, run.json against
    the rows). A baseline is what later runs are judged against: it must be whole."""
    from netbench.reports.context import load_baseline
    from netbench.reports.runcheck import ENDED_EARLY

    read = load_baseline(run_dir)
    rows = read.rows
    measured = int((rows["status"] == "ok").sum()) if len(rows) else 0
    results = {str(p) for p in RunDir(run_dir, "").row_files()}
    left_out = sum(1 for u in read.unreadable if u.file in results and u.line is not None)
    run_id, started = read.run.get("run_id"), read.run.get("started")
    info = BaselineInfo(run_dir.name, run_dir, run_id if isinstance(run_id, str) else None,
                        started if isinstance(started, str) else None, len(rows), left_out)
    problems = []
    if not measured:
        problems.append(f"no measured row ({len(rows)} rows, none with status ok)")
    status = read.run.get("status")
    if status in ENDED_EARLY:
        problems.append(f"run.json says {status}: the run ended early or never recorded its end")
    for u in read.unreadable[:5]:
        problems.append(f"{u.file}{f':{u.line}' if u.line else ''}: {u.reason}")
    if len(read.unreadable) > 5:
        problems.append(f"{len(read.unreadable) - 5} more unreadable lines or files")
    problems += [f"{d.file}: {d.reason} ({d.kind})" for d in read.doubts]
    return info, problems


class BaselineStore:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_root()

    def path(self, name: str) -> Path:
        return self.root / validate_name(name)

    def save(self, run_dir: str | Path, name: str, overwrite: bool = False, force: bool = False) -> Saved:
        """Copy the run's data files to ``<root>/<name>/`` (atomically: a temp dir, then rename).
        Refused (``UsageError``) for a run that ``run_problems`` finds wrong unless ``force``, and for a
        file that is not a regular file of the run directory (a link out of it: ``results.jsonl ->
        /etc/passwd``, a FIFO) always."""
        src = Path(run_dir)
        if not holds_rows(src):
            raise UsageError(f"{src} is not a run directory (no results.parquet or results.jsonl)")
        dest = self.path(name)
        if dest.exists() and not overwrite:
            raise UsageError(f"baseline {name!r} exists; pass --overwrite to replace it")
        files = [f for f in FILES if (src / f).exists() or (src / f).is_symlink()]
        if (src / RESULTS_PARQUET).is_dir():  # its parts, not results.jsonl (an export beside them)
            _check_inside(src, RESULTS_PARQUET)
            parts = RunDir(src, "").row_files()
            files = [f for f in files if f != RESULTS_JSONL] + [f"{RESULTS_PARQUET}/{p.name}" for p in parts]
        for f in files:
            _check_inside(src, f)
        info, problems = run_problems(src)
        if problems and not force:
            raise UsageError(f"{src} is not fit to be a baseline: {'; '.join(problems)} "
                             "(--force saves it anyway)")
        replaced = self._info(dest) if dest.is_dir() else None
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            for f in files:
                (tmp / f).parent.mkdir(exist_ok=True)
                _copy_regular(src / f, tmp / f)
            if dest.exists():
                shutil.rmtree(dest)
            os.replace(tmp, dest)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # the disk's, not the user's: 3, as any full disk
                why = f"cannot save baseline {name!r}: {exc.strerror}"
                raise OSError(exc.errno, why, str(dest)) from None
            raise UsageError(f"cannot save baseline {name!r} in {self.root}: {exc.strerror or exc}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # gone already when it became the baseline
        info.name, info.path = name, dest
        return Saved(dest, info, replaced, problems)

    def resolve(self, name_or_path: str | Path) -> Path:
        """A saved baseline's directory, or ``name_or_path`` itself when it is a run directory."""
        p = Path(name_or_path)
        if holds_rows(p):
            return p
        if _NAME_RE.match(str(name_or_path)) and holds_rows(self.root / str(name_or_path)):
            return self.root / str(name_or_path)
        raise UsageError(f"no baseline or run directory {str(name_or_path)!r} "
                         f"(baselines live in {self.root})")

    def list(self) -> list[BaselineInfo]:
        """Every saved baseline, its rows counted by the report's reader (garbage is no row)."""
        if not self.root.is_dir():
            # no store yet is no baseline; a store path that runs into a file ($HOME or
            # $NETBENCH_BASELINES a file) is a setting to mend, not an empty store
            first = next(p for p in (self.root, *self.root.parents) if p.exists() or p.is_symlink())
            if not first.is_dir():
                raise UsageError(f"the baseline store {self.root} is not a directory (or under a file "
                                 f"{first}): set NETBENCH_BASELINES to a folder")
            return []
        return [self._info(d) for d in sorted(self.root.iterdir())
                if d.is_dir() and not d.name.startswith(".") and holds_rows(d)]

    @staticmethod
    def _info(d: Path) -> BaselineInfo:
        info, _ = run_problems(d)
        return info

    def delete(self, name: str) -> None:
        dest = self.path(name)
        if not dest.is_dir():
            raise UsageError(f"no baseline named {name!r} in {self.root}")
        shutil.rmtree(dest)


def _check_inside(src: Path, name: str) -> None:
    """A run-directory file a baseline copies must be the run directory's own: a symbolic link that
    leads out of it (``results.jsonl -> /etc/passwd``) is refused, never followed."""
    path = src / name
    if path.is_symlink() and not path.resolve().is_relative_to(src.resolve()):
        raise UsageError(f"{path} is a symbolic link out of the run directory (to {os.readlink(path)}); "
                         "a baseline copies only the run's own files")


def _copy_regular(src: Path, dest: Path) -> None:
    """Copy a regular file (``open_regular``: a FIFO or device is refused, not read)."""
    from netbench.common.rundir import open_regular

    with open_regular(src) as fh, dest.open("wb") as out:
        shutil.copyfileobj(fh, out)
