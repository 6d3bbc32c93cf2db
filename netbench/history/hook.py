"""Adding a completed run to the history, on by default: one warning line at worst, never a cost
to the run's verdict or its exit status."""

from __future__ import annotations

import os
import sys
from pathlib import Path

OFF = ("off", "no", "0", "none", "")


def chosen_root(choice: str | None = None) -> Path | None:
    """The store runs are added to: ``choice`` (``--history DIR``; ``off``: none), else
    ``$NETBENCH_HISTORY`` (``off``: none), else the default."""
    from netbench.history.store import default_root

    if choice is not None:
        return None if choice.strip().lower() in OFF else Path(choice)
    value = os.environ.get("NETBENCH_HISTORY")
    if value is not None and value.strip().lower() in OFF:
        return None
    return default_root()


def record(run_dir: Path, choice: str | None = None) -> None:
    """Add the run at ``run_dir`` to the history (``choice``: ``--history``/``--no-history``);
    anything that goes wrong is one warning line."""
    root = chosen_root(choice)
    if root is None:
        return
    try:
        from netbench.history.ingest import read_run
        from netbench.history.store import HistoryStore

        HistoryStore(root).add(read_run(run_dir))
    except Exception as exc:  # noqa: BLE001 - the run and its verdict are whole without the history
        print(f"netbench: warning: run not added to the history at {root}: {exc}", file=sys.stderr)
