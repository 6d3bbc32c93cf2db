"""Each host's part of the plan: what an agent (or a rank without one) fetches from the run's store.

A host's part holds every phase (so ranks pass the phase gate ``go/N`` of phases they have no group
in) and exactly the groups that hold the host's ranks; every host's parts together are the plan's
groups; and through a real store, every host of a multi-host plan fetching its part reads at most
twice the plan in all (the whole plan per rank was ranks x plan)."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from pathlib import Path
from typing import Any

import pytest
from netbench.collectives.plan import GroupSpec, PairGroups, WorkerPlan

from netbench.agents.launchers import (
    HostSlot,
    fetch_host_plan,
    host_plan_key,
    open_server,
    publish_plan,
    secured,
)
from netbench.run.options import MeasureOptions
from netbench.run.planner import PlanRequest, build_plan
from netbench.sim.fabric import Fabric, FabricSpec

WAIT = _dt.timedelta(seconds=30)


def _plan(nodes: int, nprocs: int, patterns: list[str], leaves: int = 3) -> WorkerPlan:
    fab = Fabric.build(FabricSpec(nodes=nodes, leaves=leaves))
    slots = [HostSlot(host=h, nprocs=nprocs, rank_base=nprocs * i) for i, h in enumerate(fab.hosts)]
    req = PlanRequest(measure=MeasureOptions(collectives=["all_reduce"], min_bytes=1024, max_bytes=4096),
                      patterns=patterns, switches=fab.uplinks(), pair_sizes=[1 << 20])
    if "rail" in patterns:
        req = dataclasses.replace(req, rail_ifaces={h: [f"ib{k}" for k in range(nprocs)] for h in fab.hosts})
    return build_plan(req, "run-parts", slots, "gloo")


def _groups(groups: Any) -> list[dict[str, Any]]:
    return [dataclasses.asdict(g) for g in groups]


def _phases(plan: WorkerPlan) -> list[tuple[int, str, dict[str, Any]]]:
    return [(p.index, p.name, dataclasses.asdict(p.spec)) for p in plan.phases]


def _fields(plan: WorkerPlan) -> dict[str, Any]:
    skip = ("phases", "rail_ifaces")
    return {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.name not in skip}


@pytest.mark.parametrize("patterns", [["ring", "pairwise", "intra"], ["world", "rail"]])
def test_a_host_gets_every_phase_and_exactly_its_own_groups(patterns: list[str]) -> None:
    plan = _plan(9, 2, patterns)  # odd: a host sits out each pairwise round, yet knows the phase
    parts = plan.parts()
    own = dict(parts.own())
    assert list(own) == sorted(own, key=plan.rank_hosts.index)  # every host of the plan has a part
    for host, text in own.items():
        mine = WorkerPlan.from_parts(parts.common, [text])
        assert _fields(mine) == _fields(plan) and _phases(mine) == _phases(plan)
        for got, want in zip(mine.phases, plan.phases, strict=True):
            assert _groups(got.groups) == [g for g in _groups(want.groups) if host in g["hosts"]]
        ranks = [r for r, h in enumerate(plan.rank_hosts) if h == host]
        for r in ranks:  # its own ranks' rail interfaces, as the whole plan has them
            assert (mine.rail_ifaces or [None] * plan.world_size)[r] == (plan.rail_ifaces or [None] * 99)[r]
    idle = [p for p in WorkerPlan.from_parts(parts.common, [own[plan.rank_hosts[0]]]).phases if not p.groups]
    assert idle or "pairwise" not in patterns  # the round it sits out: a phase without its groups


def test_a_pairwise_round_costs_a_host_its_partners_position_not_the_groups() -> None:
    """A pairwise round's groups go as partners' positions: a host's part is a small share of its
    groups as GroupSpec JSON, and far below the whole plan."""
    plan = _plan(64, 8, ["ring", "pairwise"], leaves=4)
    parts = plan.parts()
    whole = len(plan.to_json())
    for host, text in parts.own():
        as_json = sum(len(json.dumps(dataclasses.asdict(g))) for p in plan.phases for g in p.groups
                      if host in g.hosts)
        assert len(text) < as_json / 10
        assert len(parts.common) + len(text) < whole / 16


def test_every_hosts_part_together_is_the_whole_plan() -> None:
    """What the simulator's driver reads (every host's part): the plan's groups, pairwise rounds as
    ``PairGroups`` again, the same groups in each phase."""
    plan = _plan(10, 3, ["ring", "pairwise", "intra"])
    parts = plan.parts()
    merged = WorkerPlan.from_parts(parts.common, [t for _, t in parts.own()])
    assert _fields(merged) == _fields(plan) and _phases(merged) == _phases(plan)
    for got, want in zip(merged.phases, plan.phases, strict=True):
        assert isinstance(got.groups, PairGroups) == isinstance(want.groups, PairGroups)
        key = lambda g: g["id"]  # noqa: E731 - the parts give pairs in host order, the plan in the schedule's
        assert sorted(_groups(got.groups), key=key) == sorted(_groups(want.groups), key=key)


def test_groups_that_do_not_follow_from_their_hosts_keep_their_ranks() -> None:
    """Any group survives the trip (ranks not every rank of its hosts, hosts out of order, a host
    without ranks in the plan): only what follows from the hosts is left out."""
    odd = GroupSpec(id="odd", pattern="world", ranks=[3, 0], hosts=["b", "a"], round=2, load=0)
    plan = _plan(4, 2, ["ring"])
    plan.phases[0].groups = [odd, *plan.phases[0].groups]
    parts = plan.parts()
    own = dict(parts.own())
    mine = WorkerPlan.from_parts(parts.common, [own["a"]])
    assert mine.phases[0].groups[0] == odd
    assert [g.id for g in WorkerPlan.from_parts(parts.common, [own["b"]]).phases[0].groups] == ["odd"]


class CountingStore:
    """The run's store as a client sees it, counting every byte a read brings back."""

    def __init__(self, store: Any) -> None:
        self.store, self.read = store, 0

    def get(self, key: str) -> bytes:
        value = self.store.get(key)
        self.read += len(value)
        return value

    def wait(self, keys: list[str], timeout: Any) -> None:
        self.store.wait(keys, timeout)


