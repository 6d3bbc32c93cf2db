"""``write_report``: what sweep, preflight and ``netbench report`` call at the end of a run.

Loads the run once, analyses it, writes ``findings.json`` and ``report.html`` into the run
directory (atomically: a half-written report never replaces a good one) and returns the findings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from reports.analysis import load_context, run_rules
from reports.findings import Finding
from reports.policy import Policy


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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
    from reports.context import gc_paused
    from reports.html import findings_doc, render_html

    with gc_paused():  # millions of row objects: the cyclic GC would rescan them for nothing
        ctx = load_context(run_dir, baseline, policy, topology)
        findings = run_rules(ctx)
        out = Path(run_dir)
        _atomic_write(
            out / "findings.json", json.dumps(findings_doc(findings, ctx), indent=2, default=str) + "\n"
        )
        if not html:
            return findings, None
        path = out / "report.html"
        _atomic_write(path, render_html(ctx, findings, plotlyjs=plotlyjs))
    return findings, path
