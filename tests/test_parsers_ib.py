"""HCA parsers: ibstat, ibv_devinfo, /sys/class/infiniband, ofed_info."""

from __future__ import annotations

import pytest
from fixtures_path import fixture_files, fixtures_dir, read_fixture
from netbench.inventory.parsers.ibstat import ibpanic_message, parse_ibstat
from netbench.inventory.parsers.ibv_devinfo import parse_ibv_devinfo
from netbench.inventory.parsers.ofed import parse_ofed_info
from netbench.inventory.parsers.sysfs_ib import dump_tree, parse_sysfs_ib

IBSTAT = "public/ibstat/leptonai-gpud__ibstat."


def test_ibstat_roce_cx7_and_cx6dx() -> None:
    nics = parse_ibstat(read_fixture(IBSTAT + "47.0.h100.all.active.1"))
    assert len(nics) == 12
    assert [n.name for n in nics[:3]] == ["mlx5_0", "mlx5_1", "mlx5_10"]  # ibstat's lexical order kept
    n0 = nics[0]
    assert (n0.hca_type, n0.firmware, n0.rate_gbps, n0.link_layer) == (
        "MT4129",
        "28.39.1002",
        400.0,
        "Ethernet",
    )
    assert (n0.state, n0.phys_state, n0.port) == ("Active", "LinkUp", 1)
    assert n0.node_guid == "0xa088c20300e3142a" and n0.port_guid == "0xa288c2fffee3142a"
    cx6 = [n for n in nics if n.hca_type == "MT4125"]
    assert (
        len(cx6) == 4
        and {n.firmware for n in cx6} == {"22.39.1002"}
        and {n.rate_gbps for n in cx6} == {100.0}
    )
    assert all(n.port_guid is None for n in cx6)  # Port GUID 0x0 means none
    assert ibpanic_message(read_fixture(IBSTAT + "47.0.h100.all.active.1")) is None


def test_ibstat_ndr_ib_and_bluefield_space_indented() -> None:
    nics = parse_ibstat(read_fixture(IBSTAT + "47.0.h100.all.active.2"))
    assert len(nics) == 9
    ib = [n for n in nics if n.link_layer == "InfiniBand"]
    assert (
        len(ib) == 8 and {n.firmware for n in ib} == {"28.41.1000"} and {n.rate_gbps for n in ib} == {400.0}
    )
    bond = next(n for n in nics if n.name == "mlx5_bond_0")
    assert (bond.hca_type, bond.firmware, bond.rate_gbps, bond.link_layer) == (
        "MT41692",
        "32.38.3056",
        200.0,
        "Ethernet",
    )


def test_ibstat_some_ports_down() -> None:
    nics = {n.name: n for n in parse_ibstat(read_fixture(IBSTAT + "47.0.h100.some.down.with.polling.1"))}
    assert (nics["mlx5_11"].state, nics["mlx5_11"].phys_state, nics["mlx5_11"].rate_gbps) == (
        "Down",
        "Polling",
        40.0,
    )
    assert (nics["mlx5_5"].state, nics["mlx5_5"].phys_state) == ("Down", "Disabled")
    assert sum(n.state == "Active" for n in nics.values()) == 10


def test_ibstat_partial_output_with_ibpanic() -> None:
    text = read_fixture(IBSTAT + "39.0.a100.failed.ibpanic.exit-255.0")
    nics = parse_ibstat(text)
    assert [n.name for n in nics] == [f"mlx5_{i}" for i in range(8)]
    assert {n.firmware for n in nics} == {"20.41.1000"} and {n.rate_gbps for n in nics} == {200.0}
    assert nics[0].node_guid == "0x00155dfffe3411eb"
    assert "mlx5_8" in (ibpanic_message(text) or "")


def test_ibstat_kaust_hdr100() -> None:
    (n,) = parse_ibstat(read_fixture("public/ibstat/kaust-rccl-ksl-docs__interconnect.rst_ibstat.txt"))
    assert (n.name, n.hca_type, n.firmware, n.rate_gbps, n.link_layer) == (
        "mlx5_0",
        "MT4123",
        "20.35.1012",
        100.0,
        "InfiniBand",
    )


