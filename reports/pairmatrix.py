"""The pair model's matrices (``reports.pairmodel``): the large-message pair rows of the judged
engine as dense N x N arrays (busbw per size, y, rounds, hop classes, loads), built from the
analysis' pair columns (``ctx.pairs``) a size, and a block of rows, at a time: at 4,096 hosts the
rows are 25 M and the matrices 16.8 M cells each, so no array a row is kept beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from netbench.reports.pairrows import NO_ROUND, PairRows, pair_facts

from netbench.common.naming import natural_key

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext


def _pick_collective(pairs: PairRows, keep: np.ndarray) -> str:
    """The collective of the most rows kept, all_reduce first among the tied."""
    codes, counts = np.unique(pairs.collective[keep], return_counts=True)
    named = {pairs.collectives[c]: int(m)
             for c, m in zip(codes.tolist(), counts.tolist(), strict=True) if c >= 0}
    best = max(named.values())
    tied = sorted(c for c, m in named.items() if m == best)
    return "all_reduce" if "all_reduce" in tied else tied[0]


@dataclass(frozen=True, eq=False)
class Matrices:
    """What a fit starts from, built from the rows: the pairs' busbw, y, rounds, hop classes and loads."""

    collective: str
    sizes: list[int]
    hosts: list[str]
    bw: np.ndarray
    y: np.ndarray
    rounds: np.ndarray
    classes: list[str]
    cls: np.ndarray
    load: np.ndarray



def _disturbed_by_a_loss(ctx: AnalysisContext, keep: np.ndarray) -> np.ndarray:
    """Which of ``ctx.pairs``' rows in ``keep`` (a mask of them) ran beside a loss: in a round in
    which a pair failed other than "not run" (a host died, hung or was cut off; a group timed out),
    the pairs with an end on a leaf of the failed pair's hosts it names (both ends where it names
    none; every pair of the round without switches). Not evidence about those hosts: a leaf peer of
    a host lost mid-round shares its switch and the moment (a partner left waiting, a burst of
    retransmits), and its pairs of that round alone made it look slow."""
    from netbench.common.rows import blamed_hosts, never_ran

    out = np.zeros(len(keep), dtype=bool)
    rest = ctx.rest
    bad = rest[(rest["status"] != "ok") & (rest["pattern"] == "pair")]
    if bad.empty or "round" not in rest.columns:
        return out
    switches = ctx.switches
    near: dict[int, set[str | None]] = {}  # round -> the leaves (a host where none is known) it disturbed
    for row in bad.to_dict("records"):  # the failed rows: few
        hosts, rnd = row.get("hosts"), row.get("round")
        if not isinstance(hosts, (list, tuple)) or rnd != rnd or rnd is None:
            continue
        if never_ran(row):
            continue  # never ran: it disturbed nothing
        culprits = blamed_hosts(row) or set(hosts)
        near.setdefault(int(rnd), set()).update(switches.get(h, h) if switches else None for h in culprits)
    if not near:
        return out
    pairs = ctx.pairs
    leaf = [switches.get(h, h) for h in pairs.names]
    for i in np.flatnonzero(keep & np.isin(pairs.round, list(near))).tolist():
        leaves = near[int(pairs.round[i])]
        out[i] = None in leaves or leaf[pairs.a[i]] in leaves or leaf[pairs.b[i]] in leaves
    return out


