"""Confirming suspects: re-measure them against known-good partners within a time budget, and say
what the re-tests show. One procedure for ``netbench preflight`` (its escalation) and for
``netbench sweep --hosts`` (after the pairwise phase, ``--confirm-budget``; ``netbench simulate``
runs the sweep's on its fabric), so they cannot disagree about who is a suspect, whom a suspect is
paired with or what its re-test says:

- ``find_suspects``: the nodes and links the analysis flags (warn/fail, and the "suspect: re-test"
  info band), not re-tested yet; a node shared by several slow links, or at one end of a link its
  re-run confirmed, is a suspect node (``slow_partners``): a node slow now and then shows as slow
  links that share it, and only a re-test against known-good partners says which end it is;
- ``candidate_links``: beside them, the fleet's worst pairs that no bar flagged (every practically slow
  one, up to 4 a node), re-run three times or as often as ``candidate_runs`` says and kept when slow
  in all but one: under heavy-tailed noise one sample cannot tell a slow link from the healthy pairs
  noise puts as low; then, in half of what the budget leaves, pairs that read near slow (0.9 or
  below), kept when slow in every re-run;
- ``plan_escalation``: perfect matchings, each suspect node with a known-good partner of the hop
  class it was slow in, each suspect link re-run with a control of its own hop class beside it, the
  other good nodes paired among themselves as the phase's controls;
- ``judge``: each re-test against the controls of its phase measured under the same load (hop class
  and pairs per uplink, ``common.topology.round_load``), never against another class; a node slow
  with some known-good partners only is confirmed as intermittent by a count test over its slow
  rounds, earlier ones included, each round weighed with the chance that the other pairs of that
  round show (``RoundChances``: slow rounds come together, under CPU contention or congestion, so
  one assumed tail for independent pairs is not the null; ``reports.analyses.intermittent_p_value``
  where every round is alike);
- ``retest_suspects``: the one re-test loop: analyse what the sweep (or quick pass) measured,
  re-test the suspects in one launch (the caller's ``Measure``), phase by phase while they fit the
  ``Budget``, again while the verdicts name new suspects (the ends of a link confirmed slow); a
  ``RetestSetup`` says what differs between callers (how they analyse, their hosts, what was
  measured, their log's words), ``Retested`` is what it found.

The re-tests' rows stay out of the analysis' pair model (``RetestEvidence.from_round``): they are
judged here, each against the controls measured beside it, and their schedule (a few suspects,
chosen partners, phase after phase) is not the sweep's: fitted with it, it made suspects of its own.

What a re-test says is handed to the analysis (``reports.analyses.RetestEvidence``); the rules turn
it into the findings' severities, and every re-tested subject appears in the findings with its
verdict, so the log, the report and the terminal summary say the same. Pure functions but the loop,
tested without hosts (tests/test_confirm.py, tests/test_preflight_plan.py); the loop runs on hosts in
tests/test_sweep_confirm_netns.py and tests/test_preflight*.py, on a simulated fabric in
tests/test_sim_preflight.py and tests/test_sim_confirm.py.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np

from netbench.common.pairrows import MetPairs, PairRows
from netbench.common.topology import LEAF, hop_class
from netbench.reports.analyses import (
    INTERMITTENT_MIN_PAIRS,
    Retest,
    RetestEvidence,
    intermittent_p_value,
    link_tests,
    noise_tail,
    rerun_share,
)
from netbench.reports.stats import binomial_sf, poisson_binomial_sf, pooled_interval

if TYPE_CHECKING:
    from netbench.collectives.plan import Phase
    from netbench.common.findings import Finding
    from netbench.coordinator import Outcome
    from netbench.reports.context import AnalysisContext
    from netbench.reports.policy import Thresholds

Pair = tuple[str, str]
REPORT_RESERVE_S = 3.0  # kept back from the budget for the final analysis and report.html
FIRST_PHASE_PRIOR_S = 1.0  # estimate for a launch's first phase, before anything was measured
INTERMITTENT_PARTNERS = 2 * INTERMITTENT_MIN_PAIRS
"""Re-test phases at least when a suspect node came from slow links: a node slow in half the rounds
is then slow with INTERMITTENT_MIN_PAIRS of its partners, what the intermittency test needs, as a rule."""
INTERMITTENT_MAX_PHASES = 24
"""Re-test phases at most for a node slow now and then (``intermittent_phases``). A node seen slow
with one partner only, an end of one slow link, has ~15 same-leaf pairs behind 2:1 uplinks and may
need 3 more slow ones for the family-wise bar of 1,024 nodes: 24 phases show 3 of a node slow in
30 % of its rounds 99 % of the time, 16 phases 87 % (a 1,024-node fabric missed so)."""
INTERMITTENT_MISS = 0.05
"""The chance a node slow in a share q of its rounds may be fast in every re-test phase."""
PhaseList = list[tuple[str, int, list[Pair]]]
"""(phase name, the rows' round, its pairs) of one launch."""


# -- the clock ---------------------------------------------------------------------------------------
@dataclass
class Budget:
    """The time budget. ``left()`` is what measurement may still use (the report's reserve kept back)."""

    total_s: float
    reserve_s: float = REPORT_RESERVE_S
    clock: Callable[[], float] = time.monotonic
    t0: float | None = None

    def __post_init__(self) -> None:
        if self.t0 is None:
            self.t0 = self.clock()
        self.reserve_s = min(self.reserve_s, self.total_s / 4)

    def elapsed(self) -> float:
        return self.clock() - (self.t0 or 0.0)

    def left(self) -> float:
        return self.total_s - self.reserve_s - self.elapsed()

    def fits(self, seconds: float) -> bool:
        return seconds <= self.left()


@dataclass
class PhaseGate:
    """The coordinator's ``before_phase``: a phase starts only if its estimated time fits the budget.

    The estimate is the longest phase measured so far in this launch (``prior_s`` before the first).
    Phase start times are recorded here, which is also how phase times are measured. Once a phase
    is refused, every later one is too: a budget never comes back."""

    budget: Budget
    prior_s: float = FIRST_PHASE_PRIOR_S
    started: list[tuple[str, float]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    ended: float | None = None
    near_from: int | None = None
    """The first phase that re-runs near candidates only (``Candidates.near``): from it on a phase
    starts only while ``CANDIDATE_NEAR_BUDGET`` of what the budget had left then is not spent, so
    that a later launch (the ends of a link confirmed slow, a node slow in its links' re-runs)
    still fits. At 1,024 nodes half of what was left (14 s) held less than a launch's start-up and a
    phase: it was kept, and the loop stopped there anyway, the budget "run out"."""
    keep_s: float = 0.0
    startup_s: float = 0.0
    """A launch's start-up: a reserve (``keep_s``) that cannot hold it and a phase is not kept."""
    kept: bool = False
    """The phases stopped to keep ``keep_s`` for a later launch, not because the budget ran out."""

    def durations(self) -> list[float]:
        """Start-to-start times of the phases that ran; the last one up to ``ended`` when set."""
        times = [t for _, t in self.started] + ([self.ended] if self.ended is not None else [])
        return [b - a for a, b in pairwise(times)]

    def estimate(self) -> float:
        """The longest phase that has finished (start to the next start), else the prior."""
        measured = [b - a for a, b in pairwise(t for _, t in self.started)]
        return max(measured) if measured else self.prior_s

    def __call__(self, phase: Phase) -> bool:
        if len(self.started) == self.near_from and not self.skipped:
            keep = (1 - CANDIDATE_NEAR_BUDGET) * self.budget.left()
            # a reserve too small for a launch (its start-up and a phase) buys nothing: spend it here
            self.keep_s = keep if keep >= self.startup_s + self.estimate() else 0.0
        if self.skipped or not self.budget.fits(self.estimate() + self.keep_s):
            if not self.skipped:
                self.kept = self.budget.fits(self.estimate())
            self.skipped.append(phase.name)
            return False
        self.started.append((phase.name, self.budget.clock()))
        return True


# -- who, with whom ----------------------------------------------------------------------------------
def find_suspects(
    findings: list[Finding],
    exclude: set[str],
    done: set[str],
    retests: Mapping[str, Retest] | None = None,
) -> tuple[list[str], list[Pair]]:
    """Nodes flagged slow and links flagged slow that were not re-tested yet (``done``: subjects).
    A node of ``slow_partners`` (several slow links share it, or a link's re-run confirmed it slow)
    is a suspect node, and its links are not re-run: re-testing it against known-good partners says
    whether it is the node or the link. A link with an end re-tested and confirmed slow is that
    node's doing: not a suspect."""
    partners = slow_partners(findings, retests or {})
    slow_nodes = {rt.subject for rt in (retests or {}).values()
                  if rt.kind == "node" and rt.verdict == "confirmed"}
    from_links = {h for h, ps in partners.items() if len(ps) >= 2}
    from_links |= {h for rt in (retests or {}).values() if rt.kind == "link" and rt.verdict == "confirmed"
                   for h in rt.subject.split("|")}
    flagged = {f.subject for f in findings if f.rule == "slow_node"}
    nodes = sorted((flagged | from_links) - exclude - done)
    links = sorted(
        {
            tuple(sorted(f.hosts))
            for f in findings
            if f.rule == "slow_pair"
            and len(f.hosts) == 2
            and not set(f.hosts) & (exclude | set(nodes) | slow_nodes)
            and "|".join(sorted(f.hosts)) not in done
        }
    )
    return nodes, links  # type: ignore[return-value]


@dataclass(frozen=True)
class Candidates:
    """The fleet's worst pairs no bar flagged (``candidate_links``) and how often each is re-run."""

    links: list[Pair]
    runs: int  # each candidate's re-runs (``candidate_runs``); 0 with none
    near: list[Pair] = field(default_factory=list)
    """Pairs beyond the noise that read near slow but not practically slow in their one sample
    (``LinkTests.near_unflagged``), worst first: re-run ``near_runs`` times where the budget leaves
    room, kept when slow in each."""
    near_runs: int = 0

    def spares(self) -> dict[Pair, int]:
        """Each candidate with the re-runs ``judge`` lets it read not slow: one sample of its may be
        noise, the sweep's included. The worst were slow in the sweep, so one re-run may not be; the
        near ones were not, so every re-run must be."""
        return {p: 1 for p in self.links} | {p: 0 for p in self.near}


def candidate_links(ctx: AnalysisContext, taken: set[str], done: set[str]) -> Candidates:
    """The fleet's worst pairs that no bar flagged (``LinkTests.worst_unflagged``), every one that is
    practically slow up to ``CANDIDATE_PER_NODE`` per node (``CANDIDATE_LINKS`` at least), to be
    re-run where a re-test follows, worst first, as far as the budget goes: one sample cannot tell a
    slow link from the healthy pairs heavy-tailed noise puts as low, a re-run can. Left out: pairs
    with an end in ``taken`` (suspect, excluded), an end the analysis found slow or intermittent,
    pairs through a slow uplink (those are the node's or the switch's), and those re-tested already
    (``done``). Each is re-run ``candidate_runs`` times for the fleet's own share of slow samples."""
    m = ctx.pair_model
    if m is None:
        return Candidates([], 0)
    nodes = ctx.analyses.nodes
    slow = {v.host for v in nodes.slow}
    limit = max(CANDIDATE_LINKS, CANDIDATE_PER_NODE * len(m.hosts))
    tests = link_tests(m, ctx.policy.thresholds)

    def usable(found: list[tuple[int, int]], room: int) -> list[Pair]:
        out: list[Pair] = []
        for i, j in found:
            a, b = sorted((m.hosts[i], m.hosts[j]))
            if (
                {a, b} & (taken | slow)
                or f"{a}|{b}" in done
                or nodes.uplink_of(a, b) is not None
                or nodes.intermittent(a)
                or nodes.intermittent(b)
            ):
                continue
            out.append((a, b))
            if len(out) == room:
                break
        return out

    worst = usable(tests.worst_unflagged(4 * limit), limit)
    share = max(tests.slow_share(), rerun_share(m, ctx.policy.thresholds))
    room = limit - len(worst)
    near_ones = tests.near_unflagged(m, ctx.policy.thresholds, CANDIDATE_NEAR, 4 * room) if room else []
    near = usable(near_ones, room)
    return Candidates(worst, candidate_runs(len(worst), share), near,
                      candidate_runs(len(near), share, spare=0) if near else 0)


def held_back(
    ctx: AnalysisContext, taken: set[str], retests: Mapping[str, Retest], explained: set[str]
) -> Candidates:
    """The fleet's worst links (``candidate_links``) a first launch held back because an end was a
    suspect node, now that the node's re-test cleared it or found it slow with no more pairs than
    the noise gives (``explained``, ``split_inconclusive``), with the re-runs the whole worst set
    gets: a link at 0.7 whose end was also at the end of another of the fleet's worst pairs by
    chance looked like a node slow now and then (``shared_ends``), its re-test was slow with 1 of 24
    pairs, inconclusive, and the link was never re-run (a 256-node fabric with a fault of every
    class, Student-t noise with 4 degrees of freedom). A node slow now and then (3 of 24) keeps its
    links: they are its slow rounds."""
    cleared = {rt.subject for rt in retests.values() if rt.kind == "node" and rt.verdict == "cleared"}
    unconfirmed = cleared | explained
    if not unconfirmed:
        return Candidates([], 0)
    found = candidate_links(ctx, taken, set(retests))
    links = [lk for lk in found.links if set(lk) & unconfirmed]
    return Candidates(links, found.runs if links else 0)


def split_inconclusive(ctx: AnalysisContext, retests: Mapping[str, Retest]) -> tuple[set[str], set[str]]:
    """The nodes re-tested inconclusive, split by whether the noise explains their slow re-test
    pairs (binomial at ``rerun_share`` with slow_node_factor, above ``HELD_BACK_ALPHA``): those
    whose links' re-runs decide it (``held_back``), and those slow more often than the noise gives,
    slow now and then perhaps, re-tested once more (``Suspects.again``). A node slow in 30% of its
    rounds was slow in 3 of its 24 first re-test pairs; a link's end at 0.7, in 1 of 24."""
    t = ctx.policy.thresholds
    share = rerun_share(ctx.pair_model, t, t.slow_node_factor) if ctx.pair_model is not None else 0.0
    noise: set[str] = set()
    more: set[str] = set()
    for rt in retests.values():
        if rt.kind == "node" and rt.verdict == "inconclusive" and rt.slow_runs is not None:
            slow, runs = rt.slow_runs
            (noise if binomial_sf(slow, runs, share) > HELD_BACK_ALPHA else more).add(rt.subject)
    return noise, more


def slow_link_ends(ctx: AnalysisContext, retests: Mapping[str, Retest]) -> dict[str, str]:
    """The nodes (and what they showed) at the ends of re-run links that were cleared, slow in
    re-runs of two of them or more (one link's slow re-runs are as much the link's as either end's),
    whose re-runs together were slow more often than the noise gives (binomial at ``rerun_share``, at least
    one in the fleet's pairs; family-wise over the nodes at such ends, ``CANDIDATE_SHARED_ALPHA``):
    a node slow now and then, seen through its links. A node slow in 30% of its rounds (1,024 nodes,
    2:1 uplinks, Student-t noise with 3 degrees of freedom, seed 9) was at the ends of 4 of the
    fleet's 872 worst pairs, its same-leaf ones (behind the uplinks its other pairs read as every
    pair does), no more than chance puts at a node (``shared_ends``); each link was slow in one or
    two of its 4 re-runs and cleared, and the node was never re-tested."""
    m = ctx.pair_model
    if m is None:
        return {}
    pairs = int(np.triu(np.isfinite(m.resid), 1).sum())
    share = max(rerun_share(m, ctx.policy.thresholds), 1.0 / max(pairs, 1))
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # slow re-runs, re-runs, links slow
    for rt in retests.values():
        if rt.kind == "link" and rt.verdict == "cleared" and rt.slow_runs is not None:
            for h in rt.subject.split("|"):
                tally[h][0] += rt.slow_runs[0]
                tally[h][1] += rt.slow_runs[1]
                tally[h][2] += rt.slow_runs[0] > 0
    family = len(tally)
    return {h: f"slow in {k} of {n} re-runs of its links" for h, (k, n, links) in tally.items()
            if links >= 2 and family * binomial_sf(k, n, share) <= CANDIDATE_SHARED_ALPHA}


def rerun_order(candidates: list[Pair], runs: int, per_phase: int) -> list[Pair]:
    """The candidates' re-runs in the order ``plan_escalation`` fills phases: a phase's worth
    (``per_phase`` pairs) of the worst, each ``runs`` times, then the next: a budget that ends the
    phases early leaves the worst candidates re-run in full, not every candidate once. Each copy of
    a pair lands in a phase of its own (its nodes are busy in the phase that took the first)."""
    out: list[Pair] = []
    for k in range(0, len(candidates), per_phase):
        out += candidates[k : k + per_phase] * runs
    return out


def candidate_runs(n: int, share: float, spare: int = 1) -> int:
    """Re-runs for each of ``n`` candidate links, confirmed when slow in all but ``spare`` of them
    (``judge``): the fewest, from ``CANDIDATE_RUNS`` (``CANDIDATE_NEAR_RUNS`` with no spare), at
    which the candidates a healthy pair slow in ``share`` of its samples (the fleet's own,
    ``LinkTests.slow_share``, or as a re-run against its control reads slow, ``rerun_share``, the
    larger) would confirm by chance stay within ``CANDIDATE_FALSE`` a fabric, at most
    ``CANDIDATE_RUNS_MAX``. Under 1% congestion bursts at 1,024 nodes (share ~0.7%, ~3,200
    candidates) five re-runs; under Student-t noise (0.55%, ~840) four; at 256 nodes (~55) four."""
    least = CANDIDATE_RUNS if spare else CANDIDATE_NEAR_RUNS
    if share <= 0.0 or share >= 1.0:
        return least if share <= 0.0 else CANDIDATE_RUNS_MAX
    runs = least
    while runs < CANDIDATE_RUNS_MAX and n * binomial_sf(runs - spare, runs, share) > CANDIDATE_FALSE:
        runs += 1
    return runs


def shared_ends(candidates: list[Pair], n_hosts: int) -> list[str]:
    """The nodes at an end of more of ``candidates`` (worst first) than chance puts there: the j-th
    at position k has p = P(Binomial(k + 1, 2 / n_hosts) >= j); a node whose least p, times the
    nodes and the j tried, is within ``CANDIDATE_SHARED_ALPHA``."""
    seen: dict[str, list[int]] = defaultdict(list)
    for k, lk in enumerate(candidates):
        for h in lk:
            seen[h].append(k)
    out = []
    for h, at in seen.items():
        if len(at) < 2:
            continue
        p = min(binomial_sf(j, k + 1, 2 / n_hosts) for j, k in enumerate(at, 1) if j >= 2)
        if p * n_hosts * (len(at) - 1) <= CANDIDATE_SHARED_ALPHA:
            out.append(h)
    return sorted(out)


def slow_partners(findings: list[Finding], retests: Mapping[str, Retest]) -> dict[str, set[str]]:
    """Per node, its partners in the links flagged slow (any severity: the suspect band too) or
    confirmed slow on re-run, less those a re-run cleared: the evidence that a node is slow now and
    then, which ``judge`` adds to its re-test."""
    cleared = {k for k, rt in retests.items() if rt.kind == "link" and rt.verdict == "cleared"}
    links = {
        "|".join(sorted(f.hosts)) for f in findings if f.rule == "slow_pair" and len(f.hosts) == 2
    } | {k for k, rt in retests.items() if rt.kind == "link" and rt.verdict == "confirmed"}
    out: dict[str, set[str]] = defaultdict(set)
    for key in links - cleared:
        a, b = key.split("|", 1)
        out[a].add(b)
        out[b].add(a)
    return dict(out)


def suspect_classes(findings: list[Finding]) -> dict[str, str]:
    """The hop class each suspect node was found slow in (its finding's evidence), so its re-test
    partners are of that class: a node slow with its own leaf is re-tested within its leaf."""
    out: dict[str, str] = {}
    for f in findings:
        klass = (f.evidence or {}).get("hop_class") if f.rule == "slow_node" else None
        if isinstance(klass, str):
            out.setdefault(f.subject, klass)
    return out


def unusable_hosts(outcome: Outcome, rows: PairRows) -> set[str]:
    """Hosts not to re-test nor to re-test against: those the launch lost (a fault of theirs: they
    died, hung, never started or broke the protocol), and both ends of a pair that failed with no
    lost host in it and no host named in its error. A pair with a dead or hung host fails for that
    host (its error names it): its partner is fine, and after a sweep that partner is every other
    host."""
    dead = {f.host for f in outcome.faults if f.host}
    flaky = {
        h
        for i, failure in rows.failed.items()
        for pair in [(rows.names[rows.a[i]], rows.names[rows.b[i]])]
        if not dead & set(pair) and not failure.blame
        for h in pair
    }
    return dead | flaky


def pairs_in(rows: PairRows, rounds: list[int]) -> set[Pair]:
    """The pairs measured in rounds ``rounds[0]..rounds[1]`` (a pair without a round as round 0)."""
    rnd = np.maximum(rows.round, 0)
    return set(rows.pairs((rnd >= rounds[0]) & (rnd <= rounds[1])))


def plan_escalation(
    suspects: list[str],
    links: list[Pair],
    good: list[str],
    tested: MetPairs,
    switches: Mapping[str, str],
    phases: int,
    classes: Mapping[str, str] | None = None,
    ends: list[str] | None = None,
    candidates: list[Pair] | None = None,
) -> list[list[Pair]]:
    """Perfect matchings for the re-tests: each suspect node with a known-good partner per phase (of
    the hop class it was slow in, ``classes``, default its own leaf; one it has not met in these
    phases first, then one it has not met at all),
    each suspect link re-run once (in the first phase where both its nodes are free) with a control
    pair of good nodes of the same hop class beside it where there is one, its ``ends`` with a
    known-good partner each in the other phases, as suspect nodes are, and the other good nodes
    paired among themselves as the phase's controls. ``candidates`` (links no bar flagged, in the
    order given, a link twice for two re-runs) take what the suspects left free in each phase, with a
    control as a suspect link. At least as many phases as it takes to re-run every link."""
    out: list[list[Pair]] = []
    tested = tested.copy()
    bad = set(suspects)
    pending = [p for p in links if not set(p) & bad]
    later = [p for p in candidates or [] if not set(p) & bad]
    retested = list(suspects) + [h for h in ends or [] if h not in bad]
    want = dict(classes or {})

    met: Counter[frozenset] = Counter()  # pairs of this escalation: a second phase takes a new partner
    order = {g: k for k, g in enumerate(good)}  # every pool is some of ``good``, in its order

    def pick(a: str, pool: list[str], klass: str | None = None) -> str:
        klass = klass or want.get(a, LEAF)
        # a partner of its own leaf is one on its switch: only those are weighed when there are
        # any (at 1,024 nodes, weighing every free node for every pick was 100 s a launch)
        leaf = switches.get(a) if klass == LEAF else None
        near = [g for g in pool if switches.get(g) == leaf] if leaf is not None else []
        return min(
            [g for g in near if hop_class(a, g, switches) == LEAF] or pool,
            key=lambda g: (
                hop_class(a, g, switches) != klass,
                met[frozenset((a, g))],
                (a, g) in tested,
                order[g],
            ),
        )

    def rerun(links: list[Pair], busy: set[str], pairs: list[Pair]) -> None:
        """Each link of ``links`` whose nodes are free into this phase, with its control; taken out."""
        for a, b in list(links):
            if not {a, b} & busy:
                pairs.append((a, b))
                busy |= {a, b}
                links.remove((a, b))
                control = _control(a, b, [g for g in good if g not in busy], switches)
                if control is not None:
                    pairs.append(control)
                    busy |= set(control)

    while len(out) < phases or pending or later:
        busy: set[str] = set()
        pairs: list[Pair] = []
        rerun(pending, busy, pairs)
        for s in retested if len(out) < phases else []:
            free = [g for g in good if g not in busy]
            if free and s not in busy:
                g = pick(s, free)
                pairs.append((s, g))
                busy |= {s, g}
        rerun(later, busy, pairs)
        rest = [g for g in good if g not in busy]
        while len(rest) >= 2:
            a = rest.pop(0)
            b = pick(a, rest, LEAF)
            rest.remove(b)
            pairs.append((a, b))
        tested.add(pairs)
        met.update(frozenset(p) for p in pairs)
        out.append(pairs)
    return out


def _control(a: str, b: str, free: list[str], switches: Mapping[str, str]) -> Pair | None:
    """Two free good nodes on the leaves of ``a`` and ``b`` (the same path through the fabric), else
    any two of the link's hop class: the reference a re-run link is judged against."""
    klass = hop_class(a, b, switches)
    if klass == LEAF:
        return None  # the phase's leftover controls are paired within leaves already
    on_a = [x for x in free if switches.get(x) == switches.get(a)]
    on_b = [y for y in free if switches.get(y) == switches.get(b) and y not in on_a]
    if on_a and on_b:
        return on_a[0], on_b[0]
    alike = ((x, y) for i, x in enumerate(free) for y in free[i + 1 :] if hop_class(x, y, switches) == klass)
    return next(alike, None)


def intermittent_phases(share: float) -> int:
    """Re-test phases for a node slow in ``share`` of its rounds: enough that it is fast in all of
    them with a chance of at most INTERMITTENT_MISS, (1 - share)^n, within INTERMITTENT_PARTNERS and
    INTERMITTENT_MAX_PHASES (a node slow in 30 % of its rounds: 9 phases)."""
    if share <= 0.0:
        return INTERMITTENT_MAX_PHASES
    if share >= 1.0:
        return INTERMITTENT_PARTNERS
    n = math.ceil(math.log(INTERMITTENT_MISS) / math.log(1.0 - share))
    return min(max(n, INTERMITTENT_PARTNERS), INTERMITTENT_MAX_PHASES)


def shift_phases(ratio: float, sigma: float, thresholds: Thresholds, family: int = 1) -> int:
    """Re-test phases for a node the analysis measured at ``ratio`` of its peers: CONFIRM_PARTNERS where
    that is twice the bar one pair must pass to count as slow (each pair shows it); else enough that,
    were it that slow, its re-test pairs together (``_shift``, at the same family-wise level: fwer over
    the ``family`` of suspects) end certainly past the warning floor 19 times in 20, at most
    SHIFT_MAX_PHASES (a node 10 % slow under 5 % noise: the cap). Sized on the measured ratio, not on
    the slow end of its interval: sized so, a node 10 % slow among 256 got three pairs and was cleared
    in half the fabrics (benchmarks/bench_diagnosis.py, 2026-12-03). One that would need more than the
    cap gets the cap: pooled with the analysis' interval (``judge``'s ``known``) its pairs still tell.
    That holds for a node measured just past the floor too: a borderline suspect's estimate is the
    draw that left it short of the family-wise bar (a node 10 % slow read 6 % slow), so its truth is
    likelier slower. A node measured at the floor or nearer gets CONFIRM_PARTNERS (no number of pairs
    shows it), and so does one whose noise would need ten times the cap to show a node slow by the
    failure floor (a noisy test network: 20 % noise)."""
    shows_each_time = math.log(max(ratio, 1e-12)) <= -2 * thresholds.mad_k * sigma
    if sigma <= 0 or ratio >= 1 - thresholds.warn_floor or shows_each_time:
        return CONFIRM_PARTNERS
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - thresholds.fwer / max(1, family)) + NormalDist().inv_cdf(0.95)

    def needed(r: float) -> float:
        return (z * 1.2533 * sigma / math.log((1 - thresholds.warn_floor) / max(r, 1e-12))) ** 2

    if needed(min(ratio, 1 - thresholds.fail_floor)) > 10 * SHIFT_MAX_PHASES:  # hopeless: a noisy network
        return CONFIRM_PARTNERS
    return min(max(math.ceil(needed(ratio)), CONFIRM_PARTNERS + 1), SHIFT_MAX_PHASES)


# -- what the re-tests say ---------------------------------------------------------------------------
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

    def slow(ratio: float, factor: float) -> bool:
        return ratio <= factor and math.log(max(ratio, 1e-12)) <= -thresholds.mad_k * noise_sigma

    bad = set(suspects)
    link_keys = {frozenset(p) for p in links}
    spares = {"|".join(sorted(p)): k for p, k in (candidates or {}).items()}
    out = {s: Retest(s, "node") for s in suspects} | {
        "|".join(sorted(p)): Retest("|".join(sorted(p)), "link", candidate=p in (candidates or []))
        for p in [*links, *(candidates or [])]
    }
    # the sweep's millions of rows are weighed as columns: which are controls, their hop class and
    # load, the medians of each; only the re-test's rows and the suspects' own go one by one
    ok = rows.ok & (rows.busbw > 0)
    rnd = rows.round
    esc = ok & (rnd >= rounds.start) & (rnd < rounds.stop)
    if not esc.any():
        return {k: replace(rt, reason="no re-test was measured") for k, rt in out.items()}
    top = rows.nbytes[esc].max()
    at_top = ok & (rows.nbytes == top)
    # each row's hop class and load as its plan recorded them (worked out only for rows without)
    load, klass, class_names = rows.facts(switches, ok)
    names = rows.names
    bad_code = rows.mask_of(bad)
    one_bad = bad_code[rows.a] != bad_code[rows.b]
    # a suspect link's rows are neither references nor the rounds' chances, its sweep rows included
    # (they are slow); a candidate's only in the re-test: its sweep rows are the worst noise, and
    # without them a congested round would look calm (a healthy node's slow rounds in it, intermittent)
    is_link = _rows_of(rows, link_keys) | (_rows_of(rows, {frozenset(p) for p in candidates or []}) & esc)
    control = at_top & ~bad_code[rows.a] & ~bad_code[rows.b] & ~is_link
    when = np.where(esc, rnd, np.where(rnd < rounds.start, BEFORE, AFTER))  # refs' phase: its own, or before
    medians = _medians(when[control], klass[control], load[control], rows.busbw[control])

    def ref(i: int) -> float | None:
        k, n = int(klass[i]), int(load[i])
        for key in ((int(rnd[i]), k, n), (int(rnd[i]), k, ANY_LOAD), (BEFORE, k, n), (BEFORE, k, ANY_LOAD)):
            if key in medians:
                return medians[key]
        return None

    chances = RoundChances.of(rows, at_top & ~is_link & (when != AFTER), when, klass, load,
                              lambda r: (r <= thresholds.slow_node_factor)
                              & (np.log(np.maximum(r, 1e-12)) <= -thresholds.mad_k * noise_sigma))

    seen: dict[Pair, str] = {}  # (suspect, partner): the hop class their rows carry

    def klass_of(s: str, g: str) -> str:
        """The hop class of a suspect's pair with a partner: its rows', else (a partner of an
        earlier slow link without a row here) from the switches."""
        return seen.get((s, g)) or hop_class(s, g, switches)

    node_ratios: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    link_ratios: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    in_round: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for i in np.flatnonzero(esc & at_top).tolist():
        base = ref(i)
        if not base:
            continue
        a, b = names[rows.a[i]], names[rows.b[i]]
        ratio = float(rows.busbw[i]) / base
        if is_link[i]:
            link_ratios["|".join(sorted((a, b)))][int(rnd[i])].append(ratio)
        elif one_bad[i]:
            s, g = (a, b) if a in bad else (b, a)
            in_round[(s, g, int(rnd[i]))].append(ratio)
            seen[(s, g)] = class_names[klass[i]]
    # one draw a round: a pair's rows of one round (sizes' in- and out-of-place runs, back to back)
    # are slowed by the same moment's contention, not by a node twice
    for (s, g, _), ratios in in_round.items():
        node_ratios[s][g].append(statistics.median(ratios))
    before: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i in np.flatnonzero(at_top & one_bad & (when == BEFORE)).tolist():
        # the suspects' earlier pairs (quick pass, earlier re-runs) against their references, but
        # those the analysis put on something else (``excused``)
        base = ref(i)
        a, b = names[rows.a[i]], names[rows.b[i]]
        s, g = (a, b) if a in bad else (b, a)
        seen.setdefault((s, g), class_names[klass[i]])
        if base and not (excused and excused(s, g)):
            before[s][g].append(float(rows.busbw[i]) / base)
    for s in suspects:
        per = {g: round(statistics.median(v), 3) for g, v in node_ratios.get(s, {}).items()}
        runs = [v for vs in node_ratios.get(s, {}).values() for v in vs]
        slow_runs = sum(slow(v, thresholds.slow_node_factor) for v in runs)
        was_slow = {
            g for g, v in before[s].items() if slow(statistics.median(v), thresholds.slow_node_factor)
        }
        earlier = sorted(was_slow | set((prior or {}).get(s, set())))
        # the count is of pairs measured, not of partners: a partner met again in a later phase
        # is another draw of a node slow now and then (the re-test meets its few same-class
        # partners several times), and a partner's median would hide it
        slow_now = Counter(klass_of(s, g) for g, vs in node_ratios.get(s, {}).items() for v in vs
                           if slow(v, thresholds.slow_node_factor))
        slow_in = slow_now + Counter(klass_of(s, g) for g in earlier)
        chance = chances.of_host(s)
        p_int, said = _intermittency(slow_in, _chances_by_class(rows, at_top, s, klass, class_names, chance))
        # the re-test's pairs alone: drawn after the suspects were picked, so their family is the
        # suspects re-tested, not the fleet's node tests the pooled count above must clear
        p_new, said_new = _intermittency(
            slow_now, _chances_by_class(rows, at_top & esc, s, klass, class_names, chance)
        )
        tally = (
            f"slow with {slow_runs} of {len(per)} known-good partner(s)"
            if len(runs) == len(per)
            else f"slow in {slow_runs} of {len(runs)} re-test pairs with {len(per)} known-good partners"
        )
        # the suspects' own family: each was picked by the analysis' family-wise test already
        shift = _shift(runs, noise_sigma, thresholds.fwer / max(1, len(suspects)))
        own = _shift(runs, noise_sigma, 0.025)  # its 95% interval: the size, pooled with the analysis'
        interval = None
        floor = 1 - thresholds.warn_floor
        if not per:
            verdict, reason = "not_run", "no known-good partner with a reference of its class was free"
        elif 2 * slow_runs > len(runs):
            verdict, reason = "confirmed", tally
        elif shift is not None and own is not None and shift[2] < 1 and _past_floor(own, known.get(s), floor):
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
        elif p_int * n_tests <= thresholds.fwer:
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
                f"intermittent: {now} {', '.join(earlier) or 'none'} ({said} slow: p = {p_int:.1e} "
                f"over {n_tests} tests)"
            )
        elif p_new * len(suspects) <= thresholds.fwer:
            # A node slow in 30% of its rounds behind 2:1 uplinks shows with its 15 leaf partners
            # only; slow with 2 of them in the sweep, it was a suspect by chance of its worst pairs,
            # and its 3-5 slow of 24 re-test pairs, pooled with 39 leaf rounds, fell short of the bar
            # over 752 node tests (Student-t noise, 256 nodes with a fault of every class)
            verdict, reason = "confirmed", (
                f"intermittent: slow in {slow_runs} of {len(runs)} re-test pairs ({said_new} slow: "
                f"p = {p_new:.1e} over the {len(suspects)} suspect(s) re-tested)"
            )
        elif slow_runs == 0:
            verdict, reason = "cleared", (
                f"slow beyond the noise with none of its {len(per)} known-good partner(s)"
                + (f" (median {shift[0]:.2f}x)" if shift is not None else "")
            )
        else:
            verdict, reason = "inconclusive", tally
        out[s] = replace(out[s], verdict=verdict, ratios=per, reason=reason, interval=interval,
                         slow_runs=(slow_runs, len(runs)))
    for key, by_round in link_ratios.items():
        # one draw a re-run (its rows of one round: the median); slow only when slow in every re-run,
        # a candidate slow in the sweep and re-run three times or more in all but one (heavy-tailed
        # noise reads a link at 0.7 above 0.8 in a few % of runs; ``candidate_runs`` sizes the runs
        # for that allowance), a near one in every re-run (its sweep sample was the one not slow)
        runs = [statistics.median(by_round[r]) for r in sorted(by_round)]
        spare = spares.get(key, 0) if len(runs) >= CANDIDATE_RUNS else 0
        slow_runs = sum(slow(v, thresholds.slow_pair_factor) for v in runs)
        verdict = "confirmed" if slow_runs >= len(runs) - spare else "cleared"
        out[key] = replace(
            out[key],
            verdict=verdict,
            ratios={f"run{i + 1}": round(v, 3) for i, v in enumerate(runs)},
            reason=f"re-run at {', '.join(f'{v:.2f}x' for v in runs)} the controls of its class and load",
            slow_runs=(slow_runs, len(runs)),
        )
    unjudged = "not re-run: no control pair of its class"
    return {k: rt if rt.reason else replace(rt, reason=unjudged) for k, rt in out.items()}


