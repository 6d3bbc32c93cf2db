"""The count test's null, for ``judge``: per round, the chance that noise alone makes a healthy pair
slow (``RoundChances``, from the other pairs of that round), each suspect's rounds by hop class
(``chances_by_class``), and the intermittency test of its slow pairs over them (``intermittency``).
Also the reference keys of ``judge`` and ``RoundChances``: the medians of the control rows of each
phase, hop class and load (``class_medians``)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from netbench.reports.analyses import INTERMITTENT_MIN_PAIRS, intermittent_p_value, noise_tail
from netbench.reports.pairrows import PairRows
from netbench.reports.stats import poisson_binomial_sf

BEFORE, AFTER, RETESTS = -2, -3, -4
"""A reference's phase (``judge``) for rows measured before the re-test's rounds, after them, and
in any of them (``RoundChances``)."""
ANY_LOAD = -1
"""A reference of a phase and class whatever the load."""


def class_medians(
    when: np.ndarray, klass: np.ndarray, load: np.ndarray, busbw: np.ndarray, rows: np.ndarray | None = None
) -> dict[tuple[int, int, int], float]:
    """The median busbw of the rows (``rows``: a mask of them; all by default) of each (phase,
    class, load) and each (phase, class) (load ANY_LOAD); NaN (no measure) left out, a group of
    NaN alone NaN."""
    return _Groups((when, klass, load), busbw, rows).medians()


class _Groups:
    """Rows grouped by (phase, class, load): sorted once by one integer key, so that each group,
    and each (phase, class), is a run of the sorted values. pandas' group-by of the three columns
    held ~1 GB over the 8 M rows of 4,096 nodes at one size; this, a key made a column at a time
    (``rows``: the mask of the rows, taken from each column as it is added), an order and the values."""

    def __init__(self, cols: tuple[np.ndarray, ...], values: np.ndarray, rows: np.ndarray | None = None):
        def picked(c: np.ndarray) -> np.ndarray:
            return np.asarray(c) if rows is None else np.asarray(c)[rows]

        self.n = len(values) if rows is None else int(np.count_nonzero(rows))
        self.lows, self.spans = [], []
        for col in cols:  # the key's digits first, so that it is made in the type that holds it
            c = picked(col)
            self.lows.append(int(c.min()) if self.n else 0)
            self.spans.append(int(c.max()) - self.lows[-1] + 1 if self.n else 1)
        narrow = math.prod(self.spans) <= np.iinfo(np.int32).max  # the sort's order: half the bytes
        key = np.zeros(self.n, dtype=np.int32 if narrow else np.int64)
        for col, low, span in zip(cols, self.lows, self.spans, strict=True):
            key *= span
            key += picked(col)
            key -= low
        self.order = np.argsort(key)
        self.keys = key[self.order]
        del key
        self.values = picked(np.asarray(values, dtype=np.float64))[self.order]
        cut = np.flatnonzero(self.keys[1:] != self.keys[:-1]) + 1
        self.starts, self.ends = np.r_[0, cut], np.r_[cut, self.n]

    def _median(self, lo: int, hi: int) -> float:
        group = self.values[lo:hi]
        group = group[~np.isnan(group)]
        return float(np.median(group)) if len(group) else float("nan")

    def medians(self) -> dict[tuple[int, int, int], float]:
        out: dict[tuple[int, int, int], float] = {}
        if not self.n:
            return out
        (w0, k0, n0), (_, classes, loads) = self.lows, self.spans
        firsts = self.keys[self.starts].tolist()
        for q, lo, hi in zip(firsts, self.starts.tolist(), self.ends.tolist(), strict=True):
            w, k = divmod(q // loads, classes)
            out[(w + w0, k + k0, q % loads + n0)] = self._median(lo, hi)
        # a (phase, class) is the runs of its loads, one after the other in the key's order
        pair = np.asarray(firsts) // loads
        cut = np.flatnonzero(pair[1:] != pair[:-1]) + 1
        for lo, hi in zip(np.r_[0, cut].tolist(), np.r_[cut, len(pair)].tolist(), strict=True):
            w, k = divmod(int(pair[lo]), classes)
            out[(w + w0, k + k0, ANY_LOAD)] = self._median(int(self.starts[lo]),
                                                                                int(self.ends[hi - 1]))
        return out

    def own(self) -> np.ndarray:
        """Each row's group median (NaN for a group of NaN alone), in the rows' order."""
        out = np.empty(self.n)
        for lo, hi in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
            out[self.order[lo:hi]] = self._median(lo, hi)
        return out


@dataclass(frozen=True)
class RoundChances:
    """Per round, the chance that noise alone makes a healthy pair of it slow, from the other pairs
    measured in that round (``of_host``).

    Why: slow rounds come together. On a shared machine, CPU contention slows the concurrent pairs
    of a round at once; on a fabric, a burst of congestion does. A suspect's slow pair in such a
    round is what the pairs beside it show too, and the independence the count test assumes holds
    only given the round: each round is weighed with its own chance (a Poisson-binomial count,
    ``poisson_binomial_sf``) instead of one assumed tail for all."""

    rounds: np.ndarray
    """The round of each pair row weighed (at the largest size, not a re-run link)."""
    slow: np.ndarray
    """Whether it was slow against the rows of its class and load in every re-test round (a sweep
    row: in every sweep round). Not its own round's: that holds one or two controls, itself among
    them, and could never be slow."""
    a: np.ndarray
    b: np.ndarray
    names: list[str]
    disturbed: frozenset[int]
    """Rounds in which a pair failed other than "not run" (a host was lost, a group hung): its
    pairs' slowness is no evidence (chance 1)."""

    @classmethod
    def of(
        cls,
        rows: PairRows,
        usable: np.ndarray,
        when: np.ndarray,
        klass: np.ndarray,
        load: np.ndarray,
        is_slow: Callable[[np.ndarray], np.ndarray],
    ) -> RoundChances:
        # each row's reference: the median of its (span, class, load), which its own rows make;
        # a mask, not positions, and the ratios in place: 8 M rows of 8 bytes at 4,096 nodes
        span = np.where(when == BEFORE, np.int8(BEFORE), np.int8(RETESTS))
        refs = _Groups((span, klass, load), rows.busbw, usable).own()
        del span
        fine = np.isfinite(refs) & (refs > 0)
        ratios = rows.busbw[usable]
        ratios /= refs
        del refs
        ratios = ratios[fine]
        blocks = range(0, len(ratios), SLOW_BLOCK)
        slow = np.concatenate([is_slow(ratios[lo:lo + SLOW_BLOCK]) for lo in blocks] or [np.zeros(0, bool)])
        disturbed = frozenset(int(rows.round[i]) for i, failure in rows.failed.items() if failure.ran)
        return cls(rows.round[usable][fine], slow, rows.a[usable][fine], rows.b[usable][fine], rows.names,
                   disturbed)

    def of_host(self, host: str) -> Mapping[int, float]:
        """Each round's chance for ``host``, from the rows of that round without it (its own slow
        pairs are what is judged), drawn towards the rate of every round (PRIOR_CONTROLS rows'
        worth of weight: a round with two fast pairs says little), never below the analysis'
        assumed tail (``noise_tail``); ANY_ROUND: a round without other rows."""
        base = noise_tail()
        code = self.names.index(host) if host in self.names else -1
        other = (self.a != code) & (self.b != code)
        rnd, slow = self.rounds[other], self.slow[other]
        pooled = max(base, float(slow.mean())) if len(slow) else base
        out: dict[int, float] = {ANY_ROUND: pooled}
        if len(rnd):
            first = int(rnd.min())
            counted = np.bincount(rnd - first)
            slowed = np.bincount(rnd - first, weights=slow.astype(float))
            for off in np.flatnonzero(counted).tolist():
                out[first + off] = max(base, (float(slowed[off]) + PRIOR_CONTROLS * pooled)
                                       / (float(counted[off]) + PRIOR_CONTROLS))
        out |= {r: 1.0 for r in self.disturbed}
        return out


