"""Preflight's sequential stage without hosts (``netbench.preflight.sequential``): the two tests a
node, the rounds they plan, and the loop that spends the budget until every node is decided, run
on a modelled fabric (a node's draws are its partner's and its own rate times log-normal noise)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest
from netbench.reports.pairrows import PairRows

from netbench.agents.coordinator import Outcome
from netbench.confirm import Budget
from netbench.preflight.sequential import (
    CLEARED,
    DRAINED,
    UNDECIDED,
    SequentialSetup,
    plan_rounds,
    run_sequential,
    weigh,
)

HOSTS = [f"n{i:02d}" for i in range(32)]
SWITCHES = {h: f"leaf{i // 16}" for i, h in enumerate(HOSTS)}  # two leaves of 16


@dataclass
class Fabric:
    """Pairs measured at the smaller of their ends' rates (``slow``: a node's rate; ``now_and_then``:
    (rate, share of rounds)), with 5% log-normal noise; the rows as the line reader gives them."""

    slow: dict[str, float] = field(default_factory=dict)
    now_and_then: dict[str, tuple[float, float]] = field(default_factory=dict)
    link: dict[frozenset, float] = field(default_factory=dict)
    seed: int = 1
    records: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def measure(self, rnd: int, pairs: list[tuple[str, str]]) -> None:
        down = {h for h, (_, share) in self.now_and_then.items() if self.rng.random() < share}
        for a, b in pairs:
            rate = min(self.rate(a, down), self.rate(b, down)) * self.link.get(frozenset((a, b)), 1.0)
            self.records.append({
                "pattern": "pair", "hosts": [a, b], "round": rnd, "bytes": 1 << 30, "status": "ok",
                "busbw_GBps": 180.0 * rate * float(np.exp(0.05 * self.rng.standard_normal())),
                "hop_class": "leaf" if SWITCHES[a] == SWITCHES[b] else "spine", "load": 0,
            })

    def rate(self, h: str, down: set[str]) -> float:
        return self.now_and_then[h][0] if h in down else self.slow.get(h, 1.0)

    def rows(self) -> PairRows:
        return PairRows.from_records(self.records)


def leaf_rounds(n: int, first: int = 1) -> list[tuple[int, list[tuple[str, str]]]]:
    """``n`` rounds of pairs within each leaf, a new partner each round (the circle method)."""
    out = []
    for k in range(n):
        pairs = []
        for leaf in range(2):
            members = HOSTS[16 * leaf: 16 * leaf + 16]
            ring = [members[0]] + members[1:][k % 15:] + members[1:][: k % 15]
            pairs += [(ring[i], ring[15 - i]) for i in range(8)]
        out.append((first + k, pairs))
    return out


def measured(fabric: Fabric, n: int) -> PairRows:
    for rnd, pairs in leaf_rounds(n):
        fabric.measure(rnd, pairs)
    return fabric.rows()


@pytest.fixture(scope="module")
def mixed() -> tuple[Fabric, object]:
    """24 rounds of a fabric with a node 15% slow, one slow in 30% of its rounds, and a slow link."""
    fab = Fabric(slow={"n03": 0.85}, now_and_then={"n20": (0.5, 0.3)}, link={frozenset(("n07", "n08")): 0.5},
                 seed=3)
    return fab, weigh(measured(fab, 24), HOSTS, SWITCHES, factor=0.9, fwer=0.05)


def test_a_capped_node_is_drained_with_its_effect_and_certainty(mixed) -> None:
    _, d = mixed
    e = d.nodes["n03"]
    assert e.decision == DRAINED and e.shift_llr >= d.upper
    ratio, lo, hi = e.effect(d.sigma)
    assert lo < ratio < hi < 0.9 and ratio == pytest.approx(0.85, abs=0.05)
    assert "slower than the controls" in d.why(e) and "for >= 10% slower" in d.why(e)


def test_a_node_slow_now_and_then_is_drained_by_its_count_across_rounds(mixed) -> None:
    _, d = mixed
    e = d.nodes["n20"]
    assert e.decision == DRAINED and e.count_llr >= d.upper and e.slow >= 3
    assert d.why(e).startswith("slow now and then")


def test_healthy_nodes_and_the_ends_of_a_slow_link_are_cleared(mixed) -> None:
    fab, d = mixed
    # the slow link's ends met once in 15 rounds (one slow draw each): a link, not a node
    assert any({"n07", "n08"} == set(r["hosts"]) for r in fab.records)
    assert d.of(DRAINED) == ["n03", "n20"]
    assert set(d.of(CLEARED)) >= set(HOSTS) - {"n03", "n20", "n07", "n08"}
    assert d.nodes["n07"].slow == d.nodes["n08"].slow == 1
    assert not d.nodes["n07"].leaning_slow and not d.nodes["n08"].leaning_slow


def test_a_drain_here_is_laid_over_the_escalations_confirmation(mixed) -> None:
    """The escalation confirmed n03 on a few pairs whose interval (6-12% slow) would make it a warning;
    this stage drained it for 10% or more: its record goes over the escalation's, so the finding's
    severity is the drain's. Its clearing of a node the escalation confirmed is laid too; a node
    both cleared keeps the escalation's record."""
    from netbench.reports.analyses import Retest

    _, d = mixed
    earlier = {"n03": Retest("n03", "node", "confirmed", {"n04": 0.9}, "8% slower", (0.88, 0.94)),
               "n05": Retest("n05", "node", "confirmed", {"n06": 0.93}, "7% slower", (0.9, 0.96)),
               "n09": Retest("n09", "node", "cleared", {"n10": 1.0}, "fast")}
    laid = d.retests(earlier)
    assert laid["n03"].verdict == "confirmed" and laid["n03"].reason.startswith("sequential test: ")
    assert laid["n03"].interval is None  # the policy's severity: drained for >= 10% slower
    assert laid["n05"].verdict == "cleared" and "n09" not in laid


