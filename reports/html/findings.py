"""The verdict banner, the findings table with each finding's evidence, the glossary, and the findings
record (findings.json, also embedded in the page for its download)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from netbench.collectives.sizes import format_size
from netbench.reports.html.text import e
from netbench.reports.verdict import headline, judge

from netbench.common.findings import SEVERITY_RANK, Finding, FindingsRecord
from netbench.common.jsontext import finite

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext


def _verdict(findings: list[Finding], n_hosts: int) -> str:
    judged = judge(findings, n_hosts)  # the drain rule of every output (reports.verdict)
    v, drain, links = judged.word, list(judged.drain), list(judged.check)
    todo = [f for f in findings if f.severity != "info"][:5]
    items = "".join(
        f'<li><span class="sev {e(f.severity)}">{e(f.severity)}</span> {e(f.title)}'
        f"{' &mdash; <em>' + e(f.action) + '</em>' if f.action else ''}</li>"
        for f in todo
    )
    extra = ""
    if drain:
        extra += (
            f'<div><strong>Drain:</strong> <span class="mono">{e(", ".join(drain))}</span></div>'
        )
    if links:
        # every failing link and switch, then warnings up to 20 in all: a failing uplink is never cut
        # for a slow link's warning (issue 47)
        first = [s for s in links if s in judged.failing]
        ordered = first + [s for s in links if s not in judged.failing]
        room = max(20, len(first))
        shown = ", ".join(s.replace("|", " - ") for s in ordered[:room])
        extra += (
            f'<div><strong>Check {"links" if all("|" in s for s in links) else "links, switches"}:</strong> '
            f'<span class="mono">{e(shown)}</span>'
            + (f" and {len(links) - room} more" if len(links) > room else "")
            + "</div>"
        )
    if judged.untested:
        extra += (f'<div><strong>Could not test:</strong> <span class="mono">{e(", ".join(judged.untested))}'
                  "</span> (neither drained nor cleared: see their findings)</div>")
    if not drain and not links and v == "PASS":
        extra = "<div>No node or link needs attention.</div>"
    return f"""
<section id="verdict" class="verdict {v.lower()}" aria-label="verdict">
  <div class="word">{v}</div>
  <div class="headline">{e(headline(judged, with_verdict=False))}</div>
  <div class="detail">{extra}</div>
</section>
{"<h3>First steps</h3><ol class='todo'>" + items + "</ol>" if items else ""}"""


EVIDENCE_ITEMS = 12  # list items and mapping entries shown in an evidence cell; the rest: "N more"


def _value(v: Any) -> str:
    """One evidence value for people: numbers to 3 significant digits, short lists and mappings
    inline, anything nested as compact JSON (escaped by the caller)."""
    text = _inline(v, top=True)
    return text if len(text) <= 400 else text[:400] + " ..."


def _inline(v: Any, top: bool = False) -> str:
    """``_value`` without the length cap: a mapping as ``key: value, ...``, a list as ``a, b``, what
    is nested in parentheses (``re-test: verdict: confirmed, ratios: (node0022: 0.696, ...)``)."""
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, (int, str)):
        return str(v)
    more = lambda n: f", ... {n - EVIDENCE_ITEMS} more" if n > EVIDENCE_ITEMS else ""  # noqa: E731
    if isinstance(v, dict):
        items = list(v.items())
        text = ", ".join(f"{k}: {_inline(x)}" for k, x in items[:EVIDENCE_ITEMS]) + more(len(items))
    elif isinstance(v, (list, tuple)):
        sep = "; " if any(isinstance(x, dict) for x in v) else ", "
        text = sep.join(_inline(x) for x in v[:EVIDENCE_ITEMS]) + more(len(v))
    else:
        text = str(finite(v))
    return text if top or not isinstance(v, (dict, list, tuple)) else f"({text})"


def _evidence(f: Finding) -> str:
    """What was compared, as a table (each label explained on hover and in the glossary), with the
    raw JSON behind its own toggle."""
    from netbench.reports.glossary import term

    rows = []
    for key, v in f.evidence.items():
        label, why = term(key)
        if key.endswith("bytes") and isinstance(v, list) and all(isinstance(x, int) for x in v):
            v = [format_size(x) for x in v]  # 64M, not 67108864
        rows.append(f'<dt title="{e(why)}">{e(label)}</dt><dd>{e(_value(v))}</dd>')
    raw = json.dumps(finite(f.evidence), indent=1, default=str)
    if len(raw) > 6000:
        raw = raw[:6000] + "\n... (full evidence in findings.json)"
    # a list, not a table: rows of a table inside the findings table would count as findings' rows
    return (f'<dl class="evtable">{"".join(rows)}</dl>'
            f'<details class="raw"><summary>raw</summary><pre>{e(raw)}</pre></details>')


def _glossary(findings: list[Finding]) -> str:
    """The words this report's evidence uses, each in one line (``reports.glossary``)."""
    from netbench.reports.glossary import TERMS

    used = {k for f in findings for k in f.evidence}
    terms = [TERMS[k] for k in TERMS if k in used]
    if not terms:
        return "<p class='note'>No evidence to explain.</p>"
    items = "".join(f"<dt>{e(label)}</dt><dd>{e(why)}</dd>" for label, why in terms)
    return f"<dl class='glossary'>{items}</dl>"


def _findings_table(findings: list[Finding]) -> str:
    rows = []
    for i, f in enumerate(findings):
        rows.append(
            f'<tr class="sev-{e(f.severity)}" id="finding-{i}">'
            f'<td data-sort="{2 - SEVERITY_RANK[f.severity]}">'
            f'<span class="sev {e(f.severity)}">{e(f.severity)}</span></td>'
            f'<td class="mono">{e(f.rule)}</td><td class="subject">{e(f.subject)}</td>'
            f'<td class="title">{e(f.title)}</td><td class="action">{e(f.action)}</td>'
            f'<td class="evidence"><details class="ev"><summary>evidence</summary>{_evidence(f)}</details>'
            "</td></tr>"
        )
    if not rows:
        return "<p class='note'>No findings.</p>"
    return f"""
<div class="filters no-print">Show:
  <label><input type="checkbox" data-sev-filter="fail" checked> fail</label>
  <label><input type="checkbox" data-sev-filter="warn" checked> warn</label>
  <label><input type="checkbox" data-sev-filter="info" checked> info</label>
  <span class="note">Click a column header to sort.</span></div>
<div class="tablewrap"><table id="findings-table" class="sortable">
<thead><tr><th>Severity</th><th>Rule</th><th>Subject</th><th>Finding</th><th>What to do</th>
<th>Evidence</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table></div>"""


def findings_record(findings: list[Finding], ctx: AnalysisContext) -> FindingsRecord:
    """The findings.json record of this analysis (also embedded in the page for its download)."""
    return FindingsRecord(
        findings=tuple(findings),
        run_id=(ctx.run or {}).get("run_id"),
        policy=ctx.policy.source,
        baseline=ctx.baseline.path if ctx.baseline else None,
    )
