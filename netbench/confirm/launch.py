"""The re-test loop (``retest_suspects``) and one launch of it (``_retest_launch``): analyse what the
sweep (or quick pass) measured, re-test the suspects in one launch (the caller's ``Measure``), phase
by phase while they fit the ``Budget``, again while the verdicts name new suspects. A
``RetestSetup`` says what differs between callers (how they analyse, their hosts, what was measured,
their log's words: ``RetestWords``), ``Retested`` is what the loop found."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from netbench.confirm.budget import Budget, Measure, PhaseGate
from netbench.confirm.candidates import Suspects, pairs_in
from netbench.confirm.judging import LINK_RUNS, judge
from netbench.confirm.rails import RailRun, RailSetup, node_rails, rail_launch
from netbench.confirm.records import Pair
from netbench.confirm.schedule import (
    CONFIRM_PARTNERS,
    INTERMITTENT_MAX_PHASES,
    intermittent_phases,
    plan_escalation,
    rerun_order,
    shift_phases,
)
from netbench.reports.analyses import Retest, RetestEvidence
from netbench.reports.pairrows import GrowingRows, MetPairs, PairRows

if TYPE_CHECKING:
    from netbench.common.findings import Finding
    from netbench.reports.context import AnalysisContext

MAX_LAUNCHES = 3
"""Re-test launches at most: again while the verdicts name suspects not re-tested yet (a link
confirmed slow on re-run makes suspects of its two ends)."""


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
class RetestSetup:
    """What the re-test loop needs from its caller (preflight after its quick pass, ``sweep --hosts``
    after its pairwise phase, ``netbench simulate`` after its simulated one); how a launch is made
    is the ``Measure`` handed beside it."""

    analyse: Callable[[], tuple[AnalysisContext, list[Finding]]]
    """The analysis of what was measured before the re-tests: (its ``AnalysisContext``, the findings)."""
    read_rows: Callable[[], PairRows]
    """The run's pair rows, read again after each launch (``reports.pairrows.GrowingRows``)."""
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
    rails: RailSetup | None = None
    """How the caller launches rail groups: a node the re-tests confirmed slow whose inventory names
    its rails' NICs is then re-tested rail by rail (``rails.rail_launch``). None: never."""


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
        tested.add(_launch_pairs(setup, info["rounds"]))
        first_round = info["rounds"][1] + 1
        if info["skipped"]:
            out.untested_reason = f"not re-tested: {setup.words.budget} ran out"
            break
    else:
        out.untested_reason = f"not re-tested: {setup.max_launches} {setup.words.launches} already ran"
    if setup.rails is not None:
        _rails(setup, setup.rails, ctx, out, tested, first_round)
    return out


def _rails(
    setup: RetestSetup, rails: RailSetup, ctx: AnalysisContext, out: Retested, tested: MetPairs,
    first_round: int,
) -> None:
    """The nodes the re-tests confirmed slow, re-tested rail by rail where the inventory names their
    rails (``rails.rail_launch``), within what the budget has left: which NIC it is."""
    confirmed = {rt.subject for rt in out.retests.values() if rt.kind == "node" and rt.verdict == "confirmed"}
    nodes = node_rails(ctx.inventory, confirmed)
    if not nodes:
        return
    doubtful = {rt.subject for rt in out.retests.values() if rt.kind == "node" and rt.verdict != "cleared"}
    doubtful |= {h for rt in out.retests.values() if rt.kind == "link" and rt.verdict == "confirmed"
                 for h in rt.subject.split("|")}
    doubtful |= {v.host for v in ctx.analyses.nodes.slow}
    m = ctx.pair_model
    effect = {h: float(m.node_effect[i]) for i, h in enumerate(m.hosts)} if m is not None else {}
    good = sorted((h for h in setup.live if h not in doubtful and h not in setup.exclude),
                  key=lambda h: -effect.get(h, 0.0))
    measured = [d for info in out.launches for d in info.get("phase_s", [])]
    startups = [info["startup_s"] for info in out.launches if info.get("startup_s")]
    t0 = setup.budget.elapsed()
    new, info = rail_launch(RailRun(
        rails, ctx, nodes, good, tested, first_round, max(measured, default=setup.phase_s),
        max(startups, default=setup.startup_s), setup.budget, setup.echo,
    ))
    out.launch_s += setup.budget.elapsed() - t0
    out.launches.append(info)
    out.retests.update(new)


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
    nodes, ends, budget = suspects.nodes, suspects.ends, setup.budget
    # a candidate's ends are no suspects: known-good partners and controls where their link is not run
    fine = [h for h in setup.live if h not in nodes and h not in ends and h not in setup.exclude]
    good = sorted(fine, key=lambda h: -effect.get(h, 0.0))
    phases = _launch_phases(setup, ctx, suspects, tested, effect)
    plan, near_from = _plan(ctx, suspects, good, tested, phases)
    spares = suspects.found.spares()
    info: dict[str, Any] = {
        "suspects": suspects.names(),
        "candidate_links": ["|".join(p) for p in spares],
        "phases_planned": len(plan),
        "phases_run": 0,
        "skipped": None,
    }
    subjects = set(nodes) | {h for lk in [*suspects.links, *spares] for h in lk}
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
    retests = _verdicts(setup, ctx, suspects, rounds, gate)
    _say(setup.echo, retests)
    return retests, info


