"""The one topology module: every public Slurm fixture, tree and block files, JSON/TOML tables, the
hop-class vocabulary (intra / leaf / spine / core / tier-N / unknown), warnings for real mistakes, and
the same classes whichever command reads the file (``sweep --topology`` and ``report --topology``)."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixtures_path import fixture_files
from netbench.inventory.hosts import parse_hosts_file
from netbench.inventory.topology import (
    TopologyError,
    hop_class,
    is_hop_class,
    load_topology,
    parse_slurm_topology,
    parse_topology,
    tier_name,
)
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import resolve_topology
from synthetic import make_fleet, write_run_dir

from netbench.cli import cli
from netbench.common.errors import UsageError
from netbench.sites.ssh.site import file_switches

FILES = {p.name: p for p in fixture_files("public/slurm-topology.conf")}

# core0 -> sp0 -> lf0 (n01 n02), lf1 (n03 n04); core0 -> sp1 -> lf2 (n05 n06), lf3 (n07 n08);
# lf4 (n09) hangs straight off core0: an unbalanced branch.
THREE_TIER = """# a three-tier fat tree
SwitchName=core0 Switches=sp[0-1],lf4
SwitchName=sp0 Switches=lf[0-1]
SwitchName=sp1 Switches=lf[2-3] LinkSpeed=400
SwitchName=lf0 Nodes=n[01-02]
SwitchName=lf1 Nodes=n[03-04]
SwitchName=lf2 Nodes=n[05-06]
SwitchName=lf3 \\
    Nodes=n[07-08]
