"""The pair model: tell "node X is slow" from "the link X-Y is slow", respecting the physics.

Large-message busbw of every measured pair is fitted robustly, separately within each hop class K
(same leaf / across the spine / ...), as

    log bw_ij = c_cell(ij) + a_i^K + a_j^K + e_ij

where the *cell* is the pair's hop class and its load: the most pairs of the same round that crossed
one uplink on its path (0 within a leaf). Both are facts of the plan, recorded in the pair's rows
(``load``, ``hop_class``: the planner worked them out from the switches it scheduled with); only rows
without them (older runs, imported logs) have them worked out here, by ``common.pairrows.pair_facts``
from the rows' ``round`` and the topology. Why cells: the pairs of
a round run at once and share uplinks, so two cross-leaf pairs can differ 2-3x because of their
round, not their hardware; a pair is compared only with pairs measured under the same load (cells
too small to have a median are pooled with the next load up). Why node effects per class: capped
parts bottleneck, they do not multiply. A node capped a little below its peers is slow with partners
on its own leaf and looks normal on every cross-spine pair already narrower than its cap; one node
effect over all partners would hide it. ``a_i^K`` is node i's effect among class-K pairs; ``e_ij``
what is left for the link. Fitting is a median polish (alternating medians), so a slow node does not
pull its partners down and a bad link does not pull its nodes down.

Dense N x N arrays (NaN = not measured): 1,024 nodes is 1M cells, a few MB, and numpy's
nanmedian over rows is what makes the fit take about a second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from netbench.reports.noise import NoiseModel, by_class, learn_classes
from netbench.reports.pairmatrix import (  # noqa: F401 - nanmedian_rows: imported from here too
    ROW_BLOCK,
    Matrices,
    build_matrices,
    finite_median,
    int_type,
    nanmedian_rows,
)
from netbench.reports.stats import SIGMA_FLOOR, residual_sigma

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext


@dataclass(frozen=True, eq=False)  # eq=False: arrays do not compare as one bool
class PairModel:
    collective: str
    sizes: list[int]  # the large sizes used, ascending
    hosts: list[str]  # matrix order
    bw: np.ndarray  # (n_sizes, N, N) median busbw GB/s per pair and size, NaN if not measured
    y: np.ndarray  # (N, N) log busbw relative to the size's median, combined over sizes
    classes: list[str]  # the hop classes of the measured pairs (netbench.inventory.topology)
    cls: np.ndarray  # (N, N) index into classes, -1 where not measured
    class_level: dict[str, float]  # c per class (log)
    node_effect: np.ndarray  # a_i (log), 0 for nodes not judged
    judged: np.ndarray  # bool: node had enough partners to estimate a_i
    partners: np.ndarray  # measured partners per node
    resid: np.ndarray  # (N, N) e_ij
    sigma: float  # robust sigma of e (log)
    class_pairs: dict[str, int] = field(default_factory=dict)
    class_median_bw: dict[str, list[float | None]] = field(default_factory=dict)  # per size
    class_effect: np.ndarray | None = None  # (n_classes, N) a_i^K (log), 0 where not judged in K
    class_judged: np.ndarray | None = None  # (n_classes, N) bool: enough partners in class K
    class_partners: np.ndarray | None = None  # (n_classes, N) measured partners in class K
    rounds: np.ndarray | None = None  # (N, N) the round a pair was measured in, -1 unknown
    load: np.ndarray | None = None  # (N, N) most pairs of its round through one uplink on its path
    # (as its first row records it), 0 where not measured
    cell: np.ndarray | None = None  # (N, N) the pair's comparison cell (class x load), -1 none
    cell_median_bw: list[float | None] = field(default_factory=list)  # largest size, per cell
    cell_pairs: list[int] = field(default_factory=list)
    noise: NoiseModel = field(default_factory=NoiseModel)  # the residuals' lower tail per hop class

    def class_sigma(self) -> np.ndarray:
        """(N, N) the noise sigma of each pair's hop class (its tail's unit; ``sigma`` elsewhere)."""
        return self.sigma_by_class()[self.cls]  # cls -1 (not measured) takes the last: the fleet's sigma

    def sigma_by_class(self) -> np.ndarray:
        """The noise sigma of each hop class, then the fleet's: ``class_sigma`` is it indexed by ``cls``
        (a block of rows can take theirs from it: the whole matrix is 0.13 GB at 4,096 hosts)."""
        own = [self.noise.tail(c).sigma if c in self.noise.tails else self.sigma for c in self.classes]
        return np.array([*own, self.sigma])

    @property
    def index(self) -> dict[str, int]:
        return {h: i for i, h in enumerate(self.hosts)}

    def pair_bw(self, i: int, j: int) -> list[float | None]:
        return [None if np.isnan(v) else float(v) for v in self.bw[:, i, j]]

    def class_index(self, klass: str) -> int | None:
        return self.classes.index(klass) if klass in self.classes else None

    def class_ratio(self, a: str, b: str) -> float | None:
        """exp(c_a - c_b): e.g. spine vs leaf is the measured cross-spine penalty."""
        if a in self.class_level and b in self.class_level:
            return float(np.exp(self.class_level[a] - self.class_level[b]))
        return None


def _two_hosts(col) -> tuple[list[str], np.ndarray, np.ndarray]:  # noqa: ANN001 - hosts' object array
    """The hosts named by the rows whose hosts are a list of two, in order of appearance, and per
    row the index of its first and second host among them (-1 for a row of another kind), without
    a Python step per row (8 M pair rows at 4,096 nodes)."""
    from netbench.reports.rowtable import listed_hosts

    names, rows, codes = listed_hosts(col, length=2)
    a = np.full(len(col), -1, dtype=np.int64)
    b = np.full(len(col), -1, dtype=np.int64)
    a[rows] = codes[0::2]
    b[rows] = codes[1::2]
    return names, a, b


def _measured(m: PairModel) -> Matrices:
    """The matrices a model was fitted from, as they are."""
    assert m.rounds is not None and m.load is not None
    return Matrices(m.collective, m.sizes, m.hosts, m.bw, m.y, m.rounds, m.classes, m.cls, m.load)


def fit_pair_model(
    ctx: AnalysisContext,
    iterations: int = 30,
    exclude: Callable[[list[str]], np.ndarray] | None = None,
    like: PairModel | None = None,
) -> PairModel | None:
    """``exclude``: given the matrix's hosts, the (N, N) pairs left out of the fit (their busbw stays
    in ``bw``, their residual is NaN):
    pairs through a slow uplink, whose slowness is the switch's and would skew every cell median and
    node effect of the other pairs. ``like``: a model of the same rows, whose measured matrices
    (busbw, y, rounds, classes) are taken as they are instead of built again: a refit that leaves
    pairs out changes only which pairs are fitted (at 4,096 hosts the matrices are ~0.5 GB)."""
    mx = _measured(like) if like is not None else build_matrices(ctx)
    if mx is None:
        return None
    coll, sizes, hosts, bw, y, rounds, classes, cls, load = (
        mx.collective, mx.sizes, mx.hosts, mx.bw, mx.y, mx.rounds, mx.classes, mx.cls, mx.load
    )
    n = len(hosts)

    valid = np.isfinite(y)
    np.fill_diagonal(valid, False)
    if exclude is not None:
        valid &= ~exclude(hosts)
    partners = valid.sum(axis=1)
    upper = np.triu(valid, 1)
    cell, cell_class = _cells(cls, load, upper, len(classes))
    min_partners = ctx.policy.thresholds.min_partners
    n_cls = len(classes)
    a_k = np.zeros((n_cls, n))
    judged_k = np.zeros((n_cls, n), dtype=bool)
    partners_k = np.zeros((n_cls, n), dtype=int)
    level = np.zeros(len(cell_class))
    resid = np.full((n, n), np.nan)
    class_level: dict[str, float] = {}
    class_pairs: dict[str, int] = {}
    class_median_bw: dict[str, list[float | None]] = {}
    cell_median_bw: list[float | None] = [None] * len(cell_class)
    cell_pairs = [0] * len(cell_class)
    for k in range(n_cls):
        in_k = valid & (cls == k)
        partners_k[k] = in_k.sum(axis=1)
        judged_k[k] = partners_k[k] >= min_partners
        if n < 4:  # with 3 nodes every pair is explained exactly by node effects: nothing to tell apart
            judged_k[k] = False
        pairs = None  # the previous class's lists go before this one's are made
        pairs = _ClassPairs.of(y, in_k, partners_k[k], cell)
        del in_k
        a_k[k], lvl = _polish(pairs, judged_k[k], len(cell_class), iterations)
        cells_k = [c for c in range(len(cell_class)) if cell_class[c] == k]
        level[cells_k] = lvl[cells_k]
        pairs.residuals_into(resid, level, a_k[k])
        if not pairs.up_i.size:
            continue
        # the class's level, pairs and medians, and its cells', from its pairs (upper triangle)
        class_level[classes[k]] = float(np.median(pairs.centred(a_k[k])))
        class_pairs[classes[k]] = int(pairs.up_i.size)
        class_median_bw[classes[k]] = [finite_median(b[pairs.up_i, pairs.up_j]) for b in bw]
        for c, part in pairs.cells.items():
            cell_median_bw[c] = finite_median(bw[-1][pairs.up_i[part], pairs.up_j[part]])
            cell_pairs[c] = part.stop - part.start
    judged = judged_k.any(axis=0)
    # one number per node for callers that want one (preflight's known-good partners): its worst class
    a = np.where(judged_k, a_k, np.inf).min(axis=0)
    a = np.where(judged, a, 0.0)
    pairs = None
    resid_up = resid[upper]  # each pair once, taken once for both
    sigma = max(residual_sigma(resid_up), SIGMA_FLOOR)
    per_class = by_class(resid_up, cls[upper], classes)
    del resid_up  # before the tails are fitted
    noise = learn_classes(per_class, sigma)
    del per_class
    return PairModel(
        collective=coll,
        sizes=sizes,
        hosts=hosts,
        bw=bw,
        y=y,
        classes=classes,
        cls=cls,
        class_level=class_level,
        node_effect=a,
        judged=judged,
        partners=partners,
        resid=resid,
        sigma=sigma,
        class_pairs=class_pairs,
        class_median_bw=class_median_bw,
        class_effect=a_k,
        class_judged=judged_k,
        class_partners=partners_k,
        rounds=rounds,
        load=load,
        cell=cell,
        cell_median_bw=cell_median_bw,
        cell_pairs=cell_pairs,
        noise=noise,
    )


MIN_CELL_PAIRS = 12
"""A cell's median needs peers: a load seen on fewer pairs is pooled with the next load up."""

