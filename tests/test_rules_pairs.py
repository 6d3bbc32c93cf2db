"""Pair-model rules on synthetic fleets with planted faults: slow pair, slow node, cross-switch."""

from __future__ import annotations

import pytest
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import run_rules
from netbench.reports.policy import Policy, Thresholds
from netbench.reports.rules import cross_switch, slow_node, slow_pair
from synthetic import host_names, make_fleet


def ctx_of(fleet, **kw) -> AnalysisContext:
    return AnalysisContext.from_data(fleet.rows, fleet.inventory, fleet.env, fleet.run, **kw)


@pytest.mark.parametrize(("nodes", "leaves", "sizes", "seed"), [
    (32, 4, 3, 0), (32, 4, 3, 1), (32, 4, 3, 2), (12, 1, 3, 3), (96, 3, 1, 4)])
def test_healthy_fleet_with_noise_has_no_warning_or_failure(nodes, leaves, sizes, seed):
    pair_sizes = (64 << 20, 256 << 20, 1 << 30)[-sizes:]
    fleet = make_fleet(nodes, leaves, pair_sizes=pair_sizes, noise=0.05, seed=seed)
    findings = run_rules(ctx_of(fleet))
    assert [f for f in findings if f.severity != "info"] == []


def test_slow_node_is_a_node_not_its_links():
    hosts = host_names(24)
    fleet = make_fleet(24, 2, slow_nodes={hosts[5]: 0.8}, noise=0.05, seed=3)
    ctx = ctx_of(fleet)
    nodes = slow_node.check(ctx)
    assert [f.subject for f in nodes] == [hosts[5]]
    f = nodes[0]
    assert f.severity == "fail" and f.subject_kind == "node" and f.hosts == [hosts[5]]
    assert 0.75 < f.evidence["node_effect_ratio"] < 0.85
    assert f.evidence["partners"] == 23 and f.evidence["partners_slow"] >= 20
    assert f.evidence["sizes_bytes"] == sorted(f.evidence["sizes_bytes"]) and f.evidence["sizes_bytes"]
    # its 23 pairs are explained by the node: none is reported as a bad link
    assert slow_pair.check(ctx) == []


@pytest.mark.parametrize(("nodes", "noise", "factor", "seed", "suspect"), [
    (48, 0.12, 0.93, 0, True),  # one leaf of 48: z -3.9, past the band's floor of 3
    (64, 0.16, 0.93, 2, True),  # z -3.8
    (24, 0.08, 0.94, 0, False),  # one leaf of 24: z -3.9, but 24 effects' spread is too uncertain
    (24, 0.08, 0.94, 3, False),  # z -3.9
])
def test_a_node_short_of_the_bar_is_a_suspect_only_among_many_nodes(nodes, noise, factor, seed, suspect):
    """A node 5-6% slow at z between -4 (mad_k, the warning's floor) and -3: "suspect, re-test" (info)
    in a hop class of 32 judged nodes or more, nothing among fewer (the band keeps mad_k there)."""
    hosts = host_names(nodes)
    fleet = make_fleet(nodes, 1, slow_nodes={hosts[5]: factor}, noise=noise, seed=seed)
    found = [f for f in slow_node.check(ctx_of(fleet)) if f.subject == hosts[5]]
    if suspect:
        assert [f.severity for f in found] == ["info"] and found[0].title.startswith("Suspect, re-test")
        assert -4 < found[0].evidence["robust_z"] < -3 and found[0].evidence["node_effect_ratio"] <= 0.95
    else:
        assert found == []
    assert [f for f in slow_node.check(ctx_of(fleet)) if f.severity != "info"] == []


def test_slow_link_is_a_link_not_its_nodes():
    hosts = host_names(24)
    a, b = hosts[2], hosts[17]  # different leaves: judged against spine pairs
    fleet = make_fleet(24, 2, slow_links={(a, b): 0.7}, noise=0.05, seed=4)
    ctx = ctx_of(fleet)
    pairs = slow_pair.check(ctx)
    assert [f.subject for f in pairs] == [f"{a}|{b}"]
    ev = pairs[0].evidence
    assert ev["hop_class"] == "spine" and ev["switches"] == ["leaf01", "leaf02"]
    assert ev["class_pairs_compared"] == 12 * 12
    assert 0.6 < ev["ratio_to_expected"] < 0.8
    assert all(0.9 < v < 1.1 for v in ev["node_effect"].values())
    assert slow_node.check(ctx) == []


def test_pair_judged_against_its_own_hop_class():
    # cross-spine pairs are 40% slower by design (oversubscription): none of them is a slow pair
    fleet = make_fleet(16, 2, spine_factor=0.6, noise=0.03, seed=5)
    assert slow_pair.check(ctx_of(fleet)) == []
    m = ctx_of(fleet).pair_model
    assert set(m.class_level) == {"leaf", "spine"}
    assert 0.55 < m.class_ratio("spine", "leaf") < 0.65


def test_thresholds_come_from_policy():
    hosts = host_names(16)
    fleet = make_fleet(16, 2, slow_nodes={hosts[0]: 0.85}, noise=0.02, seed=6)
    assert [f.subject for f in slow_node.check(ctx_of(fleet))] == [hosts[0]]
    strict = Policy(thresholds=Thresholds(warn_floor=0.2, fail_floor=0.3))
    assert slow_node.check(ctx_of(fleet, policy=strict)) == []
    lenient = Policy(thresholds=Thresholds(warn_floor=0.05, fail_floor=0.2))  # 15% is a warning only
    assert [f.severity for f in slow_node.check(ctx_of(fleet, policy=lenient))] == ["warn"]


