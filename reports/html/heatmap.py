"""The pair heatmap: hosts x hosts grouped by switch (busbw and the ratio to expected), hosts x switches
past ``HEATMAP_FULL_MAX`` hosts with a drill-down of the switch pairs worth a look, and the notes
under them. The matrices travel as placeholders replaced by compact JSON (``_z_json``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from netbench.collectives.sizes import format_size
from netbench.reports.html.text import e

from netbench.common.findings import Finding

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext


HEATMAP_LABEL_MAX = 64  # above this many hosts, axes name switches instead of hosts
HEATMAP_FULL_MAX = 1024  # above this many hosts, a column per switch instead of per host (_switch_heatmap)
HEATMAP_BOTH_MAX = 512
"""Up to this many hosts the heatmap carries raw busbw and the ratio to expected (a button switches);
above, the ratio alone: each matrix is ~4 MB of JSON at 1,024 hosts, and the report must stay small
enough to attach to a ticket."""
SWITCH_TICKS_MAX = 48  # switch names on the host axis of the switch heatmap, at most


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