def test_through_a_real_store_each_host_reads_its_part_and_all_hosts_at_most_twice_the_plan() -> None:
    """The coordinator's publish, then one client per host (what each agent does once for its
    ranks): each gets exactly its host's groups, and the store serves at most 2x the plan in all."""
    import torch.distributed as dist

    from netbench.agents.launchers import new_secret

    plan = _plan(48, 8, ["ring", "pairwise", "intra"], leaves=4)
    whole = len(plan.to_json().encode())
    raw, sock = open_server("127.0.0.1")
    try:
        secret = new_secret()
        publish_plan(secured(raw, secret), plan)
        client = dist.TCPStore("127.0.0.1", sock.getsockname()[1], is_master=False, timeout=WAIT)
        total, most = 0, 0
        for host in dict.fromkeys(plan.rank_hosts):
            counted = CountingStore(secured(client, secret))
            mine = fetch_host_plan(counted, host, WAIT).plan()
            total, most = total + counted.read, max(most, counted.read)
            assert _phases(mine) == _phases(plan)
            for got, want in zip(mine.phases, plan.phases, strict=True):
                assert {g.id for g in got.groups} == {g.id for g in want.groups if host in g.hosts}
        assert not secured(client, "another-run").check([host_plan_key(plan.rank_hosts[0])])
    finally:
        sock.close()
    assert total <= 2 * whole  # the whole plan per rank: 384 x whole
    assert most <= whole / 8


def test_ranks_of_several_hosts_run_their_parts_through_real_agents(tmp_path: Path) -> None:
    """Three hosts' agents on this machine (the local launcher), ring and pairwise: each agent
    fetches its host's part and hands it to its rank; every group the plan has is measured, and a
    host sitting out a round passes its phase gate."""
    from netbench.common.rundir import RunDir
    from netbench.run.execute import RunSettings, execute
    from netbench.sites.local.launcher import LocalLauncher

    slots = [HostSlot(host=f"h{i}", nprocs=1, rank_base=i) for i in range(3)]
    req = PlanRequest(measure=MeasureOptions(collectives=["all_reduce"], min_bytes=1024, max_bytes=1024,
                                           iters=2, warmup=0), patterns=["ring", "pairwise"])
    rundir = RunDir.create(tmp_path / "run")
    plan = build_plan(req, rundir.run_id, slots, "gloo")
    out = execute(plan, slots, LocalLauncher(), rundir, RunSettings("local"), lambda _: None)
    assert out.status == "completed" and not out.faults
    rows = list(rundir.read_rows())
    assert all(r["status"] == "ok" for r in rows)
    assert {r["group"] for r in rows} == {g.id for p in plan.phases for g in p.groups}


def test_a_rank_whose_agent_found_no_plan_exits_and_says_so() -> None:
    """The agent closes a rank's stdin after the secret when it could not fetch the plan: the rank
    ends with code 2 and a reason (the coordinator then names the host), it does not wait forever."""
    import subprocess
    import sys

    raw, sock = open_server("127.0.0.1")
    try:
        cmd = [sys.executable, "-m", "netbench.agents.worker", "rank", "--store-addr", "127.0.0.1",
               "--store-port", str(sock.getsockname()[1]), "--rank", "0", "--host", "h0"]
        done = subprocess.run(cmd, input=b"0123456789abcdef\n", capture_output=True, timeout=120)
    finally:
        sock.close()
    assert done.returncode == 2
    assert b"no plan on stdin" in done.stderr and not done.stdout
