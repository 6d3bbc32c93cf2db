"""Issue 46 (3): a node confirmed slow on a rail-optimised fabric is re-tested rail by rail against
known-good partners (netbench.confirm.rails), through the real confirm loop, the run's Launch and the
simulated site, and the finding names the NIC (node, rail, NIC) and its rail switch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rowfiles import rows_of

from netbench.cli import cli


def simulate(out: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["simulate", "--nodes", "16", "--rails", "4", "--pair-sizes", "256M,1G",
                                 "--out", str(out), *args])
    return r.exit_code, r.output


def findings(out: Path) -> list[dict]:
    return json.loads((out / "findings.json").read_text())["findings"]


def retests(out: Path) -> dict[str, dict]:
    return json.loads((out / "run.json").read_text())["retests"]["results"]


@pytest.fixture(scope="module")
def half_nic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """16 nodes, 4 rails, 8 GPUs a node (two GPUs a NIC): NIC 3 of node0005 at half rate."""
    out = tmp_path_factory.mktemp("rails") / "nic"
    code, said = simulate(out, "--fault", "nic:node0005/3=0.5", "--seed", "3")
    return out, code, said


def test_a_nic_at_half_rate_is_named_with_its_rail_switch_after_the_rail_by_rail_re_test(half_nic):
    out, code, said = half_nic
    assert code == 2, said
    assert "# re-test node0005: confirmed" in said
    assert "# re-testing node0005 rail by rail against known-good partners" in said
    # NIC 3 (mlx5_2) serves GPUs 4 and 5: GPU 4, the first of them, is its rail
    [nic] = [f for f in findings(out) if f["rule"] == "slow_rail"]
    ev = nic["evidence"]
    assert (nic["subject"], nic["severity"], ev["rail"], ev["nic"], ev["rail_switch"]) == (
        "node0005", "fail", 4, "mlx5_2/1", "r3-leaf01")
    assert "node0005 NIC mlx5_2/1 (GPU 4's rail, rail switch r3-leaf01) is 5" in nic["title"]
    got = {k: v["verdict"] for k, v in retests(out).items() if v["kind"] == "nic"}
    assert got == {"node0005/rail0": "cleared", "node0005/rail2": "cleared", "node0005/rail4": "confirmed",
                   "node0005/rail6": "cleared"}
    assert all(r < 0.6 for r in retests(out)["node0005/rail4"]["ratios"].values())
    # the node is still the one to drain
    assert {f["subject"] for f in findings(out) if f["severity"] == "fail"} == {"node0005"}


def test_the_rail_restriction_reaches_the_launched_ranks_on_the_fabric(half_nic):
    """The re-test's rail groups are rank k of both hosts (the plan's ``rail``), and the simulated
    site runs each on GPU k's rail alone: node0005's groups on GPUs 4 and 5 (NIC 3) read half of
    its others, with the same partners in the same rounds."""
    out, _, _ = half_nic
    run = json.loads((out / "run.json").read_text())
    [launch] = [ln for ln in run["confirm"]["launches"] if "rails_of" in ln]
    first, last = launch["rounds"]
    rail_rows = [r for r in rows_of(out) if r["pattern"] == "rail" and first <= r["round"] <= last
                 and "node0005" in r["hosts"] and r["bytes"] == 1 << 30]
    assert {r["ranks"] for r in rail_rows} == {2}
    by_gpu = {k: [r["busbw_GBps"] for r in rail_rows if r["rail"] == k] for k in range(8)}
    assert all(len(v) == launch["phases_run"] == 3 for v in by_gpu.values())
    healthy = min(min(by_gpu[k]) for k in (0, 1, 2, 3, 6, 7))
    assert max(by_gpu[4] + by_gpu[5]) < 0.65 * healthy
    # the report, rebuilt from the run directory alone, names the same NIC
    r = CliRunner().invoke(cli, ["report", str(out)])
    assert "node0005 NIC mlx5_2/1 (GPU 4's rail, rail switch r3-leaf01)" in r.output


def test_a_slow_node_on_a_rail_fabric_names_no_nic(tmp_path):
    """Every NIC of the node capped: every rail is slow with every partner, so it is the node."""
    out = tmp_path / "node"
    code, said = simulate(out, "--fault", "node:node0012=0.6", "--seed", "4")
    assert code == 2, said
    assert "# rail re-test node0012: no NIC named (every rail is slow: the node, not one NIC)" in said
    assert [f["rule"] for f in findings(out) if f["subject"] == "node0012"] == ["slow_node"]
    assert {v["verdict"] for v in retests(out).values() if v["kind"] == "nic"} == {"cleared"}


def test_a_healthy_rail_fabric_names_no_nic(tmp_path):
    out = tmp_path / "healthy"
    code, said = simulate(out, "--seed", "5")
    assert code == 0, said
    assert "rail by rail" not in said
    assert not [f for f in findings(out) if f["rule"] == "slow_rail" or f["severity"] != "info"]


def test_a_nic_re_test_in_run_json_that_names_no_rail_names_no_nic(half_nic, tmp_path):
    """run.json is untrusted: a "nic" re-test whose key names no rail is no finding, and the report
    still names the NIC the well-formed one names."""
    import shutil

    out = tmp_path / "edited"
    shutil.copytree(half_nic[0], out)
    run = json.loads((out / "run.json").read_text())
    bad = dict(run["retests"]["results"]["node0005/rail4"], subject="node0005/railX")
    run["retests"]["results"]["node0005/railX"] = bad
    (out / "run.json").write_text(json.dumps(run))
    r = CliRunner().invoke(cli, ["report", str(out)])
    assert r.exit_code == 2, r.output
    assert [f["evidence"]["nic"] for f in findings(out) if f["rule"] == "slow_rail"] == ["mlx5_2/1"]


def test_a_nodes_network_bound_is_its_ports_times_the_slowest_in_lock_step():
    """The analysis' expectation of a pair over R rails: R x its slowest rail's rate (NCCL's channels
    run in lock-step over the NICs), not the sum: 4 ports, one at 200 Gb/s, bound 4 x 25 GB/s."""
    from netbench.inventory.ceilings import node_links
    from netbench.inventory.model import NIC, NodeInventory

    nics = [NIC(name=f"mlx5_{k}", port=1, link_layer="InfiniBand", state="Active",
                rate_gbps=200.0 if k == 2 else 400.0) for k in range(4)]
    links = node_links(NodeInventory(host="n1", nics=nics))
    assert links.nic_GBps() == pytest.approx(100.0)
    assert links.nic_GBps(2) == pytest.approx(100.0)  # two ranks: the two fastest ports
    assert "(in lock-step: 4 x the slowest)" in links.nic_text()
    even = node_links(NodeInventory(host="n2", nics=[NIC(name=n.name, port=1, link_layer="InfiniBand",
                                                         state="Active", rate_gbps=400.0) for n in nics]))
    assert even.nic_GBps() == pytest.approx(200.0) and even.nic_text() == "4 x 400 Gb/s"


def test_a_budget_the_pair_re_test_spent_leaves_the_nic_unnamed_and_says_why(tmp_path):
    out = tmp_path / "short"
    code, said = simulate(out, "--fault", "nic:node0005/3=0.5", "--seed", "3", "--confirm-budget", "20")
    assert code == 2, said
    assert "# re-test node0005: confirmed" in said
    assert "# rail re-test of node0005 not run: budget: a rail re-test needs ~" in said
    assert [f["rule"] for f in findings(out) if f["subject"] == "node0005"] == ["slow_node"]
    assert not [v for v in retests(out).values() if v["kind"] == "nic"]