BEFORE, AFTER, RETESTS = -2, -3, -4
"""A reference's phase (``judge``) for rows measured before the re-test's rounds, after them, and
in any of them (``RoundChances``)."""
ANY_LOAD = -1
"""A reference of a phase and class whatever the load."""


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


def _rows_of(rows: PairRows, pairs: set[frozenset]) -> np.ndarray:
    """Whether each row is of one of ``pairs`` (either way round)."""
    code = {h: i for i, h in enumerate(rows.names)}
    n = len(rows.names)
    known = [sorted(code[h] for h in p) for p in pairs if len(p) == 2 and p <= code.keys()]
    lo, hi = np.minimum(rows.a, rows.b), np.maximum(rows.a, rows.b)
    return np.isin(lo * n + hi, np.array([x * n + y for x, y in known], dtype=np.int64))


def _medians(
    when: np.ndarray, klass: np.ndarray, load: np.ndarray, busbw: np.ndarray
) -> dict[tuple[int, int, int], float]:
    """The median busbw of the rows of each (phase, class, load) and each (phase, class) (load ANY_LOAD)."""
    import pandas as pd

    frame = pd.DataFrame({"when": when, "klass": klass, "load": load, "busbw": busbw})
    out = {(int(w), int(k), int(n)): float(v) for (w, k, n), v in
           frame.groupby(["when", "klass", "load"], sort=False)["busbw"].median().items()}
    out |= {(int(w), int(k), ANY_LOAD): float(v) for (w, k), v in
            frame.groupby(["when", "klass"], sort=False)["busbw"].median().items()}
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
        span = np.where(when[idx] == BEFORE, BEFORE, RETESTS)
        medians = _medians(span, klass[idx], load[idx], rows.busbw[idx])
        refs = np.full(len(idx), np.nan)
        if len(idx):
            keys = np.stack([span, klass[idx], load[idx]], axis=1)
            uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
            per_key = [
                next((medians[key] for key in ((w, k, n), (w, k, ANY_LOAD)) if key in medians), np.nan)
                for w, k, n in uniq.tolist()
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


def _chances_by_class(
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


def _intermittency(slow: Counter[str], measured: Mapping[str, list[float]]) -> tuple[float, str]:
    """The intermittency test of a node's slow pairs out of the rounds it was measured in
    (``measured``: each round's noise chance, ``_chances_by_class``), all classes together and
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


# -- the procedure -----------------------------------------------------------------------------------
CONFIRM_PARTNERS = 2
"""Known-good partners each suspect node is re-tested against (preflight's --confirm default)."""
SHIFT_MAX_PHASES = 12
"""Re-test phases at most for a node a little slow with every partner (``shift_phases``)."""
CANDIDATE_LINKS = 32
CANDIDATE_PER_NODE = 4
"""Pairs re-run beside the suspects as the fleet's worst that no bar flagged (``candidate_links``):
every practically slow one, up to this many per node (``CANDIDATE_LINKS`` at least). At 256 nodes
under Student-t noise (3 degrees of freedom) about a dozen healthy pairs sit as low as a link at 0.7
(one sample each), under 1% congestion bursts of 1.1-1.5x about a hundred; at 1,024 nodes under
those bursts 3,191 pairs were practically slow and a link read at 0.73 ranked 1,684th among them
(bench_diagnosis: one candidate for every two nodes found it in 0 of 2 fabrics, one a node in 0
of 4). The phases run worst first as far as the re-test budget goes (``rerun_order``)."""
CANDIDATE_SHARED_ALPHA = 0.05
"""A node at an end of more of the fleet's worst candidate links than chance puts there (the j-th at
position k: Binomial(k, 2/N) >= j, Bonferroni over the nodes and j) is a suspect node, not their
links: a NIC slow in a third of the rounds behind a 2:1 uplink shows in its leaf's pairs only, 2-5
pairs at 0.5 among 15, which heavy-tailed noise keeps below the intermittency test's bar (issue 25's
grid missed 2-3 such nodes in 10 fabrics), and which are the fleet's very worst pairs."""
CANDIDATE_RUNS = 3
"""Re-runs of a candidate link at least, each in its own phase: confirmed when slow in all but one
(a healthy pair reads 0.8 or less in 0.1-0.6% of samples under t3 or 1% congestion bursts, in two of
three runs with p ~ 3e-6 to 1e-4; the link at 0.7 in 96% of runs under t3, so in two of three 99.5%
of the time, where "slow in both of two" missed one link in four at 1,024 nodes: re-run at 0.74x,
then 0.80x). ``candidate_runs`` adds more where the fleet is noisier."""
CANDIDATE_RUNS_MAX = 5
CANDIDATE_FALSE = 0.002
"""Healthy pairs a fabric's candidates may confirm by chance, in expectation (``candidate_runs``),
the worst and the near ones each. At 0.01 one fabric in a hundred carries a false link: 256-node
fabrics under Student-t noise gave one in about eighty (a pair re-run at 0.97x, 0.79x, 0.80x)."""
CANDIDATE_NEAR = 0.9
CANDIDATE_NEAR_RUNS = 2
"""Pairs beyond the noise that read at 0.9 of their prediction or below, not practically slow (the
half of the slow-link test they miss), fill the candidates the worst left (``Candidates.near``),
re-run this often at least, after the worst and while the budget lasts, and kept when slow every
time. At 256 nodes under Student-t noise one link at 0.7 in thirty read 0.84 in its one sample,
ranked 119th of 32,640 pairs, and was never a candidate. A healthy pair is slow in both of two
re-runs with p ~ 4e-5 (the re-run share squared under t3 or congestion bursts), in all of three with
p ~ 2e-7; the link at 0.7 in about 92% and 88%."""
CANDIDATE_NEAR_BUDGET = 0.5
"""The share of what the budget has left after the suspects and the worst candidates that the near
ones may take (``PhaseGate.near_from``): the rest stays for a later launch (the ends of a link
confirmed slow)."""
HELD_BACK_ALPHA = 0.05
"""A node re-tested inconclusive whose slow pairs are at least this likely from the noise alone (at
the fleet's share of residual differences that slow, ``rerun_share``) gives back the candidate links
held back for it (``held_back``); one less likely is re-tested once more (``split_inconclusive``)."""
MAX_LAUNCHES = 3
"""Re-test launches at most: again while the verdicts name suspects not re-tested yet (a link
confirmed slow on re-run makes suspects of its two ends)."""

Measure = Callable[[PhaseList, PhaseGate], "Outcome"]
"""One launch of ranks for the re-test phases, each phase started only if the ``PhaseGate`` lets it;
returns the launch's ``coordinator.Outcome`` (its ``startup_s`` is recorded)."""


@dataclass(frozen=True)
class RetestWords:
    """How a caller's log and the verdicts' default reason name its re-tests: preflight calls a
    re-test launch an escalation, ``sweep --hosts`` its confirm step."""

    name: str
    """The loop in the log: "# {name} stopped: ..."."""
    budget: str
    """The budget the re-tests draw on: "not re-tested: {budget} ran out"."""
    launches: str
    """Its launches: "not re-tested: 3 {launches} already ran"."""
    not_suspect: str
    """Why a subject never re-tested has no verdict when the suspects ran out first."""
    list_suspects: bool = False
    """Say each analysis' suspects ("# suspects: a1, b2|b3" or "none"), as preflight's progress does;
    else only that none is left ("# {name}: no other suspect node or link to re-test")."""


PREFLIGHT_WORDS = RetestWords(
    "escalation", "the budget", "escalations", "not a suspect after the quick pass", list_suspects=True
)
SWEEP_WORDS = RetestWords(
    "confirm", "the --confirm-budget", "re-test launches", "not a suspect after the pairwise phase"
)


@dataclass(frozen=True)
class Suspects:
    """What one analysis asks to re-test, and what the re-test plan and the verdicts need about it."""

    nodes: list[str]
    links: list[Pair]
    classes: Mapping[str, str]
    """The hop class each node was found slow in (``suspect_classes``): its partners' class."""
    prior: Mapping[str, set[str]]
    """Each node's partners of earlier slow links (``slow_partners``): a node slow now and then."""
    intermittent: Mapping[str, float] = field(default_factory=dict)
    """Nodes the analysis itself found slow in some rounds only (its finding's ``kind``): the share
    of their pairs that were slow."""
    decided: frozenset[str] = frozenset()
    """Nodes an earlier launch re-tested to a verdict (confirmed or cleared): never again an end."""
    measured: Mapping[str, float] = field(default_factory=dict)
    """Each node's ratio to its peers as its finding measured it (else the middle of its interval):
    what its re-test is sized to show (``shift_phases``)."""
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Each node's 95% interval of that ratio from its finding: pooled with its re-test's (``judge``)."""
    found: Candidates = field(default_factory=lambda: Candidates([], 0))
    """Links no bar flagged, re-run as the fleet's worst and as near slow (``candidate_links``);
    their ends are not suspects."""
    again: Mapping[str, str] = field(default_factory=dict)
    """Nodes re-tested with as many fresh pairs as a node slow now and then gets at most, and why:
    re-tested inconclusive by more slow pairs than the noise gives (``split_inconclusive``), or
    slow in more of their links' re-runs than the noise gives (``slow_link_ends``)."""

    @property
    def candidates(self) -> list[Pair]:
        """The fleet's worst links no bar flagged (``Candidates.links``)."""
        return self.found.links

    @classmethod
    def of(
        cls,
        findings: list[Finding],
        exclude: set[str],
        retests: Mapping[str, Retest],
        ctx: AnalysisContext | None = None,
        looked: frozenset[str] = frozenset(),
    ) -> Suspects:
        """What to re-test after the analysis ``ctx``: with it and no re-test yet, candidate links too;
        after a launch, the candidates held back while an end was a suspect node (``held_back``), and
        once more, unless ``looked`` at again already, the nodes re-tested inconclusive by more slow
        pairs than the noise gives (``split_inconclusive``) and those whose links' re-runs were
        (``slow_link_ends``)."""
        nodes, links = find_suspects(findings, exclude, set(retests), retests)
        taken = exclude | set(nodes) | {h for lk in links for h in lk}
        taken |= {rt.subject for rt in retests.values() if rt.kind == "node" and rt.verdict == "confirmed"}
        # the fleet's worst, once: a later launch is for the suspects the first one's verdicts made,
        # and for the worst held back while one of their ends was a suspect node
        found, again = Candidates([], 0), dict[str, str]()
        if ctx is not None and not retests:
            found = candidate_links(ctx, taken, set(retests))
        elif ctx is not None:
            explained, more = split_inconclusive(ctx, retests)
            retested = {rt.subject for rt in retests.values() if rt.kind == "node"}
            ends = {h: why for h, why in slow_link_ends(ctx, retests).items() if h not in retested | exclude}
            why_again = {h: "inconclusive" for h in more} | ends
            again = {h: why for h, why in why_again.items() if h not in looked}
            found = held_back(ctx, taken, retests, explained)
        candidates = found.links
        first = candidates and not retests  # a node at the ends of many: once, from the fleet's worst
        now_and_then_too = shared_ends(candidates, len(ctx.pair_model.hosts)) if first else []
        prior = slow_partners(findings, retests)
        for h in now_and_then_too:  # its worst pairs are its evidence, as a flagged node's slow links
            prior[h] = prior.get(h, set()) | {g for lk in candidates if h in lk for g in lk}
            prior[h].discard(h)
        nodes = sorted({*nodes, *now_and_then_too, *again})
        keep = lambda links: [lk for lk in links if not set(lk) & set(now_and_then_too)]  # noqa: E731
        found = replace(found, links=keep(candidates), near=keep(found.near))
        now_and_then, measured, intervals = {}, {}, {}
        for f in findings:
            ev = (f.evidence or {}) if f.rule == "slow_node" else {}
            if ev.get("kind") == "intermittent" and ev.get("partners"):
                now_and_then[f.subject] = ev["partners_slow"] / ev["partners"]
            ci, ratio = ev.get("effect_ci_ratio"), ev.get("node_effect_ratio")
            if ratio or ci:
                measured[f.subject] = float(ratio if ratio else math.sqrt(ci[0] * ci[1]))
            if ci and len(ci) == 2 and min(ci) > 0:
                intervals[f.subject] = (float(min(ci)), float(max(ci)))
        decided = frozenset(k for k, rt in retests.items() if rt.kind == "node" and rt.verdict != "not_run")
        return cls(nodes, links, suspect_classes(findings), prior, now_and_then, decided, measured, intervals,
                   found, again)

    def slow_share(self, node: str, tested: MetPairs) -> float | None:
        """The share of its rounds a node seemed slow in: its intermittent finding's, else its slow
        links' among its pairs; None for a node slow with every partner of a class (capped)."""
        if node in self.intermittent:
            return self.intermittent[node]
        met = tested.partners(node)
        return len(self.prior[node]) / met if self.prior.get(node) and met else None

    def names(self) -> list[str]:
        """The suspects the analysis flagged, by name (the candidate links apart)."""
        return self.nodes + ["|".join(p) for p in self.links]

    def said(self) -> str:
        """The suspects for the log: the flagged by name, the candidate links by count, the nodes
        re-tested ``again`` apart."""
        worst = f"{len(self.candidates)} candidate link(s) (the worst pairs no bar flagged)"
        more = [worst] if self.candidates else []
        more += [f"{h} again ({why})" for h, why in sorted(self.again.items())]
        if self.found.near:
            more.append(f"{len(self.found.near)} near-slow pair(s) as the budget allows")
        return ", ".join([n for n in self.names() if n not in self.again] + more)

    @property
    def ends(self) -> list[str]:
        """The nodes of the suspect links, re-tested as nodes beside the link's re-run: a link slow
        once may be a node slow now and then, fast when its link is re-run."""
        return sorted({h for lk in self.links for h in lk} - set(self.nodes) - self.decided)


@dataclass(frozen=True)
class RetestSetup:
    """What the re-test loop needs from its caller (preflight after its quick pass, ``sweep --hosts``
    after its pairwise phase, ``netbench simulate`` after its simulated one); how a launch is made
    is the ``Measure`` handed beside it."""

    analyse: Callable[[], tuple[AnalysisContext, list[Finding]]]
    """The analysis of what was measured before the re-tests: (its ``AnalysisContext``, the findings)."""
    read_rows: Callable[[], PairRows]
    """The run's pair rows, read again after each launch (``common.rundir.GrowingRows``)."""
    echo: Callable[[str], None]
    live: list[str]
    """Hosts that may be re-tested or partner a re-test."""
    exclude: set[str]
    """Hosts neither re-tested nor partnered (``unusable_hosts``)."""
    tested: MetPairs
    """Pairs measured already: a suspect meets a partner it has not met where there is one."""
    first_round: int
    """The rows' round of the first re-test phase (after the rounds measured)."""
    phase_s: float
    """A pair phase's time so far: the estimate until a re-test phase is measured."""
    startup_s: float
    """A launch's start-up so far: a re-test launch needs it and one phase to fit the budget."""
    budget: Budget
    words: RetestWords = SWEEP_WORDS
    partners: int = CONFIRM_PARTNERS
    """Known-good partners each suspect node is re-tested against (phases of a launch)."""
    max_launches: int = MAX_LAUNCHES


@dataclass
class Retested:
    """What the loop found: the verdicts, each launch's ``info`` (phases planned and run, why not),
    the reason a subject without a verdict was not re-tested, and the budget's seconds spent on the
    analyses and on the launches."""

    retests: dict[str, Retest] = field(default_factory=dict)
    launches: list[dict[str, Any]] = field(default_factory=list)
    untested_reason: str = ""
    analysis_s: float = 0.0
    launch_s: float = 0.0
    from_round: int | None = None
    """The first re-test round: its rows and later ones are the re-tests'."""

    @property
    def evidence(self) -> RetestEvidence:
        """As the analysis weighs it (run.json's ``retests``)."""
        return RetestEvidence(self.retests, self.untested_reason, self.from_round)


def retest_suspects(setup: RetestSetup, measure: Measure) -> Retested:
    """The re-test loop: analyse what was measured, re-test the suspects not re-tested yet in one
    launch (``measure``) within the budget, and again while the verdicts name new suspects, at most
    ``max_launches`` times. Stops at the first launch that re-tests nothing (no partner, no budget)
    or that the budget cut short. One analysis: the re-tests' rows are not the pair model's."""
    out = Retested(untested_reason=setup.words.not_suspect, from_round=setup.first_round)
    tested, first_round = setup.tested.copy(), setup.first_round
    name = setup.words.name
    t0 = setup.budget.elapsed()
    ctx, findings = setup.analyse()
    out.analysis_s = setup.budget.elapsed() - t0
    looked: frozenset[str] = frozenset()  # nodes re-tested inconclusive, then once more
    for _ in range(setup.max_launches):
        suspects = Suspects.of(findings, setup.exclude, out.retests, ctx, looked)
        looked |= set(suspects.again)
        if setup.words.list_suspects:
            setup.echo(f"# suspects: {suspects.said() or 'none'}")
        elif not suspects.said():
            setup.echo(f"# {name}: no {'other ' if out.retests else ''}suspect node or link to re-test")
        if not suspects.said():
            break
        t0 = setup.budget.elapsed()
        new, info = _retest_launch(setup, measure, ctx, suspects, tested, first_round)
        out.launch_s += setup.budget.elapsed() - t0
        out.launches.append(info)
        if not new:
            out.untested_reason = f"not re-tested: {info['skipped']}"
            setup.echo(f"# {name} stopped: {info['skipped']}")
            break
        for key, rt in new.items():  # a later launch's "not run" never undoes an earlier verdict
            if rt.verdict != "not_run" or out.retests.get(key, rt).verdict == "not_run":
                out.retests[key] = rt
        tested.add(pairs_in(setup.read_rows(), info["rounds"]))
        first_round = info["rounds"][1] + 1
        if info["skipped"]:
            out.untested_reason = f"not re-tested: {setup.words.budget} ran out"
            break
    else:
        out.untested_reason = f"not re-tested: {setup.max_launches} {setup.words.launches} already ran"
    return out


def _retest_launch(
    setup: RetestSetup,
    measure: Measure,
    ctx: AnalysisContext,
    suspects: Suspects,
    tested: MetPairs,
    first_round: int,
) -> tuple[dict[str, Retest], dict[str, Any]]:
    """One launch (``measure``) re-testing the suspects against known-good partners, phase by phase
    within the budget; the verdicts and what ran (``info``: phases planned and run, why not). A
    suspect with partners of earlier slow links, or found intermittent, gets ``intermittent_phases``
    of the share of its pairs that were slow, so that a node slow now and then can show it (two
    phases miss a node slow in a third of the rounds about half the time)."""
    m = ctx.pair_model
    effect = {h: float(m.node_effect[i]) for i, h in enumerate(m.hosts)} if m is not None else {}
    nodes, links, budget, switches = suspects.nodes, suspects.links, setup.budget, ctx.switches
    ends, found = suspects.ends, suspects.found
    # a candidate's ends are no suspects: known-good partners and controls where their link is not run
    fine = [h for h in setup.live if h not in nodes and h not in ends and h not in setup.exclude]
    good = sorted(fine, key=lambda h: -effect.get(h, 0.0))
    phases = setup.partners if nodes or ends else 0
    shares = [q for q in (suspects.slow_share(s, tested) for s in nodes + ends) if q is not None]
    if shares:
        phases = max(phases, intermittent_phases(min(shares)))
    if suspects.again:  # inconclusive once: as many fresh pairs as a node slow now and then gets at most
        phases = max(phases, INTERMITTENT_MAX_PHASES)
    if m is not None and nodes:  # a subtle node needs more pairs than a capped one to be told apart
        phases = max(phases, *(shift_phases(suspects.measured.get(s, math.exp(effect.get(s, 0.0))), m.sigma,
                                            ctx.policy.thresholds, family=len(nodes)) for s in nodes))
    per_phase = max(1, len(good) // 2)

    def planned(reruns: list[Pair]) -> list[list[Pair]]:
        made = plan_escalation(nodes, links, good, tested, switches, phases, suspects.classes, ends, reruns)
        return [p for p in made if p]

    reruns = rerun_order(found.links, found.runs, per_phase)
    plan = planned(reruns)
    near_from = len(plan) if found.near else None
    if found.near:  # after the worst, in phases of their own, as far as ``PhaseGate`` lets them
        plan = planned(reruns + rerun_order(found.near, found.near_runs, per_phase))
    spares = found.spares()
    info: dict[str, Any] = {
        "suspects": suspects.names(),
        "candidate_links": ["|".join(p) for p in spares],
        "phases_planned": len(plan),
        "phases_run": 0,
        "skipped": None,
    }
    subjects = set(nodes) | {h for lk in [*links, *spares] for h in lk}
    if not plan or not any(set(p) & subjects for ph in plan for p in ph):
        info["skipped"] = "no known-good partner to re-test against"
        return {}, info
    if not budget.fits(setup.startup_s + setup.phase_s):
        info["skipped"] = (
            f"budget: re-testing needs ~{setup.startup_s + setup.phase_s:.0f} s (start-up + one phase), "
            f"{max(budget.left(), 0):.0f} s left"
        )
        return {}, info
    gate = PhaseGate(budget, prior_s=setup.phase_s, near_from=near_from, startup_s=setup.startup_s)
    setup.echo(
        f"# re-testing {suspects.said()} against known-good partners: up to {len(plan)} "
        f"phase(s), {max(budget.left(), 0):.0f} s left"
    )
    rounds = range(first_round, first_round + len(plan))
    t0 = budget.elapsed()
    outcome = measure([(f"re-test {k + 1}/{len(plan)}", rounds[k], p) for k, p in enumerate(plan)], gate)
    info.update(
        phases_run=len(gate.started),
        phase_s=[round(d, 3) for d in gate.durations()],
        startup_s=outcome.startup_s,
        launch_s=round(budget.elapsed() - t0, 3),
        rounds=[rounds.start, rounds.stop - 1],
        skipped="budget" if gate.skipped and not gate.kept else None,
        kept=len(gate.skipped) if gate.kept else 0,  # near candidates' phases left for a later launch
    )
    sigma = m.sigma if m is not None else 0.0
    n_tests = max(ctx.analyses.nodes.tests, len(setup.live))  # the analysis' family of node tests
    rows, thresholds = setup.read_rows(), ctx.policy.thresholds
    verdicts = ctx.analyses.nodes
    found_slow = {v.host for v in verdicts.slow}
    below = [set(sv.below) for sv in verdicts.switches]

    def excused(s: str, g: str) -> bool:
        """A pair slow because of its partner, found slow itself, or of a slow uplink it crosses
        (on a fabric with several faults, a suspect met them all in the sweep)."""
        return g in found_slow or any((s in hosts) != (g in hosts) for hosts in below)

    retests = judge(
        rows, rounds, nodes + ends, links, switches, thresholds, sigma, suspects.prior, n_tests, excused,
        known=suspects.intervals, candidates=spares,
    )
    for (a, b), spare in spares.items():
        rt = retests[f"{a}|{b}"]
        runs = found.runs if spare else found.near_runs
        if rt.verdict == "confirmed" and len(rt.ratios) < runs:  # the budget cut its runs short
            rt = replace(rt, verdict="inconclusive", reason=f"{rt.reason}; re-run {len(rt.ratios)} time only")
        elif not rt.ratios and gate.skipped:
            rt = replace(rt, reason="not re-run: the budget ended the re-test first")
        retests[rt.subject] = rt
    quiet = [rt for rt in retests.values() if rt.candidate and rt.verdict != "confirmed"]
    for rt in retests.values():
        if rt not in quiet:
            setup.echo(f"# re-test {rt.subject}: {rt.verdict} ({rt.reason})")
    if quiet:  # each is in run.json's retests; one line here, as they never were findings
        unrun = sum(1 for rt in quiet if not rt.ratios)
        left = f"; {unrun} not re-run (budget)" if unrun else ""
        ran = len(quiet) - unrun
        setup.echo(f"# re-run {ran} candidate link(s): not slow in every re-run, not findings{left}")
    return retests, info
