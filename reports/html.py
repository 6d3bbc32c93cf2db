"""The HTML incident report: ONE self-contained file, verdict first, then the evidence.

Whoever opens it days later, offline, from a ticket, must see: the verdict; which node or link is
bad and by how much against which peers; the busbw curves (with the baseline); the pair heatmap by
switch; where the bad nodes sit; the firmware beside the fleet's majority; the software versions;
and the raw rows. plotly.js is inlined by default (``plotlyjs="cdn"`` makes the file small but
needs the network to show plots).

Security: everything a host reported (hostnames, labels, firmware strings, errors) is untrusted.
Text goes through ``html.escape``; data for the scripts is one JSON block whose ``<``, ``>``, ``&``
are written as ``\\u003c`` etc., so ``</script>`` in a firmware string cannot end the block; the
page's script only ever sets ``textContent``. Plotly text is escaped too (it understands a few tags).
"""

from __future__ import annotations

import base64
import datetime as _dt
import gzip
import html
import io
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from netbench.collectives.sizes import format_size
from netbench.reports.verdict import headline, judge

from netbench.common.findings import SEVERITY_RANK, Finding, FindingsRecord, verdict
from netbench.common.jsontext import finite
from netbench.common.naming import natural_key
from netbench.common.rows import CONTRACT_FIELDS
from netbench.common.runrecord import rows_line

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext

ASSETS = Path(__file__).parent / "assets"
# the row contract without per-rank times (kept in results.jsonl), plus the group
CSV_COLUMNS = [c for c in CONTRACT_FIELDS if c != "rank_time_us"] + ["group"]
CSV_LEAN_COLUMNS = [
    "collective",
    "pattern",
    "hosts",
    "ranks",
    "round",
    "bytes",
    "dtype",
    "in_place",
    "time_us",
    "busbw_GBps",
    "wrong",
    "status",
    "error",
]
CSV_FULL_MAX_ROWS = 100_000  # above this, the lean columns (keeps a 1,024-node report under 25 MB)
CSV_GZ_BUDGET = 10_000_000  # compressed bytes of rows embedded in the report at most
EMBED_ROWS = ("auto", "yes", "no")
"""``--embed-rows``: the rows in report.html (a second copy of results.jsonl, there for the download
buttons): ``yes`` up to ``CSV_GZ_BUDGET``; ``no`` never; ``auto`` only when every row fits
``EMBED_AUTO_BYTES``, so a large fleet's report stays small enough to attach to a ticket."""
EMBED_AUTO_BYTES = 2_000_000
HEATMAP_LABEL_MAX = 64  # above this many hosts, axes name switches instead of hosts
HEATMAP_FULL_MAX = 1024  # above this many hosts, a column per switch instead of per host (_switch_heatmap)
HEATMAP_BOTH_MAX = 512
"""Up to this many hosts the heatmap carries raw busbw and the ratio to expected (a button switches);
above, the ratio alone: each matrix is ~4 MB of JSON at 1,024 hosts, and the report must stay small
enough to attach to a ticket."""
SWITCH_TICKS_MAX = 48  # switch names on the host axis of the switch heatmap, at most
INVENTORY_FULL_MAX = 16  # above this many hosts, the deviating ones are listed first
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


