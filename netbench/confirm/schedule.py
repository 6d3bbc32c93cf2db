"""How many phases a re-test launch takes and who meets whom in each: ``intermittent_phases`` and
``shift_phases`` size a launch for its suspect nodes, ``plan_escalation`` fills the phases (perfect
matchings: each suspect with a known-good partner, each re-run link beside a control of its hop
class, the other good nodes as the phase's controls), and ``rerun_order`` orders the candidate
links' re-runs so that a budget that ends the phases early leaves the worst re-run in full."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from netbench.confirm.records import Pair
from netbench.inventory.topology import LEAF, hop_class
from netbench.reports.analyses import INTERMITTENT_MIN_PAIRS
from netbench.reports.pairrows import MetPairs

if TYPE_CHECKING:
    from netbench.reports.policy import Thresholds

CONFIRM_PARTNERS = 2
"""Known-good partners each suspect node is re-tested against (preflight's --confirm default)."""
SHIFT_MAX_PHASES = 12
"""Re-test phases at most for a node a little slow with every partner (``shift_phases``)."""
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


def rerun_order(candidates: list[Pair], runs: int, per_phase: int) -> list[Pair]:
    """The candidates' re-runs in the order ``plan_escalation`` fills phases: a phase's worth
    (``per_phase`` pairs) of the worst, each ``runs`` times, then the next: a budget that ends the
    phases early leaves the worst candidates re-run in full, not every candidate once. Each copy of
    a pair lands in a phase of its own (its nodes are busy in the phase that took the first)."""
    out: list[Pair] = []
    for k in range(0, len(candidates), per_phase):
        out += candidates[k : k + per_phase] * runs
    return out


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