def test_ibv_devinfo_tabs() -> None:
    (n,) = parse_ibv_devinfo(
        read_fixture("public/ibv_devinfo/kaust-rccl-ksl-docs__interconnect.rst_ibv_devinfo.txt")
    )
    assert (n.name, n.firmware, n.board_id, n.hca_type) == ("mlx5_0", "20.35.1012", "MT_0000000222", "MT4123")
    assert (n.state, n.link_layer, n.node_guid) == ("Active", "InfiniBand", "0xb8599f030022626e")


def test_ibv_devinfo_mixed_firmware_on_one_host() -> None:
    nics = parse_ibv_devinfo(
        read_fixture("public/ibv_devinfo/luigifcruz-stelline__asus-esc8000a-e12.md_ibv_devinfo.txt")
    )
    assert [(n.name, n.firmware) for n in nics] == [
        ("mlx5_0", "28.41.1000"),
        ("mlx5_1", "28.41.1000"),
        ("mlx5_2", "28.43.2566"),
        ("mlx5_3", "28.43.2566"),
    ]
    assert {(n.board_id, n.hca_type, n.state, n.link_layer) for n in nics} == {
        ("MT_0000000834", "MT4129", "Down", "Ethernet")
    }


def test_sysfs_tree() -> None:
    (root,) = [p for p in (fixtures_dir() / "public/sysfs-infiniband").iterdir() if p.is_dir()]
    assert len(fixture_files("public/sysfs-infiniband")) == 63
    nics = parse_sysfs_ib(dump_tree(root))
    assert [n.name for n in nics] == ["mlx5_0", "mlx5_1"] + [f"mlx5_{i}" for i in range(4, 10)] + [
        "mlx5_bond_0"
    ]
    n0 = nics[0]
    assert (n0.firmware, n0.board_id, n0.hca_type) == ("28.41.1000", "MT_0000000838", "MT4129")
    assert (n0.rate_gbps, n0.state, n0.phys_state, n0.link_layer) == (400.0, "Active", "LinkUp", "InfiniBand")
    bond = nics[-1]
    assert (bond.firmware, bond.board_id, bond.rate_gbps, bond.link_layer) == (
        "32.38.3056",
        "MT_0000000884",
        200.0,
        "Ethernet",
    )


def test_sysfs_probe_dump_with_pci_and_netdev() -> None:
    text = (
        "/sys/class/infiniband/mlx5_0/fw_ver: 28.39.1002\n"
        "/sys/class/infiniband/mlx5_0/node_guid: a088:c203:00e3:142a\n"
        "/sys/class/infiniband/mlx5_0/device: 0000:1A:00.0\n"
        "/sys/class/infiniband/mlx5_0/device/current_link_speed: 32.0 GT/s PCIe\n"
        "/sys/class/infiniband/mlx5_0/device/current_link_width: 16\n"
        "/sys/class/infiniband/mlx5_0/device/net: ens1f0np0\n"
        "/sys/class/infiniband/mlx5_0/ports/1/rate: 400 Gb/sec (4X NDR)\n"
    )
    (n,) = parse_sysfs_ib(text)
    assert (n.firmware, n.node_guid, n.pci_bus_id, n.pcie_speed, n.pcie_width, n.netdev, n.rate_gbps) == (
        "28.39.1002",
        "0xa088c20300e3142a",
        "0000:1a:00.0",
        "32.0 GT/s PCIe",
        16,
        "ens1f0np0",
        400.0,
    )


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("DaoCloud-DaoCloud-docs__ofed_driver.md_ofed_info_-s.txt", "MLNX_OFED_LINUX-23.07-0.5.1.2"),
        ("DaoCloud-DaoCloud-docs__ofed_driver.md_ofed_info_firstline.txt", "MLNX_OFED_LINUX-23.10-1.1.9.0"),
    ],
)
def test_ofed_info(name: str, version: str) -> None:
    assert parse_ofed_info(read_fixture(f"public/ofed_info/{name}")) == version


def test_ofed_info_missing() -> None:
    assert parse_ofed_info("sh: 1: ofed_info: not found\n") is None