def e(value: Any) -> str:
    """Escape anything for HTML text or attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def safe_json(data: Any) -> str:
    """JSON safe inside <script>: no '<', '>', '&' (so no '</script>'), no U+2028/9 line breaks."""
    text = json.dumps(data, separators=(",", ":"), default=_json_default, allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if not np.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


# -- sections -----------------------------------------------------------------------------------


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
            f'<div><strong>Drain:</strong> <span class="mono">{e(", ".join(drain[:40]))}</span>'
            + (f" and {len(drain) - 40} more" if len(drain) > 40 else "")
            + "</div>"
        )
    if links:
        shown = ", ".join(s.replace("|", " - ") for s in links[:20])
        extra += (
            f'<div><strong>Check {"links" if all("|" in s for s in links) else "links, switches"}:</strong> '
            f'<span class="mono">{e(shown)}</span>'
            + (f" and {len(links) - 20} more" if len(links) > 20 else "")
            + "</div>"
        )
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


def _size_axis(sizes: list[int]) -> dict[str, Any]:
    sizes = sorted(set(sizes))
    step = max(1, len(sizes) // 12)
    shown = sizes[::step]
    return {
        "type": "log",
        "title": {"text": "message size (bytes, log)"},
        "tickvals": shown,
        "ticktext": [format_size(s) for s in shown],
    }


def _curve_figures(ctx: AnalysisContext) -> list[dict[str, Any]]:
    figs: list[dict[str, Any]] = []
    cols = ["collective", "pattern", "bytes", "busbw_GBps"]  # filtered copies of these only, not every column
    df = ctx.ok_rows[cols]
    df = df[df["busbw_GBps"].notna()]
    base = None
    if ctx.baseline is not None:
        b = ctx.baseline.rows
        base = b.loc[(b["status"] == "ok") & b["busbw_GBps"].notna(), cols]
    for ci, coll in enumerate(sorted(df["collective"].dropna().unique())):
        traces = []
        sub = df[df["collective"] == coll]
        all_sizes: list[int] = []
        for pi, pattern in enumerate(sorted(sub["pattern"].dropna().unique())):
            color = COLORS[pi % len(COLORS)]
            for label, src, dash in (("", sub, "solid"), ("baseline ", base, "dash")):
                if src is None:
                    continue
                part = src[(src["collective"] == coll) & (src["pattern"] == pattern)]
                if part.empty:
                    continue
                g = part.groupby(part["bytes"].astype(int))["busbw_GBps"]
                med = g.median()
                all_sizes += med.index.tolist()
                n = int(g.size().max())
                name = f"{label}{pattern} median" + (f" of {n}" if pattern == "pair" and n > 1 else "")
                traces.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "name": e(name),
                        "x": med.index.tolist(),
                        "y": [round(float(v), 3) for v in med.values],
                        "line": {"color": color, "dash": dash, "width": 2 if not label else 1.5},
                        "marker": {"size": 5},
                        "hovertemplate": "%{x} B: %{y:.3g} GB/s",
                    }
                )
                if pattern == "pair" and n > 1 and not label:
                    lo = g.min()
                    traces.append(
                        {
                            "type": "scatter",
                            "mode": "lines",
                            "name": "pair slowest",
                            "x": lo.index.tolist(),
                            "y": [round(float(v), 3) for v in lo.values],
                            "line": {"color": color, "dash": "dot", "width": 1},
                            "hovertemplate": "%{x} B: %{y:.3g} GB/s (slowest pair)",
                        }
                    )
        if not traces:
            continue
        figs.append(
            {
                "id": f"curve-{ci}",
                "title": coll,
                "data": traces,
                "layout": {
                    "title": {"text": e(f"{coll}: busbw vs message size")},
                    "xaxis": _size_axis(all_sizes),
                    "yaxis": {"title": {"text": "busbw (GB/s)"}, "rangemode": "tozero"},
                    "margin": {"l": 60, "r": 20, "t": 50, "b": 60},
                    "height": 380,
                    "legend": {"orientation": "h", "y": -0.25},
                },
            }
        )
    return figs


def _z_json(z: np.ndarray) -> str:
    """A matrix as JSON with 3 significant digits (null for missing): 1024x1024 stays ~5 MB."""
    import pyarrow as pa

    ok = np.isfinite(z) & (z != 0)
    with np.errstate(all="ignore"):
        scale = 10.0 ** (2 - np.floor(np.log10(np.abs(np.where(ok, z, 1.0)))))
        rounded = np.where(ok, np.round(z * scale) / scale, z)  # an integer / a power of ten: shortest repr
    # pyarrow writes each double's shortest repr (np.char.mod is a Python call per cell: 5 s at 1M)
    txt = pa.array(rounded.ravel(), from_pandas=True).cast(pa.string()).fill_null("null").to_pylist()
    w = z.shape[1] if z.ndim == 2 else 0
    return "[" + ",".join("[" + ",".join(txt[i * w : (i + 1) * w]) + "]" for i in range(z.shape[0])) + "]"


def _expected_ratio(m: Any) -> np.ndarray | None:
    """Each pair's busbw over what its cell (hop class x round load) predicts, at the largest size:
    1.0 is normal whatever the oversubscription, so a slow node is a dark row and column and a slow
    link one dark cell in every class. None without cells (too few pairs to form them)."""
    if not _has_ratio(m):
        return None
    # float32 and in place: at 4,096 hosts each N x N float64 temporary is 134 MB of the report's
    # peak; 3 significant digits is all the page shows
    med = np.array([v if v else np.nan for v in m.cell_median_bw], dtype=np.float32)
    ratio = med[np.clip(m.cell, 0, None)]
    with np.errstate(all="ignore"):
        np.divide(m.bw[-1], ratio, out=ratio)
    ratio[m.cell < 0] = np.nan
    return ratio


def _has_ratio(m: Any) -> bool:
    """Whether the model has cells to predict a pair from (``_expected_ratio`` is not None)."""
    return m.cell is not None and bool(m.cell_median_bw)


def _finding_marks(
    m: Any, findings: list[Finding], column: Callable[[str], str] | None = None
) -> dict[str, Any] | None:
    """Markers on the cells of the warn and fail findings, where to look first: a link's two cells
    (both halves of the matrix), a node's diagonal cell (a host has no pair with itself). ``column``:
    the x of a host when columns are not hosts (the switch heatmap: a node's row at its own switch,
    a link's two ends at each other's switch)."""
    index = {h: i for i, h in enumerate(m.hosts)}
    col = column or (lambda h: h)
    xs, ys, texts = [], [], []
    for f in findings:
        if f.severity == "info" or f.subject_kind not in ("pair", "node"):
            continue
        ends = f.subject.split("|", 1) if f.subject_kind == "pair" else [f.subject]
        if len(ends) != (2 if f.subject_kind == "pair" else 1) or not all(h in index for h in ends):
            continue
        a, b = ends[0], ends[-1]
        for y, x in dict.fromkeys(((a, b), (b, a))):
            xs.append(e(col(x)))
            ys.append(e(y))
            texts.append(e(f"{f.rule}: {f.title}"))
    if not xs:
        return None
    return {"type": "scatter", "mode": "markers", "x": xs, "y": ys, "text": texts, "name": "findings",
            "marker": {"symbol": "square-open", "size": 11, "color": "#101828", "line": {"width": 2}},
            "hovertemplate": "%{text}<extra></extra>", "showlegend": False}


def _heatmap_figure(
    ctx: AnalysisContext, findings: list[Finding]
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The pairs' heatmap and its matrices' JSON by placeholder (too big to go through json.dumps)."""
    m = ctx.pair_model
    if m is None:
        return None, {}
    hosts = [e(h) for h in m.hosts]
    blocks = _switch_blocks(ctx, m)
    if len(hosts) > HEATMAP_FULL_MAX and len(blocks) > 1:
        fig, zjson = _switch_heatmap(m, hosts, blocks, findings)
        return fig, {"__NB_Z__": zjson}
    shapes = []
    if len(blocks) > 1:
        for _, lo, hi in blocks:
            shapes.append(
                {
                    "type": "rect",
                    "xref": "x",
                    "yref": "y",
                    "x0": lo - 0.5,
                    "x1": hi + 0.5,
                    "y0": lo - 0.5,
                    "y1": hi + 0.5,
                    "line": {"color": "#101828", "width": 1.5},
                }
            )
    axis: dict[str, Any] = {"type": "category", "automargin": True}
    if len(hosts) > HEATMAP_LABEL_MAX:
        axis.update(
            tickmode="array",
            tickvals=[hosts[(lo + hi) // 2] for _, lo, hi in blocks],
            ticktext=[e(s) for s, _, _ in blocks],
        )
    else:
        axis.update(tickfont={"size": 10})
    size = format_size(m.sizes[-1])
    z = m.bw[-1]
    finite = z[np.isfinite(z)]
    # contrast where the findings are: 0.6x the median (slow nodes/links) up to the top 0.1%
    zmin = float(0.6 * np.median(finite)) if finite.size else None
    zmax = float(np.percentile(finite, 99.9)) if finite.size else None
    fig = {
        "id": "heatmap-plot",
        "data": [
            {
                "type": "heatmap",
                "x": hosts,
                "y": hosts,
                "z": "__NB_Z__",
                "colorscale": "Viridis",
                "zmin": zmin,
                "zmax": zmax,
                "colorbar": {"title": {"text": "GB/s"}},
                "hoverongaps": False,
                "hovertemplate": "%{y} - %{x}: %{z} GB/s<extra></extra>",
            }
        ],
        "layout": {
            "title": {"text": e(f"{m.collective} busbw per pair at {size} (hosts grouped by switch)")},
            "xaxis": {**axis, "tickangle": -60},
            "yaxis": {**axis, "autorange": "reversed"},
            "shapes": shapes,
            "height": 720 if len(hosts) > 24 else 560,
            "margin": {"l": 90, "r": 20, "t": 50, "b": 90},
        },
    }
    matrices = {"__NB_Z__": _z_json(m.bw[-1])}
    ratio = _expected_ratio(m)
    title = fig["layout"]["title"]["text"]
    ratio_trace = {
        "type": "heatmap", "x": hosts, "y": hosts, "z": "__NB_R__", "hoverongaps": False,
        "colorscale": "RdBu", "reversescale": True, "zmin": 0.4, "zmax": 1.6, "zmid": 1.0,  # slow: red
        "colorbar": {"title": {"text": "x expected"}},
        "hovertemplate": "%{y} - %{x}: %{z}x what its hop class and load predict<extra></extra>",
    }
    ratio_title = e(f"{m.collective} busbw per pair at {size} / what its hop class and load predict")
    if ratio is not None and len(hosts) > HEATMAP_BOTH_MAX:  # one matrix only: the one that shows faults
        fig["data"][0] = ratio_trace
        fig["layout"]["title"]["text"] = ratio_title
        matrices = {"__NB_R__": _z_json(ratio)}
    elif ratio is not None:
        fig["data"].append({**ratio_trace, "visible": False})
        matrices["__NB_R__"] = _z_json(ratio)
        fig["layout"]["updatemenus"] = [{
            "type": "buttons", "direction": "right", "x": 0, "xanchor": "left", "y": 1.09,
            "yanchor": "bottom",
            "showactive": True, "pad": {"t": 0, "r": 4},
            "buttons": [
                {"label": "busbw", "method": "update",
                 "args": [{"visible": [True, False, True]}, {"title.text": title}]},
                {"label": "ratio to expected", "method": "update",
                 "args": [{"visible": [False, True, True]}, {"title.text": ratio_title}]},
            ],
        }]
        fig["layout"]["margin"]["t"] = 80
    marks = _finding_marks(m, findings)
    if marks is not None:
        fig["data"].append(marks)
    return fig, matrices


def _blocks_median(m: Any, z: np.ndarray, blocks: list[tuple[str, int, int]]) -> np.ndarray:
    """Hosts x switches: each host's median of ``z`` (N x N) with the hosts of each switch."""
    from netbench.reports.pairmodel import nanmedian_rows

    out = np.full((len(m.hosts), len(blocks)), np.nan)
    for k, (_, lo, hi) in enumerate(blocks):
        part = z[:, lo : hi + 1]
        out[:, k] = np.where(np.isfinite(part).any(axis=1), nanmedian_rows(part), np.nan)
    return out


def _switch_heatmap(
    m: Any, hosts: list[str], blocks: list[tuple[str, int, int]], findings: list[Finding]
) -> tuple[dict[str, Any], str]:
    """Hosts x switches: each cell a host's median with the hosts of one switch, as a ratio to what
    hop class and load predict when the model has cells (else busbw). Past HEATMAP_FULL_MAX hosts a
    cell per pair would not fit the page (4,096 hosts: 16.8 M cells, ~70 MB of JSON); a slow node
    still shows as a dark row, a slow uplink as a dark column, and ``_drill_figure`` holds the
    pairs of the switches worth a look at host resolution."""
    ratio = _expected_ratio(m)
    z = _blocks_median(m, ratio if ratio is not None else m.bw[-1], blocks)
    finite = z[np.isfinite(z)]
    switches = [e(s) for s, _, _ in blocks]
    every = -(-len(blocks) // SWITCH_TICKS_MAX)  # 128 leaves' names in 900 px overlap: every k-th
    ticks = {"tickmode": "array", "tickvals": [hosts[(lo + hi) // 2] for _, lo, hi in blocks[::every]],
             "ticktext": switches[::every]}
    size = format_size(m.sizes[-1])
    if ratio is not None:
        colour: dict[str, Any] = {"colorscale": "RdBu", "reversescale": True, "zmin": 0.4, "zmax": 1.6,
                                  "zmid": 1.0, "colorbar": {"title": {"text": "x expected"}}}
        what, unit = "x what hop class and load predict", "x expected"
    else:
        colour = {"colorscale": "Viridis", "zmin": float(0.6 * np.median(finite)) if finite.size else None,
                  "zmax": float(np.percentile(finite, 99.9)) if finite.size else None,
                  "colorbar": {"title": {"text": "GB/s"}}}
        what, unit = "busbw", "GB/s"
    data: list[dict[str, Any]] = [{
        "type": "heatmap", "x": switches, "y": hosts, "z": "__NB_Z__", **colour, "hoverongaps": False,
        "hovertemplate": f"%{{y}} with the hosts of %{{x}}: median %{{z}} {unit}<extra></extra>",
    }]
    block_of = {h: name for name, lo, hi in blocks for h in m.hosts[lo : hi + 1]}
    marks = _finding_marks(m, findings, block_of.__getitem__)
    if marks is not None:
        data.append(marks)
    fig = {
        "id": "heatmap-plot",
        "data": data,
        "layout": {
            "title": {"text": e(f"{m.collective} {what} at {size}: each host's median with each switch's "
                                f"hosts ({len(hosts)} hosts, one column per switch)")},
            "xaxis": {"type": "category", "automargin": True, "tickangle": -60},
            "yaxis": {"type": "category", "automargin": True, "autorange": "reversed", **ticks},
            "height": 900,
            "margin": {"l": 90, "r": 20, "t": 50, "b": 90},
        },
    }
    return fig, _z_json(z)


DRILL_MAX = 8  # switch pairs shown at host resolution past HEATMAP_FULL_MAX hosts


def _drill_blocks(
    m: Any, blocks: list[tuple[str, int, int]], findings: list[Finding], agg: np.ndarray
) -> list[tuple[int, int, str]]:
    """The switch pairs worth a look at host resolution, at most DRILL_MAX: those of the findings
    (failures first: a node's own switch, a link's two switches, a slow switch with itself), then
    the lowest medians of the aggregate ``agg`` (hosts x switches)."""
    block_of = {h: k for k, (_, lo, hi) in enumerate(blocks) for h in m.hosts[lo : hi + 1]}
    by_name = {name: k for k, (name, _, _) in enumerate(blocks)}
    chosen: dict[tuple[int, int], str] = {}
    for f in sorted(findings, key=lambda f: {"fail": 0, "warn": 1}.get(f.severity, 2)):
        if f.severity == "info":
            continue
        if f.subject_kind == "pair" and "|" in f.subject:
            a, b = f.subject.split("|", 1)
            key = (block_of.get(a), block_of.get(b))
        elif f.subject_kind == "node":
            key = (block_of.get(f.subject),) * 2
        elif f.subject_kind == "switch":
            key = (by_name.get(f.subject),) * 2
        else:
            continue
        if None not in key:
            chosen.setdefault((min(key), max(key)), f"{f.rule} {f.subject}")  # type: ignore[type-var]
    from netbench.reports.pairmodel import nanmedian_rows

    sw = np.full((len(blocks), len(blocks)), np.nan)
    for k, (_, lo, hi) in enumerate(blocks):
        part = agg[lo : hi + 1].T  # switch x this switch's hosts
        sw[k] = np.where(np.isfinite(part).any(axis=1), nanmedian_rows(part), np.nan)
    order = np.argsort(np.where(np.isfinite(sw), sw, np.inf), axis=None)
    for flat in order:
        if len(chosen) >= DRILL_MAX:
            break
        i, j = divmod(int(flat), len(blocks))
        if i <= j and np.isfinite(sw[i, j]):
            chosen.setdefault((i, j), f"median {sw[i, j]:.2f}")
    return [(i, j, why) for (i, j), why in list(chosen.items())[:DRILL_MAX]]


def _drill_figure(ctx: AnalysisContext, findings: list[Finding]) -> dict[str, Any] | None:
    """Past HEATMAP_FULL_MAX hosts, the pairs of a few switch pairs at host resolution (a menu picks
    one): the findings' switches first, then those whose hosts do worst together. The full matrix is
    results.jsonl's."""
    m = ctx.pair_model
    if m is None or len(m.hosts) <= HEATMAP_FULL_MAX:
        return None
    blocks = _switch_blocks(ctx, m)
    if len(blocks) < 2:
        return None
    ratio = _expected_ratio(m)
    z = ratio if ratio is not None else m.bw[-1]
    picks = _drill_blocks(m, blocks, findings, _blocks_median(m, z, blocks))
    if not picks:
        return None
    traces, buttons = [], []
    for n, (i, j, why) in enumerate(picks):
        (a, alo, ahi), (b, blo, bhi) = blocks[i], blocks[j]
        cells = z[alo : ahi + 1, blo : bhi + 1]
        traces.append({
            "type": "heatmap", "visible": n == 0, "hoverongaps": False,
            "x": [e(h) for h in m.hosts[blo : bhi + 1]], "y": [e(h) for h in m.hosts[alo : ahi + 1]],
            "z": [[float(f"{v:.3g}") if np.isfinite(v) else None for v in row] for row in cells],
            **({"colorscale": "RdBu", "reversescale": True, "zmin": 0.4, "zmax": 1.6, "zmid": 1.0,
                "colorbar": {"title": {"text": "x expected"}}} if ratio is not None
               else {"colorscale": "Viridis", "colorbar": {"title": {"text": "GB/s"}}}),
            "hovertemplate": "%{y} - %{x}: %{z}<extra></extra>",
        })
        buttons.append({"label": e(f"{a} x {b} ({why})"), "method": "update",
                        "args": [{"visible": [k == n for k in range(len(picks))]}]})
    small = {"type": "category", "automargin": True, "tickfont": {"size": 9}}
    return {
        "id": "heatmap-drill-plot",
        "data": traces,
        "layout": {
            "title": {"text": e(f"pairs at host resolution: {m.collective} at {format_size(m.sizes[-1])}"
                                + (" / what hop class and load predict" if ratio is not None else " busbw")),
                      "yref": "container", "y": 0.985},
            "updatemenus": [{"type": "dropdown", "x": 0, "xanchor": "left", "y": 1.04, "yanchor": "bottom",
                             "buttons": buttons, "showactive": True}],
            "xaxis": {**small, "tickangle": -60},
            "yaxis": {**small, "autorange": "reversed"},
            "height": 640,
            "margin": {"l": 90, "r": 20, "t": 100, "b": 90},
        },
    }


def _switch_blocks(ctx: AnalysisContext, m: Any) -> list[tuple[str, int, int]]:
    """Runs of consecutive hosts under one switch (the matrix's hosts are grouped by switch)."""
    blocks: list[tuple[str, int, int]] = []
    for i, h in enumerate(m.hosts):
        s = ctx.switches.get(h) or "?"
        if blocks and blocks[-1][0] == s:
            blocks[-1] = (s, blocks[-1][1], i)
        else:
            blocks.append((s, i, i))
    return blocks


def _human(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def _host_severity(findings: list[Finding]) -> dict[str, tuple[str, list[str]]]:
    out: dict[str, tuple[str, list[str]]] = {}
    for f in findings:
        if f.severity == "info" or f.subject_kind == "pair":
            continue
        for h in f.hosts:
            sev, titles = out.get(h, ("info", []))
            if SEVERITY_RANK[f.severity] > SEVERITY_RANK[sev]:
                sev = f.severity
            out[h] = (sev, titles + [f.title])
    return out


def _topology(ctx: AnalysisContext, findings: list[Finding]) -> str:
    hosts = ctx.hosts
    if not hosts:
        return "<p class='note'>No hosts.</p>"
    marks = _host_severity(findings)
    by_sw: dict[str, list[str]] = {}
    for h in hosts:
        by_sw.setdefault(ctx.switches.get(h) or "switch unknown", []).append(h)
    bad_switch = {f.subject: f.severity for f in findings if f.subject_kind == "switch"}
    leaves = []
    for sw in sorted(by_sw, key=lambda s: (s == "switch unknown", natural_key(s))):
        chips = []
        worst = "info"
        for h in sorted(by_sw[sw], key=natural_key):
            sev, titles = marks.get(h, ("", []))
            if sev and SEVERITY_RANK.get(sev, 0) > SEVERITY_RANK[worst]:
                worst = sev
            tip = "; ".join(titles[:3])
            chips.append(f'<span class="chip {e(sev)}" title="{e(tip)}">{e(h)}</span>')
        cls = bad_switch.get(sw) or (worst if worst != "info" else "")
        n_bad = sum(1 for h in by_sw[sw] if h in marks)
        leaves.append(
            f'<div class="leaf {e(cls)}"><h3><span>{e(sw)}</span><span class="note">{len(by_sw[sw])} hosts'
            f"{f', {n_bad} flagged' if n_bad else ''}</span></h3>{''.join(chips)}</div>"
        )
    links = [f for f in findings if f.subject_kind == "pair" and f.severity != "info"]
    link_html = ""
    if links:
        items = []
        for f in links[:100]:
            a, _, b = f.subject.partition("|")
            ratio = f.evidence.get("ratio_to_expected")
            klass = f.evidence.get("hop_class", "")
            items.append(
                f'<span class="link" title="{e(f.title)}">{e(a)} &harr; {e(b)}'
                f"{f' ({e(klass)}, x{e(ratio)})' if ratio else ''}</span>"
            )
        link_html = f'<div class="links"><strong>Bad links:</strong> {"".join(items)}</div>'
    m = ctx.pair_model
    spine_note = "spine"
    if m is not None and m.class_ratio("spine", "leaf"):
        spine_note += (
            f" &mdash; cross-spine pairs at {m.class_ratio('spine', 'leaf'):.2f}x of same-leaf pairs"
        )
    spine = f'<div class="spine">{spine_note}</div>' if len(by_sw) > 1 else ""
    legend = (
        '<div class="legend"><span class="chip fail">host</span> failure &nbsp; '
        '<span class="chip warn">host</span> warning &nbsp; <span class="chip">host</span> fine '
        "(hover a host for its findings)</div>"
    )
    return f"{legend}{spine}<div class='leaves'>{''.join(leaves)}</div>{link_html}"


def _inventory(ctx: AnalysisContext) -> str:
    from netbench.inventory.versions import compare_versions

    if not ctx.inventory:
        return "<p class='note'>No inventory was recorded for this run.</p>"
    env_hosts = (ctx.env or {}).get("hosts") or {}
    cols = [
        ("gpus", "GPUs", False),
        ("gpu_model", "GPU", False),
        ("driver", "driver", True),
        ("cuda", "CUDA", True),
        ("vbios", "VBIOS", True),
        ("nic_fw", "NIC firmware", True),
        ("ofed", "OFED", True),
        ("nccl", "NCCL", True),
        ("nic_rate", "NIC ports", False),
    ]
    table = []
    for n in ctx.inventory:
        gpus = n.get("gpus") or []
        nics = n.get("nics") or []
        rates = Counter(f"{nic.get('rate_gbps'):g}G" if nic.get("rate_gbps") else "?" for nic in nics)
        table.append(
            {
                "host": n.get("host"),
                "switch": ctx.switches.get(n.get("host") or ""),
                "status": n.get("status"),
                "gpus": str(len(gpus)),
                "gpu_model": ", ".join(sorted({str(g.get("name")) for g in gpus if g.get("name")})),
                "driver": n.get("driver_version"),
                "cuda": n.get("cuda_version") or (env_hosts.get(n.get("host")) or {}).get("cuda"),
                "vbios": ", ".join(sorted({str(g.get("vbios")) for g in gpus if g.get("vbios")})),
                "nic_fw": ", ".join(sorted({str(x.get("firmware")) for x in nics if x.get("firmware")})),
                "ofed": n.get("ofed_version"),
                "nccl": (env_hosts.get(n.get("host")) or {}).get("nccl") or n.get("nccl_version_torch"),
                "nic_rate": " ".join(f"{k}x{v}" for v, k in sorted(rates.items())) if nics else "",
            }
        )
    ok_rows = [r for r in table if r["status"] in (None, "ok", "partial")]
    majority = {
        c: (Counter(r[c] for r in ok_rows if r[c]).most_common(1) or [(None, 0)])[0][0] for c, _, _ in cols
    }

    def cell(r: dict[str, Any], c: str, is_version: bool) -> tuple[str, bool]:
        v, maj = r[c], majority[c]
        if not v or maj is None or v == maj or r["status"] not in (None, "ok", "partial"):
            return f"<td>{e(v)}</td>", False
        older = False
        if is_version and "," not in v and "," not in maj:
            older = compare_versions(v, maj) < 0
        elif c == "gpus":
            older = int(v) < int(maj)
        else:
            older = True  # mixed within a node, or a different model/rate than the fleet
        cls = "outdated" if older else "newer"
        return f'<td class="{cls}" title="fleet majority: {e(maj)}">{e(v)}</td>', True

    def render(rows: list[dict[str, Any]], table_id: str) -> str:
        body = []
        for r in rows:
            cells = [cell(r, c, isv) for c, _, isv in cols]
            st = r["status"]
            st_cls = "" if st in (None, "ok", "partial") else ' class="bad-status"'
            body.append(
                f"<tr><td class='mono'>{e(r['host'])}</td><td>{e(r['switch'])}</td><td{st_cls}>{e(st)}</td>"
                + "".join(c for c, _ in cells)
                + "</tr>"
            )
        head = "".join(f"<th>{e(t)}</th>" for _, t, _ in cols)
        maj = "".join(f"<td>{e(majority[c])}</td>" for c, _, _ in cols)
        return (
            f'<div class="tablewrap"><table id="{table_id}" class="sortable inv"><thead><tr><th>host</th>'
            f"<th>switch</th><th>status</th>{head}</tr></thead><tbody>"
            f'<tr class="majority"><td>fleet majority</td><td></td><td></td>{maj}</tr>'
            f"{''.join(body)}</tbody></table></div>"
        )

    def deviates(r: dict[str, Any]) -> bool:
        return r["status"] not in (None, "ok", "partial") or any(cell(r, c, v)[1] for c, _, v in cols)

    legend = (
        "<p class='note'>Cells differing from the fleet majority are marked: "
        "<span class='sev fail'>older</span> red, newer or different amber; hover a cell for the majority."
        "</p>"
    )
    if len(table) <= INVENTORY_FULL_MAX:
        return legend + render(table, "inventory-table")
    dev = [r for r in table if deviates(r)]
    return (
        legend
        + f"<p class='note'>{len(dev)} of {len(table)} hosts differ from the fleet majority:</p>"
        + render(dev, "inventory-table")
        + f"<details><summary>All {len(table)} hosts</summary>{render(table, 'inventory-all')}</details>"
    )


def _ceilings(ctx: AnalysisContext) -> str:
    """Each headline (pairs are in the heatmap) with its % of ceiling or why that is unknown, the
    published reference it matches, and why it is above its links' rate when it is."""
    lines = [h for h in ctx.analyses.headlines if h.pattern != "pair"]
    if not lines:
        return "<p class='note'>No group of two or more ranks measured bandwidth.</p>"
    body = []
    for h in lines:
        c = h.ceiling
        ceiling = (f"{c.GBps:.1f} GB/s<br><span class='note'>{e(c.basis)}</span>" if c.GBps is not None
                   else f"unknown: {e(c.unknown)}")
        share = f"{h.fraction:.0%}" if h.fraction is not None else "&ndash;"
        ref = "&ndash;"
        if h.reference is not None:
            r = h.reference
            rng = f"{r.low_GBps:.0f}" if r.low_GBps == r.high_GBps else f"{r.low_GBps:.0f}-{r.high_GBps:.0f}"
            ref = (f"{rng} GB/s ({e(r.ref.algo)})<br><span class='note'>{e(r.ref.note)} &mdash; "
                   f"{e(r.source)}</span>")
        why = f"<br><span class='note'>{e(h.exceeds)}</span>" if h.exceeds else ""
        where = " ".join(h.hosts) if len(h.hosts) <= 4 else f"{len(h.hosts)} hosts"
        body.append(
            f"<tr><td>{e(h.collective)}</td><td>{e(h.pattern)}</td><td class='mono'>{e(where)}</td>"
            f"<td>{h.ranks}</td><td>{e(h.engine)}</td><td>{h.busbw_GBps:.2f}</td>"
            f"<td>{share}{why}</td><td>{ceiling}</td><td>{ref}</td></tr>"
        )
    return (
        "<p class='note'>Large-message busbw (mean of the largest sizes) against the physical ceiling the "
        "inventory gives: across nodes the slowest node's NIC ports (rate, or their PCIe link when lower), "
        "within a node a GPU's NVLinks. Ring algorithms stay below it; Tree and NVLS can exceed it.</p>"
        "<div class='tablewrap'><table id='ceilings-table'><thead><tr><th>collective</th><th>pattern</th>"
        "<th>hosts</th><th>ranks</th><th>engine</th><th>busbw GB/s</th><th>of ceiling</th><th>ceiling</th>"
        f"<th>published reference</th></tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _counters(ctx: AnalysisContext) -> str:
    """Per port, the counters that rose between the snapshots before and after the run; error
    counters first. Hosts without a pair of snapshots are named with why."""
    d = ctx.analyses.counters
    if not ctx.counters:
        return ("<p class='note'>No port counter snapshots in this run (taken by <code>sweep</code> "
                "and <code>preflight</code> over SSH or as Kubernetes pods, before and after the "
                "traffic).</p>")
    body = []
    for p in sorted(d.ports, key=lambda p: (-len(p.errors) - p.flaps, p.host, p.port)):
        if not p.rose and not p.went_back:
            continue
        errs = ", ".join(f"{k} +{v}" for k, v in sorted(p.errors.items())) or "none"
        other = ", ".join(f"{k} +{v}" for k, v in sorted(p.rose.items())[:12] if k not in p.errors)
        back = (f"<br><span class='note'>went back (reset?): {e(', '.join(p.went_back))}</span>"
                if p.went_back else "")
        body.append(f"<tr><td class='mono'>{e(p.host)}</td><td class='mono'>{e(p.port)}</td>"
                    f"<td>{e(p.source)}</td><td>{e(errs)}</td><td class='mono'>{e(other)}{back}</td></tr>")
    missing = "".join(f"<li>{e(h)}: {e(why)}</li>" for h, why in sorted(d.missing.items()))
    return (
        f"<p class='note'>{d.hosts_compared} host(s) compared, {len(d.ports)} port(s); only ports whose "
        "counters changed are listed.</p><div class='tablewrap'><table id='counters-table'><thead><tr>"
        "<th>host</th><th>port</th><th>source</th><th>errors during the run</th><th>other counters that rose"
        f"</th></tr></thead><tbody>{''.join(body) or '<tr><td colspan=5>no counter changed</td></tr>'}"
        "</tbody></table></div>" + (f"<p>Not compared:</p><ul>{missing}</ul>" if missing else "")
    )


def _environment(ctx: AnalysisContext) -> str:
    from netbench.reports.compare import flatten_env

    run = ctx.run or {}
    info = [
        ("run id", run.get("run_id")),
        ("command", " ".join(map(str, run.get("argv") or [])) or None),
        ("started", run.get("started") or run.get("start")),
        ("ended", run.get("ended") or run.get("end")),
        ("launcher", run.get("launcher")),
        ("netbench", run.get("netbench_version") or run.get("version")),
        ("status", run.get("status")),
        ("policy", ctx.policy.source or "defaults"),
    ]
    rows = "".join(f"<tr><th>{e(k)}</th><td class='mono'>{e(v)}</td></tr>" for k, v in info if v is not None)
    flat = flatten_env(ctx.env or {})
    nccl = [(k, v) for k, v in flat.items() if "NCCL_" in k]
    other = [(k, v) for k, v in flat.items() if "NCCL_" not in k]
    env_rows = "".join(
        f"<tr><td class='mono'>{e(k)}</td><td class='mono'>{e(v)}</td></tr>" for k, v in nccl + other
    )
    out = (
        f"<div class='grid2'><div class='tablewrap'><table><tbody>{rows}</tbody></table></div>"
        f"<div class='tablewrap'><table id='env-table'><thead><tr><th>setting (hosts.*: every host)</th>"
        f"<th>value</th></tr></thead><tbody>{env_rows or '<tr><td colspan=2>no env.json</td></tr>'}"
        "</tbody></table></div></div>"
    )
    if ctx.baseline is not None:
        from netbench.reports.rules.regression import env_differences

        diffs = env_differences(ctx)
        drows = "".join(
            f"<tr><td class='mono'>{e(k)}</td><td class='mono'>{e(b)}</td><td class='mono'>{e(c)}</td></tr>"
            for k, b, c in diffs
        )
        out += (
            f"<h3>Differences from the baseline ({e(ctx.baseline.path)})</h3><div class='tablewrap'><table>"
            f"<thead><tr><th>key</th><th>baseline</th><th>this run</th></tr></thead><tbody>"
            f"{drows or '<tr><td colspan=3>none</td></tr>'}</tbody></table></div>"
        )
    return out


def _arrow_csv(df: Any, cols: list[str]) -> bytes:
    """Rows as CSV lines without a header, written by pyarrow (6x pandas' to_csv on a large fleet's
    rows). Values as pandas would read them back; booleans spelled true/false, whole floats without
    the ".0"."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    out = df[cols].copy()
    if "hosts" in out:
        out["hosts"] = [" ".join(map(str, h)) if isinstance(h, list) else "" for h in out["hosts"]]
    table = pa.Table.from_pandas(out, preserve_index=False)
    table = table.cast(pa.schema([
        pa.field(f.name, pa.string()) if pa.types.is_dictionary(f.type) else f for f in table.schema
    ]))
    buf = pa.BufferOutputStream()
    pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    return buf.getvalue().to_pybytes()


def _csv_bytes(df: Any, cols: list[str]) -> bytes:
    out = df[cols].copy()
    if "hosts" in out:
        out["hosts"] = [" ".join(map(str, h)) if isinstance(h, list) else "" for h in out["hosts"]]
    buf = io.StringIO()
    out.to_csv(buf, index=False)
    return buf.getvalue().encode("utf-8")


_ROW_BUTTONS = ('<button id="dl-csv">Download rows (CSV)</button>\n'
                '<button id="dl-csv-gz">Download rows (CSV.gz)</button>')


def _rows_script(gz: bytes) -> str:
    if not gz:
        return ""
    data = base64.b64encode(gz).decode("ascii")
    return f'<script type="application/octet-stream" id="nb-rows-csv-gz">{data}</script>'


def _rows_note(gz: bytes, nrows: int, note: str) -> str:
    if not gz:
        return e(note)
    return e(f"{nrows} rows: {note}; embedded compressed ({_human(len(gz))}).")


def _embedded_rows(ctx: AnalysisContext, embed_rows: str) -> tuple[bytes, int, str]:
    """What report.html carries of the rows (``EMBED_ROWS``): (gz bytes, rows, note); no bytes and a
    note saying where the rows are when they are left out."""
    where = "results.jsonl in the run directory holds every row"
    if embed_rows == "no":
        return b"", 0, f"{len(ctx.rows)} rows, not embedded (--embed-rows no): {where}"
    gz, nrows, note = rows_csv_gz(ctx, CSV_GZ_BUDGET if embed_rows == "yes" else EMBED_AUTO_BYTES)
    if embed_rows == "auto" and nrows < len(ctx.rows):
        return b"", 0, (f"{len(ctx.rows)} rows, more than fit {_human(EMBED_AUTO_BYTES)} compressed, so "
                        f"not embedded (the report stays small enough to attach): {where}; "
                        "netbench report RUN_DIR --embed-rows yes embeds them")
    return gz, nrows, note


def rows_csv_gz(ctx: AnalysisContext, budget: int = CSV_GZ_BUDGET) -> tuple[bytes, int, str]:
    """The raw rows as gzip'd CSV for the download button: (gz bytes, rows included, note).

    Every column but per-rank times, while that fits ``budget`` (compressed). Large fleets (500k
    pair rows) get the measurement columns only (derived ones like algbw and count are recomputable):
    every non-pair row, then pair rows in order, compressed chunk by chunk until the next chunk would
    pass the budget (said in the note), so a 1.6 M-row run formats and compresses only what fits.
    results.jsonl always has everything.
    """
    df = ctx.rows
    if len(df) > CSV_FULL_MAX_ROWS:
        return _lean_csv_gz(df, budget)
    cols = [c for c in CSV_COLUMNS if c in df.columns]
    note = "every field except per-rank times (those are in results.jsonl)"
    gz = gzip.compress(_csv_bytes(df, cols), compresslevel=6, mtime=0)
    if len(gz) <= budget:
        return gz, len(df), note
    is_pair = (df["pattern"] == "pair").to_numpy()
    keep_pairs = int(is_pair.sum() * budget / len(gz) * 0.95)
    pair_idx = np.nonzero(is_pair)[0][:keep_pairs]
    sel = df.iloc[np.sort(np.concatenate([np.nonzero(~is_pair)[0], pair_idx]))]
    gz = gzip.compress(_csv_bytes(sel, cols), compresslevel=6, mtime=0)
    return (
        gz,
        len(sel),
        (
            f"{note}; only {len(sel)} of {len(df)} rows (all non-pair rows, the first "
            f"{keep_pairs} pair rows) fit the report's size budget"
        ),
    )


CSV_CHUNK_ROWS = 25_000
"""Pair rows formatted and compressed at a time on a large fleet (~0.4 MB compressed)."""


def _lean_csv_gz(df: Any, budget: int) -> tuple[bytes, int, str]:
    """The measurement columns of every non-pair row, then of pair rows chunk by chunk while the
    compressed stream stays within ``budget``."""
    import zlib

    cols = [c for c in CSV_LEAN_COLUMNS if c in df.columns]
    note = f"measurement fields ({', '.join(cols)}); every field is in results.jsonl"
    is_pair = (df["pattern"] == "pair").to_numpy()
    pair_idx = np.nonzero(is_pair)[0]
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip stream (header mtime 0)
    head = ",".join(cols).encode() + b"\n"
    out = [comp.compress(head + _arrow_csv(df.iloc[np.nonzero(~is_pair)[0]], cols))]
    size = len(out[0])
    pairs = 0
    for lo in range(0, len(pair_idx), CSV_CHUNK_ROWS):
        chunk = pair_idx[lo : lo + CSV_CHUNK_ROWS]
        trial = comp.copy()
        data = trial.compress(_arrow_csv(df.iloc[chunk], cols))
        data += trial.flush(zlib.Z_SYNC_FLUSH)  # its compressed size is known only once flushed
        if size + len(data) > budget:
            break
        comp, size, pairs = trial, size + len(data), pairs + len(chunk)
        out.append(data)
    out.append(comp.flush())
    included = int((~is_pair).sum()) + pairs
    if pairs < len(pair_idx):
        note += (
            f"; only {included} of {len(df)} rows (all non-pair rows first, then the first {pairs} "
            "pair rows) fit the report's size budget"
        )
    return b"".join(out), included, note


def findings_record(findings: list[Finding], ctx: AnalysisContext) -> FindingsRecord:
    """The findings.json record of this analysis (also embedded in the page for its download)."""
    return FindingsRecord(
        findings=tuple(findings),
        run_id=(ctx.run or {}).get("run_id"),
        policy=ctx.policy.source,
        baseline=ctx.baseline.path if ctx.baseline else None,
    )


def _engines(ctx: AnalysisContext) -> str:
    """Both engines side by side per size (``--engine both``): the torch overhead as a number."""
    rows = ctx.all_ok_rows
    if ctx.engines < {"nccl", "torch"}:
        return ""
    keys = [k for k in ("collective", "in_place", "cuda_graph", "bytes") if k in rows.columns]
    wide = rows.pivot_table(index=keys, columns="engine", values="time_us", aggfunc="median").dropna()
    parts = []
    for head, part in wide.groupby(level=keys[:-1]):
        coll, in_place, *graph = head
        title = f"{coll}, {'in-place' if in_place else 'out-of-place'}{', CUDA graph' if any(graph) else ''}"
        body = "".join(
            f"<tr><td>{e(format_size(int(idx[-1])))}</td><td>{r['nccl']:.2f}</td>"
            f"<td>{r['torch']:.2f}</td><td>{r['torch'] - r['nccl']:+.2f}</td>"
            f"<td>{r['torch'] / r['nccl']:.2f}</td></tr>"
            for idx, r in part.iterrows()
            if r["nccl"] > 0
        )
        parts.append(
            f"<h3>{e(title)}</h3><div class='tablewrap'><table><thead><tr><th>size</th><th>nccl (us)</th>"
            f"<th>torch (us)</th><th>torch &minus; nccl (us)</th><th>torch / nccl</th></tr></thead>"
            f"<tbody>{body}</tbody></table></div>"
        )
    return (
        "<section id='engines'><h2>Engines side by side</h2><p class='note'>Time per operation (median "
        "over groups) through NCCL called directly (nccl4py) and through torch's process group. The "
        f"diagnosis above judges the {e(ctx.judged_engine)} rows.</p>{''.join(parts)}</section>"
    )


def _drill_note(drill: dict[str, Any]) -> str:
    n = len(drill["data"])
    return (f"Drill-down: {n} switch pair{'s' if n > 1 else ''} at host resolution (the menu picks one): "
            "the switches of the findings first, then those whose hosts do worst together. Every pair is "
            "a row of results.jsonl (pattern pair), for any other switch pair.")


def _heat_note(ctx: AnalysisContext) -> str:
    m = ctx.pair_model
    if m is not None and len(m.hosts) > HEATMAP_FULL_MAX:
        what = "ratio to what its hop class and load predict" if _has_ratio(m) else "busbw"
        return (f"{len(m.hosts)} hosts: each cell is a host's median {what} with the hosts of one switch "
                "(a cell per pair would not fit the page); open squares mark the findings. A red row is "
                "a slow node, a red column a slow switch or uplink; the drill-down below shows the pairs.")
    return ("Each cell: the pair's busbw at the largest size measured; boxes are leaf switches; open "
            "squares mark the findings' pairs (on the diagonal: a node's). A dark row and column is a "
            "slow node; a single dark cell a slow link. \"ratio to expected\" shows each pair against "
            "what its hop class and round load predict, so faults stand out whatever the oversubscription.")


def _rows_line(ctx: AnalysisContext) -> str:
    """What the rows count, as the log and run.json say it: measured (status ok) and failed apart."""
    n = len(ctx.rows)
    return rows_line(n, n - len(ctx.all_ok_rows) if n else 0)


def render_html(
    ctx: AnalysisContext, findings: list[Finding], plotlyjs: str = "inline", embed_rows: str = "auto"
) -> str:
    """The whole report as one HTML string. ``plotlyjs``: "inline" (offline, ~4.6 MB) or "cdn";
    ``embed_rows``: ``EMBED_ROWS``."""
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
<a href="#curves">Bandwidth</a>
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
