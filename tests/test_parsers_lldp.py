"""LLDP neighbours from every lldpcli/lldpctl fixture shape (json, json0, one port, keyvalue)."""

from __future__ import annotations

import pytest
from fixtures_path import read_fixture
from netbench.inventory.parsers.lldp_json import parse_lldp_json, parse_lldp_keyvalue

GEN = "public/lldpctl-json/generated-lldpd-1.0.16__"
TWO = [
    ("ens1f0np0", "leaf01", "swp1", "8a:fb:f4:6e:07:f1"),
    ("ens2f0np0", "leaf01", "swp2", "8a:fb:f4:6e:07:f1"),
]


def _rows(ns):
    assert all(n.source == "lldp" for n in ns)
    return [(n.local_port, n.switch, n.switch_port, n.switch_id) for n in ns]


@pytest.mark.parametrize(
    "name",
    [
        "lldpcli_-f_json_show_neighbors_details_2ports.json",
        "lldpctl_-f_json.json",
        "lldpcli_-f_json0_show_neighbors_details_2ports.json",
    ],
)
def test_two_ports(name: str) -> None:
    assert _rows(parse_lldp_json(read_fixture(GEN + name))) == TWO


def test_one_port_object_shape() -> None:
    rows = _rows(
        parse_lldp_json(
            read_fixture(GEN + "lldpcli_-f_json_show_neighbors_ports_ens1f0np0_details_1port.json")
        )
    )
    assert rows == TWO[:1]


def test_keyvalue() -> None:
    assert _rows(parse_lldp_keyvalue(read_fixture(GEN + "lldpcli_-f_keyvalue_show_neighbors.txt"))) == TWO


def test_juniper_router() -> None:
    rows = _rows(
        parse_lldp_json(
            read_fixture("public/lldpctl-json/voxpupuli-puppet-lldpd__lldp_spec.rb_command_output1.json")
        )
    )
    assert rows == [("eno1", "router", "ge-1/0/1", "10:0e:7e:aa:aa:aa")]


def test_chassis_without_sysname() -> None:
    rows = _rows(
        parse_lldp_json(
            read_fixture("public/lldpctl-json/voxpupuli-puppet-lldpd__lldp_spec.rb_command_output2.json")
        )
    )
    assert rows == [("enp3s0", None, "g17", "44:94:fc:9d:55:0a")]


def test_empty_and_bad() -> None:
    assert parse_lldp_json('{"lldp": {}}') == []
    assert parse_lldp_json('{"lldp": [ { } ]}') == []
    with pytest.raises(ValueError):
        parse_lldp_json('{"other": 1}')
