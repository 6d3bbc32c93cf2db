"""report.html's history section: the fleet's headline busbw over time as inline SVG (no script, no
plot library: it prints and reads offline), the environment changes marked at their dates, and each
finding's entity's past in one line.

Its data (``HistorySection``) is the fleet history's (``netbench.history.section``, the application
layer): this module only draws it. Every string in it came from a store that many runs, hosts and
users wrote, so every one is escaped here (``e``), in text and attributes alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from netbench.reports.html.text import e

from netbench.common.findings import Finding


@dataclass(frozen=True)
class HistoryPoint:
    started: str  # ISO time of the run
    run_id: str
    busbw_GBps: float
    this_run: bool = False


@dataclass(frozen=True)
class HistorySeries:
    """One headline over time: a collective, pattern and size this run measured."""

    label: str  # "all_reduce ring 1G"
    points: tuple[HistoryPoint, ...]


@dataclass(frozen=True)
class EnvMark:
    """An environment change the store knows, at the first run that had it."""

    started: str
    text: str  # "nic_firmware 28.39.1002 -> 28.41.1000 on 16 of 256 hosts"
    cause: bool = False  # named the likely cause of nodes' losses (``netbench history changes``)


@dataclass(frozen=True)
class PastLine:
    """A finding's entity (a node, link or switch) in the history, in one line."""

    subject: str
    severity: str
    text: str


@dataclass(frozen=True)
class HistorySection:
    store: str  # the store's folder
    runs: int  # runs in the history, this one included
    series: tuple[HistorySeries, ...] = ()
    marks: tuple[EnvMark, ...] = ()
    past: tuple[PastLine, ...] = ()
    note: str = ""  # said under the heading (only this run in the history, runs left out ...)


HistoryHook = Callable[[Any, list[Finding], bool], "HistorySection | None"]
"""The application's history stage as the report calls it: (the analysis, its findings, whether
report.html is written) -> the section (None: no history to show)."""

WIDTH, HEIGHT = 760, 230
LEFT, RIGHT, TOP, BOTTOM = 58, 44, 14, 34  # room for the axis' numbers and the last date
SERIES_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"]
#: the section's own look, kept beside its markup (report.css is every page's)
_STYLE = """<style>
.history-charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px; }
.history-chart { margin: 0; } .history-chart figcaption { font-size: 13px; font-weight: 600; }
.history-chart svg { width: 100%; height: auto; font: 10px sans-serif; fill: #444; }
.history-chart .grid { stroke: #e4e4e4; } .history-chart .this-run { stroke: #000; stroke-width: 1.5; }
.history-chart .env-mark line { stroke: #888; stroke-dasharray: 4 3; }
.history-chart .env-mark.cause line { stroke: #d62728; stroke-width: 1.5; }
.history-chart .env-mark text { fill: #555; font-weight: 600; }
.history-chart .env-mark.cause text, .history-marks li.cause { color: #b00; fill: #b00; }
</style>"""


def history_html(section: HistorySection | None) -> str:
    """The section, or nothing when there is no history (``section`` None)."""
    if section is None:
        return ""
    head = (f'<p class="note">{section.runs} run{"s" * (section.runs != 1)} in the fleet history at '
            f'<span class="mono">{e(section.store)}</span>'
            f"{': ' + e(section.note) if section.note else ''}.</p>")
    if section.runs <= 1:
        return f'<section id="history"><h2>History</h2>{head}</section>'
    charts = "".join(_chart(s, section.marks, k) for k, s in enumerate(section.series))
    marks = "".join(
        f'<li class="{"cause" if m.cause else ""}"><span class="mono">{e(_day(m.started))}</span> '
        f"{e(m.text)}</li>" for m in section.marks)  # numbered as the charts' dashed lines
    past = "".join(f'<li><span class="sev {e(p.severity)}">{e(p.severity)}</span> {e(p.text)}</li>'
                   for p in section.past)
    return (
        f'<section id="history"><h2>History</h2>{_STYLE}{head}'
        + (f'<div class="history-charts">{charts}</div>' if charts
           else "<p class='note'>No headline of this run was measured in an earlier run.</p>")
        + (f'<h3>Environment changes</h3><ol class="history-marks">{marks}</ol>' if marks else
           "<p class='note'>No firmware, driver or library change recorded in the history.</p>")
        + (f'<h3>This run&#x27;s findings in the history</h3><ul class="history-past">{past}</ul>' if past
           else "")
        + "</section>"
    )


def _when(text: str) -> float | None:
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def _day(text: str) -> str:
    return text[:10]


def _chart(series: HistorySeries, marks: tuple[EnvMark, ...], k: int) -> str:
    """One headline as an SVG line over time, this run's point ringed, each mark a dashed line."""
    pts = [(t, p) for p in series.points
           if (t := _when(p.started)) is not None and math.isfinite(p.busbw_GBps)]
    if not pts:
        return ""
    t0, t1 = min(t for t, _ in pts), max(t for t, _ in pts)
    span = max(t1 - t0, 1.0)
    top = max(p.busbw_GBps for _, p in pts) * 1.1 or 1.0
    w, h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + w * (t - t0) / span

    def y(v: float) -> float:
        return TOP + h * (1 - v / top)

    color = SERIES_COLORS[k % len(SERIES_COLORS)]
    grid = "".join(
        f'<line x1="{LEFT}" x2="{LEFT + w}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
        f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>'
        for v in (top * f / 1.1 for f in (0.0, 0.25, 0.5, 0.75, 1.0)))
    ticks = "".join(
        f'<text x="{x(t):.1f}" y="{TOP + h + 16}" text-anchor="middle">{e(_day(iso))}</text>'
        for t, iso in _date_ticks(pts, t0, t1))
    line = " ".join(f"{x(t):.1f},{y(p.busbw_GBps):.1f}" for t, p in pts)
    dots = "".join(
        f'<circle cx="{x(t):.1f}" cy="{y(p.busbw_GBps):.1f}" r="{5 if p.this_run else 3}" '
        f'class="{"this-run" if p.this_run else "dot"}" fill="{color}"><title>{e(_day(p.started))} '
        f'{e(p.run_id)}: {p.busbw_GBps:.3g} GB/s{" (this run)" if p.this_run else ""}</title></circle>'
        for t, p in pts)
    lines = []
    for n, m in enumerate(marks):
        t = _when(m.started)
        if t is None or not t0 <= t <= t1:
            continue
        lines.append(
            f'<g class="env-mark{" cause" if m.cause else ""}">'
            f"<title>{e(_day(m.started))}: {e(m.text)}</title>"
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{TOP}" y2="{TOP + h}"/>'
            f'<text x="{x(t) + 3:.1f}" y="{TOP + 10}">{n + 1}</text></g>')
    return (
        f'<figure class="history-chart"><figcaption>{e(series.label)}: median busbw (GB/s) by run'
        f"</figcaption>"
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{e(series.label)} busbw over time">{grid}{ticks}{"".join(lines)}'
        f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="1.5"/>{dots}</svg></figure>'
    )


def _date_ticks(pts: list[tuple[float, HistoryPoint]], t0: float, t1: float) -> list[tuple[float, str]]:
    """Up to six of the runs' dates, evenly spread (the first and the last among them)."""
    if t1 <= t0:
        return [(pts[0][0], pts[0][1].started)]
    shown: list[tuple[float, str]] = []
    for k in range(6):
        want = t0 + (t1 - t0) * k / 5
        t, p = min(pts, key=lambda tp: abs(tp[0] - want))
        if all(abs(t - s) > (t1 - t0) / 8 for s, _ in shown):
            shown.append((t, p.started))
    return shown
