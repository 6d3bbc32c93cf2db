"""The real test hosts of tests/netns.py: names, reachability, per-host tools, rate limits, cleanup."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from netns import TestNetwork

pytestmark = pytest.mark.netns

_RECV = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5201)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0; t0 = None
while True:
    b = c.recv(1 << 16)
    if not b: break
    t0 = t0 or time.monotonic(); n += len(b)
print(n * 8 / (time.monotonic() - t0) / 1e6, flush=True)
"""
_SEND = """
import socket, sys
s = socket.create_connection((sys.argv[1], 5201)); s.sendall(b"x" * int(sys.argv[2])); s.close()
"""


def _mbit(net: TestNetwork, src: str, dst: str, nbytes: int) -> float:
    """Measured TCP throughput from src to dst, in Mbit/s, with real sockets in the namespaces."""
    rx = net.popen(dst, [sys.executable, "-c", _RECV, net.host(dst).addr], stdout=subprocess.PIPE, text=True)
    assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
    net.run(src, [sys.executable, "-c", _SEND, net.host(dst).addr, str(nbytes)], check=True, timeout=60)
    out, _ = rx.communicate(timeout=60)
    return float(out.strip())


def test_hosts_have_names_addresses_and_resolve_each_other(netns_factory) -> None:
    net = netns_factory(["alpha", "beta", "gamma"], leaves={"l1": ["alpha"], "l2": ["beta", "gamma"]})
    assert net.leaf_of("alpha") == "l1" and net.leaf_of("gamma") == "l2"
    assert len({net.host(n).addr for n in net.names}) == 3
    for n in net.names:
        assert net.run(n, ["hostname"]).stdout.strip() == n
    code = "import socket; print(socket.gethostbyname('gamma'), socket.gethostbyname(socket.gethostname()))"
    out = net.run("alpha", [sys.executable, "-c", code]).stdout.split()
    assert out == [net.host("gamma").addr, net.host("alpha").addr]
    hosts_file = net.hosts_file(net.workdir / "hosts.txt", labels={"beta": {"rack": "r2"}})
    hosts = hosts_file.read_text().splitlines()
    assert hosts == ["alpha switch=l1", "beta switch=l2 rack=r2", "gamma switch=l2"]
    cfg = net.write_ssh_config(net.workdir / "cfg")
    r = subprocess.run(["ssh", "-F", str(cfg), "-o", "BatchMode=yes", "beta", "hostname"],
                       capture_output=True, text=True, timeout=20)
    assert (r.returncode, r.stdout.strip()) == (0, "beta"), r.stderr


def test_tools_are_per_host(netns_factory, tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "nvidia-smi").write_text("#!/bin/sh\necho fake-smi \"$@\"\n")
    (tools / "nvidia-smi").chmod(0o755)
    net = netns_factory(3, tools={"h0": tools})
    net.install_tools("h2", tools)  # after start, too
    cfg = net.write_ssh_config(tmp_path / "cfg")
    outs = {}
    for n in net.names:
        r = subprocess.run(["ssh", "-F", str(cfg), "-o", "BatchMode=yes", n, "nvidia-smi -L"],
                           capture_output=True, text=True, timeout=20)
        outs[n] = r.stdout.strip()
    assert outs["h0"] == outs["h2"] == "fake-smi -L" and outs["h1"] == ""
    assert not Path("/usr/local/sbin/nvidia-smi").exists()  # the root namespace is untouched


def test_pair_limit_slows_only_that_pair(netns_factory) -> None:
    net = netns_factory(3)
    net.limit_pair("h0", "h1", "20mbit")
    limited = _mbit(net, "h0", "h1", 1_000_000)
    other = _mbit(net, "h0", "h2", 20_000_000)
    back = _mbit(net, "h1", "h0", 1_000_000)
    assert limited < 30 and back < 30, (limited, back)
    assert other > 200, other
    net.clear_limits()
    assert _mbit(net, "h0", "h1", 20_000_000) > 200


def test_host_limit_and_uplink_limit(netns_factory) -> None:
    net = netns_factory(4, leaves={"a": ["h0", "h1"], "b": ["h2", "h3"]}, uplink_rate="30mbit")
    assert _mbit(net, "h0", "h2", 1_000_000) < 45  # across the spine
    assert _mbit(net, "h0", "h1", 20_000_000) > 200  # same leaf
    net.limit_host("h1", "20mbit")
    assert _mbit(net, "h0", "h1", 1_000_000) < 30  # into h1
    assert _mbit(net, "h1", "h0", 1_000_000) < 30  # out of h1


def test_stop_kill_and_destroy_clean_up(netns_factory) -> None:
    net = netns_factory(2)
    sleeper = net.popen("h1", ["sleep", "600"])
    time.sleep(0.1)
    assert sleeper.pid in net.pids("h1")
    killed = net.kill_host("h1", cut_link=True)
    assert sleeper.pid in killed and sleeper.wait(5) == -9
    assert net.pids("h1") == [] and net.host("h1").pid is None
    net.stop_sshd("h0")
    assert net.host("h0").pid is None
    net.start_sshd("h0")
    assert net.host("h0").pid is not None
    ns_names, prefix = [net.host(n).netns for n in net.names], f"nbt{net.id}"
    net.destroy()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not any(ns in listed for ns in ns_names) and prefix not in links
    assert not net.workdir.exists()
