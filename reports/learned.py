"""Leaves learned from the pairs, for a run that names no switch.

Without a topology every pair is of one hop class, ``unknown``: a pair across an oversubscribed
uplink is then judged against pairs within a leaf, and a host that lost its leaf peers (one of them
died) keeps only pairs across the uplink and reads as slow; its re-test against partners across that
uplink, judged against controls within a leaf, "confirms" it (issue 45). The fabric's shape is in the
measurements: pairs within a leaf run at one rate, pairs across at a lower one, and the hosts joined
by fast pairs are the leaves. So where nothing places a host, the leaves are learned:

- each pair's rate: the median busbw of its ok rows at the largest size most pairs have;
- fast and slow: the split of the log rates into two groups that leaves the least spread in each
  (1-D two-means), kept only when the groups' means are ``MIN_RATIO`` apart: a non-blocking fabric,
  or one leaf, has no such split and stays unknown, as before;
- the leaves: hosts joined through fast pairs that most of their fast partners share (one cross
  pair fast by chance does not join two leaves), groups of two hosts or more, at least two such leaves, and
  the pairs must agree with them (``AGREE`` of the pairs fast within a leaf and slow across), else
  the split was not the fabric's shape (a slow node, half the fleet capped) and nothing is learned;
- a host left alone (slow with everyone, or with few rows: it died) joins the leaf whose hosts it ran
  fastest with, so its pairs are still judged in a class; one with no ok pair stays unplaced.

A slow node in a leaf is not a leaf of its own (it is alone, so it joins one), and a slow link does
not split a leaf (its ends are joined through their other peers).
"""

from __future__ import annotations

import numpy as np
from netbench.reports.pairrows import PairRows

MIN_RATIO = 1.5
"""Fast pairs' mean rate over the slow ones' (geometric): less is noise or load, not a fabric's tier."""
AGREE = 0.8
"""Share of the pairs between placed hosts that must be fast within a leaf and slow across."""
PREFIX = "learned-leaf"


def learn_leaves(rows: PairRows) -> dict[str, str]:
    """host -> a learned leaf (``learned-leaf1``...), or {} where the pairs show no leaves."""
    n = len(rows.names)
    pairs, rate = pair_rates(rows)
    if len(rate) < 4:
        return {}
    fast = fast_pairs(np.log(rate))
    if fast is None:
        return {}
    leaf = _components(n, _supported(n, pairs[fast]))
    if len(set(leaf[leaf >= 0].tolist())) < 2 or not _agree(pairs, fast, leaf):
        return {}
    _join_alone(n, pairs, rate, leaf)
    order = {c: k + 1 for k, c in enumerate(dict.fromkeys(leaf[leaf >= 0].tolist()))}
    return {rows.names[h]: f"{PREFIX}{order[c]}" for h, c in enumerate(leaf.tolist()) if c >= 0}


def pair_rates(rows: PairRows) -> tuple[np.ndarray, np.ndarray]:
    """(pairs as (lo, hi) host codes, each one's median busbw) at the largest size most pairs ran."""
    ok = rows.ok & np.isfinite(rows.busbw) & (rows.busbw > 0)
    if not ok.any():
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0)
    import pandas as pd

    # each size's count from a mask (no copy of 25 M sizes to sort: a few distinct sizes)
    sizes = np.sort(pd.unique(rows.nbytes))
    count = np.array([np.count_nonzero(ok & (rows.nbytes == s)) for s in sizes.tolist()])
    size = sizes[count >= count.max() / 2].max()
    sel = ok & (rows.nbytes == size)
    n = max(len(rows.names), 1)
    a, b, values = rows.a[sel], rows.b[sel], rows.busbw[sel]
    del ok, sel  # the masks of every row (25 M at 4,096 nodes) before the sort
    # each pair's key (lower code first) in the codes' own type where n * n fits it: 8.4 M rows
    key = np.minimum(a, b).astype(np.int64 if n * n > np.iinfo(a.dtype).max else a.dtype, copy=False)
    key *= n
    key += np.maximum(a, b)
    del a, b
    order = np.argsort(key, kind="stable")
    key = key[order]
    values = values[order]
    del order
    first = np.r_[True, key[1:] != key[:-1]]  # each pair's first row (key is sorted)
    keys, rate = key[first], values[first]  # a pair of one row (all but the re-tested ones): its value
    several = ~first  # the rows of pairs of several rows: the later ones, and their first
    several[:-1] |= ~first[1:]
    at = np.flatnonzero(several)  # few (the re-tested pairs): indices of them alone
    del first, several
    if at.size:
        sub_key, sub = key[at], values[at]
        start = np.flatnonzero(np.r_[True, sub_key[1:] != sub_key[:-1]])
        count = np.diff(np.r_[start, len(sub)])
        where = np.searchsorted(keys, sub_key[start])  # those pairs among the keys
        # grouped by how many rows: their medians a 2-D block at a time, the same numbers as one
        # median a pair (a pandas group-by of 8.4 M rows held ~0.45 GB at 4,096 nodes)
        for m in np.unique(count).tolist():
            group = np.flatnonzero(count == m)
            rate[where[group]] = np.median(sub[start[group, None] + np.arange(m)], axis=1)
    del key, values
    out = np.empty((len(keys), 2), dtype=rows.a.dtype)  # the hosts' codes' type, written in place
    np.floor_divide(keys, n, out=out[:, 0], casting="unsafe")
    np.remainder(keys, n, out=out[:, 1], casting="unsafe")
    return out, rate