def build_matrices(ctx: AnalysisContext) -> Matrices | None:
    """The matrices of the large-message pair rows of the judged engine (None without any)."""
    import pandas as pd

    pairs = ctx.pairs
    bus = pairs.busbw
    keep = ctx.judged_pairs & (bus > 0)
    start = ctx.retests.from_round if ctx.retests is not None else None
    if start is not None:  # the re-tests' rows: judged against their own controls, not fitted here
        keep &= ~((pairs.round != NO_ROUND) & (pairs.round >= start))
    keep &= ~_disturbed_by_a_loss(ctx, keep)
    if not keep.any():
        return None
    coll = _pick_collective(pairs, keep)
    nbytes = pairs.nbytes
    in_coll = pairs.collective_is(coll)
    sizes = ctx.large_sizes(sorted(pd.unique(nbytes[keep & in_coll]).tolist()))  # hashed: 25 M rows
    keep &= in_coll & np.isin(nbytes, sizes)
    del in_coll
    # the rows kept as a mask, not positions: every array taken from it is a number a row (25 M)
    names = pairs.names
    host_key = _host_order(ctx)
    order = sorted(range(len(names)), key=lambda c: host_key(names[c]))
    hosts = [names[c] for c in order]
    n = len(hosts)
    pos = np.empty(n, dtype=np.int32)  # int32 indices: a number per row, 25 M at 4,096 hosts
    pos[order] = np.arange(n, dtype=np.int32)
    ia, ib = pos[pairs.a[keep]], pos[pairs.b[keep]]
    distinct = ia != ib
    if not distinct.all():
        ia, ib = ia[distinct], ib[distinct]
        keep[keep] = distinct
    del distinct
    if not ia.size:
        return None
    used = np.zeros(n, dtype=bool)  # the matrix holds the hosts of the rows kept, no other
    used[ia] = used[ib] = True
    if not used.all():
        hosts = [h for h, u in zip(hosts, used.tolist(), strict=True) if u]
        shift = (np.cumsum(used) - 1).astype(np.int32)
        ia, ib, n = shift[ia], shift[ib], len(hosts)
    rnd = pairs.round[keep]
    rounds = _round_matrix(rnd, ia, ib, n)
    load, classes, cls = _factbuild_matrices(ctx, keep, hosts, ia, ib, rnd)
    del rnd, ia, ib
    # each host code's matrix index (-1: not in the matrix); the busbw matrix one size at a time,
    # from that size's rows alone: a third of the rows' indices and values at once, not all
    index = np.full(len(names), -1, dtype=np.int32)
    code = {h: c for c, h in enumerate(names)}
    index[[code[h] for h in hosts]] = np.arange(n, dtype=np.int32)
    bw = np.full((len(sizes), n, n), np.nan)
    for k, size in enumerate(sizes):
        at = keep & (nbytes == size)
        ia, ib = index[pairs.a[at]], index[pairs.b[at]]
        _busbw_into(bw[k], np.minimum(ia, ib), np.maximum(ia, ib), bus[at])
        del at, ia, ib
    del keep  # a number per row of the run: gone before the N x N work starts
    return Matrices(coll, sizes, hosts, bw, _log_levels(bw), rounds, classes, cls, load)


def _busbw_into(bw: np.ndarray, lo: np.ndarray, hi: np.ndarray, bwv: np.ndarray) -> None:
    """(N, N) ``bw`` (NaN) of one size from its rows' pairs ``lo`` < ``hi`` and busbw ``bwv``: the
    median over repeats of the same pair (rounds re-run, or both directions listed), both ways. A
    run measures each pair once a size: then the rows go straight in."""
    n = bw.shape[0]
    bw[lo, hi] = bwv
    # every row its cell's value: no cell had two rows of different busbw, whose median it would be
    if bool((bw[lo, hi] == bwv).all()):
        bw[hi, lo] = bwv
        return
    key = lo.astype(np.int64) * n + hi
    order = np.argsort(key, kind="stable")
    key, bwv = key[order], bwv[order]
    start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])  # key is sorted: where each pair starts
    med = np.array([np.median(seg) for seg in np.split(bwv, start[1:])])
    lo_u, hi_u = np.divmod(key[start], n)
    bw[lo_u, hi_u] = med
    bw[hi_u, lo_u] = med


def _log_levels(bw: np.ndarray) -> np.ndarray:
    """(N, N) y: each pair's log busbw relative to its size's median over pairs, the median over sizes."""
    n_sizes, n = bw.shape[0], bw.shape[1]
    # each size's median over its pairs: the upper triangle holds each pair once, the matrix twice,
    # and a list of values each taken twice has the same median. The logs a size, then a block of
    # rows, at a time: the whole stack's logs were 0.4 GB more at 4,096 hosts
    top = np.triu(np.ones((n, n), dtype=bool), 1)
    centre = np.array([finite_median(_log(v[top])) for v in bw], dtype=float)
    del top
    if n_sizes == 1:
        y = _log(bw[0])
        y -= centre[0]
        return y
    # the median over sizes of each pair (numpy's nanmedian would copy the stack through masks),
    # ROW_BLOCK rows of the matrix at a time: its sort copies only those
    y = np.empty((n, n))
    for lo in range(0, n, ROW_BLOCK):
        rel = _log(bw[:, lo : lo + ROW_BLOCK])
        rel -= centre[:, None, None]
        per_pair = rel.reshape(n_sizes, -1).T
        some = np.isfinite(per_pair).any(axis=1)
        y[lo : lo + ROW_BLOCK] = np.where(some, nanmedian_rows(per_pair), np.nan).reshape(-1, n)
    return y