def test_a_slow_link_met_again_and_again_drains_neither_end() -> None:
    fab = Fabric(link={frozenset(("n01", "n02")): 0.5}, seed=5)
    for rnd, pairs in leaf_rounds(15):
        fab.measure(rnd, pairs)
        fab.measure(rnd, [("n01", "n02")])  # and again beside each round
    d = weigh(fab.rows(), HOSTS, SWITCHES, factor=0.9, fwer=0.05)
    assert d.of(DRAINED) == []
    assert d.nodes["n01"].slow + d.nodes["n02"].slow <= 2  # once a partner, whoever the link is blamed on


def test_few_draws_decide_nothing_and_a_healthy_fabric_drains_nobody() -> None:
    few = weigh(measured(Fabric(slow={"n03": 0.9}), 3), HOSTS, SWITCHES, factor=0.9, fwer=0.05)
    assert few.of(DRAINED) == [] and few.of(CLEARED) == []  # 3 fast rounds cannot rule out 25%
    for seed in range(3):
        d = weigh(measured(Fabric(seed=seed), 30), HOSTS, SWITCHES, factor=0.9, fwer=0.05)
        assert d.of(DRAINED) == [] and len(d.of(CLEARED)) >= 30


def test_rounds_pair_the_undecided_with_trusted_peers_of_their_leaf() -> None:
    d = weigh(measured(Fabric(slow={"n03": 0.5, "n04": 0.92}), 3), HOSTS, SWITCHES, 0.9, 0.05)
    assert d.nodes["n03"].decision == DRAINED
    met: Counter[frozenset] = Counter()
    plan = plan_rounds(d, HOSTS, SWITCHES, met, 4)
    assert len(plan) == 4
    for pairs in plan:
        ends = [h for p in pairs for h in p]
        assert len(ends) == len(set(ends)) == 30  # every node but the drained one (and its leaf's odd one)
        assert "n03" not in ends and all(SWITCHES[a] == SWITCHES[b] for a, b in pairs)
        partner = next(b if a == "n04" else a for a, b in pairs if "n04" in (a, b))
        assert not d.nodes[partner].leaning_slow
    assert len({next(p for p in pairs if "n04" in p) for pairs in plan}) == 4  # a new partner each round
    assert sum(met.values()) == sum(len(p) for p in plan)


