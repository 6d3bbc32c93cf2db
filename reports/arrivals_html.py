"""The report's straggler section: who arrived last, as an iteration x rank heatmap, and each
judged size's verdict (reports.arrivals). Every name in it (hosts, groups) is the run's text:
escaped (``e``) before it meets HTML; the figure's text goes through plotly, which escapes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from netbench.collectives.arrivals import ArrivalRecord, read_samples

from netbench.common.rundir import PER_ITER_GZ

if TYPE_CHECKING:
    from netbench.reports.arrivals import PointVerdict
    from netbench.reports.context import AnalysisContext

MAX_ITERS = 200  # cells of the picture: the first iterations of the point ...
MAX_RANKS = 256  # ... and its first ranks (the straggler's always among them)


def _pick(ctx: AnalysisContext) -> tuple[ArrivalRecord, PointVerdict] | None:
    """The point to draw: the named straggler's point with the most wait, else the point with the
    most decisive iterations."""
    best = None
    for g in ctx.analyses.stragglers:
        named = {h for h, _ in g.stragglers()}
        for p in g.points:
            score = (p.host in named, p.wait_share if p.host in named else p.decisive)
            if best is None or score > best[0]:
                best = (score, p)
    if best is None:
        return None
    p = best[1]
    for rec in ctx.arrivals:
        if (rec.group, rec.collective, rec.bytes, rec.in_place, rec.engine) == (
                p.group, p.collective, p.bytes, p.in_place, p.engine) and tuple(rec.hosts) == p.hosts:
            return rec, p
    return None


def figure(ctx: AnalysisContext) -> tuple[dict[str, Any] | None, str]:
    """(the heatmap figure or None, the note under it)."""
    from netbench.collectives.sizes import format_size

    picked = _pick(ctx)
    if picked is None:
        return None, ""
    rec, verdict = picked
    iters = min(rec.iters, MAX_ITERS)
    ranks = list(range(min(rec.ranks, MAX_RANKS)))
    if verdict.rank is not None and verdict.rank not in ranks:
        ranks[-1] = verdict.rank
    z = None
    if ctx.run_dir is not None and (ctx.run_dir / PER_ITER_GZ).exists():
        for key, arrive, _done in read_samples(ctx.run_dir / PER_ITER_GZ):
            if (key.get("group"), key.get("collective"), key.get("bytes"), key.get("in_place"),
                    key.get("engine")) == rec.key() and arrive.shape == (rec.iters, rec.ranks):
                skew = arrive - np.median(arrive, axis=1, keepdims=True)
                z, what = skew[:iters][:, ranks], "arrival after the iteration's median rank (us)"
                break
    if z is None:  # the bounded record: who arrived last, by how much after the second-last
        z = np.zeros((iters, len(ranks)))
        col = {r: i for i, r in enumerate(ranks)}
        for i in range(iters):
            c = col.get(rec.last_rank[i])
            if c is not None:
                z[i, c] = rec.last_by_us[i]
        what = "last arrival, us after the second-last (0: not last)"
    labels = [f"{r} {rec.host_of(r) or ''}".strip() for r in ranks]
    fig = {
        "id": "arrivals-plot",
        "data": [{"type": "heatmap", "x": labels, "y": list(range(iters)),
                  "z": np.round(z, 1).tolist(), "colorscale": "Reds", "zmin": 0,
                  "colorbar": {"title": {"text": "us"}},
                  "hovertemplate": "rank %{x}, iteration %{y}: %{z} us<extra></extra>"}],
        "layout": {"title": {"text": f"{rec.collective} {format_size(rec.bytes)} ({rec.group}): {what}"},
                   "xaxis": {"title": {"text": "rank host"}, "type": "category"},
                   "yaxis": {"title": {"text": "iteration"}, "autorange": "reversed"},
                   "height": 520, "margin": {"l": 70, "r": 20, "t": 50, "b": 90}},
    }
    cut = iters < rec.iters or len(ranks) < rec.ranks
    note = (f"Clock bound {rec.clock_err_us:.0f} us (each rank's clock put on group rank 0's through "
            f"the store); a difference within twice it is not judged. {rec.iters} iterations x "
            f"{rec.ranks} ranks" + (f", the first {iters} x {len(ranks)} drawn" if cut else "") + ".")
    return fig, note


def table(ctx: AnalysisContext, e: Any) -> str:
    """Each judged point's verdict, one row a point (``e``: the report's HTML escaper)."""
    from netbench.collectives.sizes import format_size

    rows = []
    for g in ctx.analyses.stragglers:
        for p in g.points:
            who = "" if p.host is None else f"rank {p.rank} ({p.host})"
            extra = f"every {p.period}th iteration" if p.kind == "periodic" else ""
            rows.append(f"<tr><td>{e(g.group or '')}</td><td>{e(p.collective)}</td>"
                        f"<td>{e(format_size(p.bytes))}</td><td>{'in' if p.in_place else 'out'}</td>"
                        f"<td>{p.decisive}/{p.iters}</td>"
                        f"<td>{e(p.kind)} {e(extra)}</td><td>{e(who)}</td>"
                        f"<td>{100 * p.wait_share:.0f}%</td><td>{p.clock_err_us:.0f}</td></tr>")
    if not rows:
        return ""
    return ("<table class='data'><thead><tr><th>group</th><th>collective</th><th>size</th><th>place</th>"
            "<th>decisive iterations</th><th>verdict</th><th>last</th><th>wait share</th>"
            "<th>clock bound us</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