def _log(v: np.ndarray) -> np.ndarray:
    """log of busbw (NaN where not measured, -inf at 0), a new array."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(v)


ROW_BLOCK = 256
def _round_matrix(rnd: np.ndarray, ia: np.ndarray, ib: np.ndarray, n: int) -> np.ndarray:
    """(N, N) the round each pair was measured in (its first row's), -1 where rows carry none.
    ``rnd``: each row's round (NO_ROUND: none), ``ia``/``ib``: its hosts' matrix indices."""
    ok = rnd != NO_ROUND
    if not ok.any():
        return np.full((n, n), -1, dtype=np.int8)
    if not ok.all():  # copies only where some row has no round
        ia, ib, rnd = ia[ok], ib[ok], rnd[ok]
    del ok
    out = np.full((n, n), -1, dtype=int_type(int(rnd.max())))
    out[ia[::-1], ib[::-1]] = rnd[::-1]  # reversed: the first row of a pair wins
    out[ib[::-1], ia[::-1]] = rnd[::-1]
    np.fill_diagonal(out, -1)
    return out


def _factbuild_matrices(
    ctx: AnalysisContext, keep: np.ndarray, hosts: list[str], ia: np.ndarray, ib: np.ndarray, rnd: np.ndarray
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """((N, N) load of each measured pair, the hop classes of the measured pairs, (N, N) index of each
    pair's class, -1 where not measured), each pair's from its first row. ``keep``: the rows (a mask
    of ``ctx.pairs``), ``ia``/``ib`` their hosts' matrix indices, ``rnd`` their rounds (NO_ROUND: none).

    The rows' own ``load`` and ``hop_class`` (the plan's, recorded when the row was stored); worked
    out (``common.pairrows.pair_facts``) only for rows without them."""
    pairs = ctx.pairs
    n = len(hosts)
    # every row here is usable: ok, busbw > 0, the judged collective's large sizes
    load, hop, names = pair_facts(hosts, ia, ib, rnd, pairs.load[keep], pairs.hop[keep], pairs.classes,
                                  ctx.switches, np.ones(len(rnd), dtype=bool))
    used = np.unique(hop)
    classes = sorted(names[k] for k in used.tolist())
    lut = np.full(len(names), -1, dtype=int_type(len(classes)))
    lut[used] = [classes.index(names[k]) for k in used.tolist()]
    cls = np.full((n, n), -1, dtype=int_type(len(classes)))
    load_m = np.zeros((n, n), dtype=int_type(int(load.max(initial=0))))
    for matrix, value in ((cls, lut[hop]), (load_m, load)):
        matrix[ia[::-1], ib[::-1]] = value[::-1]  # reversed: the first row of a pair wins
        matrix[ib[::-1], ia[::-1]] = value[::-1]
    return load_m, classes, cls


def int_type(largest: int) -> np.dtype:
    """The narrowest signed integer type for -1..largest: the N x N matrices of classes, cells,
    rounds and loads are 16.8 M cells at 4,096 hosts, 134 MB each as int64."""
    for t in (np.int8, np.int16, np.int32):
        if largest <= np.iinfo(t).max:
            return np.dtype(t)
    return np.dtype(np.int64)


def finite_median(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else None


def nanmedian_rows(r: np.ndarray) -> np.ndarray:
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


def _host_order(ctx: AnalysisContext):  # noqa: ANN202
    """Hosts grouped by switch, switches and hosts in natural order (leaf2 before leaf10)."""

    def key(h: str) -> tuple:
        sw = ctx.switches.get(h)
        return (sw is None, natural_key(sw or ""), natural_key(h))

    return key
