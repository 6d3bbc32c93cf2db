"""The terminal summary (``--format text|markdown|json``): verdict line, counts, top findings.

The same verdict logic feeds the exit code and the HTML banner, so the three never disagree.
"""

from __future__ import annotations

from typing import Any

from netbench.common.findings import Finding, counts, verdict
from netbench.common.jsontext import dumps

EXIT_CODES = {"PASS": 0, "WARN": 1, "FAIL": 2}
FAIL_ON = ("fail", "warn", "never")
"""``--fail-on``: which verdict fails the command (exit 2). ``fail``: failures (warnings exit 1);
``warn``: warnings too; ``never``: no verdict does (exit 0), for a job that only collects data."""


def exit_code(findings: list[Finding], fail_on: str = "fail") -> int:
    """0: no warn/fail findings, 1: warnings only, 2: failures; ``fail_on`` moves the bar (FAIL_ON)."""
    return verdict_status(EXIT_CODES[verdict(findings)], fail_on)


def verdict_status(code: int, fail_on: str) -> int:
    """A verdict's status (0 pass, 1 warnings, 2 failures) with the bar ``fail_on`` moved; any other
    status (3 no verdict, 128 + a signal) is not a verdict and stays."""
    if code not in (0, 1, 2):
        return code
    if fail_on == "never":
        return 0
    return 2 if fail_on == "warn" and code == 1 else code


def to_drain(findings: list[Finding]) -> list[str]:
    """Hosts named by node findings that fail: the list an operator acts on first."""
    seen: dict[str, None] = {}
    for f in findings:
        if f.severity == "fail" and f.subject_kind == "node":
            for h in f.hosts or [f.subject]:
                seen.setdefault(h, None)
    return list(seen)


def to_check(findings: list[Finding]) -> list[str]:
    """Links (pairs) named by warn/fail pair findings."""
    return [f.subject for f in findings if f.subject_kind == "pair" and f.severity in ("warn", "fail")]


def headline(findings: list[Finding], with_verdict: bool = True) -> str:
    """One sentence: the verdict and what to do first."""
    v = verdict(findings)
    c = counts(findings)
    parts = [
        f"{c['fail']} failure{'s' * (c['fail'] != 1)}",
        f"{c['warn']} warning{'s' * (c['warn'] != 1)}",
        f"{c['info']} info",
    ]
    text = f"{v}: {', '.join(parts)}" if with_verdict else ", ".join(parts).capitalize()
    drain = to_drain(findings)
    if drain:
        text += f". Drain {_few(drain)}"
    links = to_check(findings)
    if links:
        text += f". Check link{'s' * (len(links) > 1)} {_few([s.replace('|', '-') for s in links])}"
    return text + "."


def _few(items: list[str], n: int = 6) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def summary_dict(findings: list[Finding], run: dict[str, Any] | None = None, top: int = 10) -> dict[str, Any]:
    run = run or {}
    return {
        "verdict": verdict(findings),
        "exit_code": exit_code(findings),
        "counts": counts(findings),
        "headline": headline(findings),
        "run_id": run.get("run_id"),
        "drain": to_drain(findings),
        "check_links": to_check(findings),
        "top": [
            {
                "severity": f.severity,
                "rule": f.rule,
                "subject": f.subject,
                "title": f.title,
                "action": f.action,
            }
            for f in findings[:top]
        ],
        "retests": retests(findings),
    }


def retests(findings: list[Finding]) -> dict[str, str]:
    """Subject -> re-test verdict, from the findings that carry one (every re-tested node and link
    has one), so the summary says what the report says, whatever the cut of ``top``."""
    out: dict[str, str] = {}
    for f in findings:
        rt = (f.evidence or {}).get("retest")
        if isinstance(rt, dict) and isinstance(rt.get("verdict"), str) and rt["verdict"] != "not_run":
            out.setdefault(f.subject, rt["verdict"])
    return out


def _term(text: str) -> str:
    """Host-reported text on a terminal: control characters (ANSI escapes, CR) shown, not obeyed."""
    return "".join(ch if ch.isprintable() or ch == " " else f"\\x{ord(ch):02x}" for ch in text)


def summary_text(findings: list[Finding], run: dict[str, Any] | None = None, top: int = 10) -> str:
    d = summary_dict(findings, run, top)
    lines = [_term(d["headline"])]
    if d["run_id"]:
        lines[0] += f"  (run {_term(str(d['run_id']))})"
    for f in findings[:top]:
        lines.append(f"  [{f.severity.upper():4}] {f.rule}: {_term(f.title)}")
        if f.action and f.severity != "info":
            lines.append(f"         -> {_term(f.action)}")
    if len(findings) > top:
        lines.append(f"  ... {len(findings) - top} more in findings.json / report.html")
    if d["retests"]:
        lines.append("  re-tests: " + _term("; ".join(f"{k} {v}" for k, v in sorted(d["retests"].items()))))
    return "\n".join(lines)


def _md(text: str) -> str:
    """Markdown table cell: no pipes, no raw HTML (renderers would interpret a host's <tags>)."""
    text = _term(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|")


def summary_markdown(
    findings: list[Finding], run: dict[str, Any] | None = None, top: int = 10, headlines: tuple[str, ...] = ()
) -> str:
    """Ready to paste into a ticket: the verdict, which run (id, date, hosts, how it ran), the headline
    busbw against its ceiling, the findings with what to do first, the re-tests."""
    d = summary_dict(findings, run, top)
    c = d["counts"]
    run = run or {}
    hosts = run.get("hosts") if isinstance(run.get("hosts"), list) else []
    how = f"{run.get('launcher')}, {run.get('backend')}" if run.get("launcher") and run.get("backend") else ""
    who = [f"run {_md(str(d['run_id']))}" if d["run_id"] else "",
           _md(str(run.get("started", ""))[:16].replace("T", " ")) + " UTC" if run.get("started") else "",
           f"{len(hosts)} host{'s' * (len(hosts) != 1)}" if hosts else "", _md(how)]
    lines = [
        f"### netbench: {d['verdict']}",
        "",
        " · ".join(w for w in who if w),
        "",
        _md(d["headline"]),
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
    if d["retests"]:
        lines.append("\nre-tests: " + _md("; ".join(f"{k} {v}" for k, v in sorted(d["retests"].items()))))
    return "\n".join(lines)


def summary_json(findings: list[Finding], run: dict[str, Any] | None = None, top: int = 10) -> str:
    return dumps(summary_dict(findings, run, top), indent=2)


FORMATS = {"text": summary_text, "markdown": summary_markdown, "json": summary_json}


def format_summary(
    findings: list[Finding], fmt: str = "text", run: dict[str, Any] | None = None, top: int = 10,
    headlines: tuple[str, ...] = (),
) -> str:
    """The summary in ``fmt``; markdown (a ticket) carries the headline busbw lines too."""
    if fmt == "markdown":
        return summary_markdown(findings, run, top, headlines)
    return FORMATS[fmt](findings, run, top)
