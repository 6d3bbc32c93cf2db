"""Preflight on a simulated fabric (``netbench simulate --preflight``): the real stages, coordinator and
report through the simulated launcher; the drain list against what was planted."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from rowfiles import rows_of

from netbench.cli import cli
from netbench.preflight import PreflightOptions
from netbench.run.options import PairOptions
from netbench.sim.fabric import FabricSpec, Fault
from netbench.sim.launcher import LaunchCosts
from netbench.sim.options import SimOptions
from netbench.sim.preflight import simulate_preflight
from netbench.sim.rails import RailFabric
from netbench.sim.setup import GroupSetup


def preflight(tmp_path, name, faults=(), seed=1, budget_s=120.0, **fabric):  # noqa: ANN001, ANN201
    spec = FabricSpec(**({"nodes": 16, "leaves": 2} | fabric))
    sim = SimOptions(spec, tuple(Fault.parse(f) for f in faults), seed=seed, out=str(tmp_path / name))
    return simulate_preflight(sim, PreflightOptions(budget_s=budget_s, html=False))


def rows(res):  # noqa: ANN001, ANN201 - a SimPreflight or a SimResult
    rundir = res.result.rundir if hasattr(res, "result") else res.rundir
    return rows_of(rundir.path)


def test_drains_exactly_the_planted_slow_node_after_confirming_it(tmp_path):
    res = preflight(tmp_path, "slow", ["node:node0005=0.5"])
    assert res.result.drain == ["node0005"]
    assert res.result.exit_code == 2
    assert res.result.info["retests"]["node0005"]["verdict"] == "confirmed"
    assert res.score.precision == 1.0 and res.score.recall == 1.0
    # the re-tests ran as a second launch of the real coordinator: rows of their own rounds
    retest_rounds = {r["round"] for r in rows(res) if r["pattern"] == "pair"} - {1, 2, 3}
    assert retest_rounds
    run = json.loads((res.result.rundir.path / "run.json").read_text())
    assert run["launcher"] == "simulated" and run["topology"]["node0001"] == "leaf01"
    truth = json.loads((res.result.rundir.path / "truth.json").read_text())
    assert truth["faults"][0]["observable"] and truth["score"]["recall"] == 1.0


def test_healthy_fabric_drains_nothing(tmp_path):
    for seed in (1, 2):
        res = preflight(tmp_path, f"ok{seed}", seed=seed, oversubscription=2.0)
        assert res.result.drain == [] and res.result.check == []
        assert res.result.exit_code == 0


def test_gpu_dropout_is_named_and_recorded_as_a_real_lost_rank(tmp_path):
    res = preflight(tmp_path, "gpu", ["gpu:node0009"])
    assert res.result.drain == ["node0009"]
    assert [f.rule for f in res.result.findings if f.subject == "node0009"] == ["host_failing"]
    failed = [r for r in rows(res) if r["status"] != "ok"]
    pairs = [r for r in failed if r["pattern"] == "pair"]
    assert pairs and all("node0009" in r["hosts"] for r in pairs)
    # the coordinator's own records: the lost rank first, then "host is down" for its later groups
    assert "lost: rank(s)" in pairs[0]["error"] and "exited with code 1" in pairs[0]["error"]
    assert all("node0009 is down" in r["error"] for r in pairs[1:])
    run = json.loads((res.result.rundir.path / "run.json").read_text())
    assert run["faults"][0]["host"] == "node0009"


def test_the_budget_runs_on_fabric_time(tmp_path):
    # inventory + one launch + the quick pass (3 rounds on each leaf, 1 across, the ring: ~0.4 s each
    # measuring, after each group's communicator set-up, sim.setup: 2.9 s for a pair of 8-GPU nodes,
    # 8.1 s for the 128 ranks of the ring) fit in 28 s of fabric time less the report's reserve (a
    # quarter of it); the re-test launch (5.5 s of rank start-up, then its rounds) does not fit
    # whole, so the budget stops it after its first round
    costs, setup = LaunchCosts(), GroupSetup()
    pair, ring = setup.seconds("nccl", 16, 2), setup.seconds("nccl", 128, 16)
    res = preflight(tmp_path, "tight", ["node:node0005=0.5"], budget_s=28.0)
    quick = res.result.info["quick_phase_s"]
    first = costs.inventory_s(16) + costs.launch_s(16) + sum(quick)
    assert first < 0.75 * 28.0 < first + costs.launch_s(16) + 2 * (pair + 0.4)
    # groups made ahead (collectives/ahead.py, 7 for NCCL across nodes): the first round waits for
    # its whole set-up, and the next phases' groups are made meanwhile, so the 3 rounds after it only
    # measure and the ring waits for what is left of its 8.1 s
    assert quick[0] == pytest.approx(pair + 0.4, abs=0.3)
    assert all(s < 0.8 for s in quick[1:4]), quick
    assert quick[4] == pytest.approx(ring - sum(quick[:4]) + 0.8, abs=0.6), quick
    escalation = res.result.info["escalations"][0]
    assert "budget" in escalation["skipped"] and escalation["phases_run"] < escalation["phases_planned"]
    assert res.fabric_s <= 28.0


def test_cli_prints_the_drain_list_and_the_score(tmp_path):
    out = tmp_path / "cli"
    r = CliRunner().invoke(
        cli,
        ["simulate", "--preflight", "--nodes", "16", "--fault", "gpu:node0003", "--out", str(out),
         "--seed", "2"],
    )
    assert r.exit_code == 2, r.output
    assert r.stdout.splitlines() == ["node0003"]
    assert "precision 1.00, recall 1.00" in r.stderr and "fabric time" in r.stderr
    assert (out / "hosts.txt").read_text().splitlines()[0] == "node0001"
    assert (out / "report.html").exists()


def test_rail_optimised_fabric_rails_share_nothing():
    spec = FabricSpec(nodes=8, leaves=2, rails=4, oversubscription=2.0, nic_GBps=400.0)
    fab = RailFabric.build(spec, [Fault.parse("nic:node0001/2=0.5"), Fault.parse("uplink:r3-leaf02=0.5")])
    h = fab.hosts
    assert fab.rail_switches("node0005") == ["r1-leaf02", "r2-leaf02", "r3-leaf02", "r4-leaf02"]
    assert fab.uplinks()["node0005"] == "leaf02"  # the report's hop classes: one unit view
    # a pair on one leaf: 4 rails of 100 each, NIC 2 of node0001 at half rate. NCCL splits the data
    # evenly over the rails and ends with the slowest (issue 46): 4 x 50, not 100 + 50 + 100 + 100
    assert fab.rates([(h[0], h[1])]).tolist() == pytest.approx([200.0])
    cross = [(h[0], h[4]), (h[1], h[5])]
    # rail 2: only node0001's flow is slowed; rail 3: its slow uplink (100) is shared by both flows;
    # rails 1 and 4 see neither fault
    assert fab.rail_rates(cross, 1).tolist() == pytest.approx([100.0, 100.0])
    assert fab.rail_rates(cross, 2).tolist() == pytest.approx([50.0, 100.0])
    assert fab.rail_rates(cross, 3).tolist() == pytest.approx([50.0, 50.0])
    assert fab.rates(cross).tolist() == pytest.approx([200.0, 200.0])


def test_one_nic_at_0_7_on_eight_rails_is_a_slow_node(tmp_path):
    """Issue 46 (3): with the rails' rates summed, NIC 5 of a node at 0.7 read as 0.96 of a healthy
    pair and the run PASSed; in lock-step every pair of the node runs at 0.7. The node confirmed,
    its rail-by-rail re-test names the NIC (mlx5_4, GPU 4's) beside it (tests/test_rail_retest.py)."""
    out = tmp_path / "r8"
    r = CliRunner().invoke(cli, ["simulate", "--nodes", "64", "--rails", "8", "--fault", "nic:node0020/5=0.7",
                                 "--out", str(out)])
    assert r.exit_code == 2, r.output
    findings = json.loads((out / "findings.json").read_text())["findings"]
    fails = [(f["rule"], f["subject"], f["evidence"].get("nic")) for f in findings if f["severity"] == "fail"]
    assert sorted(fails) == [("slow_node", "node0020", None), ("slow_rail", "node0020", "mlx5_4/1")]


def test_preflight_on_rails_drains_the_node_with_one_slow_nic(tmp_path):
    res = preflight(tmp_path, "rails", ["nic:node0011/3=0.1"], rails=4)
    assert res.result.drain == ["node0011"] and res.score.recall == 1.0


def test_gpu_dropout_in_a_simulated_sweep_is_recorded_as_the_coordinator_records_it(tmp_path):
    from netbench.reports.engine import analyze

    from netbench.sim.run import simulate

    res = simulate(SimOptions(FabricSpec(nodes=16, leaves=2), (Fault.parse("gpu:node0004"),),
                              pairs=PairOptions(pair_sizes=[1 << 30]), out=str(tmp_path / "sweep")))
    found = analyze(res.rundir.path)
    assert [f.subject for f in found if f.rule == "host_failing"] == ["node0004"]
    failed = [r for r in rows(res) if r["status"] != "ok"]
    assert failed[0]["pattern"] == "ring" and failed[0]["error"].startswith("lost: rank(s) [24, 25")
    assert len(failed) == 16 and all("node0004 is down" in r["error"] for r in failed[1:])
    assert res.truth["faults"][0]["observable"]
    assert json.loads((res.rundir.path / "run.json").read_text())["down_hosts"] == ["node0004"]


def test_a_node_behind_oversubscription_is_measured_against_its_own_leaf_and_drained(tmp_path):
    # 4:1 uplinks give a cross-leaf pair at most half a NIC, so node0001's half-rate NIC shows only
    # against its own leaf; the quick pass in hosts-file order paired it with node0014-16 (the other
    # leaf) and never saw it, the leaf-first quick pass pairs it with its leaf peers
    res = preflight(tmp_path, "hidden", ["node:node0001=0.5"], oversubscription=4.0)
    assert res.result.drain == ["node0001"] and res.score.recall == 1.0
    quick = [r["hosts"] for r in rows(res) if r["pattern"] == "pair" and r["round"] in (1, 2, 3)]
    run = json.loads((res.result.rundir.path / "run.json").read_text())
    assert all(run["topology"][a] == run["topology"][b] for a, b in quick)


def test_a_fault_too_small_to_measure_is_scored_as_unobservable(tmp_path):
    # a NIC at 95 %: no pair of it ever runs below 90 % of healthy, so no analysis could name it
    res = preflight(tmp_path, "hidden", ["node:node0001=0.95"], oversubscription=4.0)
    assert res.result.drain == []
    assert res.score.unobservable == ["node0001"] and res.score.recall == 0.0
    assert "never measured below 90% of healthy" in res.score.text()


def three_tier(tmp_path, name, faults=(), seed=1):  # noqa: ANN001, ANN201
    # 64 nodes, 8 leaves of 8, 2 pods; 2:1 at the leaf and the pod uplinks: a cross-pod pair under
    # load gets a quarter of a NIC, less than a NIC at half rate
    return preflight(tmp_path, name, faults, seed=seed, nodes=64, leaves=8, tiers=3, pods=2,
                     oversubscription=2.0, core_oversubscription=2.0, budget_s=300.0)


def test_oversubscribed_three_tier_fabric_drains_the_slow_node(tmp_path):
    res = three_tier(tmp_path, "slow", ["node:node0037=0.5"])
    assert res.result.drain == ["node0037"] and res.result.check == []
    assert res.result.info["retests"]["node0037"]["verdict"] == "confirmed"


def test_intermittent_node_is_drained_as_the_node_not_as_links(tmp_path):
    # seed 2: node0021 is slow in one quick-pass round only, so it first shows as one slow link
    # (node0020|node0021); re-run three times (issue 46: two slow re-runs confirm noise too) it is
    # fast in one, so the link is cleared; both ends are re-tested against known-good partners and
    # node0021 is slow with some of them only: intermittent, the node
    res = three_tier(tmp_path, "flaky", ["intermittent:node0021=0.5@0.5"], seed=2)
    assert res.result.drain == ["node0021"] and res.result.check == []
    retests = res.result.info["retests"]
    assert retests["node0020|node0021"]["verdict"] == "cleared"
    assert len(retests["node0020|node0021"]["ratios"]) == 3
    assert retests["node0020"]["verdict"] == "cleared"
    assert retests["node0021"]["verdict"] == "confirmed"
    # the escalation found it intermittent; the sequential stage drained it as slow now and then,
    # and its record, a count over every round, is the one the finding goes by
    assert retests["node0021"]["reason"].startswith("sequential test: slow now and then")
    link = [f for f in res.result.findings if f.subject == "node0020|node0021"]
    assert [f.severity for f in link] == ["info"] and "node node0021 is slow" in link[0].title


def test_sequential_rounds_catch_an_intermittent_node_the_quick_pass_missed(tmp_path):
    # seed 5: node0010, at half rate in 30% of the rounds, is fast in each of its own-leaf rounds of
    # the quick pass (behind 2:1 uplinks its cross-leaf pairs never show it): no suspect, no
    # escalation; the sequential rounds re-test every node across rounds until all are decided
    said: list[str] = []
    sim = SimOptions(FabricSpec(nodes=64, leaves=2, oversubscription=2.0),
                     (Fault.parse("intermittent:node0010=0.5@0.3"),), seed=5, out=str(tmp_path / "flaky"))
    res = simulate_preflight(sim, PreflightOptions(budget_s=120.0, html=False), said.append)
    assert res.result.drain == ["node0010"] and res.score.precision == 1.0
    assert "# suspects: none" in said and res.result.info["escalations"] == []
    retest = res.result.info["retests"]["node0010"]
    assert retest["verdict"] == "confirmed"
    assert retest["reason"].startswith("sequential test: slow now and then")
    seq = res.result.info["sequential"]
    assert seq["counts"] == {"drained": 1, "cleared": 63, "undecided": 0}
    assert seq["stopped"] == "every node decided" and res.fabric_s < 60.0  # half the budget left unspent
    assert seq["launches"][0]["run"] < seq["launches"][0]["planned"]
    # the decision summary: each class with its certainty
    assert "#   drained 1:" in said
    assert any(line.startswith("#     node0010: slow now and then: slow in ") and "likelihood ratio" in line
               for line in said)
    assert any(line.startswith("#   cleared 63: each at least ") for line in said)


def test_a_node_ten_percent_slow_is_drained_by_the_sequential_tests(tmp_path):
    # 2 noise sigmas a pair: the quick pass's 3 own-leaf partners name no suspect; rounds with known-
    # good partners of its leaf until its test decides (15 of them, 35 s of the 120 s budget)
    said: list[str] = []
    sim = SimOptions(FabricSpec(nodes=64, leaves=2, oversubscription=2.0),
                     (Fault.parse("node:node0040=0.9"),), seed=2, out=str(tmp_path / "ten"))
    res = simulate_preflight(sim, PreflightOptions(budget_s=120.0, html=False), said.append)
    assert "# suspects: none" in said
    assert res.result.drain == ["node0040"] and res.result.info["sequential"]["counts"]["drained"] == 1
    [finding] = [f for f in res.result.findings if f.subject == "node0040"]
    assert finding.severity == "fail" and "sequential test: " in finding.title


def test_oversubscribed_three_tier_slow_link_stays_a_link(tmp_path):
    # both ends of a confirmed slow link are re-tested as nodes, fine with known-good partners
    res = three_tier(tmp_path, "link", ["link:node0003,node0006=0.5"])
    assert res.result.drain == [] and res.result.check == ["node0003|node0006"]
    retests = res.result.info["retests"]
    assert retests["node0003"]["verdict"] == retests["node0006"]["verdict"] == "cleared"


def test_healthy_oversubscribed_three_tier_fabric_drains_nothing(tmp_path):
    for seed in (1, 2):
        res = three_tier(tmp_path, f"ok{seed}", seed=seed)
        assert res.result.drain == [] and res.result.check == []


@pytest.mark.parametrize(("nodes", "leaves", "named"), [(32, 4, "leaf02"), (16, 2, "leaf01|leaf02")])
def test_slow_uplink_is_named_and_none_of_its_nodes_drained(tmp_path, nodes, leaves, named):
    # the own-leaf rounds never cross an uplink; the cross-leaf rounds (each leaf against the others,
    # every host at once) make leaf02's uplink the common factor of its hosts' pairs. With only two
    # leaves the pairs cannot say whose uplink it is: both are named, as the candidates
    res = preflight(tmp_path, f"up{leaves}", ["uplink:leaf02=0.5"], nodes=nodes, leaves=leaves,
                    oversubscription=2.0)
    assert res.result.drain == [] and res.result.check == [named]
    assert [f.subject for f in res.result.findings if f.rule == "slow_switch"] == [named]
    run = json.loads((res.result.rundir.path / "run.json").read_text())
    crossed = {r["round"] for r in rows(res) if r["pattern"] == "pair"
               and run["topology"][r["hosts"][0]] != run["topology"][r["hosts"][1]]}
    # whole leaves against each other: 3 rounds for 4 leaves, 1 for two (any more would cross the
    # same two uplinks again)
    assert len(crossed) == (3 if leaves > 2 else 1)


def test_a_half_rate_node_among_six_is_drained(tmp_path):
    """Six nodes on two leaves, one at half rate: the first re-test launch confirms it; the second,
    for its slow links, once re-tested it again with no partner left and its 'not run' replaced the
    confirmation (WARN, nothing drained). Found on real test hosts (benchmarks/readme_demo.py)."""
    r = CliRunner().invoke(cli, ["simulate", "--preflight", "--nodes", "6", "--leaves", "2", "--fault",
                                 "node:node0005=0.5", "--seed", "1", "--out", str(tmp_path / "run")])
    assert r.exit_code == 2 and r.stdout.splitlines() == ["node0005"], r.output
    assert "re-test node0005: not_run" not in r.stderr


@pytest.mark.parametrize(("fault", "fail_on", "status"), [
    ("gpu:node0003", "never", 0),  # a node to drain: still drained, still printed
    # a link confirmed 60% slow: a failure (issue 47; was a warning), checked, never drained
    ("link:node0001,node0009=0.4", "fail", 2),
    ("link:node0001,node0009=0.4", "warn", 2),
])
def test_fail_on_moves_preflight_s_bar_and_keeps_the_drain_list(tmp_path, fault, fail_on, status):
    r = CliRunner().invoke(cli, ["simulate", "--preflight", "--nodes", "16", "--leaves", "2", "--fault",
                                 fault, "--seed", "2", "--fail-on", fail_on, "--out", str(tmp_path / "run")])
    assert r.exit_code == status, r.output
    assert r.stdout.splitlines() == (["node0003"] if fault.startswith("gpu") else [])