# -- the loop ---------------------------------------------------------------------------------------
@dataclass
class Launches:
    """``Measure`` on the modelled fabric: a launch costs ``startup_s``, a round ``round_s`` of a
    fake clock; each round asked of the gate first, as the coordinator does."""

    fabric: Fabric
    startup_s: float = 5.0
    round_s: float = 1.0
    now: float = 0.0
    rounds: int = 0

    def clock(self) -> float:
        return self.now

    def __call__(self, phases, gate):  # noqa: ANN001, ANN204
        self.now += self.startup_s
        for phase in phases:
            name, rnd, pairs = phase

            class P:
                pass

            P.name = name
            if gate(P):
                self.fabric.measure(rnd, pairs)
                self.now += self.round_s
                self.rounds += 1
        gate.ended = self.now
        return Outcome(status="completed", startup_s=self.startup_s)


def run(fabric: Fabric, budget_s: float, quick: int = 3) -> tuple[object, Launches, Budget, list[str]]:
    measured(fabric, quick)
    launches = Launches(fabric)
    budget = Budget(budget_s, reserve_s=3.0, clock=launches.clock)
    said: list[str] = []
    setup = SequentialSetup(
        hosts=HOSTS, switches=SWITCHES, factor=0.9, fwer=0.05, read_rows=fabric.rows, budget=budget,
        first_round=quick + 1, phase_s=1.0, startup_s=5.0, echo=said.append,
    )
    return run_sequential(setup, launches), launches, budget, said


def test_stops_early_once_every_node_is_decided() -> None:
    seq, launches, budget, said = run(Fabric(slow={"n05": 0.8}, seed=2), budget_s=300.0)
    assert seq.stopped == "every node decided" and seq.decisions.undecided == []
    assert seq.decisions.of(DRAINED) == ["n05"]
    assert launches.rounds < 32 and budget.elapsed() < 60  # most of the 300 s left unspent
    assert seq.launches[0]["run"] == launches.rounds < seq.launches[0]["planned"]
    # progress a round, then the decision summary with its certainty
    assert any(line.startswith("# sequential round 2/") for line in said)
    assert "#   drained 1:" in said and any(line.startswith("#     n05: ") and "likelihood ratio" in line
                                            for line in said)
    assert any(line.startswith("#   cleared 31: each at least ") for line in said)


def test_spends_the_budget_while_nodes_are_undecided_and_never_overruns_it() -> None:
    # a healthy node is cleared of slowness now and then after 14 fast rounds (each weighs log 0.75
    # against the bar of log(0.02)): 3 quick rounds and the 8 that 16 s hold leave all undecided
    seq, launches, budget, said = run(Fabric(seed=4), budget_s=16.0)
    assert launches.rounds == 8  # 16 s less the report's 3 s and a 5 s start-up, 1 s a round
    assert budget.elapsed() <= budget.total_s - budget.reserve_s
    assert seq.stopped.startswith("budget") and len(seq.decisions.undecided) == 32
    assert seq.decisions.of(DRAINED) == []
    assert "#   undecided 32:" in said and "#     ... and 22 more (run.json's preflight.sequential)" in said
    assert seq.to_json()["nodes"]["n05"]["decision"] == UNDECIDED


def test_no_launch_when_the_budget_left_cannot_hold_one() -> None:
    seq, launches, budget, _ = run(Fabric(seed=6), budget_s=6.0)
    assert launches.rounds == 0 and launches.now == 0 and seq.stopped.startswith("budget: a launch needs")
