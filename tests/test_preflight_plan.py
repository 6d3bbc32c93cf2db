"""Preflight's decisions without test hosts: schedules, the budget gate, re-test verdicts, the drain
rule, and the could-not-run exits (3, one line) at the real CLI boundary."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from netbench.reports.analyses import Analyses, NodeVerdict, NodeVerdicts
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import run_rules
from netbench.reports.pairrows import MetPairs, PairRows
from netbench.reports.policy import Policy, Thresholds
from netbench.reports.rules import slow_node
from netbench.reports.verdict import drain_and_check

from netbench.cli import main
from netbench.common.findings import Finding
from netbench.confirm import PREFLIGHT_WORDS, RetestSetup, retest_suspects
from netbench.preflight import (
    Budget,
    PhaseGate,
    PreflightOptions,
    Retest,
    RetestEvidence,
    judge,
    plan_escalation,
    quick_rounds,
)
from netbench.run.options import SiteOptions


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["preflight", *args])
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- schedules ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 33])
def test_quick_rounds_give_every_host_enough_partners_in_disjoint_pairs(n: int) -> None:
    hosts = [f"n{i}" for i in range(n)]
    rounds = quick_rounds(hosts, 3)
    met: dict[str, set[str]] = {h: set() for h in hosts}
    for rnd in rounds:
        flat = [h for p in rnd for h in p]
        assert len(flat) == len(set(flat))  # a host is in at most one pair per round
        for a, b in rnd:
            assert b not in met[a]  # never the same pair twice
            met[a].add(b)
            met[b].add(a)
    assert all(len(m) >= min(3, n - 1) for m in met.values())
    assert len(rounds) <= (4 if n % 2 else 3)  # odd n: one host sits out each round, one round more


def test_quick_rounds_pair_each_node_with_its_own_leaf_first() -> None:
    # leaves of 5, 4, 3 and 2 hosts; l1-l3 in pod p1, l4 in pod p2. Behind an oversubscribed uplink
    # a capped NIC shows only against its leaf peers, so the rounds stay within leaves as far as
    # they go; an odd leaf's idle host pairs with the closest idle host (its pod before another)
    sizes = {"a": ("l1", 5), "b": ("l2", 4), "c": ("l3", 3), "d": ("l4", 2)}
    sw = {f"{k}{i}": leaf for k, (leaf, n) in sizes.items() for i in range(n)}
    hosts = list(sw)
    sw |= {"l1": "p1", "l2": "p1", "l3": "p1", "l4": "p2", "p1": "core", "p2": "core"}
    rounds = quick_rounds(hosts, 3, sw)
    met: dict[str, set[str]] = {h: set() for h in hosts}
    first = 0  # the own-leaf stage: the rounds until every host has 3 partners
    for rnd in rounds:
        flat = [h for p in rnd for h in p]
        assert len(flat) == len(set(flat))
        for a, b in rnd:
            assert b not in met[a]
            met[a].add(b)
            met[b].add(a)
        if not first and all(len(m) >= 3 for m in met.values()):
            first = rounds.index(rnd) + 1
            own = {h: set(m) for h, m in met.items()}
    assert 0 < first <= 4
    for h in hosts:  # leaf peers first: all the leaf has, less the rounds an odd leaf sits one out
        n = sum(sw[x] == sw[h] for x in hosts)
        peers = {p for p in own[h] if sw[p] == sw[h]}
        assert len(peers) >= min(3, n - 1) - n % 2, h
    # round 1: l1's and l3's sit-outs meet within pod p1, l4's pair has its leaf; later rounds pair
    # l4's nodes (their leaf used up) with whoever is idle
    assert [p for p in rounds[0] if sw[p[0]] != sw[p[1]]] in ([("a0", "c0")], [("c0", "a0")])
    # then the uplinks: p1's three leaves meet each other (3 rounds), then the two pods (3 rounds)
    cross = rounds[first:]
    assert 0 < len(cross) <= 6 and all(sw[a] != sw[b] for rnd in cross for a, b in rnd)
    assert all(any(sw[p] != sw[h] for p in met[h]) for h in hosts)  # every host crosses its uplink
    for leaf in ("l1", "l2", "l3"):  # each leaf of p1 meets both others (uneven leaves: not every host)
        assert {sw[p] for h in hosts if sw[h] == leaf for p in met[h]} >= {"l1", "l2", "l3"} - {leaf}
    # a host the topology does not place: the circle method, in hosts-file order
    assert quick_rounds(hosts, 3, {"a0": "l1"}) == quick_rounds(hosts, 3)


def test_escalation_pairs_suspects_with_good_partners_and_reruns_links() -> None:
    switches = {"s1": "A", "g1": "B", "g2": "A", "g3": "A", "g4": "B", "l1": "B", "l2": "B"}
    good = ["g1", "g2", "g3", "g4", "l1", "l2"]
    tested = MetPairs(list(switches), [("s1", "g2")])
    plan = plan_escalation(["s1"], [("l1", "l2")], good, tested, switches, phases=2)
    assert len(plan) == 2
    for phase in plan:
        flat = [h for p in phase for h in p]
        assert len(flat) == len(set(flat)) == 7 - (7 % 2)  # a perfect matching of everyone who can play
    partners = [next(b for a, b in phase if a == "s1") for phase in plan]
    assert partners == ["g3", "g2"]  # same switch first, a partner not met yet first
    assert ("l1", "l2") in plan[0] and ("l1", "l2") not in plan[1]  # the link re-run once
    assert not any("s1" in p and ("l1" in p or "l2" in p) for phase in plan for p in phase)


def test_links_sharing_a_node_are_rerun_in_later_phases() -> None:
    plan = plan_escalation([], [("a", "b"), ("a", "c")], ["a", "b", "c", "d"], MetPairs("abcd"), {}, phases=0)
    assert [("a", "b") in ph for ph in plan] == [True, False]
    assert [("a", "c") in ph for ph in plan] == [False, True]


# -- the budget --------------------------------------------------------------------------------------
def test_phase_gate_stops_when_the_measured_phase_time_no_longer_fits() -> None:
    clock = FakeClock()
    budget = Budget(60.0, reserve_s=3.0, clock=clock)
    gate = PhaseGate(budget, prior_s=1.0)

    class P:
        def __init__(self, name: str) -> None:
            self.name = name

    ran = []
    for i in range(20):
        if gate(P(f"p{i}")):
            ran.append(i)
            clock.now += 10.0  # every phase takes 10 s
    # 57 s usable: phases start at 0, 10, 20, 30, 40; at 50 s only 7 s are left for a 10 s phase
    assert ran == [0, 1, 2, 3, 4]
    assert gate.skipped == [f"p{i}" for i in range(5, 20)]
    assert gate.durations() == [10.0] * 4 and gate.estimate() == 10.0
    assert budget.elapsed() <= budget.total_s


def test_phase_gate_never_resumes_after_refusing() -> None:
    clock = FakeClock()
    gate = PhaseGate(Budget(10.0, reserve_s=0.0, clock=clock), prior_s=20.0)

    class P:
        name = "x"

    assert not gate(P())
    gate.prior_s = 0.1
    assert not gate(P())  # a budget never comes back


def test_escalation_is_skipped_when_startup_and_a_phase_do_not_fit() -> None:
    """No launch at all (a launch would fail the test), and the loop says why, in the log and as the
    reason the suspect has no verdict."""
    clock = FakeClock()
    budget = Budget(30.0, reserve_s=3.0, clock=clock)
    clock.now += 20.0  # 7 s left: start-up 5 s + a 4 s phase do not fit

    class Ctx:
        pair_model = None
        switches: dict[str, str] = {}

    def launch(phases: object, gate: object) -> None:
        raise AssertionError("nothing fits the budget: no launch")

    said: list[str] = []
    setup = RetestSetup(
        analyse=lambda: (Ctx(), [finding("slow_node", "warn", "node", "s", ["s"])]),
        read_rows=PairRows.empty,
        echo=said.append,
        live=["s", "a", "b", "c"],
        exclude=set(),
        tested=MetPairs(["s", "a", "b", "c"]),
        first_round=4,
        phase_s=4.0,
        startup_s=5.0,
        budget=budget,
        words=PREFLIGHT_WORDS,
        partners=2,
    )
    done = retest_suspects(setup, launch)
    assert done.retests == {} and len(done.launches) == 1
    info = done.launches[0]
    assert info["skipped"].startswith("budget") and info["phases_run"] == 0 and info["phases_planned"] == 2
    assert done.untested_reason == f"not re-tested: {info['skipped']}"
    assert said == ["# suspects: s", f"# escalation stopped: {info['skipped']}"]


# -- verdicts ----------------------------------------------------------------------------------------
def judge_of(rows: list[dict], *args: object, **kwargs: object) -> dict[str, Retest]:
    """``judge`` of rows written as the line reader gives them, read as the loop reads them."""
    return judge(PairRows.from_records(rows), *args, **kwargs)  # type: ignore[arg-type]


def row(a: str, b: str, rnd: int, bw: float, nbytes: int = 1 << 20) -> dict:
    return {
        "pattern": "pair",
        "status": "ok",
        "hosts": [a, b],
        "round": rnd,
        "bytes": nbytes,
        "busbw_GBps": bw,
    }


def test_judge_confirms_a_slow_node_and_clears_a_noisy_link() -> None:
    rows = [row("g1", "g2", 1, 10.0), row("g3", "g4", 1, 10.4)]  # quick pass
    rows += [
        row("s", "g1", 4, 1.0),
        row("g3", "g4", 4, 9.0),
        row("l1", "l2", 4, 8.0),
        row("s", "g2", 5, 1.2),
        row("g1", "g3", 5, 11.0),
        row("s", "g2", 5, 0.1, nbytes=1 << 10),
    ]  # small sizes are not judged
    out = judge_of(rows, range(4, 6), ["s"], [("l1", "l2")], {}, Thresholds(), noise_sigma=0.05)
    assert out["s"].verdict == "confirmed" and out["s"].ratios == {
        "g1": pytest.approx(1 / 9, rel=1e-2),
        "g2": pytest.approx(1.2 / 11, rel=1e-2),
    }
    assert out["l1|l2"].verdict == "cleared"  # 8/9 of the controls: not below slow_pair_factor 0.8


def test_judge_needs_slowness_beyond_noise() -> None:
    rows = [
        row("s", "g1", 4, 7.0),
        row("g2", "g3", 4, 10.0),
        row("s", "g2", 5, 7.5),
        row("g1", "g3", 5, 10.0),
    ]
    noisy = judge_of(rows, range(4, 6), ["s"], [], {}, Thresholds(), noise_sigma=0.2)
    assert noisy["s"].verdict == "cleared"  # 0.7-0.75x is within 4 sigma of 20% noise
    quiet = judge_of(rows, range(4, 6), ["s"], [], {}, Thresholds(), noise_sigma=0.01)
    assert quiet["s"].verdict == "confirmed"
    mixed = judge_of(
        [row("s", "g1", 4, 2.0), row("g2", "g3", 4, 10.0), row("s", "g2", 5, 10.0), row("g1", "g3", 5, 10.0)],
        range(4, 6),
        ["s"],
        [],
        {},
        Thresholds(),
        noise_sigma=0.01,
    )
    assert mixed["s"].verdict == "inconclusive"
    none = judge_of([], range(4, 6), ["s"], [], {}, Thresholds())
    assert none["s"].verdict == "not_run" and none["s"].reason


def finding(rule: str, sev: str, kind: str, subject: str, hosts: list[str]) -> Finding:
    return Finding(
        rule=rule, severity=sev, subject_kind=kind, subject=subject, title=f"{rule} {subject}", hosts=hosts
    )


def slow_nodes_with_retests(retests: dict[str, Retest], policy: Policy | None = None) -> list[Finding]:
    """The slow-node rule through the engine, fed hand-made verdicts (a, b, c slow) and re-tests."""
    verdicts = NodeVerdicts(
        slow=tuple(
            NodeVerdict(
                host=h,
                effect_ratio=0.7,
                robust_z=-9.0,
                partners=5,
                partners_slow=5,
                median_busbw_GBps=10.0,
                slowest_partners={"e": 9.0},
            )
            for h in ("a", "b", "c")
        ),
        hosts=("a", "b", "c", "d", "e", "f"),
        collective="all_reduce",
        sizes=(1 << 30,),
        class_median_busbw_GBps={"leaf": 14.0},
        z_threshold=4.5,
    )
    ctx = AnalysisContext.from_data(
        [],
        run={"command": "preflight"},
        policy=policy,
        analyses=Analyses(
            pair_model=None, nodes=verdicts, retests=RetestEvidence(retests, "not re-tested: budget")
        ),
    )
    return run_rules(ctx, [slow_node.RULE])


def test_only_confirmed_slow_nodes_keep_failing() -> None:
    retests = {
        "a": Retest("a", "node", "confirmed"),
        "b": Retest("b", "node", "cleared", reason="fine"),
        "d": Retest("d", "node", "confirmed", reason="r"),
    }
    out = slow_nodes_with_retests(retests)
    sev = {f.subject: f.severity for f in out}
    assert sev == {"a": "fail", "b": "info", "c": "warn", "d": "fail"}
    assert [f.severity for f in out] == sorted((f.severity for f in out), key=["fail", "warn", "info"].index)
    c = next(f for f in out if f.subject == "c")
    assert c.evidence["retest"]["reason"] == "not re-tested: budget" and "Unconfirmed" in c.title
    b = next(f for f in out if f.subject == "b")
    assert b.evidence["retest"]["verdict"] == "cleared"
    assert b.title.startswith("Not confirmed by re-test (fine)")
    assert drain_and_check(out, 10)[0] == ["a", "d"]
    # the advice moves on: a confirmed node is to repair, not to re-test again; an untested one is
    a, d = (next(f for f in out if f.subject == h) for h in "ad")
    assert a.title.startswith("Confirmed by re-test: Node a ") and "confirmed it on re-test" in a.action
    assert d.title == "Confirmed by re-test (r): node d is slow against known-good partners"
    assert d.action == a.action.replace("Drain a", "Drain d")
    assert "then re-test" not in a.action and "re-test c against known-good partners" in c.action


def test_retest_evidence_lowers_the_policy_severity_never_raises_it() -> None:
    """A policy that makes slow nodes warnings: confirmed stays a warning, cleared is info."""
    retests = {"a": Retest("a", "node", "confirmed"), "b": Retest("b", "node", "cleared")}
    out = slow_nodes_with_retests(retests, Policy(severity={"slow_node": "warn"}))
    assert {f.subject: f.severity for f in out} == {"a": "warn", "b": "info", "c": "warn"}


def test_drain_rule_names_nodes_and_sends_links_to_check() -> None:
    fs = [
        finding("version_below_minimum", "fail", "node", "n1", ["n1"]),
        finding("version_below_minimum", "fail", "component", "NIC fw 1", ["n2", "n3"]),  # 2 of 10
        finding("version_below_minimum", "fail", "component", "NCCL 2.1", [f"m{i}" for i in range(5)]),
        finding("slow_pair", "fail", "pair", "p|q", ["p", "q"]),
        finding("slow_pair", "warn", "pair", "r|s", ["r", "s"]),
        finding("slow_switch", "fail", "switch", "leaf3", ["t"]),
        finding("gpu_count_low", "warn", "node", "w", ["w"]),
    ]
    drain, check = drain_and_check(fs, 10)
    assert drain == ["n1", "n2", "n3"]  # half the fleet on an old NCCL is a fleet-wide fix, not a drain
    assert check == ["leaf3", "p|q", "r|s"]


# -- could not run: exit 3 and one line --------------------------------------------------------------
def one_error_line(err: str) -> str:
    """The error is one line, the last (progress lines starting with '#' may come before it)."""
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines and lines[-1].startswith("netbench: error: "), err
    assert all(x.startswith("# ") for x in lines[:-1]) and "Traceback" not in err, err
    return lines[-1]


def test_bad_input_exits_3_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("node01\nnode02 switch=leaf;reboot\n")
    js = tmp_path / "pf.json"
    drain = tmp_path / "drain.txt"
    drain.write_text("stale-node\n")
    code, out, err = cli(["--hosts", str(hosts), "--json", str(js), "--drain-list", str(drain)], capsys)
    assert code == 3 and out == ""
    assert f"{hosts}:2" in one_error_line(err)
    doc = json.loads(js.read_text())
    assert doc["verdict"] == "error" and doc["exit_code"] == 3 and f"{hosts}:2" in doc["error"]
    assert drain.read_text() == ""  # a stale drain list must not be acted on

    hosts.write_text("node01\nnode02\n")
    cases = [
        (["--budget", "soon"], "bad duration"),
        (["--budget", "0"], "'--budget': '0' is not a usable limit"),
        (["--no-such-option"], "no such option"),
        (["--policy", str(tmp_path / "nope.toml")], "policy file not found"),
        (["--baseline", "never-saved"], "no baseline or run directory"),
        (["--pair-sizes", "1Q"], "pair-sizes"),
        (["--collective", "bogus"], "unknown collective"),
    ]
    for extra, text in cases:
        code, out, err = cli(["--hosts", str(hosts), *extra], capsys)
        assert code == 3 and out == "", (extra, err)
        assert text in one_error_line(err).lower(), (extra, err)
    (tmp_path / "dup.txt").write_text("a gpus=0\nb\na gpus=1\n")
    code, _, err = cli(["--hosts", str(tmp_path / "dup.txt")], capsys)
    assert code == 3 and "appears twice" in one_error_line(err)


def test_nothing_reachable_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n    HostName 127.0.0.1\n    Port 1\n    ConnectTimeout 2\n")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("down1\ndown2\n")
    junit = tmp_path / "pf.xml"
    code, out, err = cli(
        [
            "--hosts",
            str(hosts),
            "--ssh-config",
            str(cfg),
            "--out",
            str(tmp_path / "run"),
            "--junit",
            str(junit),
        ],
        capsys,
    )
    assert code == 3 and out == ""
    assert "no host could be reached" in one_error_line(err)
    assert 'failures="1"' in junit.read_text()
    inv = [json.loads(x) for x in (tmp_path / "run" / "inventory.jsonl").read_text().splitlines()]
    assert {n["status"] for n in inv} == {"unreachable"}


def test_options_are_validated() -> None:
    with pytest.raises(Exception, match="rounds"):
        PreflightOptions(SiteOptions(hosts_file="h"), rounds=0)
    assert math.isclose(Budget(8.0).reserve_s, 2.0)  # a small budget keeps back at most a quarter


@pytest.mark.parametrize("stage", ["inventory", "quick pass", "escalation", "report"])
def test_a_stop_in_the_report_stage_keeps_the_run_completed(stage: str) -> None:
    """run.json after a SIGTERM: every measurement is in once the report stage has begun, so the run
    stays completed there (``netbench report`` judges it); before it, the run is interrupted."""
    from netbench.common.interrupts import Interrupted
    from netbench.preflight.stages import SoFar

    fields = SoFar(stage, started="now").run_fields(Interrupted("SIGTERM"), ended="later")
    assert fields["status"] == ("completed" if stage == "report" else "interrupted")
    assert fields["stopped_in"] == stage and fields["signal"] == "SIGTERM"
    assert fields["verdict"] == "interrupted"  # the preflight gives none
    assert fields["error"].startswith(f"interrupted by SIGTERM during the {stage}")