SwitchName=lf4 Nodes=n09
"""
# Written out by hand from the tree above: the tier of the lowest common switch.
THREE_TIER_CLASSES = {
    ("n01", "n01"): "intra",
    ("n01", "n02"): "leaf",
    ("n03", "n04"): "leaf",
    ("n01", "n03"): "spine",
    ("n05", "n08"): "spine",
    ("n01", "n05"): "core",
    ("n04", "n07"): "core",
    ("n09", "n01"): "core",  # meets at core0: 3 tiers above n01, 2 above n09; the longer path counts
    ("n09", "n06"): "core",
    ("n01", "elsewhere"): "unknown",
}


def test_tier_names() -> None:
    assert [tier_name(t) for t in (1, 2, 3, 4, 7)] == ["leaf", "spine", "core", "tier-4", "tier-7"]
    for word in ("intra", "leaf", "spine", "core", "tier-4", "tier-12", "unknown"):
        assert is_hop_class(word), word
    for word in ("tier-2", "tier-3", "tier-1", "rack", "same-leaf", "cross-leaf", "tier-x", "any"):
        assert not is_hop_class(word), word  # one spelling per tier; "any" is the policy's, not a class


@pytest.mark.parametrize("path", sorted(FILES.values()), ids=lambda p: p.name)
def test_every_fixture_parses(path: Path) -> None:
    topo = load_topology(path)
    assert topo.switches and topo.node_leaf
    for node, leaf in topo.node_leaf.items():
        assert node in topo.switches[leaf].nodes


def test_tree_example() -> None:
    topo = load_topology(FILES["SchedMD-slurm__topology.conf.5_EXAMPLE_tree.conf"])
    assert topo.kind == "tree" and topo.warnings == []
    assert topo.leaf_of("dev3") == "s0" and topo.leaf_of("dev17") == "s2"
    assert topo.switches["s3"].children == ["s0", "s1", "s2"] and topo.roots == ["s3"]
    assert topo.hop_class("dev0", "dev5") == "leaf"
    assert topo.hop_class("dev0", "dev6") == "spine"
    assert topo.hop_class("dev0", "nowhere") == "unknown"
    assert topo.hop_class("dev0", "dev0") == "intra"
    assert topo.leaf_of("dev4.cluster.example") == "s0"  # FQDN in a hosts file, short name in topology


def test_block_example() -> None:
    topo = load_topology(FILES["SchedMD-slurm__topology.conf.5_EXAMPLE_block.conf"])
    assert topo.kind == "block" and topo.block_sizes == [30, 120] and topo.warnings == []
    assert topo.leaf_of("node32") == "block1" and topo.leaf_of("node33") == "block2"
    assert topo.hop_class("node1", "node32") == "leaf"  # a block is a leaf
    assert topo.hop_class("node1", "node128") == "spine"


def test_mixed_names_single_node_switches() -> None:
    topo = load_topology(FILES["maatthias-slurm-cluster__topology.conf"])
    assert topo.warnings == []
    assert len(topo.switches["s0"].nodes) == 19 + 13 + 2 + 2
    assert topo.leaf_of("gpu013") == "s0" and topo.leaf_of("saturn4") == "s3"
    assert topo.hop_class("hpc001", "xf11id-srv2") == "spine"


def test_three_tier_tree() -> None:
    topo = parse_topology(THREE_TIER, "fat.conf")
    assert topo.kind == "tree" and topo.warnings == [] and topo.roots == ["core0"]
    assert topo.switches["lf3"].nodes == ["n07", "n08"] and topo.switches["sp1"].link_speed == "400"
    for (a, b), want in THREE_TIER_CLASSES.items():
        assert topo.hop_class(a, b) == want, (a, b)
        assert topo.hop_class(b, a) == want, (b, a)


def test_four_tiers_and_separate_roots() -> None:
    # a second core (core1 -> lf9 -> m1) and a fourth tier above both cores
    deeper = THREE_TIER + "\n".join(
        ["SwitchName=top Switches=core[0-1]", "SwitchName=core1 Switches=lf9", "SwitchName=lf9 Nodes=m1"]
    )
    topo = parse_topology(deeper)
    assert topo.hop_class("n01", "m1") == "tier-4" and topo.hop_class("n01", "n05") == "core"
    # two roots and nothing above them: the fabric joining them is one tier above the highest listed
    split = parse_topology("SwitchName=a Nodes=x1\nSwitchName=b Nodes=y1\nSwitchName=up Switches=b\n")
    assert split.hop_class("x1", "y1") == "core"  # y1 is two tiers deep (b, up), so they meet at tier 3
    flat = parse_topology("SwitchName=a Nodes=x1\nSwitchName=b Nodes=y1\n")
    assert flat.hop_class("x1", "y1") == "spine"


def test_uplinks_and_the_plain_function_agree() -> None:
    topo = parse_topology(THREE_TIER)
    up = topo.uplinks()
    assert up["n01"] == "lf0" and up["lf0"] == "sp0" and up["sp0"] == "core0" and up["lf4"] == "core0"
    assert "core0" not in up  # the root hangs off nothing listed
    for a, b in combinations([f"n{i:02d}" for i in range(1, 10)], 2):
        assert hop_class(a, b, up) == topo.hop_class(a, b)
    only = topo.uplinks(["n01.example.org", "n05", "ghost"])  # names as a hosts file spells them
    assert only["n01.example.org"] == "lf0" and only["n05"] == "lf2" and "ghost" not in only
    assert "n02" not in only and only["sp1"] == "core0"


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"switches": {"lfA": ["h1", "h2"], "lfB": "h[3-4]"}}),
        json.dumps({"lfA": ["h1", "h2"], "lfB": ["h3", "h4"]}),
        '[switches]\nlfA = ["h1", "h2"]\nlfB = "h[3-4]"\n',
        'lfA = "h[1-2]"\nlfB = ["h3", "h4"]\n',
        "switchname=lfA nodes=h[1-2]\nSwitchName=lfB Nodes=h[3-4]\n",  # Slurm keys ignore case
    ],
    ids=["json", "json-top-level", "toml", "toml-top-level", "slurm"],
)
def test_every_file_form_gives_the_same_leaves(text: str) -> None:
    topo = parse_topology(text)
    assert topo.node_leaf == {"h1": "lfA", "h2": "lfA", "h3": "lfB", "h4": "lfB"}
    assert topo.hop_class("h1", "h2") == "leaf" and topo.hop_class("h2", "h3") == "spine"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "not valid JSON"),
        ("this is = = not toml", "neither JSON, TOML nor Slurm"),
        ('{"switches": ["h1"]}', "table of switch -> list of hosts"),
        ('{"lfA": [1, 2]}', "must list host names"),
        ('{"lfA": "h[1-"}', "unbalanced"),
    ],
)
def test_unusable_files_are_topology_errors(text: str, why: str) -> None:
    with pytest.raises(TopologyError, match=why):
        parse_topology(text, "t.json")


def test_superpod_real_mistakes_are_warnings() -> None:
    topo = load_topology(FILES["tonystarkiss-slurm-superpod__topology.conf"])
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
    topo = parse_slurm_topology(text, "t.conf")
    text_w = "\n".join(topo.warnings)
    for needle in ("t.conf:2: bad Nodes list", "ghost listed under top is never defined",
                   "switch a is under both top and top2", "unknown key Frobnicate",
                   "empty has neither", "makes a loop"):
        assert needle in text_w, needle
    assert topo.switches["a"].parent == "top" and topo.switches["a"].link_speed == "100"


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="topology file not found"):
        load_topology(tmp_path / "nope.conf")


# -- one file, every command: the sweep's path and the report's path agree ---------------------------


def _report_classes(topology: dict[str, str] | None, hosts: list[str], run: dict | None = None) -> dict:
    rows = [{"pattern": "pair", "hosts": [a, b]} for a, b in combinations(hosts, 2)]
    ctx = AnalysisContext.from_data(rows, run=run, topology=topology)
    if topology is None:  # as AnalysisContext.load does for a run directory
        from netbench.reports.context import _topology_from_run

        unreadable: list = []
        ctx.topology = _topology_from_run(ctx.run, unreadable, Path("run.json"))
        assert unreadable == []
    return {(a, b): ctx.hop_class(a, b) for a, b in combinations(hosts, 2)}


def test_sweep_and_report_give_the_same_classes_for_one_file(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text(THREE_TIER)
    hosts_file = tmp_path / "hosts.txt"
    # a hosts file with FQDNs and a switch= label that the topology file overrides
    names = [f"n{i:02d}.cluster.example" for i in range(1, 10)]
    hosts_file.write_text("\n".join(names[:-1]) + f"\n{names[-1]} switch=wrong\n")
    entries = parse_hosts_file(hosts_file)
    echoed: list[str] = []
    sweep_uplinks = file_switches(entries, str(conf), echoed.append).uplinks  # sweep/preflight --topology
    assert echoed == [] and sweep_uplinks[names[-1]] == "lf4"

    expected = {
        (a, b): THREE_TIER_CLASSES[(a.split(".")[0], b.split(".")[0])]
        if (a.split(".")[0], b.split(".")[0]) in THREE_TIER_CLASSES
        else None
        for a, b in combinations(names, 2)
    }
    via_sweep = {(a, b): hop_class(a, b, sweep_uplinks) for a, b in combinations(names, 2)}
    via_report_flag = _report_classes(resolve_topology(str(conf)), names)  # report --topology FILE
    via_run_json = _report_classes(None, names, run={"topology": sweep_uplinks})  # report of a sweep run
    via_run_path = _report_classes(None, names, run={"options": {"topology": str(conf)}})
    assert via_sweep == via_report_flag == via_run_json == via_run_path
    assert {k: v for k, v in via_sweep.items() if expected[k]} == {k: v for k, v in expected.items() if v}
    assert set(via_sweep.values()) == {"leaf", "spine", "core"}


def test_sweep_path_warns_per_line_and_refuses_an_unusable_file(tmp_path: Path) -> None:
    hosts_file = tmp_path / "hosts.txt"
    hosts_file.write_text("n01\nn02\n")
    entries = parse_hosts_file(hosts_file)
    conf = tmp_path / "t.conf"
    conf.write_text("SwitchName=a Nodes=n01\nSwitchName=b Nodes=n01,n02\n")
    echoed: list[str] = []
    assert file_switches(entries, str(conf), echoed.append).uplinks == {"n01": "a", "n02": "b"}
    assert echoed == [
        f"# topology warning: {conf}:2: node n01 is under a (line 1) and again under b; keeping a"
    ]
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(UsageError, match="not valid JSON"):
        file_switches(entries, str(bad), echoed.append)


def test_report_cli_reads_a_three_tier_file_and_refuses_a_broken_one(tmp_path: Path) -> None:
    run_dir = write_run_dir(make_fleet(8, 2, noise=0.02, seed=5), tmp_path / "run")
    conf = tmp_path / "topology.conf"
    conf.write_text(  # the synthetic fleet's hosts gpu001..gpu008 on four leaves, two spines, one core
        "SwitchName=c Switches=s[0-1]\nSwitchName=s0 Switches=l[0-1]\nSwitchName=s1 Switches=l[2-3]\n"
        + "".join(f"SwitchName=l{i} Nodes=gpu[{2 * i + 1:03d}-{2 * i + 2:03d}]\n" for i in range(4))
    )
    res = CliRunner().invoke(cli, ["report", str(run_dir), "--topology", str(conf), "--no-html"])
    assert res.exit_code == 0, res.output
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    res = CliRunner().invoke(cli, ["report", str(run_dir), "--topology", str(bad), "--no-html"])
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and "not valid JSON" in lines[0], res.output
    assert "Traceback" not in res.output


def test_report_cli_prints_topology_warnings_on_stderr(tmp_path: Path) -> None:
    run_dir = write_run_dir(make_fleet(4, 1, noise=0.02, seed=6), tmp_path / "run")
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=a Nodes=gpu[001-002]\nSwitchName=b Nodes=gpu[002-004]\n")
    res = CliRunner().invoke(cli, ["report", str(run_dir), "--topology", str(conf), "--no-html"])
    assert res.exit_code == 0, res.output
    assert f"# topology warning: {conf}:2: node gpu002 is under a (line 1)" in res.stderr
