"""``write_report``: what sweep, preflight and ``netbench report`` call at the end of a run.

Loads the run once, analyses it, writes ``findings.json`` and ``report.html`` into the run
directory (atomically: a half-written report never replaces a good one) and returns the findings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from netbench.reports.analysis import load_context, run_rules
from netbench.reports.findings import Finding
from netbench.reports.policy import Policy


def atomic_write(path: str | Path, text: str) -> None:
    """Write then rename: a reader (a browser, node_exporter, a CI step) never sees half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_outputs(
    out: Path, ctx: Any, findings: list[Finding], html: bool = True, plotlyjs: str = "inline"
) -> Path | None:
    """findings.json always; report.html unless ``html`` is False. Returns the HTML path or None."""
    from netbench.reports.html import findings_doc, render_html

    atomic_write(out / "findings.json", json.dumps(findings_doc(findings, ctx), indent=2, default=str) + "\n")
    if not html:
        return None
    path = out / "report.html"
    atomic_write(path, render_html(ctx, findings, plotlyjs=plotlyjs))
    return path


def write_report(
    run_dir: str | Path,
    baseline: str | Path | None = None,
    policy: Policy | str | Path | None = None,
    plotlyjs: str = "inline",
    topology: dict[str, str] | str | Path | None = None,
    html: bool = True,
) -> tuple[list[Finding], Path | None]:
    """Analyse ``run_dir`` and write findings.json (+ report.html unless ``html=False``).

    Returns (findings worst first, path of report.html or None).
    """
    from netbench.reports.context import gc_paused

    with gc_paused():  # millions of row objects: the cyclic GC would rescan them for nothing
        ctx = load_context(run_dir, baseline, policy, topology)
        findings = run_rules(ctx)
        path = write_outputs(Path(run_dir), ctx, findings, html=html, plotlyjs=plotlyjs)
    return findings, path
