"""collect_inventory without test hosts: failures become records, split nodes are probed once."""

from __future__ import annotations

from pathlib import Path

from netbench.inventory.hosts import parse_hosts_text

from netbench.sites.ssh.inventory import collect_inventory
from netbench.sites.ssh.transport import SSHOptions


def test_refused_host_becomes_a_record_and_split_node_is_probed_once(tmp_path: Path) -> None:
    entries = parse_hosts_text("127.0.0.1 port=1 gpus=0-3 rack=r1\n127.0.0.1 port=1 gpus=4-7 rack=r1\n")
    seen = []
    nodes = collect_inventory(entries, SSHOptions(ssh_config="none", known_hosts=tmp_path / "kh"),
                              progress=lambda done, total, inv: seen.append((done, total, inv.host)))
    assert len(nodes) == 1 and seen == [(1, 1, "127.0.0.1")]
    (n,) = nodes
    assert n.status == "unreachable" and "refused" in n.error and n.labels == {"port": "1", "rack": "r1"}
    assert not n.ok and n.probe_seconds is not None


def test_bad_ssh_config_value_is_that_hosts_error(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.write_text("Host n1\n  HostName bad;name\n")
    (n,) = collect_inventory(parse_hosts_text("n1\n"), SSHOptions(ssh_config=cfg))
    assert n.status == "error" and "HostName" in n.error
