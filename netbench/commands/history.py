"""``netbench history``: every run's figures and environment in one store; when a node, link, switch
or the fleet got slower, and what changed then."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from netbench.history.store import HistoryStore

FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text",
                      show_default=True, help="A terminal table, markdown for a ticket, or JSON.")


class Since(click.ParamType):
    """``30d``, ``12h``, ``2w``: how far back ``changes`` looks."""

    name = "AGE"
    _RE = re.compile(r"^\s*(\d{1,5})\s*([hdw])\s*$")

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        m = self._RE.match(str(value))
        if not m:
            self.fail(f"{value!r} is not an age: give hours, days or weeks (12h, 30d, 2w)", param, ctx)
        n, unit = int(m.group(1)), m.group(2)
        return timedelta(hours=n) if unit == "h" else timedelta(days=n * (7 if unit == "w" else 1))


@click.group(
    short_help="Every run's figures and environment over time; what got slower and what changed.",
    epilog="""\b
Examples:
  netbench history list
  netbench history add netbench-runs/20261129T020000Z-1a2b3c   # a run made elsewhere or before
  netbench history changes --since 30d                         # persistent shifts, with their causes
  netbench history show node node0042 --format markdown        # one node's nights, for a ticket
  netbench history show link node0003,node0012
  netbench history show fleet --format json
  NETBENCH_HISTORY=/shared/netbench-history netbench history changes
\b
Every completed sweep, preflight, simulate and import adds itself (NETBENCH_HISTORY=off skips it).
The store is a folder of Parquet files (docs/guide.md, "Fleet history"): DuckDB, Spark or pandas
read it as it is.
""",
)
@click.option("--history", "root", type=click.Path(file_okay=False),
              help="The store's folder (default $NETBENCH_HISTORY, else ~/.local/share/netbench/history).")
@click.pass_context
def command(ctx: click.Context, root: str | None) -> None:
    """The fleet's history: runs, node/link/switch/fleet timelines and their changes."""
    ctx.ensure_object(dict)
    ctx.obj["history_root"] = root


def _store(ctx: click.Context) -> HistoryStore:
    from netbench.history.hook import chosen_root
    from netbench.history.store import HistoryStore

    root = (ctx.obj or {}).get("history_root") or chosen_root()
    if root is None:
        from netbench.common.errors import UsageError

        raise UsageError("NETBENCH_HISTORY=off: no history store to use (give --history DIR)")
    return HistoryStore(root)


@command.command("add", short_help="Add run directories to the history (the same run twice is one).")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.pass_context
def add(ctx: click.Context, run_dirs: tuple[str, ...]) -> None:
    """Add RUN_DIRS (``latest``: the newest run under netbench-runs/); a damaged or foreign one is
    refused with one line (exit 2)."""
    from netbench.common.rundir import resolve_run
    from netbench.history.ingest import read_run

    store = _store(ctx)
    for run_dir in run_dirs:
        tables = read_run(resolve_run(run_dir))
        again = store.add(tables)
        said = "replaced" if again else "added"
        click.echo(f"{said} run {tables.run_id} ({tables.started[:16]}) in {store.root}")


@command.command("list", short_help="The runs in the history, oldest first.")
@FORMAT
@click.pass_context
def list_(ctx: click.Context, fmt: str) -> None:
    from netbench.history.views import runs_view

    store = _store(ctx)
    runs = store.runs().to_pylist() if store.exists() else []
    if not runs and fmt != "json":
        click.echo(f"no runs in the history at {store.root}")
        return
    click.echo(runs_view(runs, fmt))


@command.command("show", short_help="One node, link, switch or the fleet over time.")
@click.argument("kind", type=click.Choice(["node", "link", "switch", "fleet"]))
@click.argument("entity", required=False)
@FORMAT
@click.pass_context
def show(ctx: click.Context, kind: str, entity: str | None, fmt: str) -> None:
    """KIND ENTITY: ``node node0042``, ``link node0003,node0012``, ``switch leaf03``, ``fleet``
    (every collective, pattern and size; ENTITY ``all_reduce pair 1G`` for one)."""
    from netbench.common.errors import UsageError
    from netbench.history.query import env_by_run, timeline
    from netbench.history.views import timeline_view

    store = _store(ctx)
    if kind != "fleet" and not entity:
        raise UsageError(f"history show {kind}: name the {kind} (e.g. {_EXAMPLE[kind]})")
    rows, found = timeline(store, kind, entity or "")
    if not rows:
        raise UsageError(f"history show {kind}: {entity or 'the fleet'} is in no run of the history at "
                         f"{store.root}")
    env = env_by_run(store, entity) if kind == "node" and entity else {}
    click.echo(timeline_view(kind, entity or "fleet", rows, found, env, fmt))


_EXAMPLE = {"node": "node0042", "link": "node0003,node0012", "switch": "leaf03"}


@command.command("changes", short_help="Persistent shifts, step or drift, with what changed then.")
@click.option("--since", type=Since(), help="Only changes that started this recently (30d, 12h, 2w).")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(["node", "link", "switch", "fleet"]),
              help="Only these kinds (repeatable; default all).")
@FORMAT
@click.pass_context
def changes(ctx: click.Context, since: timedelta | None, kinds: tuple[str, ...], fmt: str) -> None:
    """Every entity's persistent shifts (a node, a link, a switch, a collective at a size): not one
    noisy night, but a step or a drift of 3% or more (a switch 5%, a link 10%) lasting two runs or more; for a
    loss, each environment field that changed between its last good and first bad run on its hosts (a
    node's own, a link's ends, most of the hosts behind a switch), and how many of the hosts that got
    the same change lost (the likely cause only when most did and few others did)."""
    from netbench.history.query import changes as find
    from netbench.history.views import changes_view

    store = _store(ctx)
    found = find(store, kinds or ("node", "link", "switch", "fleet"), since) if store.exists() else []
    click.echo(changes_view(found, fmt))
