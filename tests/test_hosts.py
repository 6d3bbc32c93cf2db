"""Hosts files: the real public formats, labels, validation errors with FILE:LINE, duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures_path import fixture_files
from netbench.inventory.hosts import parse_hosts_file, parse_hosts_text, validate_hostname

from netbench.common.errors import UsageError

PUBLIC = {p.name: p for p in fixture_files("public/hostfile")}


def test_public_hostfiles() -> None:
    mpich = parse_hosts_file(PUBLIC["2610jun-mpi__hostfile"])
    assert len(mpich) == 16 and (mpich[0].name, mpich[0].slots) == ("node01", 20)
    assert (mpich[-1].name, mpich[-1].slots) == ("node19", 32)
    ds = parse_hosts_file(PUBLIC["CoinCheung-gdGPT__hostfile"])
    assert [(e.name, e.slots) for e in ds] == [("node1", 8), ("node2", 2), ("node3", 4), ("node4", 1)]
    bare = parse_hosts_file(PUBLIC["Damin3927-llm2025compet__hostfile"])
    assert [e.name for e in bare] == ["osk-gpu54", "osk-gpu56", "osk-gpu91"]
    assert all(e.slots is None and e.labels == {} for e in bare)
    fdu = parse_hosts_file(PUBLIC["FDU-SC-ASC26-AMSS-NCKU__hostfile"])
    assert [(e.name, e.slots) for e in fdu] == [("node-a", 128), ("node-b", 128)]
    assert fdu[1].source.endswith("FDU-SC-ASC26-AMSS-NCKU__hostfile:2")


def test_every_public_hostfile_parses() -> None:
    for path in PUBLIC.values():
        assert parse_hosts_file(path), path


def test_hostlists_labels_comments() -> None:
    text = """# fleet
gpu[01-03] slots=8 switch=leaf3 rack=r12   # three nodes
login1:4
big user=ops port=2222 python=/opt/conda/bin/python3 gpus=0-3
big gpus=4-7

10.0.0.7
fe80::1 switch=mgmt
"""
    hosts = parse_hosts_text(text, "h.txt")
    names = ["gpu01", "gpu02", "gpu03", "login1", "big", "big", "10.0.0.7", "fe80::1"]
    assert [e.name for e in hosts] == names
    assert hosts[0].labels == {"switch": "leaf3", "rack": "r12"} and hosts[2].slots == 8
    assert hosts[0].source == "h.txt:2" and hosts[3].slots == 4
    assert hosts[4].labels["python"] == "/opt/conda/bin/python3" and hosts[4].gpus == "0-3"
    assert hosts[5].source == "h.txt:5"


@pytest.mark.parametrize(
    ("text", "line", "why"),
    [
        ("ok\nbad;name\n", 2, "not allowed"),
        ("a\n\n$(reboot)\n", 3, "not allowed"),
        ("a switch=le af\n", 1, "expected key=value"),
        ("a switch=x`id`\n", 1, "not allowed in label switch"),
        ("a port=99999\n", 1, "not a TCP port"),
        ("a port=22;ls\n", 1, "not allowed"),
        ("a user=-oops\n", 1, "not a valid user"),
        ("a slots=0\n", 1, "slots=0"),
        ("a:x\n", 1, "bad slot count"),
        ("a slots=2 slots=3\n", 1, "given twice"),
        ("n[3-1]\n", 1, "backwards"),
        ("a\nb\na\n", 3, "duplicate host a (first at f:1)"),
        ("a gpus=0\na\n", 2, "duplicate host a"),
        ("a gpus=0\na gpus=0\n", 2, "duplicate"),
        ("n[1-3]\nn2\n", 2, "duplicate host n2"),
        ("-oBatchMode\n", 1, "must start with"),
        ("a" * 254 + "\n", 1, "longer than"),
        ("a python=/bin/\n", 1, "not a program"),
        ("a gpus=all\n", 1, "GPU indices"),
        ("a =x\n", 1, "bad label name"),
        ("a b=\n", 1, "no value"),
    ],
)
def test_bad_lines_name_file_and_line(text: str, line: int, why: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_hosts_text(text, "f")
    assert str(exc.value).startswith(f"f:{line}: ") and why in str(exc.value)
    assert exc.value.exit_code == 2


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not found"):
        parse_hosts_file(tmp_path / "missing")
    (tmp_path / "empty").write_text("# nothing\n\n")
    with pytest.raises(UsageError, match="no hosts"):
        parse_hosts_file(tmp_path / "empty")
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match="UTF-8"):
        parse_hosts_file(tmp_path / "bin")


def test_validate_hostname() -> None:
    assert validate_hostname("node-01.cluster.local") is None
    assert validate_hostname("10.77.2.1") is None and validate_hostname("::1") is None
    for bad in ("", "a b", "a..b", "a|b", "a:b", "é"):
        assert validate_hostname(bad), bad


def test_host_cap_is_per_file_not_per_expression(monkeypatch) -> None:
    import netbench.inventory.hosts as hosts

    monkeypatch.setattr(hosts, "MAX_HOSTS", 50)
    assert len(parse_hosts_text("a[1-30]\nb[1-20]\n")) == 50
    with pytest.raises(UsageError, match=r"^f:2: f lists more than 50 hosts$"):
        parse_hosts_text("a[1-30]\nb[1-21]\n", "f")


@pytest.mark.parametrize(
    "name, ok",
    [("fe80::1%eth0", True), ("fe80::1%2", True), ("fe80::1%eth0;reboot", False), ("fe80::1%", False),
     ("fe80::1%$(id)", False)],
)
def test_ipv6_zone_is_checked(name: str, ok: bool) -> None:
    assert (validate_hostname(name) is None) == ok


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c"])
def test_unicode_line_separator_is_one_clear_error(sep: str) -> None:
    with pytest.raises(UsageError, match=r"^hosts:2: .* inside the line; use one host per line$"):
        parse_hosts_text(f"node1\nnode2{sep}node3 slots=2\n", "hosts")


@pytest.mark.parametrize(
    "text", ["host:\u00b2", "host:\u0663", "host:99999999999999999999", "h slots=9999999999"]
)
def test_odd_slot_counts_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match=r"^hosts:1: "):
        parse_hosts_text(text + "\n", "hosts")
