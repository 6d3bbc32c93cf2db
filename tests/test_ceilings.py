"""Ceilings and references: inventories assembled from real captured tool output (../shared/fixtures),
headline rows in nccl-tests' units, the rule, the policy's references and the terminal summary."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures_path import fixture
from netbench.inventory.assemble import Section, build_inventory
from netbench.inventory.ceilings import node_links, pcie_GBps
from netbench.inventory.model import NodeInventory
from netbench.reports.ceilings import headlines, references
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import run_rules
from netbench.reports.policy import PolicyError, Thresholds, policy_from_dict
from netbench.reports.rules import ceiling

from netbench.agents.coordinator import Outcome
from netbench.run.execute import summarize

# 8 x NDR InfiniBand and a 200G Ethernet bond
IBSTAT_8X400 = "public/ibstat/leptonai-gpud__ibstat.47.0.h100.all.active.2"
IBSTAT_ROCE_MIXED = "public/ibstat/leptonai-gpud__ibstat.47.0.h100.some.down.with.polling.1"
A100_XML = "public/nvidia-smi-q-x/influxdata-telegraf__a100-sxm4-v12.xml"
A100_NVLINK = "public/nvidia-smi-nvlink-status/leptonai-gpud__nvidia-smi.nvlink.status.a100"


def node(host: str, **files: str) -> NodeInventory:
    """A NodeInventory assembled by the real parsers from fixture files, one per probe section."""
    sections = {name.replace("_", "-"): Section(name, 0, fixture(path).read_text(errors="replace"))
                for name, path in files.items()}
    sections["end"] = Section("end", 0, "")
    return build_inventory(host, sections)


def h200(host: str, ibstat: str = IBSTAT_8X400) -> NodeInventory:
    return node(host, ibstat=ibstat, **{"nvidia_smi_q_x": "h200-node/nvidia-smi-q-x.txt"})


LARGE = (256 << 20, 512 << 20, 1 << 30)


def rows(hosts: list[str], ranks: int, busbw: float, pattern: str = "world", backend: str = "nccl",
         collective: str = "all_reduce", sizes: tuple[int, ...] = LARGE) -> list[dict]:
    return [
        {"collective": collective, "pattern": pattern, "hosts": hosts, "ranks": ranks, "bytes": b,
         "busbw_GBps": busbw, "algbw_GBps": busbw / 2, "backend": backend, "status": "ok",
         "group": pattern if pattern != "pair" else "pair:" + "|".join(hosts), "in_place": False,
         "dtype": "float32", "time_us": 1.0, "wrong": 0}
        for b in sizes
    ]


def test_node_links_from_real_ibstat_and_nvidia_smi():
    links = node_links(h200("a"))
    assert len(links.nics) == 8 and {n.rate_gbps for n in links.nics} == {400.0}
    assert links.nic_GBps() == pytest.approx(8 * 400 / 8)  # decimal GB/s
    assert any("mlx5_bond_0" in why and "Ethernet" in why for why in links.left_out)
    assert links.gpu_name == "NVIDIA H200" and links.gpu_pcie_GBps == pytest.approx(pcie_GBps(32.0, 16))
    assert links.nvlink_GBps is None and links.nvlink_unknown  # the capture has no nvlink section


def test_down_ports_are_left_out_and_named():
    links = node_links(h200("b", IBSTAT_ROCE_MIXED))
    assert {n.name for n in links.nics} >= {"mlx5_0", "mlx5_1"}
    assert {"mlx5_11", "mlx5_5"} <= {why.split("/")[0] for why in links.left_out if "Down" in why}


def test_nvlink_ceiling_from_real_a100_capture():
    links = node_links(node("a", nvidia_smi_q_x=A100_XML, nvidia_smi_nvlink=A100_NVLINK))
    assert links.nvlink_links == 12 and links.nvlink_GBps == pytest.approx(300.0)  # NVLink 3: 12 x 25
    assert links.nvlink_generation == 3


def test_pcie_rates_per_generation():
    assert pcie_GBps(8.0, 16) == pytest.approx(15.75, rel=1e-3)
    assert pcie_GBps(32.0, 16) == pytest.approx(63.0, rel=1e-3)
    assert pcie_GBps(32.0, None) is None and pcie_GBps(3.0, 16) is None


def test_two_node_ring_ceiling_is_the_slowest_node_and_matches_the_ndr_reference():
    inv = [h200("a"), h200("b")]
    (h,) = headlines(rows(["a", "b"], 16, 370.0), inv, references())
    assert h.ceiling.GBps == pytest.approx(400.0) and "8 x 400 Gb/s" in h.ceiling.basis
    assert h.fraction == pytest.approx(370 / 400)
    assert h.reference is not None and h.reference.ref.id == "ndr-400g-ring"
    assert (h.reference.low_GBps, h.reference.high_GBps) == (8 * 46.0, 8 * 48.0)
    assert h.ceiling_text().startswith("92% of ceiling 400.0 GB/s")
    assert h.exceeds is None

    inv = [h200("a"), h200("slow", IBSTAT_ROCE_MIXED)]
    (h,) = headlines(rows(["a", "slow"], 16, 200.0), inv, references())
    assert "slowest node slow" in h.ceiling.basis and h.ceiling.GBps < 400
    assert h.reference is None  # its ports run at different rates: no per-NIC figure applies


def test_fewer_ranks_than_nics_count_fewer_ports():
    (h,) = headlines(rows(["a", "b"], 2, 40.0), [h200("a"), h200("b")], references())
    assert h.ceiling.GBps == pytest.approx(50.0) and "at most 1 of its 8 ports" in h.ceiling.basis


def test_unknown_ceilings_say_why():
    (cpu,) = headlines(rows(["here"], 4, 1.0, backend="gloo"), [], references())
    assert cpu.ceiling.GBps is None and "loopback" in cpu.ceiling_text()
    (gpu,) = headlines(rows(["here"], 8, 300.0), [], references())
    assert gpu.ceiling_text().startswith("ceiling unknown: the run has no inventory")
    bare = NodeInventory(host="b", missing={"nics": "ibstat not installed"})
    (h,) = headlines(rows(["a", "b"], 16, 100.0), [h200("a"), bare], references())
    assert h.ceiling_text() == "ceiling unknown: b: no NIC rate (ibstat not installed)"


def test_above_the_nic_rate_on_two_nodes_is_explained():
    (h,) = headlines(rows(["a", "b"], 16, 460.0), [h200("a"), h200("b")], references())
    assert h.exceeds and "Tree" in h.exceeds and "NCCL_ALGO=Ring" in h.exceeds
    found = ceiling.check(AnalysisContext.from_data(rows(["a", "b"], 16, 460.0), [h200("a"), h200("b")]))
    assert [(f.rule, f.severity) for f in found] == [("above_ceiling", "info")]


def _ctx(data: list[dict], inv: list[NodeInventory], policy: dict[str, Any] | None = None) -> AnalysisContext:
    return AnalysisContext.from_data(data, inv, policy=policy_from_dict(policy or {}))


def test_below_ceiling_rule_uses_the_policy_factor_and_severity():
    inv = [h200("a"), h200("b")]
    slow = rows(["a", "b"], 16, 150.0)  # 38% of 400 GB/s
    (f,) = ceiling.check(_ctx(slow, inv))
    assert f.rule == "below_ceiling" and f.hosts == ["a", "b"]
    assert f.evidence["ceiling_GBps"] == 400 and "368-384 GB/s" in f.title
    assert ceiling.check(_ctx(rows(["a", "b"], 16, 370.0), inv)) == []
    assert ceiling.check(_ctx(slow, inv, {"thresholds": {"below_ceiling_factor": 0.3}})) == []
    found = run_rules(_ctx(slow, inv, {"severity": {"below_ceiling": "fail"}}))
    assert [f.severity for f in found if f.rule == "below_ceiling"] == ["fail"]


def test_small_sizes_are_not_judged_against_the_ceiling():
    small = rows(["a", "b"], 16, 10.0, sizes=(64 << 10, 128 << 10, 256 << 10))
    assert ceiling.check(_ctx(small, [h200("a"), h200("b")])) == []


def test_pairs_share_one_finding():
    inv = [h200(h) for h in "abcd"]
    data = (rows(["a", "b"], 16, 100.0, "pair") + rows(["c", "d"], 16, 120.0, "pair")
            + rows(["a", "c"], 16, 380.0, "pair"))
    (f,) = ceiling.check(_ctx(data, inv))
    assert f.evidence["pairs_below"] == 2 and f.evidence["pairs_judged"] == 3
    assert f.evidence["worst"][0]["hosts"] == "a|b"


def test_policy_reference_replaces_a_bundled_one_by_id_and_is_validated():
    mine = {"id": "ndr-400g-ring", "collective": "all_reduce", "scope": "per_nic", "nic_gbps": 400.0,
            "low_GBps": 40.0, "high_GBps": 41.0, "source": "our acceptance run"}
    pol = policy_from_dict({"reference": [mine]})
    (h,) = headlines(rows(["a", "b"], 16, 300.0), [h200("a"), h200("b")], references(pol.references))
    assert h.reference is not None and h.reference.high_GBps == 8 * 41.0
    assert h.reference.ref.source == "our acceptance run"
    with pytest.raises(PolicyError, match="source"):
        policy_from_dict({"reference": [{**mine, "source": " "}]})
    with pytest.raises(PolicyError, match="unknown key"):
        policy_from_dict({"reference": [{**mine, "typo": 1}]})
    with pytest.raises(PolicyError, match="below_ceiling_factor"):
        Thresholds(below_ceiling_factor=1.5)


def test_every_bundled_reference_names_its_source():
    refs = references()
    assert refs and all(r.source.startswith("https://") for r in refs)


def test_terminal_summary_prints_the_share_of_ceiling():
    lines: list[str] = []
    inv = [h200("a").to_dict(), h200("b").to_dict()]
    summarize(rows(["a", "b"], 16, 370.0), Outcome(status="completed"), lines.append, inv)
    text = "\n".join(lines)
    assert "large-message busbw  370.000 GB/s" in text
    want = "#   92% of ceiling 400.0 GB/s (slowest node a: 8 x 400 Gb/s = 400.0 GB/s); reference 368-384"
    assert want in text
    lines.clear()
    summarize(rows(["here"], 4, 1.0, backend="gloo"), Outcome(status="completed"), lines.append, [])
    assert any(line.startswith("#   ceiling unknown: CPU ranks on one host") for line in lines)
