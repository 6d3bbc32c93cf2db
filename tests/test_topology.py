"""Slurm topology.conf: every public fixture, leaf lookup, hop classes, and warnings for real mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures_path import fixture_files

from netbench.common.errors import UsageError
from netbench.common.topology import parse_topology_file, parse_topology_text

FILES = {p.name: p for p in fixture_files("public/slurm-topology.conf")}


@pytest.mark.parametrize("path", sorted(FILES.values()), ids=lambda p: p.name)
def test_every_fixture_parses(path: Path) -> None:
    topo = parse_topology_file(path)
    assert topo.switches and topo.node_leaf
    for node, leaf in topo.node_leaf.items():
        assert node in topo.switches[leaf].nodes


def test_tree_example() -> None:
    topo = parse_topology_file(FILES["SchedMD-slurm__topology.conf.5_EXAMPLE_tree.conf"])
    assert topo.kind == "tree" and topo.warnings == []
    assert topo.leaf_of("dev3") == "s0" and topo.leaf_of("dev17") == "s2"
    assert topo.switches["s3"].children == ["s0", "s1", "s2"] and topo.roots == ["s3"]
    assert topo.hop_class("dev0", "dev5") == "same-leaf"
    assert topo.hop_class("dev0", "dev6") == "cross-leaf"
    assert topo.hop_class("dev0", "nowhere") == "unknown"
    assert topo.switch_hops("dev0", "dev5") == 1 and topo.switch_hops("dev0", "dev12") == 3
    assert topo.leaf_of("dev4.cluster.example") == "s0"  # FQDN in a hosts file, short name in topology


def test_block_example() -> None:
    topo = parse_topology_file(FILES["SchedMD-slurm__topology.conf.5_EXAMPLE_block.conf"])
    assert topo.kind == "block" and topo.block_sizes == [30, 120] and topo.warnings == []
    assert topo.leaf_of("node32") == "block1" and topo.leaf_of("node33") == "block2"
    assert topo.hop_class("node1", "node32") == "same-leaf"
    assert topo.hop_class("node1", "node128") == "cross-leaf"


def test_mixed_names_single_node_switches() -> None:
    topo = parse_topology_file(FILES["maatthias-slurm-cluster__topology.conf"])
    assert topo.warnings == []
    assert len(topo.switches["s0"].nodes) == 19 + 13 + 2 + 2
    assert topo.leaf_of("gpu013") == "s0" and topo.leaf_of("saturn4") == "s3"
    assert topo.hop_class("hpc001", "xf11id-srv2") == "cross-leaf"


def test_superpod_real_mistakes_are_warnings() -> None:
    topo = parse_topology_file(FILES["tonystarkiss-slurm-superpod__topology.conf"])
    text = "\n".join(topo.warnings)
    assert "circe-n051 is under s2" in text and "again under s4" in text
    assert "prefix 'n' looks truncated" in text and "n019" in text
    assert topo.leaf_of("circe-n051") == "s2"
    assert topo.leaf_of("circe-n080") == "s4"
    assert all(":" in w and "topology.conf:" in w for w in topo.warnings)
    assert topo.unknown_hosts(["circe-n019", "circe-n001"]) == ["circe-n019"]


def test_other_mistakes_warn_without_crashing() -> None:
    text = """SwitchName=a Nodes=x[1-2] LinkSpeed=100
SwitchName=b Nodes=x[3-4
SwitchName=top Switches=a,ghost
SwitchName=top2 Switches=a
Frobnicate=1
SwitchName=empty
SwitchName=l1 Switches=l2
SwitchName=l2 Switches=l1
"""
    topo = parse_topology_text(text, "t.conf")
    text_w = "\n".join(topo.warnings)
    for needle in ("t.conf:2: bad Nodes list", "ghost listed under top is never defined",
                   "switch a is under both top and top2", "unknown key Frobnicate",
                   "empty has neither", "makes a loop"):
        assert needle in text_w, needle
    assert topo.switches["a"].parent == "top" and topo.switches["a"].link_speed == "100"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not found"):
        parse_topology_file(tmp_path / "nope.conf")
