"""What lets the simulator (and the plan builder) work at 4,096 nodes without changing what they write:
pair groups kept as host positions and read as ``GroupSpec``s, plan.json streamed in pieces, rows and
plan groups spelt column by column (``netbench.common.jsontext``) exactly as ``json.dumps`` spells
them, and rail groups measured on their own rail."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from netbench.collectives.plan import PairGroups, WorkerPlan
from netbench.collectives.planfile import plan_file_chunks, read_plan

from netbench.agents.launchers import HostSlot
from netbench.cli import cli
from netbench.common.jsontext import number_texts
from netbench.common.rows import ResultRow
from netbench.common.rundir import PLAN_SCHEMA, RunDir
from netbench.run.options import MeasureOptions, PairOptions, from_command_line
from netbench.run.planner import PairRound, PlanRequest, build_plan
from netbench.sim.fabric import Fabric, FabricSpec, Fault
from netbench.sim.options import SimOptions
from netbench.sim.rails import build_fabric
from netbench.sim.run import _flows, _measure, _rates, simulate


def plan_of(nodes: int, leaves: int, patterns: list[str], switches: bool = True, **kw: object) -> WorkerPlan:
    fab = Fabric.build(FabricSpec(nodes=nodes, leaves=leaves))
    up = fab.uplinks()
    if switches:
        del up[fab.hosts[-1]]  # one host the topology does not place: its pairs' load is None
    slots = [HostSlot(host=h, nprocs=2, rank_base=2 * i) for i, h in enumerate(fab.hosts)]
    req = PlanRequest(
        measure=MeasureOptions(collectives=["all_reduce"], max_bytes=1 << 20),
        patterns=patterns,
        switches=up if switches else None,
        **kw,  # type: ignore[arg-type]
    )
    return build_plan(req, "r1", slots, "nccl")


def as_lists(plan: WorkerPlan) -> dict:
    """The plan as ``dataclasses.asdict`` gives it once every phase's groups are a plain list."""
    listed = dataclasses.replace(
        plan, phases=[dataclasses.replace(p, groups=list(p.groups)) for p in plan.phases]
    )
    return dataclasses.asdict(listed)


@pytest.mark.parametrize("switches", [True, False])
def test_streamed_plan_json_has_the_plans_content_and_reads_back(tmp_path, switches):
    plan = plan_of(12, 3, ["world", "ring", "pairwise", "rail", "intra"], switches)
    assert any(isinstance(p.groups, PairGroups) for p in plan.phases)
    loads = {g.load for p in plan.phases for g in p.groups if g.pattern == "pair"}
    assert (loads >= {0, None} and len(loads) > 2) if switches else loads == {None}
    rundir = RunDir.create(str(tmp_path / "run"))
    rundir.write_plan(plan_file_chunks(plan))  # compact (issue 48): the rounds as host positions
    text = (rundir.path / "plan.json").read_text()
    assert json.loads(text)["schema"] == PLAN_SCHEMA
    assert as_lists(read_plan(text)) == as_lists(plan)
    # what ranks get through the store: the same plan, each pair group the one the plan builder made
    back = WorkerPlan.from_json(plan.to_json())
    assert dataclasses.asdict(back) == as_lists(plan)


def test_plan_json_comes_in_pieces_a_round_at_most():
    plan = plan_of(16, 2, ["pairwise"])
    chunks = list(plan_file_chunks(plan))
    text = "".join(chunks)
    assert len(plan.phases) == 15 and len(chunks) > 15 and all(c.count('"index":') <= 1 for c in chunks)
    # a round a line, its pairs as positions in the host table, never a group record each
    assert sum('"pairs":"' in line for line in text.splitlines()) == 15
    assert '"pair:' not in text


def test_explicit_rounds_and_batches_make_the_same_groups_as_listed_pairs():
    hosts = [f"node{i:04d}" for i in range(1, 7)]
    plan = plan_of(6, 2, ["pairwise"], pair_rounds=[PairRound("re-test 1/1", 1, [(hosts[4], hosts[0])])])
    assert [(g.id, g.hosts, g.ranks) for g in plan.phases[0].groups] == [
        ("pair:node0001|node0005", [hosts[4], hosts[0]], [8, 9, 0, 1])
    ]
    batched = plan_of(6, 2, ["pairwise"], pair_batch=2)
    assert [len(p.groups) for p in batched.phases] == [2, 1] * 5 and batched.phases[0].groups[-1].round == 1


FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=1e-4, max_value=1e9),
    st.integers(min_value=0, max_value=10**12).map(lambda k: k / 1000),
    st.integers(min_value=-(10**9), max_value=10**9).map(float),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(FLOATS, min_size=1, max_size=40))
def test_numbers_are_spelt_as_json_dumps_spells_them(values):
    v = np.array(values, dtype=np.float64)
    assert number_texts(v).to_pylist() == [json.dumps(x) for x in values]


def test_extreme_floats_and_integers():
    odd = [0.0, -0.0, 5.0, -5.0, 1e-5, 1e9, 999999999.999, 1e16, 2.0**60, 5e-324, 1.7976931348623157e308, 0.1]
    assert number_texts(np.array(odd)).to_pylist() == [json.dumps(x) for x in odd]
    ints = np.array([0, -3, 2**40])
    assert number_texts(ints).to_pylist() == ["0", "-3", str(2**40)]


