"""Inventory rules: versions (firmware/drivers) and link/configuration health."""

from __future__ import annotations

import pytest
from netbench.reports.context import AnalysisContext
from netbench.reports.policy import Expectations, Policy, Versions
from netbench.reports.rules import link_health, versions
from synthetic import make_fleet


@pytest.fixture
def fleet():
    return make_fleet(8, 2, pair_sizes=(1 << 30,), ring_sizes=(), seed=0)


def ctx_of(fleet, **kw) -> AnalysisContext:
    return AnalysisContext.from_data(fleet.rows, fleet.inventory, fleet.env, fleet.run, **kw)


def node(fleet, host):
    return next(n for n in fleet.inventory if n["host"] == host)


def by_rule(findings, rule):
    return [f for f in findings if f.rule == rule]


# -- versions -------------------------------------------------------------------------------------


def test_uniform_fleet_has_no_version_findings(fleet):
    assert versions.check(ctx_of(fleet)) == []


def test_behind_majority_firmware_is_outdated(fleet):
    for nic in node(fleet, "gpu003")["nics"]:
        nic["firmware"] = "28.38.1002"
    found = by_rule(versions.check(ctx_of(fleet)), "outdated_firmware")
    assert [f.subject for f in found] == ["gpu003"]
    ev = found[0].evidence
    assert (
        ev["fleet_majority"] == "28.39.1002" and ev["component"] == "nic_firmware" and ev["model"] == "MT4129"
    )


def test_versions_compared_by_meaning_not_text(fleet):
    # "580.159.4" is the same driver as "580.159.04"; "580.65.06" is older although it sorts later as text
    node(fleet, "gpu001")["driver_version"] = "580.159.4"
    node(fleet, "gpu002")["driver_version"] = "580.65.06"
    found = versions.check(ctx_of(fleet))
    assert [(f.rule, f.subject) for f in found] == [("outdated_firmware", "gpu002")]


def test_vbios_hex_fields_and_ofed_prefixes(fleet):
    node(fleet, "gpu004")["gpus"][0]["vbios"] = "96.00.99.00.01"  # older than 96.00.A5.00.01 (hex)
    node(fleet, "gpu005")["ofed_version"] = "MLNX_OFED_LINUX-23.10-1.1.9.0"
    found = versions.check(ctx_of(fleet))
    got = {(f.rule, f.subject, f.evidence.get("component")) for f in found}
    assert ("outdated_firmware", "gpu005", "ofed") in got
    assert ("firmware_mismatch", "gpu004", "vbios") in got  # one GPU differs from its siblings
    assert ("outdated_firmware", "gpu004", "vbios") in got


def test_below_policy_minimum_fails(fleet):
    pol = Policy(versions=Versions(minimum={"nic_firmware": {"MT4129": "28.40.1000"}, "driver": "550.54.15"}))
    found = versions.check(ctx_of(fleet, policy=pol))
    below = by_rule(found, "version_below_minimum")
    assert len(below) == 1 and below[0].severity == "fail" and below[0].subject_kind == "component"
    assert len(below[0].hosts) == 8 and below[0].evidence["policy_minimum"] == "28.40.1000"


def test_hca_mismatch_within_a_node(fleet):
    node(fleet, "gpu006")["nics"][3]["firmware"] = "28.41.1000"
    found = versions.check(ctx_of(fleet))
    mism = by_rule(found, "firmware_mismatch")
    assert [f.subject for f in mism] == ["gpu006"]
    assert mism[0].evidence["per_device"]["mlx5_3"] == "28.41.1000"


def test_different_nic_models_are_not_compared_with_each_other(fleet):
    for h in ("gpu007", "gpu008"):
        for nic in node(fleet, h)["nics"]:
            nic.update(hca_type="MT4123", firmware="20.40.1000")  # ConnectX-6: its own firmware line
    assert versions.check(ctx_of(fleet)) == []


def test_newer_minority_is_info_only(fleet):
    node(fleet, "gpu001")["cuda_version"] = "13.1"
    found = versions.check(ctx_of(fleet))
    assert [(f.rule, f.severity) for f in found] == [("version_behind_newest", "info")]


