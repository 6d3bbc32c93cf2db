"""What the re-tests say: ``judge`` turns one launch's rows into a verdict for each subject. Each
re-test pair is judged against the controls of its phase measured under the same load (hop class
and pairs per uplink, ``common.topology.round_load``; ``RetestFrame``), never against another
class; a node slow with some known-good partners only is confirmed as intermittent by a count test
over its slow rounds, earlier ones included, each round weighed with the chance that the other pairs
of that round show (``chances.RoundChances``: slow rounds come together, under CPU contention or
congestion, so one assumed tail for independent pairs is not the null;
``reports.analyses.intermittent_p_value`` where every round is alike). The steps: the rows as
columns and their references (``RetestFrame``), the draws of each suspect and link (``Draws``), what
a suspect node's draws show (``NodeShown``) and its verdict, a link's verdict (``link_verdict``)."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from netbench.confirm.candidates import CANDIDATE_RUNS
from netbench.confirm.chances import (
    AFTER,
    ANY_LOAD,
    BEFORE,
    RoundChances,
    chances_by_class,
    class_medians,
    intermittency,
)
from netbench.confirm.records import Pair
from netbench.inventory.topology import hop_class
from netbench.reports.analyses import Retest
from netbench.reports.pairrows import PairRows
from netbench.reports.stats import pooled_interval

if TYPE_CHECKING:
    from netbench.reports.policy import Thresholds


def judge(
    rows: PairRows,
    rounds: range,
    suspects: list[str],
    links: list[Pair],
    switches: Mapping[str, str],
    thresholds: Thresholds,
    noise_sigma: float = 0.0,
    prior: Mapping[str, set[str]] | None = None,
    n_tests: int = 1,
    excused: Callable[[str, str], bool] | None = None,
    known: Mapping[str, tuple[float, float]] | None = None,
    candidates: Mapping[Pair, int] | None = None,
) -> dict[str, Retest]:
    """Verdicts from one escalation's rows (pair rows whose round is in ``rounds``) at the largest size.

    Each re-test pair's busbw is divided by its reference: the median of the control pairs (good-good)
    of its phase of the same hop class under the same load (pairs of the round through one uplink),
    else of its phase and class, else of the earlier pairs (the sweep or quick pass) of that class
    and load, else of that class. Never a pair of another class: a cross-leaf pair "slow" against
    pairs within a leaf is the fabric, not the pair; without a reference of its class it is not judged.
    "Slow" is both practical and beyond noise, as in the rules: a ratio at most the policy's factor
    (slow_node_factor for nodes, slow_pair_factor for links) and log(ratio) at most -mad_k times the
    pair model's noise sigma (log space). A pair's rows of one round are one draw (their median).
    A suspect node is confirmed when slow in most of its
    re-test pairs; a link when slow in each of its re-runs (one a round; a candidate link, re-run
    ``candidate_runs`` times, in all but its spare, ``candidates``' count, of three or more).
    Otherwise a node is confirmed as intermittent
    when its slow partners (these, those of its earlier pairs slow against the earlier references
    but for pairs ``excused`` puts on something else, and ``prior``'s: the partners of its earlier
    slow links, suspects themselves perhaps) out of the rounds it was measured in pass the count
    test, family-wise over ``n_tests``: each round weighed with the chance its other pairs were
    slow (``RoundChances``; a round in which a host was lost or a group hung counts for nothing),
    which is the analysis' intermittency test (``intermittent_p_value``) when every round is
    alike; also when it
    was fast with every re-test partner, since such a node is fast for a while. A node slow with few
    or none of its pairs alone is confirmed when they together show it certainly slow and, pooled
    with ``known`` (each suspect's 95% interval from the analysis that made it one), certainly past
    the warning floor. The re-test's slow pairs alone pass the count test too, family-wise over
    the suspects: they were drawn after the suspects were picked. Cleared: slow with none and no
    test passes; inconclusive: slow with a few.
    """
    known = known or {}
    out = {s: Retest(s, "node") for s in suspects} | {
        "|".join(sorted(p)): Retest("|".join(sorted(p)), "link", candidate=p in (candidates or []))
        for p in [*links, *(candidates or [])]
    }
    frame = RetestFrame.of(rows, rounds, suspects, links, candidates or {}, switches)
    if frame is None:
        return {k: replace(rt, reason="no re-test was measured") for k, rt in out.items()}
    draws = Draws.of(frame, excused)
    # "slow" beyond the noise the re-test itself shows, not only the sweep's: a healthy node re-tested
    # under CPU contention or congestion met 0.73-0.88x in most of its pairs, which a quiet sweep's
    # sigma called slow, while its round's controls spread as far (issue 45)
    bar = SlowBar(thresholds, max(noise_sigma, control_sigma(frame)))
    chances = RoundChances.of(rows, frame.at_top & ~frame.is_link & (frame.when != AFTER), frame.when,
                              frame.klass, frame.load,
                              lambda r: (r <= thresholds.slow_node_factor)
                              & (np.log(np.maximum(r, 1e-12)) <= -thresholds.mad_k * noise_sigma))
    for s in suspects:
        shown = NodeShown.of(s, frame, draws, chances.of_host(s), bar, (prior or {}).get(s, set()), switches,
                             len(suspects))
        verdict, reason, interval = shown.verdict(known.get(s), n_tests)
        out[s] = replace(out[s], verdict=verdict, ratios=shown.per, reason=reason, interval=interval,
                         slow_runs=(shown.slow_runs, len(shown.runs)))
    spares = {"|".join(sorted(p)): k for p, k in (candidates or {}).items()}
    for key, by_round in draws.links.items():
        out[key] = link_verdict(out[key], by_round, spares.get(key, 0), bar)
    unjudged = "not re-run: no control pair of its class"
    return {k: rt if rt.reason else replace(rt, reason=unjudged) for k, rt in out.items()}


LINK_RUNS = CANDIDATE_RUNS
"""Re-runs of a suspect link, each in its own phase; confirmed only when slow in every one of them."""
MIN_CONTROL_DIFFS = 5
"""Differences between controls of one cell it takes to estimate the re-test's own noise."""


def control_sigma(frame: RetestFrame) -> float:
    """The pair-level noise of the re-test's rounds (log space): controls of one round, hop class and
    load differ only by it, so the spread of their pairwise log differences is sqrt(2) sigma (a
    robust 1.4826 MAD). 0 where fewer than ``MIN_CONTROL_DIFFS`` differences were measured."""
    rows = frame.rows
    good = ~rows.mask_of(frame.bad)
    ctrl = np.flatnonzero(frame.esc & frame.at_top & ~frame.is_link & good[rows.a] & good[rows.b])
    cells: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for i in ctrl.tolist():
        cells[(int(rows.round[i]), int(frame.klass[i]), int(frame.load[i]))].append(math.log(rows.busbw[i]))
    # every pair of a cell's logs, each earlier one less each later: as floats in one array, where
    # a list of them was ~300 MB at 4,096 nodes (2,048 controls a round: 2 M differences each)
    diffs = np.concatenate([np.zeros(0), *(_differences(xs) for xs in cells.values())])
    if len(diffs) < MIN_CONTROL_DIFFS:
        return 0.0
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return 1.4826 * mad / math.sqrt(2)


def _differences(xs: list[float]) -> np.ndarray:
    """Each of ``xs`` less each one after it, in that order."""
    v = np.asarray(xs, dtype=np.float64)
    first, later = np.triu_indices(len(v), 1)
    return v[first] - v[later]


@dataclass(frozen=True)
class SlowBar:
    """What "slow" means, as in the rules: both practical and beyond noise, a ratio at most the
    policy's factor and log(ratio) at most -mad_k times the pair model's noise sigma (log space)."""

    thresholds: Thresholds
    noise_sigma: float

    def __call__(self, ratio: float, factor: float) -> bool:
        return ratio <= factor and math.log(max(ratio, 1e-12)) <= -self.thresholds.mad_k * self.noise_sigma


@dataclass(frozen=True, eq=False)
class RetestFrame:
    """The rows as columns, for ``judge``: the sweep's millions of rows are weighed so (which are
    controls, their hop class and load, the medians of each); only the re-test's rows and the
    suspects' own go one by one (``Draws``)."""

    rows: PairRows
    esc: np.ndarray
    """The re-test's rows: ok, with a round in the launch's ``rounds``."""
    at_top: np.ndarray
    """The ok rows at the re-test's largest size."""
    load: np.ndarray
    klass: np.ndarray
    class_names: list[str]
    """Each row's load and hop class (a code into ``class_names``) as its plan recorded them."""
    bad: set[str]
    """The suspect nodes."""
    one_bad: np.ndarray
    """The rows with one suspect end: a suspect's re-test pairs and its earlier ones."""
    is_link: np.ndarray
    """The rows of a re-run link: neither references nor the rounds' chances."""
    when: np.ndarray
    """Each row's phase as a reference: its own round in the re-test, else ``BEFORE`` or ``AFTER``."""
    medians: dict[tuple[int, int, int], float]
    """The controls' median busbw per (phase, class, load) and (phase, class, ``ANY_LOAD``)."""
    paths: dict[tuple[int, int, int], float]
    """The re-test's controls' median busbw per (round, leaf, leaf): what a re-run link's own path
    carried in its round (``schedule._control`` puts two good nodes on its leaves beside it)."""
    leaf: np.ndarray
    """Each host's leaf as a code (``-1``: not placed), by the rows' host codes."""

    @classmethod
    def of(
        cls,
        rows: PairRows,
        rounds: range,
        suspects: list[str],
        links: list[Pair],
        candidates: Mapping[Pair, int],
        switches: Mapping[str, str],
    ) -> RetestFrame | None:
        """The frame of the launch's ``rounds``; None when none of its rows was measured."""
        ok = rows.ok & (rows.busbw > 0)
        rnd = rows.round
        esc = ok & (rnd >= rounds.start) & (rnd < rounds.stop)
        if not esc.any():
            return None
        top = rows.nbytes[esc].max()
        at_top = ok & (rows.nbytes == top)
        # each row's hop class and load as its plan recorded them (worked out only for rows without)
        load, klass, class_names = rows.facts(switches, ok)
        bad = set(suspects)
        bad_code = rows.mask_of(bad)
        one_bad = bad_code[rows.a] != bad_code[rows.b]
        # a suspect link's rows are neither references nor the rounds' chances, its sweep rows included
        # (they are slow); a candidate's only in the re-test: its sweep rows are the worst noise, and
        # without them a congested round would look calm (a healthy node's slow rounds in it, intermittent)
        is_link = _rows_of(rows, {frozenset(p) for p in links}) | (
            _rows_of(rows, {frozenset(p) for p in candidates}) & esc
        )
        control = at_top & ~bad_code[rows.a] & ~bad_code[rows.b] & ~is_link
        # refs' phase: its own, or before (of the rounds' type: at 4,096 nodes int64 took 200 MB a column)
        when = np.where(esc, rnd, np.where(rnd < rounds.start, rnd.dtype.type(BEFORE), rnd.dtype.type(AFTER)))
        medians = class_medians(when, klass, load, rows.busbw, control)
        codes: dict[str, int] = {}
        leaf = np.array([codes.setdefault(switches[h], len(codes)) if h in switches else -1
                         for h in rows.names], dtype=np.int64)
        paths = _path_medians(rows, control & esc, leaf)
        return cls(rows, esc, at_top, load, klass, class_names, bad, one_bad, is_link, when, medians, paths,
                   leaf)

    def ref(self, i: int) -> float | None:
        """Row ``i``'s reference: for a re-run link, the controls on its own two leaves in its round
        (the same uplinks under the same round's load), where the re-test placed any; else the median
        of the controls of its phase, class and load, else of its phase and class, else of the earlier
        pairs of that class and load, else of that class.

        Why a link's own path first: "same class and load" (the most pairs of the round through one
        uplink of its path) does not make two paths alike. On 1,024-node 3-tier 2:1 fabrics the
        near-slow candidates of one leaf, re-run together beside their controls, ran at 0.71-0.73x of
        the round's other core pairs of the same load, in both re-runs, and 1-12 healthy links a fabric
        were confirmed (33 of 48 fabrics, t3/t4/congestion); the pairs beside them on the same leaves
        ran as slow."""
        k, n, r = int(self.klass[i]), int(self.load[i]), int(self.rows.round[i])
        if self.is_link[i] and self.esc[i]:
            la, lb = int(self.leaf[self.rows.a[i]]), int(self.leaf[self.rows.b[i]])
            own = self.paths.get((r, min(la, lb), max(la, lb)))
            if own is not None:
                return own
        for key in ((r, k, n), (r, k, ANY_LOAD), (BEFORE, k, n), (BEFORE, k, ANY_LOAD)):
            if key in self.medians:
                return self.medians[key]
        return None


@dataclass(frozen=True)
class Draws:
    """The draws ``judge`` weighs, each a row's busbw over its reference (``RetestFrame.ref``)."""

    nodes: dict[str, dict[str, list[float]]]
    """Per suspect and partner, its re-test draws: one a round (the median of the pair's rows)."""
    links: dict[str, dict[int, list[float]]]
    """Per re-run link and round, its rows' ratios."""
    before: dict[str, dict[str, list[float]]]
    """Per suspect and partner, the ratios of their earlier rows (quick pass, earlier re-runs)."""
    seen: dict[Pair, str]
    """(suspect, partner): the hop class their rows carry."""

    @classmethod
    def of(cls, frame: RetestFrame, excused: Callable[[str, str], bool] | None) -> Draws:
        """The draws of the re-test's rows at its largest size, and of the suspects' earlier rows but
        those ``excused`` puts on something else."""
        rows, names, bad = frame.rows, frame.rows.names, frame.bad
        seen: dict[Pair, str] = {}
        nodes: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        links: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        in_round: dict[tuple[str, str, int], list[float]] = defaultdict(list)
        for i in np.flatnonzero(frame.esc & frame.at_top).tolist():
            base = frame.ref(i)
            if not base:
                continue
            a, b = names[rows.a[i]], names[rows.b[i]]
            ratio = float(rows.busbw[i]) / base
            if frame.is_link[i]:
                links["|".join(sorted((a, b)))][int(rows.round[i])].append(ratio)
            elif frame.one_bad[i]:
                s, g = (a, b) if a in bad else (b, a)
                in_round[(s, g, int(rows.round[i]))].append(ratio)
                seen[(s, g)] = frame.class_names[frame.klass[i]]
        # one draw a round: a pair's rows of one round (sizes' in- and out-of-place runs, back to back)
        # are slowed by the same moment's contention, not by a node twice
        for (s, g, _), ratios in in_round.items():
            nodes[s][g].append(statistics.median(ratios))
        before: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for i in np.flatnonzero(frame.at_top & frame.one_bad & (frame.when == BEFORE)).tolist():
            # the suspects' earlier pairs (quick pass, earlier re-runs) against their references, but
            # those the analysis put on something else (``excused``)
            base = frame.ref(i)
            a, b = names[rows.a[i]], names[rows.b[i]]
            s, g = (a, b) if a in bad else (b, a)
            seen.setdefault((s, g), frame.class_names[frame.klass[i]])
            if base and not (excused and excused(s, g)):
                before[s][g].append(float(rows.busbw[i]) / base)
        return cls(nodes, links, before, seen)

    def klass_of(self, s: str, g: str, switches: Mapping[str, str]) -> str:
        """The hop class of a suspect's pair with a partner: its rows', else (a partner of an
        earlier slow link without a row here) from the switches."""
        return self.seen.get((s, g)) or hop_class(s, g, switches)


@dataclass(frozen=True)
class NodeShown:
    """What a suspect node's re-test showed: its draws, its slow ones, its count tests and its shift."""

    per: dict[str, float]
    """Each partner's median ratio."""
    runs: list[float]
    """Every re-test draw (a partner met again in a later phase is another draw)."""
    slow_runs: int
    earlier: list[str]
    """Its partners slow earlier: in its earlier pairs (but those excused) and of earlier slow links."""
    p_int: float
    said: str
    """The count test over every round it was measured in, earlier ones included, and its count."""
    p_new: float
    said_new: str
    """The count test over the re-test's rounds alone, and its count."""
    shift: tuple[float, float, float] | None
    own: tuple[float, float, float] | None
    """Its draws together at the suspects' family-wise bar and at its own 95% (``_shift``)."""
    bar: SlowBar
    n_suspects: int

    @classmethod
    def of(
        cls,
        s: str,
        frame: RetestFrame,
        draws: Draws,
        chance: Mapping[int, float],
        bar: SlowBar,
        prior: set[str],
        switches: Mapping[str, str],
        n_suspects: int,
    ) -> NodeShown:
        """What suspect ``s``'s draws show: ``chance`` is each round's noise chance for it
        (``RoundChances.of_host``), ``prior`` its partners of earlier slow links, ``n_suspects`` the
        suspects re-tested (the family of the tests of the re-test's pairs alone)."""
        factor = bar.thresholds.slow_node_factor
        mine = draws.nodes.get(s, {})
        per = {g: round(statistics.median(v), 3) for g, v in mine.items()}
        runs = [v for vs in mine.values() for v in vs]
        slow_runs = sum(bar(v, factor) for v in runs)
        was_slow = {g for g, v in draws.before[s].items() if bar(statistics.median(v), factor)}
        earlier = sorted(was_slow | set(prior))
        # the count is of pairs measured, not of partners: a partner met again in a later phase
        # is another draw of a node slow now and then (the re-test meets its few same-class
        # partners several times), and a partner's median would hide it
        slow_now = Counter(
            draws.klass_of(s, g, switches) for g, vs in mine.items() for v in vs if bar(v, factor)
        )
        slow_in = slow_now + Counter(draws.klass_of(s, g, switches) for g in earlier)
        rows, klass, class_names = frame.rows, frame.klass, frame.class_names
        p_int, said = intermittency(
            slow_in, chances_by_class(rows, frame.at_top, s, klass, class_names, chance)
        )
        # the re-test's pairs alone: drawn after the suspects were picked, so their family is the
        # suspects re-tested, not the fleet's node tests the pooled count above must clear
        p_new, said_new = intermittency(
            slow_now, chances_by_class(rows, frame.at_top & frame.esc, s, klass, class_names, chance)
        )
        # the suspects' own family: each was picked by the analysis' family-wise test already
        shift = _shift(runs, bar.noise_sigma, bar.thresholds.fwer / max(1, n_suspects))
        own = _shift(runs, bar.noise_sigma, 0.025)  # its 95% interval: the size, pooled with the analysis'
        return cls(per, runs, slow_runs, earlier, p_int, said, p_new, said_new, shift, own, bar, n_suspects)

    def verdict(
        self, known: tuple[float, float] | None, n_tests: int
    ) -> tuple[str, str, tuple[float, float] | None]:
        """(verdict, reason, the 95% interval of a node confirmed by its shift) against ``known``, its
        interval from the analysis, with ``n_tests`` the analysis' family of node tests."""
        per, runs, slow_runs, shift, own = self.per, self.runs, self.slow_runs, self.shift, self.own
        thresholds = self.bar.thresholds
        tally = (
            f"slow with {slow_runs} of {len(per)} known-good partner(s)"
            if len(runs) == len(per)
            else f"slow in {slow_runs} of {len(runs)} re-test pairs with {len(per)} known-good partners"
        )
        interval = None
        floor = 1 - thresholds.warn_floor
        if not per:
            verdict, reason = "not_run", "no known-good partner with a reference of its class was free"
        elif 2 * slow_runs > len(runs):
            verdict, reason = "confirmed", tally
        elif shift is not None and own is not None and shift[2] < 1 and _past_floor(own, known, floor):
            # slow by less than each pair's own bar (a node 10% slow under 5% noise is never one
            # pair's 4-sigma outlier) but, all its re-test pairs together, certainly slow (past the
            # family-wise bar: the re-test itself shows it), and certainly by the warning floor or
            # more once its 95% interval is pooled with the analysis' (``known``: two independent
            # measurements of one node). The re-test's pairs alone could not show a node 10% slow
            # among 256 certainly past the floor, and cleared a third of them.
            ratio, low, high = shift
            interval = (round(own[1], 3), round(own[2], 3))
            verdict, reason = "confirmed", (
                f"{100 * (1 - ratio):.0f}% slower than its references across {len(runs)} re-test pair(s) "
                f"(median; {100 * (1 - high):.0f}-{100 * (1 - low):.0f}% at the family-wise bar), "
                + (f"{slow_runs} of them slow beyond the noise alone" if slow_runs
                   else "none slow beyond the noise alone")
            )
        elif self.p_int * n_tests <= thresholds.fwer:
            # A node slow now and then may be fast in every re-test phase (one slow in a third of
            # its rounds, in 1 of 9 six-phase re-tests): the re-test adds its pairs to the count
            # and clears the node only when all its pairs together no longer show it.
            verdict = "confirmed"
            now = (
                f"slow in {slow_runs} of {len(runs)} re-test pair(s) and earlier with"
                if slow_runs
                else f"not slow beyond the noise in its {len(runs)} re-test pair(s), but slow earlier with"
            )
            reason = (
                f"intermittent: {now} {', '.join(self.earlier) or 'none'} ({self.said} slow: "
                f"p = {self.p_int:.1e} over {n_tests} tests)"
            )
        elif self.p_new * self.n_suspects <= thresholds.fwer:
            # A node slow in 30% of its rounds behind 2:1 uplinks shows with its 15 leaf partners
            # only; slow with 2 of them in the sweep, it was a suspect by chance of its worst pairs,
            # and its 3-5 slow of 24 re-test pairs, pooled with 39 leaf rounds, fell short of the bar
            # over 752 node tests (Student-t noise, 256 nodes with a fault of every class)
            verdict, reason = "confirmed", (
                f"intermittent: slow in {slow_runs} of {len(runs)} re-test pairs ({self.said_new} slow: "
                f"p = {self.p_new:.1e} over the {self.n_suspects} suspect(s) re-tested)"
            )
        elif slow_runs == 0:
            verdict, reason = "cleared", (
                f"slow beyond the noise with none of its {len(per)} known-good partner(s)"
                + (f" (median {shift[0]:.2f}x)" if shift is not None else "")
            )
        else:
            verdict, reason = "inconclusive", tally
        return verdict, reason, interval


def link_verdict(rt: Retest, by_round: Mapping[int, list[float]], spare: int, bar: SlowBar) -> Retest:
    """A re-run link's verdict from its draws (``Draws.links``), with ``spare`` re-runs it may read
    not slow in (``Candidates.spares``)."""
    # one draw a re-run (its rows of one round: the median); slow only when slow in every re-run,
    # a candidate slow in the sweep and re-run three times or more in all but one (heavy-tailed
    # noise reads a link at 0.7 above 0.8 in a few % of runs; ``candidate_runs`` sizes the runs
    # for that allowance), a near one in every re-run (its sweep sample was the one not slow)
    runs = [statistics.median(by_round[r]) for r in sorted(by_round)]
    spare = spare if len(runs) >= CANDIDATE_RUNS else 0
    slow_runs = sum(bar(v, bar.thresholds.slow_pair_factor) for v in runs)
    verdict = "confirmed" if slow_runs >= len(runs) - spare else "cleared"
    reason = f"re-run at {', '.join(f'{v:.2f}x' for v in runs)} the controls of its class and load"
    if verdict == "confirmed" and not rt.candidate and len(runs) < LINK_RUNS:
        # two slow re-runs of a healthy pair are within heavy-tailed noise over the thousands of
        # pairs a large fabric re-runs (issue 46: a healthy link confirmed at 0.63x, 0.70x)
        verdict, reason = "inconclusive", f"{reason}; re-run {len(runs)} of {LINK_RUNS} times: not confirmed"
    return replace(
        rt,
        verdict=verdict,
        ratios={f"run{i + 1}": round(v, 3) for i, v in enumerate(runs)},
        reason=reason,
        slow_runs=(slow_runs, len(runs)),
    )


def _shift(ratios: list[float], sigma: float, alpha: float) -> tuple[float, float, float] | None:
    """A suspect's re-test ratios together: (their median, its interval's low and high ends) at
    one-sided level ``alpha``; None for fewer than 2. The median, not the mean: a node slow now and
    then, or a partner behind a slow link, makes a few pairs far slower, and those belong to the
    count tests, not to a shift of every pair. The spread is the larger of the pair model's noise and
    the ratios' own (MAD), so a few draws that happen to agree never narrow it below the noise."""
    if len(ratios) < 2 or sigma <= 0:
        return None
    from statistics import NormalDist

    logs = [math.log(max(r, 1e-12)) for r in ratios]
    mid = statistics.median(logs)
    mad = 1.4826 * statistics.median(abs(x - mid) for x in logs)
    # the median's standard error is sqrt(pi / 2) ~ 1.2533 times the mean's under normal noise
    half = NormalDist().inv_cdf(1 - alpha) * 1.2533 * max(sigma, mad) / math.sqrt(len(logs))
    return math.exp(mid), math.exp(mid - half), math.exp(mid + half)


def _past_floor(own: tuple[float, float, float], known: tuple[float, float] | None, floor: float) -> bool:
    """Whether a suspect is certainly ``floor`` of its references or slower: the high end of its
    re-test's 95% interval (``own``, ``_shift``'s) pooled with ``known`` (the analysis' interval;
    None: the re-test's alone)."""
    pooled = pooled_interval(known, own[1:])
    return pooled is not None and pooled[1] <= floor


def _path_medians(rows: PairRows, control: np.ndarray, leaf: np.ndarray) -> dict[tuple[int, int, int], float]:
    """The median busbw of the ``control`` rows per (round, leaf, leaf) of placed hosts across leaves
    (a path through uplinks; pairs within one leaf are the leftover controls, of no link's path)."""
    idx = np.flatnonzero(control)
    la, lb = leaf[rows.a[idx]], leaf[rows.b[idx]]
    keep = (la >= 0) & (lb >= 0) & (la != lb)
    idx, la, lb = idx[keep], la[keep], lb[keep]
    groups: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for i, x, y in zip(idx.tolist(), np.minimum(la, lb).tolist(), np.maximum(la, lb).tolist(), strict=True):
        groups[(int(rows.round[i]), x, y)].append(float(rows.busbw[i]))
    return {key: statistics.median(v) for key, v in groups.items()}


def _rows_of(rows: PairRows, pairs: set[frozenset]) -> np.ndarray:
    """Whether each row is of one of ``pairs`` (either way round): the rows with a lower end of
    theirs first (a few), their keys then (int64: a key of two codes passes int32 past 46,340 hosts)."""
    code = {h: i for i, h in enumerate(rows.names)}
    n = len(rows.names)
    known = [sorted(code[h] for h in p) for p in pairs if len(p) == 2 and p <= code.keys()]
    out = np.zeros(len(rows), dtype=bool)
    if not known:
        return out
    at = np.flatnonzero(np.isin(np.minimum(rows.a, rows.b), [x for x, _ in known]))
    a, b = rows.a[at].astype(np.int64), rows.b[at].astype(np.int64)
    out[at] = np.isin(np.minimum(a, b) * n + np.maximum(a, b), np.array([x * n + y for x, y in known]))
    return out