SLOW_BLOCK = 1 << 20
"""Ratios ``RoundChances.of`` asks ``is_slow`` about at a time (its logs are temporaries)."""
PRIOR_CONTROLS = 2.0
"""The weight, in rows, of every round's rate in one round's chance (``RoundChances.of_host``)."""
ANY_ROUND = -(1 << 40)
"""``RoundChances.of_host``'s key for a round without other rows: the rate of every round."""


def chances_by_class(
    rows: PairRows,
    at_top: np.ndarray,
    host: str,
    klass: np.ndarray,
    class_names: list[str],
    chance: Mapping[int, float],
) -> dict[str, list[float]]:
    """Per hop class, the noise chance (``RoundChances``) of each round ``host`` was measured
    in at the top size: a round, not a pair, is the unit (``host`` has one pair in a round)."""
    code = rows.names.index(host) if host in rows.names else -1
    mine = np.flatnonzero(at_top & ((rows.a == code) | (rows.b == code)))
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for k, r in zip(klass[mine].tolist(), rows.round[mine].tolist(), strict=True):
        out[class_names[k]][r] = chance.get(r, chance[ANY_ROUND])
    return {k: list(v.values()) for k, v in out.items()}


def intermittency(slow: Counter[str], measured: Mapping[str, list[float]]) -> tuple[float, str]:
    """The intermittency test of a node's slow pairs out of the rounds it was measured in
    (``measured``: each round's noise chance, ``chances_by_class``), all classes together and
    each hop class alone, the smallest p-value times the tests made, and which count it was. Per
    class as the analysis judges nodes: behind oversubscribed uplinks a node capped now and then
    shows with its own leaf only, and its many cross-leaf pairs, never slower, would drown it in
    the pooled count. Rounds whose controls were slow weigh little (``poisson_binomial_sf``); with
    every round's chance the assumed tail it is ``intermittent_p_value``."""
    every = [p for ps in measured.values() for p in ps]
    tests = [(sum(slow.values()), every, "")]
    tests += [(slow[k], ps, f" {k}") for k, ps in sorted(measured.items()) if len(measured) > 1]

    def p_value(k: int, chances: list[float]) -> float:
        if k < INTERMITTENT_MIN_PAIRS:
            return 1.0
        if k > len(chances):
            # slow partners of earlier slow links outnumber the rounds counted: as the analysis does
            return intermittent_p_value(k, len(chances))
        return poisson_binomial_sf(k, chances)

    p, k, n, name = min((p_value(k, ps), k, len(ps), name) for k, ps, name in tests)
    return min(1.0, p * len(tests)), f"{k} of {n}{name} rounds"
