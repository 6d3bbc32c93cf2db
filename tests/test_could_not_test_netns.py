"""Issue 47 (3): a host's own faults are the host's. h1 behind a firewall (every inbound TCP connection
but to port 22 dropped: its SSH works, its ranks' ports do not) is "could not test h1: it refuses
connections on TCP port N", N the port of h1's agent that the coordinator's own connection went
unanswered on, a warning that drains nobody and sends no one to check its links (it was "Check links
h1-h2, h3-h1")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rowfiles import as_jsonl_layout

pytestmark = pytest.mark.netns

QUICK = ["--pattern", "pairwise", "--pair-sizes", "64K", "-k", "all_reduce", "-n", "2", "-w", "1",
         "--timeout", "10", "--confirm-budget", "0"]


def firewall(net, name: str) -> None:  # noqa: ANN001
    """Drop every TCP connection attempt (SYN without ACK) into ``name`` but to port 22, as a host
    firewall that only lets SSH in does (its own outgoing connections still work): on the egress of
    its veth's root end (everything that reaches the host passes there; this kernel has no netfilter
    and no tc actions, so htb sends those packets to a class whose queue holds none)."""
    veth = net.host(name).veth
    ip_tcp = ["protocol", "ip", "u32", "match", "ip", "protocol", "6", "0xff"]
    steps = (["qdisc", "replace", "dev", veth, "root", "handle", "1:", "htb", "default", "10"],
             ["class", "add", "dev", veth, "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"],
             ["class", "add", "dev", veth, "parent", "1:", "classid", "1:3", "htb", "rate", "10gbit"],
             ["qdisc", "add", "dev", veth, "parent", "1:3", "handle", "30:", "pfifo", "limit", "0"],
             ["filter", "add", "dev", veth, "parent", "1:", "prio", "1", *ip_tcp,
              "match", "ip", "dport", "22", "0xffff", "flowid", "1:10"],
             # the TCP flags byte (an IP header of 20 bytes + 13): SYN set, ACK clear
             ["filter", "add", "dev", veth, "parent", "1:", "prio", "2", *ip_tcp,
              "match", "u8", "0x02", "0x12", "at", "33", "flowid", "1:3"])
    for argv in steps:
        r = subprocess.run(["tc", *argv], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_a_firewalled_host_is_its_own_fault_never_links(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(["h0", "h1", "h2", "h3"])
    firewall(net, "h1")
    argv = net.netbench_argv(tmp_path)
    out = tmp_path / "run"
    res = subprocess.run([*argv, "--out", str(out), *QUICK], capture_output=True, text=True, timeout=400)
    said = res.stdout + res.stderr
    found = json.loads((out / "findings.json").read_text())["findings"]
    head = next(line for line in said.splitlines() if line.startswith(("PASS", "WARN", "FAIL")))
    untested = head.split("Could not test ", 1)[-1].split(".")[0].split(", ")
    assert "h1" in untested, said[-3000:]
    assert "Check link" not in head and "Drain" not in head, head  # neither its links nor a drain
    # its pairs' rows failed (timed out): a run is never better than its counted failures (2)
    assert res.returncode == 2, said[-3000:]
    (named,) = [f for f in found if f["rule"] == "host_refuses"]
    assert named["subject"] == "h1" and named["severity"] == "warn"
    # the port the coordinator's own connection went unanswered on (this firewall drops, not rejects),
    # in the finding and on the terminal
    (port,) = named["evidence"]["ports"]
    assert 1024 <= port < 65536, named
    said_port = (f"Could not test h1: it refuses connections on TCP port {port} (the coordinator's "
                 "connection: unanswered within 2 s; a firewall that drops them?); its pairs with h2, h3")
    assert named["title"].startswith(said_port), named["title"]
    assert any(said_port in line for line in said.splitlines()), said[-3000:]
    assert not [f for f in found if f["severity"] == "fail" and f["subject_kind"] == "node"], found
    rejecting_report(out, tmp_path / "rejected", port)


def rejecting_report(out: Path, copy: Path, port: int) -> None:
    """The same run as a firewall that rejects would have left it: gloo's connect refused at once (the
    pairs errored, not stalled) and the coordinator's connection to h1's port refused. Its report
    names the port and the refusal, still "could not test h1", never a link, never a drain."""
    import shutil

    shutil.copytree(out, copy)
    path = as_jsonl_layout(copy)  # rows a line each, edited as JSON
    refused = (f"rank 1: RuntimeError: Gloo connectFullMesh failed with connect: Connection refused; "
               f"h1's TCP port {port}: the coordinator's connection refused")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for r in rows:
        if r["status"] == "timeout" and "h1" in r["hosts"]:
            r.update(status="error", error=refused)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rep = subprocess.run([sys.executable, "-m", "netbench", "report", str(copy)], capture_output=True,
                         text=True, timeout=300)
    said = rep.stdout + rep.stderr
    head = next(line for line in said.splitlines() if line.startswith(("PASS", "WARN", "FAIL")))
    assert "Could not test" in head and "h1" in head, head
    assert "Check link" not in head and "Drain" not in head, head
    assert (f"Could not test h1: it refuses connections on TCP port {port} (the coordinator's connection: "
            "refused; its firewall?); its pairs with h2, h3") in said, said[-3000:]


def test_a_mistyped_host_is_could_not_test_and_its_pairs_are_said(netns_factory, tmp_path: Path) -> None:
    """Issue 47 (9): a name that does not resolve is a host that could not be tested: a warning (1),
    named in the headline, never drained; the others are measured and judged."""
    net = netns_factory(["h0", "h1", "h2", "h3"])
    argv = net.netbench_argv(tmp_path)
    hosts = Path(argv[argv.index("--hosts") + 1])
    hosts.write_text(hosts.read_text() + "h4-mistyped\n")
    out = tmp_path / "run"
    res = subprocess.run([*argv, "--out", str(out), *QUICK], capture_output=True, text=True, timeout=400)
    said = res.stdout + res.stderr
    head = next(line for line in said.splitlines() if line.startswith(("PASS", "WARN", "FAIL")))
    assert res.returncode == 1 and head.startswith("WARN"), said[-3000:]
    assert "Could not test h4-mistyped" in head and "Drain" not in head, head
    found = json.loads((out / "findings.json").read_text())["findings"]
    assert [f["subject"] for f in found if f["rule"] == "node_unreachable"] == ["h4-mistyped"]
