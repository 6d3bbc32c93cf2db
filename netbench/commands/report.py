"""``netbench report RUN_DIR``: rebuild findings.json and report.html, print the verdict."""

from __future__ import annotations

import click

from netbench.commands._options import FAIL_ON
from netbench.commands._params import POLICY_FILE, TOPOLOGY_FILE, Count
from netbench.defaults import MAX_COUNT


@click.command(
    short_help="Diagnose a run: findings.json, report.html and a summary.",
    epilog="""\b
Exit status (docs/exit-status.md): 0 no warnings or failures, 1 warnings only, 2 failures
(--fail-on moves the bar; bad input, e.g. a broken policy file, also exits 2 with one error line).
\b
Examples:
  netbench report latest                  # the newest run under netbench-runs/
  netbench report netbench-runs/20261129T101500Z-3fa2c1
  netbench report RUN --baseline nightly --policy policy.toml
  netbench report RUN --baseline netbench-runs/last-good --fail-on warn
  netbench report RUN --format markdown --plotlyjs cdn > summary.md
  netbench report RUN --history /shared/netbench-history   # report.html's history section from it
""",
)
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option(
    "--baseline", help="A saved baseline's name (netbench baseline list) or an earlier run directory."
)
@click.option(
    "--policy",
    "policy_path",
    type=POLICY_FILE,
    help="Policy TOML (thresholds, minimum versions, severities); see docs/policy.example.toml.",
)
@click.option(
    "--topology",
    type=TOPOLOGY_FILE,
    help="Slurm topology.conf (tree or block) or a JSON/TOML switch -> hosts table.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="Terminal summary format.",
)
@click.option(
    "--plotlyjs",
    type=click.Choice(["inline", "cdn"]),
    default="inline",
    show_default=True,
    help="inline: works offline (+4.6 MB); cdn: small file, plots need the network.",
)
@click.option("--top", type=Count(0, MAX_COUNT), default=10, show_default=True,
              help="Findings in the summary.")
@click.option("--no-html", is_flag=True, help="Write findings.json only.")
@click.option(
    "--embed-rows",
    type=click.Choice(["auto", "yes", "no"]),
    default="auto",
    show_default=True,
    help="The rows inside report.html, for its download buttons: auto only when they fit 2 MB "
    "compressed (a large fleet's report stays attachable; results.jsonl holds every row), yes up to "
    "10 MB, no never.",
)
@click.option("--history", type=click.Path(file_okay=False), default=None,
              help="The fleet history whose past report.html shows (default $NETBENCH_HISTORY, else "
              "~/.local/share/netbench/history); only read: `netbench history add` adds a run.")
@click.option("--no-history", "history", flag_value="off", help="No history section in report.html.")
@FAIL_ON
def command(
    run_dir: str,
    baseline: str | None,
    policy_path: str | None,
    topology: str | None,
    fmt: str,
    plotlyjs: str,
    top: int,
    no_html: bool,
    embed_rows: str,
    history: str | None,
    fail_on: str,
) -> None:
    """Analyse RUN_DIR (``latest``: the newest run under netbench-runs/): slow pairs and nodes,
    firmware, link health, stragglers, errors, regressions."""
    from pathlib import Path

    from netbench.common.errors import NetbenchError, UsageError
    from netbench.common.rundir import INVENTORY_JSONL, resolve_run
    from netbench.history.hook import META_KEY, HistoryStage
    from netbench.inventory.topology import load_topology
    from netbench.reports.ceilings import TERMINAL_PATTERNS, headline_lines
    from netbench.reports.policy import PolicyError
    from netbench.reports.report import report_run
    from netbench.reports.runcheck import KINDS
    from netbench.reports.summary import format_summary
    from netbench.run.baselines import BaselineStore, holds_rows

    run_dir = str(resolve_run(run_dir))
    if not Path(run_dir).is_dir():
        raise UsageError(f"run directory not found: {run_dir}")
    if baseline:
        baseline = str(BaselineStore().resolve(baseline))
    if not holds_rows(Path(run_dir)) and not (Path(run_dir) / INVENTORY_JSONL).exists():
        raise UsageError(f"{run_dir} is not a run directory (no results.parquet, results.jsonl or "
                         "inventory.jsonl)")
    uplinks = None
    if topology:  # read here so its warnings reach the user, as sweep --topology prints them
        topo = load_topology(topology)
        for w in topo.warnings:
            click.echo(f"# topology warning: {w}", err=True)
        uplinks = topo.uplinks()
    try:
        done = report_run(
            run_dir,
            baseline=baseline,
            policy=policy_path,
            plotlyjs=plotlyjs,
            topology=uplinks,
            html=not no_html,
            embed_rows=embed_rows,
            history=(click.get_current_context().meta.get(META_KEY)  # an import's: it adds the run
                     or HistoryStage(history, adds=False)).section,
        )
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:  # read-only, no permission: no report (exit 3, as a full disk); the rows stay
        raise NetbenchError(f"cannot write the report into {run_dir}: {exc.strerror or exc} (its rows are "
                            "unchanged)", exit_code=3) from None
    from netbench.common.rundir import RunDir
    from netbench.common.text import coloured, terminal_safe

    findings = done.findings
    verdict = done.verdict(fail_on, "report")  # the exit status, the summary and report.html's drain list
    for f in findings:  # said on the terminal whatever --top and --format: the verdict lacks this data
        if f.rule in ("unreadable_rows", "unreadable_file", *KINDS):
            click.echo(f"netbench: warning: {f.title}", err=True)
    heads = tuple(headline_lines(done.headlines, TERMINAL_PATTERNS))
    said = format_summary(findings, fmt, RunDir.open(run_dir).read_run(), top, heads, verdict)
    click.echo(coloured(said) if fmt == "text" else said)
    if fmt == "text":  # the headline busbw, against its ceiling and the published figure, as sweep ends
        for line in heads:
            click.echo(terminal_safe(line))
    if done.html is not None and fmt == "text":
        click.echo(f"report: {done.html}")
    raise SystemExit(verdict.code)