"""Rows of the N x N matrices taken at a time when listing a class's pairs (bounds the temporaries)."""


@dataclass(eq=False)
class _ClassPairs:
    """One hop class's measured pairs as lists instead of N x N masks: the polish touches only them
    (a leaf's pairs are 1/32 of the matrix at 32 leaves), and its medians select among exactly the
    values the masked matrices held, computed in the same order, so the numbers are the same.

    ``up_i``/``up_j``/``up_y``: each pair once (i < j), grouped by cell (``cells``: cell -> slice).
    ``by_count``: per number of partners, (the nodes with that many, their partners, the pairs'
    cells (one number when they share one)), so each node's median over its partners is a row of
    one 2-D array; the pairs' y are taken from ``y`` a block at a time (``_blocks``), not kept (the
    spine class's were 0.13 GB at 4,096 hosts)."""

    y: np.ndarray
    up_i: np.ndarray
    up_j: np.ndarray
    up_y: np.ndarray
    cells: dict[int, slice]
    by_count: list[tuple[np.ndarray, np.ndarray, np.ndarray | np.intp]]

    @classmethod
    def of(cls, y: np.ndarray, in_k: np.ndarray, partners: np.ndarray, cell: np.ndarray) -> _ClassPairs:
        n = y.shape[0]
        ui: list[np.ndarray] = []
        uj: list[np.ndarray] = []
        for lo in range(0, n, ROW_BLOCK):
            ii, jj = np.nonzero(in_k[lo : lo + ROW_BLOCK])
            ii += lo
            above = jj > ii
            ui.append(ii[above].astype(np.int32))
            uj.append(jj[above].astype(np.int32))
        up_i, up_j = np.concatenate(ui), np.concatenate(uj)
        del ui, uj
        up_c = cell[up_i, up_j]
        order = np.argsort(up_c, kind="stable")
        up_i, up_j, up_c = up_i[order], up_j[order], up_c[order]
        values, first, counts = np.unique(up_c, return_index=True, return_counts=True)
        cells = {int(c): slice(int(s), int(s + m)) for c, s, m in zip(values, first, counts, strict=True)}
        by_count = []
        for m in np.unique(partners[partners > 0]).tolist():
            rows = np.nonzero(partners == m)[0]
            cols = np.empty((len(rows), m), dtype=np.int32)
            for lo in range(0, len(rows), ROW_BLOCK):
                block = rows[lo : lo + ROW_BLOCK]
                cols[lo : lo + len(block)] = np.nonzero(in_k[block])[1].reshape(len(block), m)
            in_cell = cell[rows[:, None], cols]
            if (in_cell == in_cell.flat[0]).all():  # one load for all (a 2-tier fabric's spine pairs)
                in_cell = np.intp(in_cell.flat[0])  # level[c] a number: no gather over 16 M pairs
            by_count.append((rows, cols, in_cell))
        return cls(y, up_i, up_j, y[up_i, up_j], cells, by_count)

    def centred(self, a: np.ndarray) -> np.ndarray:
        """y - a_i - a_j of each pair (upper triangle), in ``up_*`` order: a block of pairs at a time
        into one array (the gathers a block's: 8.3 M spine pairs at 4,096 hosts)."""
        out = np.empty(self.up_y.size)
        for lo in range(0, out.size, ROW_BLOCK * ROW_BLOCK * 16):
            part = slice(lo, lo + ROW_BLOCK * ROW_BLOCK * 16)
            np.subtract(self.up_y[part], a[self.up_i[part]], out=out[part])
            out[part] -= a[self.up_j[part]]
        return out

    def row_medians(self, level: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Each node's median over its partners j of y - c_cell - a_j (0 for a node without any)."""
        out = np.zeros(len(a))
        for rows, cols, cells, ys in self._blocks():
            out[rows] = _middle(ys - level[cells] - a[cols])
        return out

    def residuals_into(self, resid: np.ndarray, level: np.ndarray, a: np.ndarray) -> None:
        """resid[i, j] = y - c_cell - a_i - a_j for every pair of the class (both triangles)."""
        for rows, cols, cells, ys in self._blocks():
            resid[rows[:, None], cols] = ys - level[cells] - a[rows][:, None] - a[cols]

    def _blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | np.intp, np.ndarray]]:
        """``by_count`` ROW_BLOCK nodes at a time: each node's numbers are its own, and the temporaries
        of a block are a few MB where a class's whole were 0.1 GB each at 4,096 hosts."""
        for rows, cols, cells in self.by_count:
            for lo in range(0, len(rows), ROW_BLOCK):
                part = slice(lo, lo + ROW_BLOCK)
                r, c = rows[part], cols[part]
                yield r, c, cells if np.ndim(cells) == 0 else cells[part], self.y[r[:, None], c]


