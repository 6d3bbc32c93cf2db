"""Port counters: the probe's dump of a real sysfs tree (leptonai/gpud's H100 capture, with its
counters), real ``ethtool -S`` output (a veth captured here, node_exporter's fixture), the deltas
between two snapshots and the findings that name the port."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from netbench.inventory.assemble import build_inventory, split_sections
from netbench.inventory.local import read_probe_script
from netbench.inventory.parsers.port_counters import is_error, parse_ethtool_s, parse_ib_counters
from netbench.reports.context import AnalysisContext
from netbench.reports.counters import counter_deltas
from netbench.reports.rules import port_counters

DATA = Path(__file__).parent / "data"
TREE = DATA / "sysfs-infiniband" / "leptonai-gpud__sys-class-infiniband-h100.0"
ETHTOOL = DATA / "ethtool-S"


def probe_counters(root: Path) -> str:
    """The real probe in counters-only mode over a sysfs tree."""
    proc = subprocess.run(["sh", "-s", "--", "python3", "n0", "counters"], input=read_probe_script(),
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NETBENCH_IB_SYSFS": str(root),
                               "NETBENCH_NET_SYSFS": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def snapshot(host: str, root: Path, phase: str) -> dict:
    inv = build_inventory(host, split_sections(probe_counters(root), nonce="n0"))
    return {"phase": phase, "host": host, "status": inv.status, "ports": [
        {"port": p.port, "source": p.source, "counters": p.counters} for p in inv.counters]}


def test_probe_and_parser_read_every_counter_file_of_the_real_tree():
    section = split_sections(probe_counters(TREE), nonce="n0")["ib-counters"]
    ports = {p.port: p for p in parse_ib_counters(section.text)}
    devices = sorted(d.name for d in TREE.iterdir())
    assert sorted(ports) == [f"{d}/1" for d in devices]
    for name in ("port_rcv_errors", "excessive_buffer_overrun_errors", "symbol_error", "out_of_sequence"):
        where = "counters" if (TREE / "mlx5_0/ports/1/counters" / name).exists() else "hw_counters"
        assert ports["mlx5_0/1"].counters[name] == int((TREE / "mlx5_0/ports/1" / where / name).read_text())
    files = list((TREE / "mlx5_0/ports/1").glob("*counters/*"))
    assert len(ports["mlx5_0/1"].counters) == len(files)


def test_hostile_or_broken_counter_lines_are_skipped():
    text = ("mlx5_0/ports/1/counters/symbol_error: 3\n"
            "mlx5_0/ports/1/counters/<script>: 1\n"
            "mlx5_0/ports/1/counters/link_downed: N/A\n"
            "mlx5_0/ports/1/counters/port_rcv_errors: -4\n")
    (p,) = parse_ib_counters(text)
    assert p.counters == {"symbol_error": 3}


def test_ethtool_s_of_a_real_veth_and_a_real_nic():
    veth_file = ETHTOOL / "generated-veth-linux-6.18-ethtool-6.1__ethtool_-S_veth.txt"
    veth = parse_ethtool_s(veth_file.read_text(), "nbceil-a")
    assert veth.port == "nbceil-a" and veth.source == "ethtool" and "rx_queue_0_drops" in veth.counters
    assert "peer_ifindex" not in veth.counters and "rx_queue_0_xdp_drops" not in veth.counters  # not judged
    nic = parse_ethtool_s((ETHTOOL / "prometheus-node_exporter__collector_fixtures_ethtool_eth0_statistics")
                          .read_text(), "eth0")
    assert nic.counters["rx_missed"] == 401 and nic.counters["rx_packets"] == 1260062
    assert "rx_unicast" not in nic.counters and "duplicate_metric" not in nic.counters  # neither judged
    assert "duplicate metric" not in nic.counters  # a name with a space is not a counter name
    lo = parse_ethtool_s((ETHTOOL / "generated-linux-6.18-ethtool-6.1__ethtool_-S_lo.txt").read_text(), "lo")
    assert lo.counters == {}
    with pytest.raises(ValueError):
        parse_ethtool_s("driver: mlx5_core\nversion: 5.0\n", "eth0")
    with pytest.raises(ValueError):
        parse_ethtool_s("NIC statistics:\n     rx_errors: 1\n", "eth0<img>")


def test_error_counter_names():
    assert is_error("symbol_error", "sysfs-ib") and not is_error("port_rcv_data", "sysfs-ib")
    assert not is_error("roce_adp_retrans", "sysfs-ib")  # congestion, not a broken link
    assert is_error("rx_crc_errors_phy", "ethtool") and is_error("rx_missed", "ethtool")
    assert not is_error("rx_corrected_bits_phy", "ethtool")
    assert not is_error("rx_queue_0_xdp_drops", "ethtool")


def _bump(root: Path, port: str, name: str, by: int) -> None:
    for where in ("counters", "hw_counters"):
        f = root / port / "ports/1" / where / name
        if f.exists():
            f.write_text(f"{int(f.read_text()) + by}\n")
            return
    raise FileNotFoundError(name)


def test_counters_that_rise_on_one_port_are_a_finding_on_that_port(tmp_path: Path):
    tree = tmp_path / "ib"
    shutil.copytree(TREE, tree)
    before = snapshot("gpu07", tree, "before")
    _bump(tree, "mlx5_4", "symbol_error", 7)
    _bump(tree, "mlx5_4", "port_rcv_errors", 2)
    _bump(tree, "mlx5_6", "link_downed", 1)
    _bump(tree, "mlx5_0", "port_xmit_data", 10**9)  # traffic: not an error
    _bump(tree, "mlx5_1", "roce_adp_retrans", 5)  # congestion: not an error
    after = snapshot("gpu07", tree, "after")
    found = port_counters.check(AnalysisContext.from_data([], counters=[before, after]))
    by_port = {f.evidence["port"]: f for f in found}
    assert sorted(by_port) == ["mlx5_4/1", "mlx5_6/1"]
    err, flap = by_port["mlx5_4/1"], by_port["mlx5_6/1"]
    assert (err.rule, err.severity, err.subject, err.hosts) == ("port_errors", "warn", "gpu07", ["gpu07"])
    assert err.evidence["errors"] == {"symbol_error": 7, "port_rcv_errors": 2}
    assert "gpu07 mlx5_4/1" in err.title and "symbol_error +7" in err.title
    assert (flap.rule, flap.severity, flap.evidence["link_flaps"]) == ("link_flap", "fail", 1)


def test_a_counter_that_went_back_is_named_not_judged(tmp_path: Path):
    tree = tmp_path / "ib"
    shutil.copytree(TREE, tree)
    before = snapshot("h", tree, "before")
    (tree / "mlx5_0/ports/1/counters/port_rcv_errors").write_text("0\n")  # cleared (perfquery -x)
    deltas = counter_deltas([before, snapshot("h", tree, "after")])
    (p,) = [p for p in deltas.ports if p.port == "mlx5_0/1"]
    assert p.went_back == ("port_rcv_errors",) and p.errors == {}


def test_snapshots_of_the_wrong_shape_are_skipped_not_fatal():
    odd = [{"phase": "before", "host": "a", "ports": [{"port": "p", "counters": [1, 2]}, "x"]},
           {"phase": "after", "host": "a", "ports": [{"port": "p", "counters": {"rx_errors": True}}]}]
    assert counter_deltas(odd).ports == ()


def test_hosts_without_both_snapshots_are_named():
    before = {"phase": "before", "host": "a", "ports": [{"port": "x", "source": "ethtool", "counters": {}}]}
    gone = {"phase": "after", "host": "a", "ports": [], "error": "timeout"}
    d = counter_deltas([before, gone, {"phase": "before", "host": "b", "ports": []}])
    assert d.missing == {"a": "timeout", "b": "no after snapshot"} and d.hosts_compared == 0
