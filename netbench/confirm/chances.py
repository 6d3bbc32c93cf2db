"""The count test's null, for ``judge``: per round, the chance that noise alone makes a healthy pair
slow (``RoundChances``, from the other pairs of that round), each suspect's rounds by hop class
(``chances_by_class``), and the intermittency test of its slow pairs over them (``intermittency``).
Also the reference keys of ``judge`` and ``RoundChances``: the medians of the control rows of each
phase, hop class and load (``class_medians``)."""

from __future__ import annotations

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
    when: np.ndarray, klass: np.ndarray, load: np.ndarray, busbw: np.ndarray
) -> dict[tuple[int, int, int], float]:
    """The median busbw of the rows of each (phase, class, load) and each (phase, class) (load
    ANY_LOAD); NaN (no measure) left out, a group of NaN alone NaN. The rows sorted by one int64
    key, each group's median of its run of them: pandas' group-by of three columns held ~1 GB
    over the 8 M rows of 4,096 nodes at one size."""
    out: dict[tuple[int, int, int], float] = {}
    if not len(busbw):
        return out
    cols = [np.asarray(c) for c in (when, klass, load)]
    lows = [int(c.min()) for c in cols]
    spans = [int(c.max()) - low + 1 for c, low in zip(cols, lows, strict=True)]
    key = np.zeros(len(busbw), dtype=np.int64)
    for c, low, span in zip(cols, lows, spans, strict=True):
        key *= span
        key += c
        key -= low
    values = np.asarray(busbw, dtype=np.float64)
    for by_load in (True, False):
        keys = key if by_load else key // spans[2]
        order = np.argsort(keys, kind="stable")
        ordered, sorted_values = keys[order], values[order]
        del order
        starts = np.r_[0, np.flatnonzero(np.diff(ordered)) + 1]
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(ordered)], strict=True):
            group = sorted_values[lo:hi]
            group = group[~np.isnan(group)]
            q = int(ordered[lo])
            n = q % spans[2] + lows[2] if by_load else ANY_LOAD
            q = q // spans[2] if by_load else q
            w, k = q // spans[1] + lows[0], q % spans[1] + lows[1]
            out[(w, k, n)] = float(np.median(group)) if len(group) else float("nan")
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
        idx = np.flatnonzero(usable)
        span = np.where(when[idx] == BEFORE, np.int8(BEFORE), np.int8(RETESTS))  # 8 M rows at 4,096 nodes
        medians = class_medians(span, klass[idx], load[idx], rows.busbw[idx])
        refs = np.full(len(idx), np.nan)
        if len(idx):
            # (phase, class, load) as one int64 key (codes and loads from -1 up, two phases): the
            # rows' triples sorted as a 2-D unique took ~1 GB over 8 M rows at 4,096 nodes
            k, n = klass[idx].astype(np.int64) + 1, load[idx].astype(np.int64) + 1
            classes, width = int(k.max()) + 1, int(n.max()) + 1
            keys = ((span == BEFORE) * classes + k) * width + n
            uniq, inverse = np.unique(keys, return_inverse=True)
            triples = [(BEFORE if q // width >= classes else RETESTS, q // width % classes - 1, q % width - 1)
                       for q in uniq.tolist()]
            per_key = [
                next((medians[key] for key in ((w, c, m), (w, c, ANY_LOAD)) if key in medians), np.nan)
                for w, c, m in triples
            ]
            refs = np.asarray(per_key, dtype=float)[inverse.reshape(-1)]
        fine = np.isfinite(refs) & (refs > 0)
        idx, refs = idx[fine], refs[fine]
        disturbed = frozenset(int(rows.round[i]) for i, failure in rows.failed.items() if failure.ran)
        return cls(rows.round[idx], is_slow(rows.busbw[idx] / refs), rows.a[idx], rows.b[idx],
                   rows.names, disturbed)

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
