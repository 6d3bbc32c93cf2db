"""``--history DIR`` / ``--no-history`` (``netbench simulate``): where its run adds itself.

Both only set ``NETBENCH_HISTORY`` for this process, which the run's history stage reads
(``netbench.history.hook``): the stage is the engine's, written once, and no option record between
the command line and it has to carry the choice."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def _history(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None and not ctx.meta.get("netbench.no_history"):
        os.environ["NETBENCH_HISTORY"] = value


def _no_history(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:  # eager: before --history, which it overrides
        ctx.meta["netbench.no_history"] = True
        os.environ["NETBENCH_HISTORY"] = "off"


def history_options(f: F) -> F:
    f = click.option("--no-history", is_flag=True, expose_value=False, callback=_no_history, is_eager=True,
                     help="Do not add this run to the fleet history.")(f)
    return click.option("--history", "history_dir", type=click.Path(file_okay=False), expose_value=False,
                        callback=_history,
                        help="The fleet history's folder this run is added to (default $NETBENCH_HISTORY, "
                        "else ~/.local/share/netbench/history; `netbench history`).")(f)
