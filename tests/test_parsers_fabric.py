"""InfiniBand fabric discovery: ibnetdiscover (both formats), iblinkinfo (both), and the step from
fabric links to the switch port each local HCA is cabled to."""

from __future__ import annotations

import pytest
from fixtures_path import read_fixture
from netbench.inventory.parsers._ib import neighbors_from_links
from netbench.inventory.parsers.iblinkinfo import parse_iblinkinfo
from netbench.inventory.parsers.ibnetdiscover import parse_ibnetdiscover

SIM = "generated-ibsim-0.10_infiniband-diags-44.0__"


def _nb(ns):
    return [(n.local_port, n.switch, n.switch_port, n.switch_id) for n in ns]


@pytest.mark.parametrize(
    "name",
    [
        f"ibnetdiscover/{SIM}ibnetdiscover.txt",
        f"ibnetdiscover/{SIM}ibnetdiscover_-p.txt",
        f"iblinkinfo/{SIM}iblinkinfo.txt",
        f"iblinkinfo/{SIM}iblinkinfo_-l.txt",
    ],
)
def test_simulated_fabric_neighbors(name: str) -> None:
    text = read_fixture(f"public/{name}")
    links = parse_iblinkinfo(text) if "iblinkinfo" in name else parse_ibnetdiscover(text)
    assert _nb(neighbors_from_links(links, ["gpu-node01"])) == [
        ("mlx5_0", "leaf01", "1", "0x0000000000200000")
    ]
    assert _nb(neighbors_from_links(links, ["gpu-node04.cluster.local"])) == [
        ("mlx5_0", "leaf02", "2", "0x0000000000200001")
    ]
    assert neighbors_from_links(links, ["spine01"]) == [] or all(
        n.switch != "spine01" for n in neighbors_from_links(links, ["spine01"])
    )


def test_neighbors_by_local_guid() -> None:
    links = parse_iblinkinfo(read_fixture(f"public/iblinkinfo/{SIM}iblinkinfo_-l.txt"))
    ns = neighbors_from_links(links, [], local_guids={"0x0000000000100005": "mlx5_0"}, source="iblinkinfo")
    assert _nb(ns) == [("mlx5_0", "leaf02", "1", "0x0000000000200001")] and ns[0].source == "iblinkinfo"


def test_ibnetdiscover_topology_details() -> None:
    links = parse_ibnetdiscover(read_fixture(f"public/ibnetdiscover/{SIM}ibnetdiscover.txt"))
    assert len(links) == 14
    ca = next(lk for lk in links if lk.src_desc == "gpu-node04 mlx5_0")
    assert (ca.src_type, ca.src_guid, ca.src_lid, ca.dst_type, ca.dst_desc, ca.dst_port, ca.dst_lid) == (
        "CA",
        "0x0000000000100007",
        7,
        "SW",
        "leaf02",
        2,
        3,
    )
    assert (ca.width, ca.speed) == ("4X", "SDR")


def test_ibnetdiscover_ports_format() -> None:
    links = parse_ibnetdiscover(read_fixture(f"public/ibnetdiscover/{SIM}ibnetdiscover_-p.txt"))
    assert len(links) == 3 * 36 + 4
    assert sum(lk.connected for lk in links) == 4 + 2 + 3 + 3 + 2  # CA ends + switch ends


def test_ibnetdiscover_stderr_line_and_mixed_speeds() -> None:
    links = parse_ibnetdiscover(read_fixture("public/ibnetdiscover/jabl-ibtopotool__3.topo"))
    assert {lk.speed for lk in links} == {"EDR", "FDR", "QDR", "SDR"}
    assert _nb(neighbors_from_links(links, ["r-ufm101"])) == [
        ("HCA-1", "MF0;switch-de779e:SX6012/U1", "2", "0xf4521403005764b0"),
        ("HCA-2", "MF0;switch-de779e:SX6012/U1", "3", "0xf4521403005764b0"),
    ]
    assert _nb(neighbors_from_links(links, ["r-ufm111"])) == [
        ("HCA-1", "SwitchIB Mellanox Technologies", "35", "0xe41d2d030003e470")
    ]


def test_ibnetdiscover_2009_sdr() -> None:
    links = parse_ibnetdiscover(read_fixture("public/ibnetdiscover/jabl-ibtopotool__2.topo"))
    assert len(links) == 4
    assert _nb(neighbors_from_links(links, ["compute-00-00"])) == [
        ("HCA-1", "MT43132 Mellanox Technologies", "2", "0x000b8cffff0053ee")
    ]


def test_ibnetdiscover_ports_edr_and_unknown_speed() -> None:
    links = parse_ibnetdiscover(
        read_fixture("public/ibnetdiscover/treydock-infiniband_exporter__ibnetdiscover-ports_test.out")
    )
    assert len(links) == 9
    unconnected = [lk for lk in links if not lk.connected]
    assert [(lk.src_desc, lk.src_port, lk.speed) for lk in unconnected] == [
        ("ib-i4l1s01", 37, None),
        ("ib-i7l2s01", 80, "SDR"),
    ]
    assert _nb(neighbors_from_links(links, ["p0001"])) == [
        ("HCA-1", "ib-i4l1s01", "35", "0x506b4b03005c2740")
    ]


def test_ibnetdiscover_ports_names_with_spaces() -> None:
    links = parse_ibnetdiscover(
        read_fixture("public/ibnetdiscover/treydock-infiniband_exporter__ibnetdiscover-ports_test2.out")
    )
    assert len(links) == 6
    assert _nb(neighbors_from_links(links, ["worker20"])) == [
        ("mlx5_3", "5FB0405-leaf-IB01", "79", "0x946dae0300630bf6")
    ]
    assert {lk.src_desc for lk in links if lk.src_type == "SW" and not lk.connected} >= {"5FB0406-spine-IB02"}


def test_fabric_net_input_is_not_discovery_output() -> None:
    # ibsim's fabric description (the simulator's input, kept for reference) has no discovery lines.
    with pytest.raises(ValueError):
        parse_ibnetdiscover(read_fixture(f"public/ibnetdiscover/{SIM}fabric.net.input"))


def test_iblinkinfo_down_ports_and_states() -> None:
    links = parse_iblinkinfo(read_fixture(f"public/iblinkinfo/{SIM}iblinkinfo.txt"))
    down = [lk for lk in links if lk.state == "Down"]
    assert len(links) == 4 + 3 * 36 and len(down) == 3 * 36 - 10  # 10 switch ports are cabled
    assert all(lk.phys_state == "Polling" and not lk.connected for lk in down)
    up = next(lk for lk in links if lk.src_desc == "leaf01" and lk.src_port == 35)
    assert (up.src_type, up.width, up.speed, up.dst_desc, up.dst_port, up.dst_lid) == (
        "SW",
        "4X",
        "2.5 Gbps",
        "spine01",
        1,
        4,
    )