def fast_pairs(logs: np.ndarray) -> np.ndarray | None:
    """Which pairs are fast: the two-means split of ``logs``, or None where the means are not
    ``MIN_RATIO`` apart."""
    s = np.sort(logs)
    k = np.arange(1, len(s))
    csum, csq = np.cumsum(s), np.cumsum(s * s)
    left = csq[:-1] - csum[:-1] ** 2 / k
    right = (csq[-1] - csq[:-1]) - (csum[-1] - csum[:-1]) ** 2 / (len(s) - k)
    cut = int(np.argmin(left + right)) + 1
    slow, quick = s[:cut].mean(), s[cut:].mean()
    if quick - slow < np.log(MIN_RATIO):
        return None
    return logs > (slow + quick) / 2


def _supported(n: int, edges: np.ndarray) -> np.ndarray:
    """The fast pairs whose hosts share most of their fast partners (Jaccard of the two hosts'
    fast neighbourhoods, each with itself, over one half): within a leaf of k hosts that is 1, while
    one cross pair fast by chance joins two leaves with 2 of 2k. Joining hosts through any fast pair
    let one such pair merge two leaves."""
    near = np.eye(n, dtype=bool)
    near[edges[:, 0], edges[:, 1]] = near[edges[:, 1], edges[:, 0]] = True
    both = np.array([np.count_nonzero(near[a] & near[b]) for a, b in edges.tolist()], dtype=np.int64)
    either = near[edges[:, 0]].sum(axis=1) + near[edges[:, 1]].sum(axis=1) - both
    return edges[both * 2 > either] if len(edges) else edges


def _components(n: int, edges: np.ndarray) -> np.ndarray:
    """Each host's component through ``edges`` (its smallest host code), -1 for a host alone."""
    parent = np.arange(n)

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    for a, b in edges.tolist():
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    comp = np.array([root(h) for h in range(n)])
    sizes = np.bincount(comp, minlength=n)
    return np.where(sizes[comp] >= 2, comp, -1)


def _agree(pairs: np.ndarray, fast: np.ndarray, leaf: np.ndarray) -> bool:
    la, lb = leaf[pairs[:, 0]], leaf[pairs[:, 1]]
    placed = (la >= 0) & (lb >= 0)
    if not placed.any():
        return False
    right = np.where(la == lb, fast, ~fast)[placed]
    return float(right.mean()) >= AGREE


def _join_alone(n: int, pairs: np.ndarray, rate: np.ndarray, leaf: np.ndarray) -> None:
    """Each host alone into the leaf it ran fastest with (median over its pairs with that leaf)."""
    placed = leaf.copy()
    for h in np.flatnonzero(placed < 0).tolist():
        mine = (pairs[:, 0] == h) | (pairs[:, 1] == h)
        other = np.where(pairs[mine, 0] == h, pairs[mine, 1], pairs[mine, 0])
        with_leaf = placed[other]
        known = with_leaf >= 0
        if not known.any():
            continue
        theirs, rates = with_leaf[known], rate[mine][known]
        by = {c: float(np.median(rates[theirs == c])) for c in set(theirs.tolist())}
        leaf[h] = max(sorted(by), key=lambda c: by[c])
