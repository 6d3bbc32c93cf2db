"""``netbench compare``: a run against a baseline, size by size, with both environments."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from netbench.commands._params import Number

if TYPE_CHECKING:
    from netbench.reports.context import Baseline


@click.command(
    short_help="Compare a run with a baseline; exit 2 on regression.",
    epilog="""\b
Exit codes: 0 no size regressed beyond the threshold, 1 a run or baseline that ended early
(interrupted, failed or killed: compared on the sizes it measured), 2 a regression, or bad input.
Examples:
  netbench compare latest --baseline nightly     # the newest run under netbench-runs/
  netbench compare netbench-runs/<id> --baseline nightly
  netbench compare runs/today --baseline runs/last-week --format markdown --threshold 0.05
""",
)
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option(
    "--baseline", "baseline", required=True, help="Baseline name (netbench baseline list) or a run directory."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="The comparison as a terminal table, markdown (a ticket) or JSON (a script).",
)
@click.option(
    "--threshold",
    type=Number(0, 10),
    default=0.1,
    show_default=True,
    help="Relative slow-down that counts as a regression (0.1 = 10 %).",
)
def command(run_dir: str, baseline: str, fmt: str, threshold: float) -> None:
    """Compare RUN_DIR with a saved baseline (or another run directory) size by size."""
    from netbench.common.errors import UsageError
    from netbench.common.rundir import resolve_run
    from netbench.reports.compare import compare_rows, env_diff, fingerprint, is_regression, render
    from netbench.reports.context import load_baseline
    from netbench.reports.verdict import FAIL, PASS, WARN, exit_code
    from netbench.run.baselines import BaselineStore, holds_rows

    cur_dir = resolve_run(run_dir)
    if not cur_dir.is_dir():
        raise UsageError(f"no run directory at {run_dir}")
    if not holds_rows(cur_dir):
        raise UsageError(f"{run_dir} is not a run directory (no results.parquet or results.jsonl)")
    cur, base = load_baseline(cur_dir), load_baseline(BaselineStore().resolve(baseline))
    _say_doubts(cur), _say_doubts(base)
    comparisons = compare_rows(cur.row_dicts, base.row_dicts)
    if not comparisons:
        raise UsageError(f"{run_dir} and baseline {baseline!r} have no measured size in common")
    fps = (fingerprint(base.env, base.inventory), fingerprint(cur.env, cur.inventory))
    click.echo(render(comparisons, fps, env_diff(cur.env, base.env), threshold, fmt), nl=False)
    regressed = any(is_regression(c, threshold) for c in comparisons)
    early = _ended_early(cur, "the run") + _ended_early(base, "the baseline")
    # a regression is a failure, as everywhere in the tool (2); a side that ended early is a warning:
    # sizes it never measured are missing from the comparison
    raise SystemExit(exit_code("compare", FAIL if regressed else WARN if early else PASS))


def _ended_early(side: Baseline, which: str) -> int:
    """Say (stderr) that ``side``'s run.json records a run that did not end (interrupted, failed, or
    still ``running``: killed before it could record its end); 1 when it did so, else 0."""
    from netbench.common.text import terminal_safe
    from netbench.reports.runcheck import ENDED_EARLY

    status = side.run.get("status")
    if status not in ENDED_EARLY:
        return 0
    why = side.run.get("error") or side.run.get("signal")
    said = f"{which} {side.path}: run.json says {status}{f' ({why})' if why else ''}: it ended early or " \
        "never recorded its end; compared on the sizes it measured"
    click.echo(terminal_safe(f"netbench: warning: {said}", keep_newlines=False), err=True)
    return 1


def _say_doubts(side: Baseline) -> None:
    """What the reader left out or cannot vouch for, on stderr (the comparison is made without the
    one and with the other); rows of several runs are refused: compared as one run they would show
    differences between the runs as regressions."""
    from netbench.common.errors import UsageError
    from netbench.reports.runcheck import MIXED_RUNS

    for d in side.doubts:
        if d.kind == MIXED_RUNS:
            raise UsageError(f"{d.file}: {d.reason}; compare needs the rows of one run")
    said = [(f"{u.file}:{u.line}" if u.line else u.file, f"{u.reason}; left out of the comparison")
            for u in side.unreadable]
    said += [(d.file, f"{d.reason} ({d.kind})") for d in side.doubts]
    for where, why in said[:10]:
        click.echo(f"netbench: warning: {where}: {why}", err=True)
    if len(said) > 10:
        click.echo(f"netbench: warning: {len(said) - 10} more lines or files like these", err=True)