def _launch_phases(
    setup: RetestSetup, ctx: AnalysisContext, suspects: Suspects, tested: MetPairs, effect: dict[str, float]
) -> int:
    """The phases a launch plans for its suspect nodes and the ends of its suspect links:
    ``setup.partners``, more for a node slow now and then (``intermittent_phases``), one re-tested
    again or a subtle one (``shift_phases``, sized on ``effect``, each node's effect in the pair
    model, where its finding measured none)."""
    m = ctx.pair_model
    nodes, ends = suspects.nodes, suspects.ends
    phases = setup.partners if nodes or ends else 0
    shares = [q for q in (suspects.slow_share(s, tested) for s in nodes + ends) if q is not None]
    if shares:
        phases = max(phases, intermittent_phases(min(shares)))
    if suspects.again:  # inconclusive once: as many fresh pairs as a node slow now and then gets at most
        phases = max(phases, INTERMITTENT_MAX_PHASES)
    if m is not None and nodes:  # a subtle node needs more pairs than a capped one to be told apart
        phases = max(phases, *(shift_phases(suspects.measured.get(s, math.exp(effect.get(s, 0.0))), m.sigma,
                                            ctx.policy.thresholds, family=len(nodes)) for s in nodes))
    return phases


def _plan(
    ctx: AnalysisContext, suspects: Suspects, good: list[str], tested: MetPairs, phases: int
) -> tuple[list[list[Pair]], int | None]:
    """The launch's phases (``plan_escalation``, none empty): the suspects' ``phases`` with the worst
    candidates' re-runs, then the near candidates' in phases of their own; and the first of those
    (``PhaseGate.near_from``; None without near candidates)."""
    found, per_phase = suspects.found, max(1, len(good) // 2)

    def planned(reruns: list[Pair]) -> list[list[Pair]]:
        links = [p for p in suspects.links for _ in range(LINK_RUNS)]  # each in its own phase
        made = plan_escalation(suspects.nodes, links, good, tested, ctx.switches, phases,
                               suspects.classes, suspects.ends, reruns)
        return [p for p in made if p]

    reruns = rerun_order(found.links, found.runs, per_phase)
    plan = planned(reruns)
    near_from = len(plan) if found.near else None
    if found.near:  # after the worst, in phases of their own, as far as ``PhaseGate`` lets them
        plan = planned(reruns + rerun_order(found.near, found.near_runs, per_phase))
    return plan, near_from


def _verdicts(
    setup: RetestSetup, ctx: AnalysisContext, suspects: Suspects, rounds: range, gate: PhaseGate
) -> dict[str, Retest]:
    """The verdicts of a launch's ``rounds`` (``judge``); a candidate the budget stopped re-running
    (``gate``) is inconclusive, or not re-run, rather than judged on fewer runs than it needs."""
    m = ctx.pair_model
    sigma = m.sigma if m is not None else 0.0
    n_tests = max(ctx.analyses.nodes.tests, len(setup.live))  # the analysis' family of node tests
    rows, thresholds = _judged_rows(setup, rounds), ctx.policy.thresholds
    verdicts = ctx.analyses.nodes
    found_slow = {v.host for v in verdicts.slow}
    below = [set(sv.below) for sv in verdicts.switches]

    def excused(s: str, g: str) -> bool:
        """A pair slow because of its partner, found slow itself, or of a slow uplink it crosses
        (on a fabric with several faults, a suspect met them all in the sweep)."""
        return g in found_slow or any((s in hosts) != (g in hosts) for hosts in below)

    found = suspects.found
    spares = found.spares()
    retests = judge(
        rows, rounds, suspects.nodes + suspects.ends, suspects.links, ctx.switches, thresholds, sigma,
        suspects.prior, n_tests, excused, known=suspects.intervals, candidates=spares,
    )
    for (a, b), spare in spares.items():
        rt = retests[f"{a}|{b}"]
        runs = found.runs if spare else found.near_runs
        if rt.verdict == "confirmed" and len(rt.ratios) < runs:  # the budget cut its runs short
            rt = replace(rt, verdict="inconclusive", reason=f"{rt.reason}; re-run {len(rt.ratios)} time only")
        elif not rt.ratios and gate.skipped:
            rt = replace(rt, reason="not re-run: the budget ended the re-test first")
        retests[rt.subject] = rt
    return retests


def _pieces(setup: RetestSetup) -> list[PairRows]:
    """The run's pair rows as read, unjoined where the reader keeps them so (``GrowingRows.pieces``)."""
    read = setup.read_rows
    return read.pieces() if isinstance(read, GrowingRows) else [read()]


def _rows_where(setup: RetestSetup, keep: Callable[[PairRows], np.ndarray]) -> PairRows:
    """The rows ``keep`` picks of each piece of the run's rows, joined: a few of 25 M at 4,096 nodes."""
    return PairRows.joined([p.subset(keep(p)) for p in _pieces(setup)], consume=True)  # subsets: ours


def _in(rows: PairRows, start: int, stop: int) -> np.ndarray:
    return (rows.round >= start) & (rows.round < stop)


def _launch_pairs(setup: RetestSetup, rounds: list[int]) -> set[Pair]:
    """The pairs a launch measured (its first and last round, ``rounds``)."""
    return pairs_in(_rows_where(setup, lambda p: _in(p, rounds[0], rounds[1] + 1)), rounds)


def _judged_rows(setup: RetestSetup, rounds: range) -> PairRows:
    """The rows ``judge`` weighs for the launch's ``rounds``: those at the re-test's largest size
    (every reference, draw and round's chance is of that size) and the failed ones (the rounds a
    host was lost in), where every row carries its load; else all of them (a load worked out
    counts the pairs of a round at every size). At 4,096 nodes, a third of the 25 M rows, and no
    join of them all."""
    pieces = _pieces(setup)
    if not all((p.load >= 0).all() for p in pieces):
        return PairRows.joined(pieces)
    esc = [p.ok & (p.busbw > 0) & _in(p, rounds.start, rounds.stop) for p in pieces]
    tops = [p.nbytes[e].max() for p, e in zip(pieces, esc, strict=True) if e.any()]
    if not tops:
        return PairRows.empty()
    top = max(tops)
    return _rows_where(setup, lambda p: (p.nbytes == top) | ~p.ok)


def _say(echo: Callable[[str], None], retests: dict[str, Retest]) -> None:
    """The launch's verdicts in the log, the candidates not confirmed in one line."""
    quiet = [rt for rt in retests.values() if rt.candidate and rt.verdict != "confirmed"]
    for rt in retests.values():
        if rt not in quiet:
            echo(f"# re-test {rt.subject}: {rt.verdict} ({rt.reason})")
    if quiet:  # each is in run.json's retests; one line here, as they never were findings
        unrun = sum(1 for rt in quiet if not rt.ratios)
        left = f"; {unrun} not re-run (budget)" if unrun else ""
        ran = len(quiet) - unrun
        echo(f"# re-run {ran} candidate link(s): not slow in every re-run, not findings{left}")
