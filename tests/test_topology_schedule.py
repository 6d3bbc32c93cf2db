"""The topology-aware pair schedule (collectives/pairs.topology_rounds) and how the plan builder
uses it: every pair exactly once, no host twice in a round, the load on every uplink bounded and
the same in every round for leaves of one size, few rounds; the load recorded per group."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from netbench.collectives.pairs import circle_rounds, cross_leaf_rounds, topology_rounds
from netbench.inventory.topology import hop_class, round_load

from netbench.agents.launchers import HostSlot
from netbench.common.errors import UsageError
from netbench.run.options import MeasureOptions
from netbench.run.planner import PlanRequest, build_plan


def fabric(sizes: list[int], pods: int = 0) -> tuple[list[str], dict[str, str]]:
    """Hosts h<leaf>_<i> under leaf<leaf>; with ``pods``, leaves spread over that many pods under core."""
    hosts, up = [], {}
    for leaf, n in enumerate(sizes):
        if pods:
            up[f"leaf{leaf}"] = f"pod{leaf % pods}"
            up[f"pod{leaf % pods}"] = "core"
        for i in range(n):
            hosts.append(f"h{leaf}_{i}")
            up[f"h{leaf}_{i}"] = f"leaf{leaf}"
    return hosts, up


def check_cover(hosts: list[str], rounds: list[list[tuple[str, str]]]) -> None:
    seen = [frozenset(p) for r in rounds for p in r]
    assert len(seen) == len(set(seen)), "a pair twice"
    assert set(seen) == {frozenset(p) for p in itertools.combinations(hosts, 2)}, "a pair missing"
    for r in rounds:
        members = [h for p in r for h in p]
        assert len(members) == len(set(members)), f"a host twice in {r}"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=6),
    st.one_of(st.none(), st.integers(min_value=1, max_value=5)),
    st.integers(min_value=0, max_value=2),
)
def test_every_pair_once_disjoint_and_bounded(sizes: list[int], cap: int | None, pods: int) -> None:
    hosts, up = fabric(sizes, pods)
    if len(hosts) < 2:
        return
    rounds = topology_rounds(hosts, up, cap)
    check_cover(hosts, rounds)
    for r in rounds:
        load = round_load(r, up)
        if cap is not None:
            assert max(load.values()) <= cap
        for (a, b), n in load.items():  # pairs within a leaf never load an uplink
            assert (n == 0) == (hop_class(a, b, up) == "leaf")


@pytest.mark.parametrize("leaves,per_leaf", [(2, 4), (4, 8), (6, 3), (3, 4), (5, 4), (2, 7)])
def test_equal_leaves_same_load_every_round_and_few_rounds(leaves: int, per_leaf: int) -> None:
    hosts, up = fabric([per_leaf] * leaves)
    rounds = topology_rounds(hosts, up)
    check_cover(hosts, rounds)
    cross = {n for r in rounds for (a, b), n in round_load(r, up).items() if up[a] != up[b]}
    assert cross == {per_leaf}, "every cross-leaf pair runs under the same uplink load"
    n = len(hosts)
    # the minimum is N-1 (N even); an odd number of leaves sits one leaf out per meeting
    assert len(rounds) <= (n - 1 if leaves % 2 == 0 else n) + (per_leaf % 2)


def test_circle_rounds_mix_loads_that_the_topology_schedule_evens_out() -> None:
    """Why the schedule exists: on 4 leaves of 4 the circle method puts 1 to 4 cross-leaf pairs
    through one uplink depending on the round; the topology schedule always 4 (the same rounds)."""
    hosts, up = fabric([4, 4, 4, 4])
    circle = circle_rounds(hosts)
    loads = {n for r in circle for (a, b), n in round_load(r, up).items() if up[a] != up[b]}
    assert len(loads) > 1
    topo = topology_rounds(hosts, up)
    assert len(topo) == len(circle) == 15


def test_three_tiers_cap_bounds_pod_uplinks_too() -> None:
    hosts, up = fabric([4, 4, 4, 4], pods=2)
    free = topology_rounds(hosts, up)
    assert max(n for r in free for n in round_load(r, up).values()) == 8  # two leaves through a pod uplink
    capped = topology_rounds(hosts, up, 4)
    check_cover(hosts, capped)
    assert max(n for r in capped for n in round_load(r, up).values()) == 4


@pytest.mark.parametrize(("sizes", "pods"), [([4, 4, 4, 4], 0), ([4, 4, 4, 4, 4, 4, 4, 4], 2), ([3, 3], 0)])
def test_cross_leaf_rounds_meet_several_leaves_then_pods_at_full_load(sizes: list[int], pods: int) -> None:
    """Preflight's cross-leaf stage: per tier, every host meets a host of another child of the same
    switch in each round (leaves within a pod, then pods), whole children at once, so each uplink of
    the tier carries its child's hosts; a leaf meets as many different leaves as the rounds allow."""
    hosts, up = fabric(sizes, pods)
    rounds = cross_leaf_rounds(hosts, up, 3)
    # 3 rounds for 4 leaves (of a pod); 1 for two leaves or two pods: whoever meets whom, their
    # pairs cross the same two uplinks
    assert len(rounds) == (3 if len(sizes) // max(pods, 1) == 4 else 1) + (1 if pods else 0)
    seen = [frozenset(p) for r in rounds for p in r]
    assert len(seen) == len(set(seen)), "a pair twice"
    for k, r in enumerate(rounds):
        members = [h for p in r for h in p]
        assert len(members) == len(set(members)) == len(hosts)  # disjoint, every host busy
        want = "spine" if k < len(rounds) - bool(pods) else "core"
        assert {hop_class(a, b, up) for a, b in r} == {want}
        loads = {n for (a, b), n in round_load(r, up).items()}
        assert loads == {sizes[0] * (1 if want == "spine" else len(sizes) // pods)}
    # within the first tier's rounds a leaf meets three different leaves (one, with only two)
    met = {up[b] for r in rounds for a, b in r if up[a] == "leaf0" and hop_class(a, b, up) == "spine"}
    met |= {up[a] for r in rounds for a, b in r if up[b] == "leaf0" and hop_class(a, b, up) == "spine"}
    assert len(met) == min(3, len(sizes) // max(pods, 1) - 1)


def test_unplaced_host_is_an_error() -> None:
    with pytest.raises(ValueError, match="h9"):
        topology_rounds(["h0_0", "h9"], {"h0_0": "leaf0"})


def plan(hosts: list[str], switches: dict[str, str] | None, **kw: object):  # noqa: ANN201 - a WorkerPlan
    slots = [HostSlot(host=h, nprocs=1, rank_base=i) for i, h in enumerate(hosts)]
    req = PlanRequest(
        measure=MeasureOptions(collectives=["all_reduce"]), patterns=["pairwise"], switches=switches, **kw
    )
    return build_plan(req, "r1", slots, "gloo")


def test_plan_uses_topology_when_known_and_records_each_pairs_load() -> None:
    hosts, up = fabric([3, 3])
    p = plan(hosts, up)
    groups = [g for ph in p.phases for g in ph.groups]
    for g in groups:
        assert g.load == (3 if up[g.hosts[0]] != up[g.hosts[1]] else 0)
    circle = plan(hosts, up, pair_schedule="circle")
    loads = {g.load for ph in circle.phases for g in ph.groups if up[g.hosts[0]] != up[g.hosts[1]]}
    assert len(loads) > 1  # the circle method on the same hosts: loads differ by round
    unknown = plan(hosts, None)
    assert all(g.load is None for ph in unknown.phases for g in ph.groups)
    assert [[tuple(g.hosts) for g in ph.groups] for ph in unknown.phases] == circle_rounds(hosts)


def test_plan_topology_schedule_needs_every_host_placed() -> None:
    hosts, up = fabric([2, 2])
    del up["h1_1"]
    with pytest.raises(UsageError, match="h1_1"):
        plan(hosts, up, pair_schedule="topology")
    auto = plan(hosts, up)  # auto falls back to the circle method
    assert [[tuple(g.hosts) for g in ph.groups] for ph in auto.phases] == circle_rounds(hosts)
    with pytest.raises(UsageError, match="pair schedule"):
        plan(hosts, up, pair_schedule="ring")


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    from netbench.cli import main

    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    return int(exc.value.code or 0), capsys.readouterr().err


def test_sweep_topology_schedule_without_a_topology_is_one_line_exit_2(capsys, tmp_path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("h1\nh2 switch=leaf1\n")
    code, err = run_main(capsys, "sweep", "--hosts", str(hosts), "--launcher", "local", "--pattern",
                         "pairwise", "--pair-schedule", "topology", "--out", str(tmp_path / "r"))
    assert code == 2 and "not placed: h1" in err and err.count("\n") == 1, err
    code, err = run_main(capsys, "sweep", "--hosts", str(hosts), "--confirm-budget", "-1")
    assert code == 2 and "--confirm-budget" in err


def test_sweep_broken_policy_is_one_line_exit_2_before_anything_runs(capsys, tmp_path) -> None:
    hosts, policy = tmp_path / "hosts.txt", tmp_path / "policy.toml"
    hosts.write_text("h1\nh2\n")
    policy.write_text("[thresholds]\nslow_node_factor = 7\n")
    code, err = run_main(capsys, "sweep", "--hosts", str(hosts), "--launcher", "local",
                         "--policy", str(policy), "--out", str(tmp_path / "r"))
    assert code == 2 and "slow_node_factor" in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()
