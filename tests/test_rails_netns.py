"""End to end on real test hosts (namespaces, sshd): three hosts with two rail NICs each on two rail
switches (bridges), one host's rail-1 NIC capped with tc. ``netbench sweep --pattern rail`` must name
that NIC, its rail and its rail switch, and not call the node or a link slow.

The hosts' inventory maps rail k to a NIC as a real 8-GPU node's does: ``nvidia-smi topo -m`` is a
real B300 capture (GPU0 beside mlx5_10, GPU1 beside mlx5_11, sglang issue 26039), the HCAs are a
copy of a real H100 node's /sys/class/infiniband (leptonai/gpud) renamed to those devices, with the
netdevs the test gives the rail NICs, and LLDP (a real lldpcli capture with the interfaces and
switch names of this network) says which rail switch each NIC is cabled to.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from fake_tools import make_fake_tools
from fixtures_path import fixture
from rowfiles import rows_of

pytestmark = pytest.mark.netns

TREE = Path(__file__).parent / "data" / "sysfs-infiniband" / "leptonai-gpud__sys-class-infiniband-h100.0"
TOPO = "public/nvidia-smi-topo-m/sgl-project-sglang__issue-26039_B300-SXM6_topo.txt"
LLDP = "public/lldpctl-json/generated-lldpd-1.0.16__lldpcli_-f_json_show_neighbors_details_2ports.json"
NETDEVS = ["enp26s0np0", "enp60s0np0"]  # rail 0, rail 1 (the netdevs of mlx5_10, mlx5_11)
HCAS = {"mlx5_0": "mlx5_10", "mlx5_1": "mlx5_11"}  # captured device -> the B300's rail device


def _ib_tree(tmp: Path) -> Path:
    root = tmp / "sys-class-infiniband"
    for (src, dst), netdev in zip(HCAS.items(), NETDEVS, strict=True):
        shutil.copytree(TREE / src, root / dst)
        (root / dst / "device" / "net" / netdev).mkdir(parents=True)
    return root


def _lldp(tmp: Path) -> Path:
    """The capture's two ports as this network's rail NICs, each on its own rail switch."""
    data = json.loads(fixture(LLDP).read_text())
    renamed = []
    for k, entry in enumerate(data["lldp"]["interface"]):
        ((_, body),) = entry.items()
        body["chassis"] = {f"railsw{k}": next(iter(body["chassis"].values()))}
        renamed.append({NETDEVS[k]: body})
    data["lldp"]["interface"] = renamed
    path = tmp / "lldp.json"
    path.write_text(json.dumps(data))
    return path


def test_a_capped_rail_nic_is_named_with_its_rail_and_switch(netns_factory, tmp_path: Path) -> None:
    tools = make_fake_tools(tmp_path / "bin", {
        "nvidia-smi topo -m": TOPO,
        "lldpcli -f json show neighbors details": str(_lldp(tmp_path)),
    })
    hosts = ["ra", "rb", "rc"]
    net = netns_factory(hosts, tools={h: tools for h in hosts})
    net.add_rails(NETDEVS)
    tree = _ib_tree(tmp_path)
    for h in hosts:
        net.set_session_env(h, {"NETBENCH_IB_SYSFS": str(tree)})
    # every rail NIC at 400 Mbit/s, so the network (not this machine's busy CPUs) sets the pace,
    # and rb's rail 1 at a quarter of that: 75% below its peers
    for h in hosts:
        for k in (0, 1):
            net.limit_rail(h, k, "100mbit" if (h, k) == ("rb", 1) else "400mbit")
    out = tmp_path / "run"
    r = subprocess.run([*net.netbench_argv(tmp_path), "--pattern", "rail", "--procs-per-host", "2",
                        "-k", "all_reduce", "--pair-sizes", "1M,4M", "-n", "5", "-w", "1",
                        "--in-place", "out", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode in (1, 2), r.stderr  # the capped rail is a finding (docs/exit-status.md)

    rows = rows_of(out)
    ok = [x for x in rows if x["status"] == "ok"]
    assert ok and all(x["pattern"] == "rail" and x["ranks"] == 2 for x in rows), rows
    assert {(tuple(x["hosts"]), x["rail"]) for x in ok} == {
        (p, k) for p in (("ra", "rb"), ("ra", "rc"), ("rb", "rc")) for k in (0, 1)}
    plan = json.loads((out / "plan.json").read_text())
    assert plan["rail_ifaces"] == NETDEVS * 3  # local rank k binds rail k's NIC

    findings = json.loads((out / "findings.json").read_text())["findings"]
    rules = [f["rule"] for f in findings]
    assert "slow_node" not in rules and "slow_pair" not in rules, findings
    rail = [f for f in findings if f["rule"].startswith("slow_rail")]
    assert len(rail) == 1, rail
    (f,) = rail
    assert f["rule"] == "slow_rail" and f["subject"] == "rb", f
    ev = f["evidence"]
    assert (ev["rail"], ev["nic"], ev["netdev"], ev["rail_switch"]) == (1, "mlx5_11/1", NETDEVS[1], "railsw1")
    assert set(ev["partners"]) == {"ra|rb", "rb|rc"} and set(ev["peers"]) == {"ra|rc"}
    assert f["title"].startswith("rb rail 1 (mlx5_11/1) is ")
    assert "below its rail peers (rail switch railsw1)" in f["title"]
    assert f["title"] in r.stdout


def test_without_rail_nics_in_the_inventory_the_sweep_says_the_rails_share_an_interface(
        netns_factory, tmp_path: Path) -> None:
    net = netns_factory(["sa", "sb"])  # no nvidia-smi: no GPU-NIC affinity
    out = tmp_path / "run"
    r = subprocess.run([*net.netbench_argv(tmp_path), "--pattern", "rail", "--procs-per-host", "2",
                        "-k", "all_reduce", "--pair-sizes", "64K", "-n", "2", "-w", "1", "--in-place", "out",
                        "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 1), r.stderr
    assert ("# rail: no rail NIC known for sa, sb (no GPU-NIC affinity in the inventory): their gloo ranks "
            "use the address that routes here, so their rails share that interface") in r.stdout
    rows = rows_of(out)
    assert sorted((x["group"], x["rail"], x["status"]) for x in rows) == [
        ("rail0:sa|sb", 0, "ok"), ("rail1:sa|sb", 1, "ok")]
    assert json.loads((out / "plan.json").read_text())["rail_ifaces"] == [None] * 4