def _polish(
    pairs: _ClassPairs, judged: np.ndarray, n_cells: int, iterations: int
) -> tuple[np.ndarray, np.ndarray]:
    """Median polish of one hop class: (node effects, cell levels) with y = c_cell + a_i + a_j."""
    n = len(judged)
    a = np.zeros(n)
    level = np.zeros(n_cells)
    if not pairs.cells:
        return a, level
    before = None  # the node effects two iterations back
    for it in range(iterations):
        r = pairs.centred(a)
        for c, part in pairs.cells.items():
            level[c] = _middle(r[part])
        new = np.where(judged, pairs.row_medians(level, a), 0.0)
        if judged.any():
            new = np.where(judged, new - np.median(new[judged]), 0.0)
        done = np.max(np.abs(new - a)) < 1e-5  # 0.001% in bandwidth: far below any threshold
        if not done and before is not None and np.array_equal(new.view(np.int64), before.view(np.int64)):
            # the polish flips between two states for good (medians can): the remaining
            # iterations would alternate, so where they end is known without running them
            a = new if (iterations - 1 - it) % 2 == 0 else a
            break
        before, a = a, new
        if done:
            break
    r = pairs.centred(a)
    for c, part in pairs.cells.items():  # cell levels consistent with the final node effects
        level[c] = _middle(r[part])
    return a, level


