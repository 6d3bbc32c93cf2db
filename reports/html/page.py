"""``render_html``: the page's frame, its sections in order, the figures' data and the assets inlined."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import TYPE_CHECKING

from netbench.reports.html.curves import _curve_figures
from netbench.reports.html.findings import _findings_table, _glossary, _verdict, findings_record
from netbench.reports.html.fleet import _ceilings, _counters, _engines, _environment, _inventory, _topology
from netbench.reports.html.heatmap import _drill_figure, _drill_note, _heat_note, _heatmap_figure
from netbench.reports.html.history import HistorySection, history_html
from netbench.reports.html.rows import (
    _ROW_BUTTONS,
    EMBED_ROWS,
    _embedded_rows,
    _rows_line,
    _rows_note,
    _rows_script,
)
from netbench.reports.html.text import e, safe_json

from netbench.common.findings import Finding, verdict

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext


ASSETS = Path(__file__).parent.parent / "assets"  # reports/assets: shared with the other pages


def render_html(
    ctx: AnalysisContext, findings: list[Finding], plotlyjs: str = "inline", embed_rows: str = "auto",
    history: HistorySection | None = None,
) -> str:
    """The whole report as one HTML string. ``plotlyjs``: "inline" (offline, ~4.6 MB) or "cdn";
    ``embed_rows``: ``EMBED_ROWS``; ``history``: the fleet history's section (None: none)."""
    import plotly
    import plotly.offline

    if plotlyjs not in ("inline", "cdn"):
        raise ValueError(f"plotlyjs must be 'inline' or 'cdn', got {plotlyjs!r}")
    figures = _curve_figures(ctx)
    heat, matrices = _heatmap_figure(ctx, findings)
    if heat:
        figures.append(heat)
    drill = _drill_figure(ctx, findings)
    if drill:
        figures.append(drill)
    from netbench.reports import arrivals_html

    arrivals_fig, arrivals_note = arrivals_html.figure(ctx)
    if arrivals_fig:
        figures.append(arrivals_fig)
    stragglers_html = (
        f'<div id="arrivals-plot" class="plot heat" style="height:530px"></div>'
        f'<p class="note">{e(arrivals_note)}</p>{arrivals_html.table(ctx, e)}'
        if arrivals_fig
        else "<p class='note'>No arrivals recorded (world/ring groups of netbench runs record them).</p>"
    )
    if embed_rows not in EMBED_ROWS:
        raise ValueError(f"embed_rows must be one of {EMBED_ROWS}, got {embed_rows!r}")
    gz, nrows, csv_note = _embedded_rows(ctx, embed_rows)
    run_id = (ctx.run or {}).get("run_id") or (ctx.run_dir.name if ctx.run_dir else "run")
    data = {
        "figures": figures,
        "findings_doc": findings_record(findings, ctx).to_dict(),
        "csv_name": f"{run_id}-rows.csv",
    }
    data_json = safe_json(data)
    for placeholder, matrix in matrices.items():
        data_json = data_json.replace(f'"{placeholder}"', matrix, 1)
    if plotlyjs == "inline":
        plotly_tag = f"<script>{plotly.offline.get_plotlyjs()}</script>"
    else:
        plotly_tag = (
            f'<script src="https://cdn.plot.ly/plotly-{plotly.__version__}.min.js" charset="utf-8"></script>'
        )
    curves = "".join(
        f'<div id="{f["id"]}" class="plot"></div>' for f in figures if f["id"].startswith("curve")
    )
    heat_h = heat["layout"]["height"] if heat else 0
    drill_h = drill["layout"]["height"] if drill else 0
    heat_html = (
        f'<div id="heatmap-plot" class="plot heat" style="height:{heat_h + 10}px"></div><p class="note">'
        f"{_heat_note(ctx)}</p>"
        + (f'<div id="heatmap-drill-plot" class="plot heat" style="height:{drill_h + 10}px">'
           f"</div><p class=\"note\">{_drill_note(drill)}</p>" if drill else "")
        if heat
        else "<p class='note'>No pair measurements in this run.</p>"
    )
    generated = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    n_hosts = len(ctx.hosts)
    baseline_note = f" &middot; baseline {e(ctx.baseline.path)}" if ctx.baseline else ""
    css = (ASSETS / "report.css").read_text()
    js = (ASSETS / "report.js").read_text()
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>netbench {e(verdict(findings))} &mdash; {e(run_id)}</title>
<style>{css}</style>
</head><body><main>
<header class="top"><h1>netbench report &mdash; <span class="mono">{e(run_id)}</span></h1>
<div class="meta">{n_hosts} hosts &middot; {e(_rows_line(ctx))}{baseline_note}
&middot; generated {generated}</div>
<nav class="toc no-print"><a href="#findings">Findings</a><a href="#ceilings">Ceilings</a>
<a href="#curves">Bandwidth</a>{'<a href="#history">History</a>' if history else ""}
<a href="#heatmap">Pairs</a><a href="#stragglers">Stragglers</a>
<a href="#topology">Topology</a><a href="#counters">Port counters</a><a href="#inventory">Inventory</a>
<a href="#environment">Environment</a>
<a href="#data">Raw data</a><a href="#glossary">Glossary</a></nav></header>
{_verdict(findings, len(ctx.hosts))}
<section id="findings"><h2>Findings ({len(findings)})</h2>{_findings_table(findings)}</section>
<section id="ceilings"><h2>Against the hardware's ceiling</h2>{_ceilings(ctx)}</section>
<section id="curves"><h2>Bus bandwidth vs message size</h2>
<p class="note">Median busbw per size{"; dashed: the baseline" if ctx.baseline else ""}.
nccl-tests conventions
(GB/s = 1e9 B/s, busbw = algbw x the collective's bus factor).</p>
<div class="grid2">{curves or "<p class='note'>No bandwidth measurements.</p>"}</div></section>
{history_html(history)}
<section id="heatmap"><h2>Pair bandwidth by switch</h2>{heat_html}</section>
<section id="stragglers"><h2>Who arrives last</h2>{stragglers_html}</section>
{_engines(ctx)}
<section id="topology"><h2>Topology</h2>{_topology(ctx, findings)}</section>
<section id="counters"><h2>Port counters during the run</h2>{_counters(ctx)}</section>
<section id="inventory"><h2>Inventory</h2>{_inventory(ctx)}</section>
<section id="environment"><h2>Environment</h2>{_environment(ctx)}</section>
<section id="data"><h2>Raw data</h2>
<p class="note">{_rows_note(gz, nrows, csv_note)}</p>
<div class="no-print">{_ROW_BUTTONS if gz else ""}
<button id="dl-findings">Download findings (JSON)</button></div></section>
<section id="glossary"><h2>Glossary</h2>{_glossary(findings)}</section>
<footer>netbench &middot; findings are rebuilt with <code>netbench report RUN_DIR</code>.</footer>
</main>
<script type="application/json" id="nb-data">{data_json}</script>
{_rows_script(gz)}
{plotly_tag}
<script>{js}</script>
</body></html>
"""
