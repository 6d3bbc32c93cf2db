"""``netbench compare``: a run against a baseline, size by size, with both environments."""

from __future__ import annotations

from typing import Any

import click

from netbench.params import Number


@click.command(
    short_help="Compare a run with a baseline; exit 1 on regression.",
    epilog="""\b
Exit codes: 0 no size regressed beyond the threshold, 1 regression, 2 bad input.
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
    import sys

    from netbench.baselines import BaselineStore
    from netbench.common.errors import UsageError
    from netbench.common.rundir import RunDir, resolve_run
    from netbench.reports.compare import compare_rows, env_diff, fingerprint, is_regression, render

    try:
        cur = RunDir.open(resolve_run(run_dir))
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from exc
    if not cur.results_path.is_file():
        raise UsageError(f"{run_dir} is not a run directory (no results.jsonl)")
    base = RunDir.open(BaselineStore().resolve(baseline))
    (cur_rows, cur_env, cur_inv), (base_rows, base_env, base_inv) = _load(cur), _load(base)
    comparisons = compare_rows(cur_rows, base_rows)
    if not comparisons:
        raise UsageError(f"{run_dir} and baseline {baseline!r} have no measured size in common")
    fps = (fingerprint(base_env, base_inv), fingerprint(cur_env, cur_inv))
    click.echo(render(comparisons, fps, env_diff(cur_env, base_env), threshold, fmt), nl=False)
    if any(is_regression(c, threshold) for c in comparisons):
        sys.exit(1)


def _load(rd: Any) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """Rows, env and inventory of a run directory; what could not be read is said on stderr (the
    comparison is made without it)."""
    rows, env, inventory = rd.load_rows(), rd.load_env(), rd.load_inventory()
    left_out = rows.unreadable + env.unreadable + inventory.unreadable
    for u in left_out[:10]:
        where = f"{u.file}:{u.line}" if u.line else u.file
        click.echo(f"netbench: warning: {where}: {u.reason}; left out of the comparison", err=True)
    if len(left_out) > 10:
        click.echo(f"netbench: warning: {len(left_out) - 10} more unreadable lines left out", err=True)
    return rows.records, env.data, inventory.records
