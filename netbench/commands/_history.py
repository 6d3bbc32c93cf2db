"""``--history DIR`` / ``--no-history`` (sweep, preflight, simulate): where the run adds itself.

Both set one value, ``history`` (``ReportOptions.history``; ``--no-history`` is ``off``), which the
run's history stage reads (``netbench.history.hook.HistoryStage``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def history_options(f: F) -> F:
    f = click.option("--no-history", "history", flag_value="off",
                     help="Do not add this run to the fleet history.")(f)
    return click.option("--history", "history", type=click.Path(file_okay=False), default=None,
                        help="The fleet history's folder this run is added to (default $NETBENCH_HISTORY, "
                        "else ~/.local/share/netbench/history; `netbench history`).")(f)
