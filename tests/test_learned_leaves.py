"""Leaves learned from the pairs when nothing names a switch (reports/learned.py, issue 45): the
fabric's two rates give its leaves; one rate, a slow node or half the fleet capped give none; a host
that lost its leaf peers (one of them died) is not slow for having only pairs across the uplink."""

from __future__ import annotations

import numpy as np
import pytest
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import run_rules
from netbench.reports.learned import learn_leaves
from netbench.reports.pairrows import PairRows
from synthetic import make_fleet


def unlabelled(fleet) -> list[dict]:
    for node in fleet.inventory:
        node["labels"] = {}
        node["neighbors"] = []
    return fleet.inventory


def rows_of(fleet, drop=lambda r: False) -> PairRows:
    return PairRows.from_records([r for r in fleet.rows if not drop(r)])


def same_partition(learned: dict[str, str], truth: dict[str, str]) -> bool:
    hosts = sorted(truth)
    return all((learned.get(a) == learned.get(b)) == (truth[a] == truth[b]) for a in hosts for b in hosts)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", [(12, 2, 0.5), (24, 4, 0.6), (16, 2, 0.3)])
def test_an_oversubscribed_fabric_gives_its_leaves(shape, seed) -> None:
    nodes, leaves, spine = shape
    fleet = make_fleet(nodes, leaves, pair_sizes=(1 << 26, 1 << 30), ring_sizes=(), spine_factor=spine,
                       noise=0.08, seed=seed)
    learned = learn_leaves(rows_of(fleet))
    assert set(learned) == set(fleet.hosts) and same_partition(learned, fleet.switches), learned


@pytest.mark.parametrize("case", ["one rate", "non-blocking", "slow node", "half capped", "no rows"])
def test_no_leaves_where_the_pairs_show_none(case) -> None:
    nodes = {"one rate": (12, 1), "non-blocking": (12, 2)}.get(case, (12, 1))
    slow = {"slow node": {"gpu003": 0.4},
            "half capped": {h: 0.3 for h in ("node02", "node04", "node06", "node08", "gpu010", "gpu012")}}
    fleet = make_fleet(*nodes, pair_sizes=(1 << 30,), ring_sizes=(), spine_factor=1.0 if case != "one rate"
                       else 0.85, slow_nodes=slow.get(case), seed=1)
    rows = rows_of(fleet, drop=lambda r: case == "no rows")
    assert learn_leaves(rows) == {}


def test_a_slow_node_in_a_leaf_joins_its_leaf_and_is_still_found() -> None:
    """Alone in the fast graph (slow with everyone), it joins the leaf it ran fastest with, so its
    pairs are judged in classes and the slow-node rule names it, as with the topology."""
    fleet = make_fleet(12, 2, pair_sizes=(1 << 30,), ring_sizes=(), spine_factor=0.5,
                       slow_nodes={"gpu003": 0.3}, seed=2)
    learned = learn_leaves(rows_of(fleet))
    assert learned.get("gpu003") == learned.get("gpu001"), learned
    ctx = AnalysisContext.from_data(fleet.rows, unlabelled(fleet), fleet.env, fleet.run)
    assert ctx.leaves_learned
    failing = {f.subject for f in run_rules(ctx) if f.severity == "fail" and f.subject_kind == "node"}
    assert failing == {"gpu003"}, failing


@pytest.mark.parametrize("seed", range(3))
def test_a_dead_hosts_leaf_peers_are_not_slow_without_a_topology(seed) -> None:
    """gpu011 of leaf 2 died early: its pairs failed. Its leaf peers keep one pair within the leaf
    and five across a 2:1 uplink. Without the learned leaves their pairs read slow against the
    fleet; with them, nothing but the dead host's failures is found."""
    fleet = make_fleet(12, 2, pair_sizes=(1 << 30,), ring_sizes=(), spine_factor=0.45, seed=seed)
    for r in fleet.rows:
        if "gpu011" in r["hosts"]:
            r.update(status="error", busbw_GBps=None, algbw_GBps=None, time_us=None,
                     error="host gpu011: stopped answering", blame=["gpu011"])
    ctx = AnalysisContext.from_data(fleet.rows, unlabelled(fleet), fleet.env, fleet.run)
    assert ctx.leaves_learned and ctx.switches.get("gpu010") == ctx.switches.get("gpu012")
    nodes = [f for f in run_rules(ctx)
             if f.severity in ("warn", "fail") and f.subject_kind in ("node", "pair")]
    others = {h for f in nodes for h in (f.hosts or [f.subject])} - {"gpu011"}
    assert not others, [(f.rule, f.subject) for f in nodes]
    said = [f for f in run_rules(ctx) if f.rule == "leaves_learned"]
    assert len(said) == 1 and said[0].severity == "info" and len(said[0].evidence["leaves"]) == 2


def test_learned_rates_read_the_largest_common_size() -> None:
    fleet = make_fleet(8, 2, pair_sizes=(1 << 20, 1 << 30), ring_sizes=(), spine_factor=0.5, seed=3)
    learned = learn_leaves(rows_of(fleet))
    assert len(set(learned.values())) == 2
    assert np.all([v.startswith("learned-leaf") for v in learned.values()])
