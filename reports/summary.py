"""The terminal summary (``--format text|markdown|json``): verdict line, counts, top findings.

The verdict, its drain and check lists come from ``reports.verdict`` as the exit status and the HTML
banner do, so the three never disagree.
"""

from __future__ import annotations

from typing import Any

from netbench.reports.verdict import Verdict, headline, judge, retests

from netbench.common.findings import Finding
from netbench.common.jsontext import dumps


def verdict_of(findings: list[Finding], run: dict[str, Any] | None = None) -> Verdict:
    """The verdict for a caller that has none at hand: the fleet the drain rule weighs is run.json's
    hosts. Commands pass the verdict they judged with (``reports.report.Reported.verdict``)."""
    hosts = (run or {}).get("hosts")
    return judge(findings, len(hosts) if isinstance(hosts, list) else 0)


def summary_dict(
    findings: list[Finding], run: dict[str, Any] | None = None, top: int = 10, verdict: Verdict | None = None
) -> dict[str, Any]:
    """The one JSON shape (schema ``netbench.report/1``, docs/output-json.md), of a run's findings."""
    from netbench.reports.export.json_out import CHECKS, to_report

    run = run or {}
    hosts = run.get("hosts")
    return to_report(findings, run, checks=list(CHECKS), hosts=hosts if isinstance(hosts, list) else None,
                     verdict=verdict or verdict_of(findings, run), top=top)


def _term(text: str) -> str:
    """Host-reported text on a terminal: control characters (ANSI escapes, CR) shown, not obeyed."""
    return "".join(ch if ch.isprintable() or ch == " " else f"\\x{ord(ch):02x}" for ch in text)


def summary_text(
    findings: list[Finding], run: dict[str, Any] | None = None, top: int = 10, verdict: Verdict | None = None
) -> str:
    run = run or {}
    v = verdict or verdict_of(findings, run)
    lines = [_term(headline(v))]
    if run.get("run_id"):
        lines[0] += f"  (run {_term(str(run['run_id']))})"
    for f in findings[:top]:
        lines.append(f"  [{f.severity.upper():4}] {f.rule}: {_term(f.title)}")
        if f.action and f.severity != "info":
            lines.append(f"         -> {_term(f.action)}")
    if len(findings) > top:
        lines.append(f"  ... {len(findings) - top} more in findings.json / report.html")
    if said := retests(findings):
        lines.append("  re-tests: " + _term("; ".join(f"{k} {v}" for k, v in sorted(said.items()))))
    return "\n".join(lines)


def _md(text: str) -> str:
    """Markdown table cell: no pipes, no raw HTML (renderers would interpret a host's <tags>)."""
    text = _term(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|")


def summary_markdown(
    findings: list[Finding], run: dict[str, Any] | None = None, top: int = 10,
    headlines: tuple[str, ...] = (), verdict: Verdict | None = None,
) -> str:
    """Ready to paste into a ticket: the verdict, which run (id, date, hosts, how it ran), the headline
    busbw against its ceiling, the findings with what to do first, the re-tests."""
    run = run or {}
    v = verdict or verdict_of(findings, run)
    c = v.counts
    hosts = run.get("hosts") if isinstance(run.get("hosts"), list) else []
    how = f"{run.get('launcher')}, {run.get('backend')}" if run.get("launcher") and run.get("backend") else ""
    who = [f"run {_md(str(run['run_id']))}" if run.get("run_id") else "",
           _md(str(run.get("started", ""))[:16].replace("T", " ")) + " UTC" if run.get("started") else "",
           f"{len(hosts)} host{'s' * (len(hosts) != 1)}" if hosts else "", _md(how)]
    lines = [
        f"### netbench: {v.word}",
        "",
        " · ".join(w for w in who if w),
        "",
        _md(headline(v)),
        "",
        f"fail: {c['fail']} · warn: {c['warn']} · info: {c['info']}",
        "",
    ]
    if headlines:  # the headline busbw lines the terminal prints, as a list (host names: escaped)
        lines += [f"- {_md(' '.join(h.removeprefix('#').split()))}" for h in headlines] + [""]
    if findings:
        lines += ["| severity | rule | subject | finding | action |", "|---|---|---|---|---|"]
        for f in findings[:top]:
            lines.append(f"| {f.severity} | {f.rule} | {_md(f.subject)} | {_md(f.title)} | {_md(f.action)} |")
        if len(findings) > top:
            lines.append(f"\n{len(findings) - top} more in findings.json / report.html")
    if said := retests(findings):
        lines.append("\nre-tests: " + _md("; ".join(f"{k} {v}" for k, v in sorted(said.items()))))
    return "\n".join(lines)


def summary_json(
    findings: list[Finding], run: dict[str, Any] | None = None, top: int = 10, verdict: Verdict | None = None
) -> str:
    return dumps(summary_dict(findings, run, top, verdict), indent=2)


def format_summary(
    findings: list[Finding], fmt: str = "text", run: dict[str, Any] | None = None, top: int = 10,
    headlines: tuple[str, ...] = (), verdict: Verdict | None = None,
) -> str:
    """The summary in ``fmt`` (text, markdown, json); markdown (a ticket) carries the headline busbw
    lines too. ``verdict``: the one the command judged with (else ``verdict_of``)."""
    if fmt == "markdown":
        return summary_markdown(findings, run, top, headlines, verdict)
    if fmt == "json":
        return summary_json(findings, run, top, verdict)
    return summary_text(findings, run, top, verdict)