def sim(tmp_path, name, faults=(), **kw):  # noqa: ANN001, ANN201
    spec = FabricSpec(**({"nodes": 16, "leaves": 2, "oversubscription": 2.0} | kw.pop("fabric", {})))
    faults = tuple(Fault.parse(f) for f in faults)
    opts = from_command_line(SimOptions, {"fabric": spec, "faults": faults, "out": str(tmp_path / name),
                                          **kw})
    return simulate(opts)


def test_simulated_rows_are_result_rows_serialized(tmp_path):
    res = sim(tmp_path, "rows", ("gpu:node0005", "node:node0002=0.7"), pair_sizes=(1 << 20, 1 << 30),
              fabric={"rails": 2}, patterns=("ring", "pairwise", "rail"))
    read = res.rundir.load_rows()  # results.parquet, every row checked against the contract
    assert len(read.records) == res.rows and not read.unreadable
    for row in read.records:
        assert ResultRow.from_dict(row).to_dict() == row
    patterns = {x["pattern"] for x in read.records}
    assert patterns == {"ring", "pair", "rail"}


@pytest.mark.parametrize("patterns", [("ring",), ("pairwise",), ("rail",)])
def test_a_phases_lines_are_its_rows_as_the_launcher_reports_them(tmp_path, patterns):
    """``Measured.table`` (the simulator's results.parquet) and ``Measured.rows_of`` (the simulated
    ranks' row messages) are one measurement: the same rows (a pair row's per-rank jitter left out
    of the file, issue 48)."""
    spec = FabricSpec(nodes=6, leaves=2, rails=2)
    opts = SimOptions(spec, pairs=PairOptions(pair_sizes=[1 << 20, 1 << 26], patterns=patterns))
    fab = build_fabric(opts.fabric)
    slots = [HostSlot(host=h, nprocs=8, rank_base=8 * i) for i, h in enumerate(fab.hosts)]
    req = PlanRequest(measure=MeasureOptions(collectives=["all_reduce", "all_gather"], max_bytes=1 << 16),
                      patterns=list(patterns), pair_sizes=[1 << 20, 1 << 26], switches=fab.uplinks())
    plan = build_plan(req, "r1", slots, "nccl")
    rng = np.random.default_rng(3)
    for phase in plan.phases:
        flows = _flows(phase.groups, fab, 8)
        rate = flows.group_rates(_rates(fab, flows, frozenset()), len(phase.groups))
        m = _measure(plan, phase, phase.groups, rate, opts, rng)
        rows = [r for group in m.rows_of() for r in group]
        assert len(rows) == m.rows > len(phase.groups)
        want = [r.to_dict() | {"extra": "{}"} | ({"rank_time_us": None} if r.pattern == "pair" else {})
                for r in rows]
        assert m.table().to_pylist() == want


def test_pair_groups_are_measured_as_the_same_groups_listed(tmp_path):
    """The fast path for a pairwise round (positions straight from the plan) and the general one
    (a flow per listed group) put the same flows on the fabric."""
    spec = FabricSpec(nodes=12, leaves=3, oversubscription=2.0)
    fab = build_fabric(spec, [Fault.parse("link:node0001,node0007=0.5")])
    plan = plan_of(12, 3, ["pairwise"])
    for phase in plan.phases:
        fast, listed = _flows(phase.groups, fab, 2), _flows(list(phase.groups), fab, 2)
        assert np.array_equal(fast.a, listed.a) and np.array_equal(fast.b, listed.b)
        assert np.array_equal(_rates(fab, fast, frozenset()), _rates(fab, listed, frozenset()))


def test_rail_groups_run_on_their_gpus_rail(tmp_path):
    """--pattern rail on a rail-optimised fabric: rank k's group runs on the rail of GPU k's NIC
    (8 GPUs on 2 rails: GPUs 0-3 on rail 1), so a slow NIC 2 slows only GPUs 4-7's groups of its node."""
    out = tmp_path / "rail"
    r = CliRunner().invoke(cli, [
        "simulate", "--nodes", "8", "--leaves", "2", "--rails", "2", "--pattern", "rail", "--fault",
        "nic:node0003/2=0.5", "--pair-sizes", "1G", "--out", str(out), "--no-report", "--noise", "0",
    ])
    assert r.exit_code == 0, r.output
    rows = RunDir.open(out).read_rows()
    assert {x["pattern"] for x in rows} == {"rail"} and {x["rail"] for x in rows} == set(range(8))
    assert len(rows) == 28 * 8  # every pair of 8 hosts, a group per GPU
    for x in rows:
        slow = "node0003" in x["hosts"] and x["rail"] >= 4
        # a NIC of 180 / 2 GB/s shared by its 4 GPUs' groups; half that on node0003's NIC 2
        assert x["busbw_GBps"] == pytest.approx(11.25 if slow else 22.5, rel=0.01), x


def test_rail_groups_on_a_fabric_without_rails_share_its_nic(tmp_path):
    res = sim(tmp_path, "onenic", noise=0.0, pair_sizes=(1 << 30,), patterns=("rail",),
              fabric={"nodes": 4, "oversubscription": 1.0})
    rows = res.rundir.read_rows()
    assert {x["ranks"] for x in rows} == {2}
    assert all(math.isclose(x["busbw_GBps"], 180 / 8, rel_tol=0.01) for x in rows)


def test_pattern_is_for_the_sweep_not_preflight():
    r = CliRunner().invoke(cli, ["simulate", "--preflight", "--pattern", "rail"])
    assert r.exit_code == 2 and "--pattern" in r.output and "Traceback" not in r.output
