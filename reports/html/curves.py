"""Busbw against message size: one plotly figure per collective, the baseline dashed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from netbench.collectives.sizes import format_size
from netbench.reports.html.text import e

if TYPE_CHECKING:
    import pandas as pd
    from netbench.reports.context import AnalysisContext


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


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


def _pair_levels(ctx: AnalysisContext) -> dict[str, tuple[Any, int, Any]]:
    """Per collective, the judged pair rows' (``ctx.pairs``) busbw per size: (median, the most rows of
    a size, slowest), from the columns (25 M rows at 4,096 nodes: no frame of them, and one size's
    values at a time: a group-by of every row held ~0.6 GB more there)."""
    import numpy as np
    import pandas as pd

    pairs = ctx.pairs
    keep = ctx.judged_pairs & np.isfinite(pairs.busbw)
    sizes = np.sort(pd.unique(pairs.nbytes))  # hashed in place: a few distinct sizes, no copy of 25 M
    out = {}
    for code in np.unique(pairs.collective[keep]).tolist():
        if code < 0:
            continue
        mine = keep & (pairs.collective == code)
        at: list[int] = []
        med: list[float] = []
        most: list[int] = []
        low: list[float] = []
        for size in sizes.tolist():
            values = pairs.busbw[mine & (pairs.nbytes == size)]  # a copy: the median may reorder it
            if values.size:
                at.append(size)
                low.append(float(values.min()))
                most.append(values.size)
                med.append(float(np.median(values, overwrite_input=True)))
        out[pairs.collectives[code]] = (pd.Series(med, index=at), max(most), pd.Series(low, index=at))
    return out


def _levels(src: pd.DataFrame, coll: str, pattern: str) -> tuple[Any, int, Any] | None:
    """(median busbw per size, the most rows of a size, slowest) of ``src``'s rows of ``coll`` and
    ``pattern``; None without any."""
    part = src[(src["collective"] == coll) & (src["pattern"] == pattern)]
    if part.empty:
        return None
    g = part.groupby(part["bytes"].astype(int))["busbw_GBps"]
    return g.median(), int(g.size().max()), g.min()


def _curve_figures(ctx: AnalysisContext) -> list[dict[str, Any]]:
    figs: list[dict[str, Any]] = []
    cols = ["collective", "pattern", "bytes", "busbw_GBps"]  # filtered copies of these only, not every column
    df = ctx.ok_rows[cols]
    df = df[df["busbw_GBps"].notna()]
    pair_levels = _pair_levels(ctx)
    base = None
    if ctx.baseline is not None:
        b = ctx.baseline.rows
        base = b.loc[(b["status"] == "ok") & b["busbw_GBps"].notna(), cols]
    for ci, coll in enumerate(sorted(set(df["collective"].dropna().unique()) | pair_levels.keys())):
        traces = []
        sub = df[df["collective"] == coll]
        all_sizes: list[int] = []
        patterns = set(sub["pattern"].dropna().unique()) | ({"pair"} if coll in pair_levels else set())
        for pi, pattern in enumerate(sorted(patterns)):
            color = COLORS[pi % len(COLORS)]
            for label, src, dash in (("", sub, "solid"), ("baseline ", base, "dash")):
                if src is None:
                    continue
                own_pairs = pattern == "pair" and not label  # from the columns, not the frame
                levels = pair_levels.get(coll) if own_pairs else _levels(src, coll, pattern)
                if levels is None:
                    continue
                med, n, lo = levels
                all_sizes += med.index.tolist()
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
