"""Named baselines: a copy of a run's data files kept under a per-user directory, so ``netbench
compare RUN --baseline nightly`` works from any working directory and survives run cleanup.

Root: ``$NETBENCH_BASELINES``, else ``$XDG_DATA_HOME/netbench/baselines``, else
``~/.local/share/netbench/baselines``. A baseline is ``<root>/<name>/`` holding run.json, env.json,
inventory.jsonl and results.jsonl (what compare needs; not the derived report).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from netbench.common.errors import UsageError
from netbench.common.rundir import ENV_JSON, INVENTORY_JSONL, RESULTS_JSONL, RUN_JSON

FILES = (RUN_JSON, ENV_JSON, INVENTORY_JSONL, RESULTS_JSONL)
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


class BaselineStore:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_root()

    def path(self, name: str) -> Path:
        return self.root / validate_name(name)

    def save(self, run_dir: str | Path, name: str, overwrite: bool = False) -> Path:
        """Copy the run's data files to ``<root>/<name>/`` (atomically: a temp dir, then rename)."""
        src = Path(run_dir)
        if not (src / RESULTS_JSONL).is_file():
            raise UsageError(f"{src} is not a run directory (no results.jsonl)")
        dest = self.path(name)
        if dest.exists() and not overwrite:
            raise UsageError(f"baseline {name!r} exists; pass --overwrite to replace it")
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for f in FILES:
            if (src / f).is_file():
                shutil.copy2(src / f, tmp / f)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
        return dest

    def resolve(self, name_or_path: str | Path) -> Path:
        """A saved baseline's directory, or ``name_or_path`` itself when it is a run directory."""
        p = Path(name_or_path)
        if (p / RESULTS_JSONL).is_file():
            return p
        if _NAME_RE.match(str(name_or_path)) and (self.root / str(name_or_path) / RESULTS_JSONL).is_file():
            return self.root / str(name_or_path)
        raise UsageError(f"no baseline or run directory {str(name_or_path)!r} "
                         f"(baselines live in {self.root})")

    def list(self) -> list[BaselineInfo]:
        from netbench.common.rundir import RunDir, open_regular

        out = []
        if not self.root.is_dir():
            return out
        for d in sorted(self.root.iterdir()):
            if not d.is_dir() or d.name.startswith(".") or not (d / RESULTS_JSONL).is_file():
                continue
            run = RunDir(d, d.name).read_run()  # a damaged run.json is {} (its fields typed), not a crash
            with open_regular(d / RESULTS_JSONL) as fh:
                rows = sum(1 for line in fh if line.strip())
            out.append(BaselineInfo(d.name, d, run.get("run_id"), run.get("started"), rows))
        return out

    def delete(self, name: str) -> None:
        dest = self.path(name)
        if not dest.is_dir():
            raise UsageError(f"no baseline named {name!r} in {self.root}")
        shutil.rmtree(dest)