def test_slow_switch_when_most_of_a_leaf_is_slow():
    hosts = host_names(32)
    leaf4 = hosts[24:32]
    fleet = make_fleet(32, 4, slow_nodes={h: 0.7 for h in leaf4[:6]}, noise=0.03, seed=7)
    found = slow_node.check(ctx_of(fleet))
    switch = [f for f in found if f.rule == "slow_switch"]
    assert [f.subject for f in switch] == ["leaf04"]
    assert sorted(switch[0].hosts) == sorted(leaf4[:6])


def test_too_few_nodes_judges_nothing():
    fleet = make_fleet(3, 1, slow_nodes={"gpu001": 0.5}, seed=8)
    ctx = ctx_of(fleet)
    assert slow_node.check(ctx) == []


def test_interleaved_ring_order_is_flagged_with_a_better_order():
    hosts = host_names(16)
    interleaved = [h for pair in zip(hosts[:8], hosts[8:], strict=True) for h in pair]
    fleet = make_fleet(16, 2, ring_order=interleaved, seed=9)
    found = [f for f in cross_switch.check(ctx_of(fleet)) if f.rule == "cross_switch_order"]
    assert len(found) == 1
    ev = found[0].evidence
    assert ev["crossings"] == 16 and ev["needed"] == 2
    better = ev["suggested_order"]
    assert sorted(better) == sorted(hosts)
    assert [fleet.switches[h] for h in better] == sorted(fleet.switches[h] for h in better)


def test_ring_order_grouped_by_leaf_is_not_flagged():
    fleet = make_fleet(16, 2, seed=10)
    assert [f for f in cross_switch.check(ctx_of(fleet)) if f.rule == "cross_switch_order"] == []


def test_cross_spine_penalty_measured_and_warned_when_beyond_policy():
    fleet = make_fleet(16, 2, spine_factor=0.4, noise=0.02, seed=11)
    pen = [f for f in cross_switch.check(ctx_of(fleet)) if f.rule == "cross_spine_penalty"]
    assert len(pen) == 1 and pen[0].severity == "warn"
    assert 0.35 < pen[0].evidence["ratio_spine_to_leaf"] < 0.45
    mild = make_fleet(16, 2, spine_factor=0.9, noise=0.02, seed=11)
    pen = [f for f in cross_switch.check(ctx_of(mild)) if f.rule == "cross_spine_penalty"]
    assert pen[0].severity == "info" and 0.85 < pen[0].evidence["ratio_spine_to_leaf"] < 0.95
    assert pen[0].title.endswith(": about 1.11:1 oversubscription under this load"), pen[0].title
    flat = make_fleet(16, 2, spine_factor=1.0, noise=0.02, seed=11)  # a non-blocking fabric
    pen = [f for f in cross_switch.check(ctx_of(flat)) if f.rule == "cross_spine_penalty"]
    assert pen[0].title.endswith(": no oversubscription shows under this load"), pen[0].title  # not 0.98:1
    one_leaf = make_fleet(8, 1, seed=11)
    assert cross_switch.check(ctx_of(one_leaf)) == []


def test_topology_file_overrides_labels(tmp_path):
    from netbench.inventory.topology import parse_topology

    fleet = make_fleet(8, 1, spine_factor=0.5, seed=12)
    # the synthetic labels say one leaf; a Slurm topology.conf says two
    topo = parse_topology(
        "SwitchName=s0 Switches=a,b\nSwitchName=a Nodes=gpu[001-004]\nSwitchName=b Nodes=gpu[005-008]\n"
    ).uplinks()
    ctx = ctx_of(fleet, topology=topo)
    assert ctx.hop_class("gpu001", "gpu004") == "leaf" and ctx.hop_class("gpu001", "gpu005") == "spine"


@pytest.mark.parametrize("faults,named", [((), None), (("node:node0003=0.3",), "node0003")])
def test_a_ring_far_below_the_pairs_gets_a_comment(tmp_path, faults, named):
    """Issue 30: a ring far below its pairs said nothing. A ring runs at its slowest hop: a node
    capped at 0.3 drags it under half the pairs' median, and the comment names that node; a healthy
    fabric's ring is as fast as its pairs and gets none."""
    from netbench.reports.engine import analyze

    from netbench.sim.fabric import FabricSpec, Fault
    from netbench.sim.options import SimOptions
    from netbench.sim.run import simulate

    spec = FabricSpec(nodes=16, leaves=2)
    simulate(SimOptions(spec, tuple(Fault.parse(f) for f in faults), seed=5, out=str(tmp_path / "run")))
    ring = [f for f in analyze(tmp_path / "run") if f.rule == "ring_below_pairs"]
    if named is None:
        assert ring == []
        return
    (f,) = ring
    assert f.severity == "info" and f.hosts == [named] and "slow node node0003 explain it" in f.title, f.title
    assert f.evidence["ring_busbw_GBps"] < 0.5 * f.evidence["class_median_busbw_GBps"]
