"""``ethtool -i``: driver, driver version, firmware and PSID, PCI bus for every fixture."""

from __future__ import annotations

import pytest
from fixtures_path import read_fixture
from netbench.inventory.parsers.ethtool import parse_ethtool_i

CASES = [
    (
        "sigitp-git-ubuntu-mlnx-dpdk__saturation-test.sh_ethtool-i_net1_node1.txt",
        "net1",
        ("mlx5_core", "6.1.106-116.188.amzn2023.x86_64", "28.42.1000", "MT_0000000834", "0001:16:00.3"),
    ),
    (
        "linux-mailinglist-archives-linux-rdma__msg-20241126081824.afd7197d3a54c5242c4bb4b5_ethtool-i_ibp129s0f0.txt",
        "ibp129s0f0",
        ("mlx5_core[ib_ipoib]", "6.10.11-amd64", "20.40.1000", "MT_0000000224", "0000:81:00.0"),
    ),
    (
        "UNRESOLVED-index-69764464742__3FS-troubleshooting-doc_ethtool-i_ens4np0.txt",
        "ens4np0",
        ("mlx5_core", "23.10-1.1.9", "28.39.3560", "MT_0000000838", "0000:e6:00.0"),
    ),
    (
        "canonical-hotsos__openstack_sos_commands_networking_ethtool_-i_ens3",
        "ens3",
        ("virtio_net", "1.0.0", None, None, "0000:00:03.0"),
    ),
    (
        "prometheus-node_exporter__collector_fixtures_ethtool_eth0_driver",
        "eth0",
        ("e1000e", "5.11.0-22-generic", "0.5-4", None, "0000:00:1f.6"),
    ),
]


@pytest.mark.parametrize(("name", "netdev", "expected"), CASES, ids=[c[1] for c in CASES])
def test_ethtool_i(name: str, netdev: str, expected: tuple) -> None:
    n = parse_ethtool_i(read_fixture(f"public/ethtool-i/{name}"), netdev)
    assert (n.name, n.netdev) == (netdev, netdev)
    assert (n.driver, n.driver_version, n.firmware, n.board_id, n.pci_bus_id) == expected


def test_ethtool_not_output() -> None:
    with pytest.raises(ValueError):
        parse_ethtool_i("Cannot get driver information: Operation not supported\n", "lo")
