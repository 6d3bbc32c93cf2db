"""``report_run``: what sweep, preflight and ``netbench report`` call at the end of a run.

Loads the run once, analyses it, writes ``findings.json`` and ``report.html`` into the run
directory (atomically: a half-written report never replaces a good one) and returns the findings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.reports.engine import load_context, row_counts, run_rules
from netbench.reports.policy import Policy
from netbench.reports.verdict import Verdict, judge

from netbench.common.findings import Finding, write_findings
from netbench.common.rundir import REPORT_HTML, atomic_write

if TYPE_CHECKING:
    from netbench.reports.html.history import HistoryHook


def write_outputs(
    out: Path, ctx: Any, findings: list[Finding], html: bool = True, plotlyjs: str = "inline",
    embed_rows: str = "auto", history: HistoryHook | None = None,
) -> Path | None:
    """findings.json always; report.html unless ``html`` is False (``embed_rows``: html.EMBED_ROWS;
    ``history``: the fleet history's section, html.history). Returns the HTML path or None."""
    from netbench.reports.html import findings_record, render_html

    write_findings(out, findings_record(findings, ctx))
    section = history(ctx, findings, html) if history is not None else None
    if not html:
        return None
    path = out / REPORT_HTML
    atomic_write(path, render_html(ctx, findings, plotlyjs=plotlyjs, embed_rows=embed_rows, history=section))
    return path


@dataclass(frozen=True)
class Reported:
    """What ``report_run`` made: the findings worst first, report.html (None without it), the
    headlines (large-message busbw against ceiling and reference) the terminal prints, and the
    fleet's size (every host the inventory or the rows name: report.html's drain rule weighs it)."""

    findings: list[Finding]
    html: Path | None
    headlines: tuple[Any, ...]
    n_hosts: int = 0
    row_counts: tuple[int, int] = (0, 0)
    """(rows measured ok and right, rows failed or wrong): ``engine.row_counts`` of the rows analysed."""

    def verdict(self, fail_on: str = "fail", command: str = "report") -> Verdict:
        """The verdict of these findings over this fleet, as report.html shows it (``reports.verdict``)."""
        return judge(self.findings, self.n_hosts, fail_on=fail_on, command=command)


def report_run(
    run_dir: str | Path,
    baseline: str | Path | None = None,
    policy: Policy | str | Path | None = None,
    plotlyjs: str = "inline",
    topology: dict[str, str] | str | Path | None = None,
    html: bool = True,
    embed_rows: str = "auto",
    history: HistoryHook | None = None,
) -> Reported:
    """Analyse ``run_dir`` and write findings.json (+ report.html unless ``html=False``, with the rows
    as ``embed_rows`` says: html.EMBED_ROWS; ``history``: the fleet history's section)."""
    from netbench.reports.context import gc_paused

    with gc_paused():  # millions of row objects: the cyclic GC would rescan them for nothing
        ctx = load_context(run_dir, baseline, policy, topology)
        findings = run_rules(ctx)
        path = write_outputs(Path(run_dir), ctx, findings, html, plotlyjs, embed_rows, history)
    return Reported(findings, path, tuple(ctx.analyses.headlines), len(ctx.hosts), row_counts(ctx))