@pytest.mark.parametrize("version", ["2.12.0", "2.14.0+cu130"])
def test_one_host_on_another_torch_warns_either_way(fleet, version):
    """Ranks of one job must share torch (and NCCL): a host behind the majority or ahead of it is a
    warning naming that host alone (issue 45: torch 2.12.0 among 2.13.0 gave no finding)."""
    for n in fleet.inventory:
        n["torch_version"] = "2.13.0+cu130"
    node(fleet, "gpu005")["torch_version"] = version
    found = [f for f in versions.check(ctx_of(fleet)) if f.severity != "info"]
    assert [(f.severity, f.subject, f.evidence["component"]) for f in found] == [("warn", "gpu005", "torch")]
    assert "2.13.0+cu130" in found[0].title and version in found[0].title


def test_a_newer_nccl_on_one_host_is_mixed_not_a_rollout(fleet):
    for h in fleet.env["hosts"].values():
        h["nccl"] = "2.27.5"
    next(iter(fleet.env["hosts"].values()))["nccl"] = "2.28.9"
    found = versions.check(ctx_of(fleet))
    assert [(f.rule, f.severity) for f in found] == [("version_mixed", "warn")]


# -- link health ----------------------------------------------------------------------------------


def test_healthy_inventory_has_no_link_findings(fleet):
    assert link_health.check(ctx_of(fleet)) == []


def test_nic_rate_below_max_and_peers(fleet):
    node(fleet, "gpu002")["nics"][1]["rate_gbps"] = 200.0
    found = by_rule(link_health.check(ctx_of(fleet)), "nic_rate_low")
    assert [f.subject for f in found] == ["gpu002"]
    assert "400" in found[0].title and found[0].evidence["nic"] == "mlx5_1"


def test_link_rate_below_policy(fleet):
    pol = Policy(expect=Expectations(link_rate_gbps=800))
    found = by_rule(link_health.check(ctx_of(fleet, policy=pol)), "nic_rate_low")
    assert len(found) == 64  # every port of every node


def test_port_down_where_peers_are_up(fleet):
    node(fleet, "gpu003")["nics"][0].update(state="Down", phys_state="Polling")
    found = by_rule(link_health.check(ctx_of(fleet)), "port_down")
    assert [(f.subject, f.severity) for f in found] == [("gpu003", "fail")]
    # a port down on every node is simply not cabled
    for n in fleet.inventory:
        n["nics"][7].update(state="Down", phys_state="Disabled")
    found = by_rule(link_health.check(ctx_of(fleet)), "port_down")
    assert [f.evidence["nic"] for f in found] == ["mlx5_0"]


def test_gpu_count_pcie_nvlink_unreachable(fleet):
    node(fleet, "gpu001")["gpus"].pop()
    node(fleet, "gpu002")["gpus"][2].update(pcie_width_current=8)
    node(fleet, "gpu003")["gpus"][0].update(pcie_gen_current=1)
    node(fleet, "gpu004")["nvlinks"][1]["up"] = False
    node(fleet, "gpu005").update(status="unreachable", error="connection refused")
    found = link_health.check(ctx_of(fleet))
    got = {(f.rule, f.subject, f.severity) for f in found}
    assert got == {
        ("gpu_count_low", "gpu001", "fail"),
        ("pcie_degraded", "gpu002", "warn"),
        ("pcie_gen_low", "gpu003", "info"),
        ("nvlink_down", "gpu004", "fail"),
        ("node_unreachable", "gpu005", "warn"),
    }


def test_nic_pcie_width_below_peers(fleet):
    node(fleet, "gpu006")["nics"][5]["pcie_width"] = 8
    found = by_rule(link_health.check(ctx_of(fleet)), "pcie_degraded")
    assert [f.subject for f in found] == ["gpu006"] and "mlx5_5 x8 (peers x16)" in found[0].title


def test_gpu_count_against_policy(fleet):
    pol = Policy(expect=Expectations(gpus_per_node=16))
    assert len(by_rule(link_health.check(ctx_of(fleet, policy=pol)), "gpu_count_low")) == 8
