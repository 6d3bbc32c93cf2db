"""Ethernet link rates from ``ethtool <netdev>`` (real captures under tests/data/ethtool, SOURCES.md
there), into the inventory and from there into the ceiling of an Ethernet-only run."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures_path import fixture
from netbench.inventory.assemble import Section, build_inventory
from netbench.inventory.ceilings import node_links
from netbench.inventory.model import NodeInventory
from netbench.inventory.parsers.ethtool_link import EthLink, parse_ethtool_link
from netbench.reports.ceilings import headlines, references

DATA = Path(__file__).parent / "data" / "ethtool"
E1000E = DATA / "prometheus-node_exporter__collector_fixtures_ethtool_eth0_settings"
VETH = DATA / "generated-veth-linux-6.18-ethtool-6.1__ethtool_veth.txt"
E1000E_I = "public/ethtool-i/prometheus-node_exporter__collector_fixtures_ethtool_eth0_driver"


def test_speed_and_carrier_from_real_captures() -> None:
    assert parse_ethtool_link(E1000E.read_text()) == EthLink(speed_gbps=1.0, link_detected=True)
    assert parse_ethtool_link(VETH.read_text()) == EthLink(speed_gbps=10.0, link_detected=True)
    down = "Settings for eth3:\n\tSpeed: Unknown!\n\tLink detected: no\n"
    assert parse_ethtool_link(down) == EthLink(None, False)
    with pytest.raises(ValueError, match="not ethtool link settings"):
        parse_ethtool_link(fixture(E1000E_I).read_text())  # ethtool -i: another format


def eth_node(host: str, settings: str | None) -> dict:
    sections = {"ethtool-i:eth0": Section("ethtool-i:eth0", 0, fixture(E1000E_I).read_text()),
                "end": Section("end", 0, "")}
    if settings is not None:
        sections["ethtool:eth0"] = Section("ethtool:eth0", 0, settings)
    return build_inventory(host, sections).to_dict()


def test_an_ethernet_only_node_gets_its_port_rate_and_a_ceiling() -> None:
    a, b = eth_node("a", E1000E.read_text()), eth_node("b", E1000E.read_text())
    (nic,) = a["nics"]
    assert (nic["name"], nic["driver"], nic["rate_gbps"], nic["state"]) == ("eth0", "e1000e", 1.0, "Active")
    assert node_links(NodeInventory.from_dict(a)).nic_GBps() == pytest.approx(0.125)
    rows = [{"collective": "all_reduce", "pattern": "ring", "hosts": ["a", "b"], "ranks": 2, "bytes": s,
             "busbw_GBps": 0.1, "algbw_GBps": 0.1, "backend": "gloo", "status": "ok", "group": "ring"}
            for s in (16 << 20, 32 << 20, 64 << 20)]
    (h,) = headlines(rows, [a, b], references())
    assert h.ceiling_text() == "80% of ceiling 0.1 GB/s (slowest node a: 1 x 1 Gb/s = 0.1 GB/s)"


def test_without_the_settings_the_rate_stays_unknown_and_a_bad_section_is_named() -> None:
    (nic,) = eth_node("a", None)["nics"]
    assert nic["rate_gbps"] is None
    bad = eth_node("a", "driver: e1000e\n")
    assert bad["nics"][0]["rate_gbps"] is None
    assert bad["missing"]["nics:ethtool:eth0"].startswith("parse error in ethtool:eth0: not ethtool link")