def _middle(r: np.ndarray) -> np.ndarray | float:
    """The median of each row of ``r`` (of a 1-D ``r``: its median) without NaN, the same numbers as
    np.median: the middle value, or half the sum of the two middle ones. One selection, in place
    (``r`` is reordered within its rows; the lower middle is then the largest value left of the
    upper): numpy's partition for two positions at once takes twice as long as sorting."""
    m = r.shape[-1]
    hi = m // 2
    r.partition(hi, axis=-1)
    upper = r[..., hi].copy()
    if m % 2:
        return upper
    return 0.5 * (r[..., :hi].max(axis=-1) + upper)


def _cells(
    cls: np.ndarray, load: np.ndarray, upper: np.ndarray, n_classes: int
) -> tuple[np.ndarray, list[int]]:
    """(N, N) cell index of each measured pair (-1 elsewhere), and the class of each cell. Within a
    class, loads are taken in ascending order and pooled until a cell has MIN_CELL_PAIRS pairs."""
    cell = np.full(cls.shape, -1, dtype=np.int32)
    cell_class: list[int] = []
    for k in range(n_classes):
        in_k = upper & (cls == k)
        if not in_k.any():
            continue
        loads, counts = np.unique(load[in_k], return_counts=True)
        groups: list[list[int]] = []
        cur: list[int] = []
        filled = 0
        for value, count in zip(loads.tolist(), counts.tolist(), strict=True):
            cur.append(value)
            filled += count
            if filled >= MIN_CELL_PAIRS:
                groups.append(cur)
                cur, filled = [], 0
        if cur and groups:
            groups[-1] += cur  # a small last cell joins the one before
        elif cur:
            groups.append(cur)
        lut = np.zeros(int(loads.max()) + 1, dtype=np.int64)
        for g in groups:
            lut[g] = len(cell_class)
            cell_class.append(k)
        cell[in_k] = lut[load[in_k]]
    cell = np.where(cell >= 0, cell, cell.T).astype(int_type(len(cell_class)), copy=False)
    return cell, cell_class


