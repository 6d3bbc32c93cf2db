"""Rails: the rail -> NIC -> rail switch mapping over real captured tool output, the plan of
``--pattern rail``, and the slow_rail rule on rail rows (the end-to-end run on namespaced hosts with
real rail NICs is tests/test_rails_netns.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixtures_path import fixture
from netbench.inventory.assemble import Section, build_inventory
from netbench.inventory.model import NodeInventory
from netbench.inventory.rails import gpu_nics, rail_ports
from netbench.reports.context import AnalysisContext
from netbench.reports.rules import slow_rail

from netbench.agents.launchers import HostSlot
from netbench.cli import main
from netbench.run.options import MeasureOptions
from netbench.run.planner import PlanRequest, build_plan

B300_TOPO = "public/nvidia-smi-topo-m/sgl-project-sglang__issue-26039_B300-SXM6_topo.txt"
SHARED_TOPO = ("public/nvidia-smi-topo-m/"
               "oyanghd-gpu-compress-decompress__project_description_EN.md_gpu-topo.txt")
LLDP = "public/lldpctl-json/generated-lldpd-1.0.16__lldpcli_-f_json_show_neighbors_details_2ports.json"


def node(host: str, **files: str) -> NodeInventory:
    """A NodeInventory assembled by the real parsers, one probe section per fixture file."""
    sections = {}
    for name, path in files.items():
        src = Path(path) if Path(path).is_absolute() else fixture(path)
        text = src.read_text(errors="replace")
        sections[name.replace("_", "-")] = Section(name, 0, text)
    sections["end"] = Section("end", 0, "")
    return build_inventory(host, sections)


def b300(host: str, tmp: Path) -> NodeInventory:
    """The B300 capture's GPU-NIC affinity, and LLDP (a real capture) with its two ports renamed to
    the netdevs of mlx5_10 and mlx5_11 on rail switches railsw0 and railsw1."""
    data = json.loads(fixture(LLDP).read_text())
    data["lldp"]["interface"] = [
        {f"ib{k}": {**body, "chassis": {f"railsw{k}": next(iter(body["chassis"].values()))}}}
        for k, entry in enumerate(data["lldp"]["interface"]) for body in entry.values()
    ]
    lldp = tmp / f"lldp-{host}.json"
    lldp.write_text(json.dumps(data))
    sysfs = "".join(f"mlx5_1{k}/device/net: ib{k}\nmlx5_1{k}/ports/1/state: 4: ACTIVE\n" for k in range(8))
    (tmp / "sysfs").write_text(sysfs)
    return node(host, nvidia_smi_topo=B300_TOPO, lldp=str(lldp), sysfs_ib=str(tmp / "sysfs"))


# -- rail -> NIC -> switch -----------------------------------------------------------------------
def test_rail_k_is_the_nic_beside_gpu_k_with_its_netdev_and_rail_switch(tmp_path: Path) -> None:
    ports = rail_ports(b300("n1", tmp_path), 3)
    assert [(p.rail, p.nic, p.netdev) for p in ports] == [
        (0, "mlx5_10/1", "ib0"), (1, "mlx5_11/1", "ib1"), (2, "mlx5_12/1", "ib2")]
    assert [p.switch for p in ports] == ["railsw0", "railsw1", None]  # the capture has two ports
    assert ports[1].label() == "rail 1 (mlx5_11/1)"


def test_two_gpus_sharing_two_nics_get_one_each() -> None:
    near = gpu_nics(node("n", nvidia_smi_topo=SHARED_TOPO))
    assert near == {k: f"mlx5_{k}" for k in range(8)}  # not mlx5_0 for both GPU0 and GPU1


def test_without_affinity_the_nic_is_unknown_and_says_why() -> None:
    ports = rail_ports(node("n", nvidia_smi_q_x="h200-node/nvidia-smi-q-x.txt"), 2)
    assert [p.nic for p in ports] == [None, None]
    assert ports[1].label().startswith("rail 1 (NIC unknown: ")
    assert rail_ports(None, 1)[0].unknown == "the host was not inventoried"


# -- the plan ------------------------------------------------------------------------------------
def test_rail_plan_pairs_rank_k_with_rank_k_and_binds_the_rail_netdevs(tmp_path: Path) -> None:
    slots = [HostSlot("a", 2, 0), HostSlot("b", 2, 2), HostSlot("c", 1, 4)]
    nodes = {"a": b300("a", tmp_path), "b": b300("b", tmp_path)}  # c: not inventoried
    req = PlanRequest(measure=MeasureOptions(collectives=["all_reduce"]), patterns=["rail"])
    plan = build_plan(req.with_rails(nodes, slots), "r", slots, "gloo")
    groups = sorted((g.id, g.ranks, g.rail, g.pattern) for p in plan.phases for g in p.groups)
    assert groups == [("rail0:a|b", [0, 2], 0, "rail"), ("rail0:a|c", [0, 4], 0, "rail"),
                      ("rail0:b|c", [2, 4], 0, "rail"), ("rail1:a|b", [1, 3], 1, "rail")]
    assert [p.name for p in plan.phases] == ["rail round 1/3", "rail round 2/3", "rail round 3/3"]
    assert plan.rail_ifaces == ["ib0", "ib1", "ib0", "ib1", None]
    assert build_plan(req, "r", slots, "gloo").rail_ifaces == [None] * 5  # no inventory: no binding


def test_rail_needs_hosts(capsys, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--pattern", "rail", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--pattern ring/pairwise/rail need --hosts" in err and err.count("\n") == 1


# -- the rule --------------------------------------------------------------------------------------
def rows(levels: dict[tuple[str, str, int], list[float]]) -> list[dict[str, Any]]:
    out = []
    for (a, b, rail), bws in levels.items():
        for i, bw in enumerate(bws):
            out.append({"collective": "all_reduce", "pattern": "rail", "hosts": [a, b], "ranks": 2,
                        "bytes": (64 << 20) << i, "busbw_GBps": bw, "algbw_GBps": bw, "status": "ok",
                        "group": f"rail{rail}:{a}|{b}", "rail": rail, "backend": "nccl"})
    return out


FAST = [45.0, 46.0, 45.5]
SLOW = [24.0, 25.0, 24.5]


def three_hosts(slow_rails: set[int]) -> list[dict[str, Any]]:
    return rows({(a, b, k): SLOW if "n1" in (a, b) and k in slow_rails else FAST
                 for a, b in (("n0", "n1"), ("n0", "n2"), ("n1", "n2")) for k in range(4)})


def test_a_slow_rail_is_named_as_the_nic_and_switch_of_its_node(tmp_path: Path) -> None:
    inv = [b300(h, tmp_path).to_dict() for h in ("n0", "n1", "n2")]
    found = slow_rail.check(AnalysisContext.from_data(three_hosts({1}), inventory=inv))
    assert len(found) == 1
    f = found[0]
    assert (f.rule, f.subject, f.severity, f.hosts) == ("slow_rail", "n1", "fail", ["n1"])
    assert f.title.startswith("n1 rail 1 (mlx5_11/1) is 46% below its rail peers (rail switch railsw1)")
    assert f.evidence["peers"] == {"n0|n2": 45.5} and set(f.evidence["partners"]) == {"n0|n1", "n1|n2"}


def test_without_inventory_the_finding_says_why_the_nic_is_unknown() -> None:
    (f,) = slow_rail.check(AnalysisContext.from_data(three_hosts({2})))
    assert f.title.startswith("n1 rail 2 (NIC unknown: the run has no inventory of this host) is 46% below")


def test_every_rail_slow_is_the_node() -> None:
    (f,) = slow_rail.check(AnalysisContext.from_data(three_hosts({0, 1, 2, 3})))
    assert f.subject == "n1" and "every rail (4)" in f.title and "the node, not one NIC" in f.title


def test_noise_that_overlaps_the_peers_is_not_a_slow_rail() -> None:
    data = three_hosts(set())
    for r in data:  # n1's rail 0 at 70% on two points, above its peers' on the third
        if r["rail"] == 0 and "n1" in r["hosts"]:
            r["busbw_GBps"] = 47.0 if r["bytes"] == 64 << 20 else 31.0
    assert slow_rail.check(AnalysisContext.from_data(data)) == []


def test_two_nodes_name_the_rail_between_them() -> None:
    data = rows({("n0", "n1", k): SLOW if k == 3 else FAST for k in range(4)})
    (f,) = slow_rail.check(AnalysisContext.from_data(data))
    assert (f.rule, f.subject_kind, f.subject, f.severity) == ("slow_rail_pair", "pair", "n0|n1", "warn")
    assert f.title.startswith("rail 3 between n0 (NIC unknown) and n1 (NIC unknown) is 46% below")
