"""The pair model: tell "node X is slow" from "the link X-Y is slow".

Large-message busbw of every measured pair is fitted robustly as

    log bw_ij = c_class(ij) + a_i + a_j + e_ij

where ``c`` is the level of the pair's hop class (same leaf / across the spine / ...), ``a_i`` the
effect of node i over all its partners, and ``e_ij`` what is left for the link. Fitting is a
median polish (alternating medians), so a slow node does not pull its partners down and a bad
link does not pull its nodes down. A node with a strongly negative ``a_i`` is slow with everyone;
a pair with a strongly negative ``e_ij`` is slow while both its nodes are fine elsewhere.

Dense N x N arrays (NaN = not measured): 1,024 nodes is 1M cells, a few MB, and numpy's
nanmedian over rows is what makes the fit take about a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from netbench.reports.stats import SIGMA_FLOOR, robust_sigma

from netbench.common.topology import LEAF, UNKNOWN, hop_class

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext


@dataclass(frozen=True, eq=False)  # eq=False: arrays do not compare as one bool
class PairModel:
    collective: str
    sizes: list[int]  # the large sizes used, ascending
    hosts: list[str]  # matrix order
    bw: np.ndarray  # (n_sizes, N, N) median busbw GB/s per pair and size, NaN if not measured
    y: np.ndarray  # (N, N) log busbw relative to the size's median, combined over sizes
    classes: list[str]  # the hop classes present among the hosts (netbench.common.topology)
    cls: np.ndarray  # (N, N) index into classes
    class_level: dict[str, float]  # c per class (log)
    node_effect: np.ndarray  # a_i (log), 0 for nodes not judged
    judged: np.ndarray  # bool: node had enough partners to estimate a_i
    partners: np.ndarray  # measured partners per node
    resid: np.ndarray  # (N, N) e_ij
    sigma: float  # robust sigma of e (log)
    class_pairs: dict[str, int] = field(default_factory=dict)
    class_median_bw: dict[str, list[float | None]] = field(default_factory=dict)  # per size

    @property
    def index(self) -> dict[str, int]:
        return {h: i for i, h in enumerate(self.hosts)}

    def pair_bw(self, i: int, j: int) -> list[float | None]:
        return [None if np.isnan(v) else float(v) for v in self.bw[:, i, j]]

    def class_ratio(self, a: str, b: str) -> float | None:
        """exp(c_a - c_b): e.g. spine vs leaf is the measured cross-spine penalty."""
        if a in self.class_level and b in self.class_level:
            return float(np.exp(self.class_level[a] - self.class_level[b]))
        return None


def _pick_collective(pairs) -> str:  # noqa: ANN001 - a DataFrame
    counts = pairs["collective"].value_counts()
    best = counts.max()
    tied = sorted(c for c, n in counts.items() if n == best)
    return "all_reduce" if "all_reduce" in tied else tied[0]


def fit_pair_model(ctx: AnalysisContext, iterations: int = 30) -> PairModel | None:
    rows = ctx.ok_rows
    pairs = rows[(rows["pattern"] == "pair") & rows["busbw_GBps"].notna()]
    if pairs.empty:
        return None
    pairs = pairs[pairs["busbw_GBps"].astype(float) > 0]
    if pairs.empty:
        return None
    coll = _pick_collective(pairs)
    pairs = pairs[pairs["collective"] == coll]
    sizes = ctx.large_sizes(pairs["bytes"].astype(int).tolist())
    pairs = pairs[pairs["bytes"].astype(int).isin(sizes)]
    pairs = pairs[[isinstance(h, list) and len(h) == 2 for h in pairs["hosts"]]]
    if pairs.empty:
        return None
    a_names = [h[0] for h in pairs["hosts"]]
    b_names = [h[1] for h in pairs["hosts"]]
    hosts = sorted(set(a_names) | set(b_names), key=_host_order(ctx))
    idx = {h: i for i, h in enumerate(hosts)}
    n = len(hosts)
    ia = np.fromiter((idx[h] for h in a_names), dtype=np.int64, count=len(a_names))
    ib = np.fromiter((idx[h] for h in b_names), dtype=np.int64, count=len(b_names))
    keep = ia != ib
    size_of = {s: k for k, s in enumerate(sizes)}
    ks = pairs["bytes"].astype(int).map(size_of).to_numpy()[keep]
    ia, ib = ia[keep], ib[keep]
    bwv = pairs["busbw_GBps"].astype(float).to_numpy()[keep]

    # median over repeats of the same pair and size (rounds re-run, or both directions listed)
    lo, hi = np.minimum(ia, ib), np.maximum(ia, ib)
    bw = np.full((len(sizes), n, n), np.nan)
    key = (ks * n + lo) * n + hi
    order = np.argsort(key, kind="stable")
    key_s, bw_s = key[order], bwv[order]
    uniq, start = np.unique(key_s, return_index=True)
    if len(uniq) == len(key_s):
        med = bw_s
    else:
        med = np.array([np.median(seg) for seg in np.split(bw_s, start[1:])])
    k_u, rem = np.divmod(uniq, n * n)
    lo_u, hi_u = np.divmod(rem, n)
    bw[k_u, lo_u, hi_u] = med
    bw[k_u, hi_u, lo_u] = med

    with np.errstate(invalid="ignore", divide="ignore"):
        logbw = np.log(bw)
    centre = np.nanmedian(logbw.reshape(len(sizes), -1), axis=1)
    rel = logbw - centre[:, None, None]
    y = rel[0] if len(sizes) == 1 else _nanmedian0(rel)

    classes, cls = _class_matrix(hosts, ctx.switches)

    valid = np.isfinite(y)
    np.fill_diagonal(valid, False)
    partners = valid.sum(axis=1)
    judged = partners >= ctx.policy.thresholds.min_partners
    if n < 4:  # with 3 nodes every pair is explained exactly by node effects: nothing to tell apart
        judged[:] = False
    upper = np.triu(valid, 1)
    a = np.zeros(n)
    level = np.zeros(len(classes))
    present = [k for k in range(len(classes)) if (upper & (cls == k)).any()]
    masks = {k: upper & (cls == k) for k in present}
    for _ in range(iterations):
        r = y - a[:, None] - a[None, :]
        for k in present:
            level[k] = np.median(r[masks[k]])
        lvl = level[cls]
        with np.errstate(all="ignore"):
            r = np.where(valid, y - lvl - a[None, :], np.nan)
            new = np.where(judged, _nanmedian_rows(r), 0.0)
        if judged.any():
            new = np.where(judged, new - np.median(new[judged]), 0.0)
        done = np.max(np.abs(new - a)) < 1e-5  # 0.001% in bandwidth: far below any threshold
        a = new
        if done:
            break
    r = y - a[:, None] - a[None, :]
    for k in present:  # class levels consistent with the final node effects
        level[k] = np.median(r[masks[k]])
    resid = np.where(valid, y - level[cls] - a[:, None] - a[None, :], np.nan)
    sigma = max(robust_sigma(resid[upper]), SIGMA_FLOOR)

    class_pairs = {classes[k]: int(masks[k].sum()) for k in present}
    class_median_bw = {
        classes[k]: [_finite_median(bw[s][masks[k]]) for s in range(len(sizes))] for k in present
    }
    return PairModel(
        collective=coll,
        sizes=sizes,
        hosts=hosts,
        bw=bw,
        y=y,
        classes=classes,
        cls=cls,
        class_level={classes[k]: float(level[k]) for k in present},
        node_effect=a,
        judged=judged,
        partners=partners,
        resid=resid,
        sigma=sigma,
        class_pairs=class_pairs,
        class_median_bw=class_median_bw,
    )


def _class_matrix(hosts: list[str], switches: dict[str, str]) -> tuple[list[str], np.ndarray]:
    """(hop classes present, (N, N) index of each cell's class). Hosts on one leaf share every
    class, so classes are looked up once per pair of leaves, not per pair of hosts (1M cells)."""
    leaf = [switches.get(h) for h in hosts]
    first: dict[str | None, str] = {}  # a representative host per leaf
    for h, sw in zip(hosts, leaf, strict=True):
        first.setdefault(sw, h)
    leaves = list(first)
    at = {sw: i for i, sw in enumerate(leaves)}
    code = np.array([at[sw] for sw in leaf], dtype=int)

    def klass(a: str | None, b: str | None) -> str:
        if a is None or b is None:
            return UNKNOWN
        return LEAF if a == b else hop_class(first[a], first[b], switches)

    names = [[klass(a, b) for b in leaves] for a in leaves]
    classes = sorted({c for row in names for c in row})
    index = np.array([[classes.index(c) for c in row] for row in names], dtype=int).reshape(len(leaves), -1)
    return classes, index[code[:, None], code[None, :]]


def _finite_median(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else None


def _nanmedian_rows(r: np.ndarray) -> np.ndarray:
    """Median of each row ignoring NaN (0 for an all-NaN row).

    numpy's nanmedian loops over rows in Python when NaNs are present (~50 ms for 1024 rows);
    sorting once (NaN sorts last) and picking the middle of the valid part is ~10x faster.
    """
    k = np.isfinite(r).sum(axis=1)
    srt = np.sort(r, axis=1)
    lo = np.maximum((k - 1) // 2, 0)
    hi = np.maximum(k // 2, 0)
    rows = np.arange(r.shape[0])
    med = 0.5 * (srt[rows, lo] + srt[rows, hi])
    return np.where(k > 0, med, 0.0)


def _nanmedian0(r: np.ndarray) -> np.ndarray:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(r, axis=0)


def _host_order(ctx: AnalysisContext):  # noqa: ANN202
    """Hosts grouped by switch, then by name with numbers in numeric order (gpu2 before gpu10)."""
    import re

    def key(h: str) -> tuple:
        parts = re.split(r"(\d+)", h)
        natural = tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts)
        return (ctx.switches.get(h) is None, ctx.switches.get(h) or "", natural)

    return key
