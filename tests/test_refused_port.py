"""Issue 47 (3), the parts a firewall that rejects (rather than drops) needs, on real sockets of this
machine: the port an agent listens on takes a connection; a port nobody listens on is refused (what a
REJECT rule answers), and the coordinator's words for it read back with the port and how, as the
``host_refuses`` rule reads them from a failed row. The test hosts' kernel has no netfilter to
reject with: tests/test_could_not_test_netns.py covers a firewall that drops, end to end."""

from __future__ import annotations

import socket
import time

from netbench.reports.refusals import read

from netbench.agents.reach import Reach, connect_error, listen


def closed_port() -> int:
    """A port of this machine's that nobody listens on (one just let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_agents_port_takes_connections_and_a_closed_one_is_refused() -> None:
    named = listen("127.0.0.1")
    assert named["addr"] == "127.0.0.1" and 0 < named["port"] < 65536
    for _ in range(3):  # each connection taken and closed: it answers again
        assert connect_error("127.0.0.1", named["port"]) is None
    assert connect_error("127.0.0.1", closed_port()) == "refused"


def test_a_refusal_is_said_with_its_port_and_read_back() -> None:
    reach = Reach()
    port = closed_port()
    reach.heard("node04", {"type": "alive", "host": "node04", "addr": "127.0.0.1", "port": port})
    up = listen("127.0.0.1")
    reach.heard("node05", {"type": "alive", "host": "node05", **up})
    # each port is tried once, when its first heartbeat names it: a stall reads the answers
    deadline = time.monotonic() + 10
    while len(reach.answers) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reach.answers == {"node04": "refused", "node05": None}
    said = reach.refusing(["node04", "node05"])
    assert said == f"; node04's TCP port {port}: the coordinator's connection refused", said
    (seen,) = read("timed out: no progress for 13 s, every rank alive (...)" + said)
    assert (seen.host, seen.port, seen.how, seen.dropped) == ("node04", port, "refused", False)


def test_what_a_heartbeat_names_is_untrusted() -> None:
    """Only an IP address and a port 1..65535 are ever connected to; a host's junk is ignored."""
    reach = Reach()
    for i, beat in enumerate([{"addr": "example.com", "port": 80}, {"addr": "127.0.0.1", "port": 0},
                              {"addr": "127.0.0.1", "port": 70000}, {"addr": "127.0.0.1", "port": "80"},
                              {"addr": ["127.0.0.1"], "port": 80}, {}]):
        reach.heard(f"h{i}", beat)
    assert reach.port == {} and reach.refusing([f"h{i}" for i in range(6)]) == ""
    assert read("h1's TCP port 99999: the coordinator's connection refused") == []
