"""`netbench sweep --hosts` on real test hosts: network namespaces, Linux bridges as leaf switches
joined by a rate-limited uplink (tc tbf), a real sshd per host, ranks started over SSH."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rowfiles import has_rows, rows_of

pytestmark = pytest.mark.netns

LEAVES = {"leafA": ["a1", "a2", "a3"], "leafB": ["b1", "b2", "b3"]}
SLOW_PAIR = ("a1", "a2")  # htb + u32 on this pair's traffic alone
SLOW_NODE = "b3"  # all of its traffic rate-limited


def sweep(net, tmp: Path, *extra: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp / "run"
    res = subprocess.run([*net.netbench_argv(tmp), "--out", str(out), *extra], capture_output=True, text=True,
                         timeout=timeout)
    return res, out


def start(net, tmp: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    out = tmp / "run"
    proc = subprocess.Popen([*net.netbench_argv(tmp), "--out", str(out), *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, out


def wait_rows(proc: subprocess.Popen, out: Path, n: int, limit: float = 120) -> None:
    deadline = time.time() + limit
    while time.time() < deadline:
        if has_rows(out) and len(rows(out)) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} rows after {limit} s")


def rows(out: Path) -> list[dict]:
    return rows_of(out)


def pair_bw(rs: list[dict]) -> dict[frozenset, float]:
    """Large-message busbw per pair (largest size measured)."""
    top = max(r["bytes"] for r in rs if r["pattern"] == "pair" and r["status"] == "ok")
    out: dict[frozenset, list[float]] = {}
    for r in rs:
        if r["pattern"] == "pair" and r["status"] == "ok" and r["bytes"] == top:
            out.setdefault(frozenset(r["hosts"]), []).append(r["busbw_GBps"])
    return {k: sum(v) / len(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def two_leaf_run(tmp_path_factory):
    """One sweep over 6 hosts on two leaves, with a slow pair and a slow node planted."""
    from netns import TestNetwork, netns_unavailable

    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("twoleaf")
    net = TestNetwork.create([h for hs in LEAVES.values() for h in hs], leaves=LEAVES, uplink_rate="300mbit")
    try:
        # faults well below every healthy pair (a cross-leaf pair has the 300mbit uplink to itself), and
        # no slower than that: their pairs take most of the sweep's time
        net.limit_pair(*SLOW_PAIR, "30mbit")
        net.limit_host(SLOW_NODE, "100mbit")
        res, out = sweep(
            net,
            tmp,
            "--pattern",
            "pairwise",
            "--pattern",
            "ring",
            "--pair-batch",
            "1",
            "--pair-sizes",
            "256K,1M",
            "-k",
            "all_reduce",
            "-b",  # ring sizes: the ring runs through the slow pair's link, so 1M would cost ~15 s
            "64K",
            "-e",
            "256K",
            "-f",
            "4",
            "-n",
            "5",
            "-w",
            "1",
            "--timeout",
            "30",
            "--no-report",
            "--confirm-budget",  # the sweep's own pairs only (re-tests: test_sweep_confirm_netns.py)
            "0",
        )
        yield net, res, out
    finally:
        net.destroy()


def test_two_leaf_sweep_finds_cross_leaf_penalty_and_slow_pair(two_leaf_run) -> None:
    net, res, out = two_leaf_run
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rs = rows(out)
    bw = pair_bw(rs)
    assert len(bw) == 15  # every pair of 6 hosts, exactly once
    leaf = {h: leafname for leafname, hs in LEAVES.items() for h in hs}
    healthy = {p: v for p, v in bw.items() if p != frozenset(SLOW_PAIR) and SLOW_NODE not in p}
    same = sorted(v for p, v in healthy.items() if len({leaf[h] for h in p}) == 1)
    cross = sorted(v for p, v in healthy.items() if len({leaf[h] for h in p}) == 2)
    assert same and cross
    assert max(cross) < 0.7 * min(same), (same, cross)  # crossing the uplink is measurably slower
    slowest = min(bw, key=bw.get)
    assert slowest == frozenset(SLOW_PAIR), sorted(bw.items(), key=lambda kv: kv[1])[:3]
    # rounds: pair-batch 1 -> one pair per round, 15 rounds
    assert sorted({r["round"] for r in rs if r["pattern"] == "pair"}) == list(range(1, 16))
    ring = [r for r in rs if r["pattern"] == "ring"]
    assert ring and all(r["status"] == "ok" and r["wrong"] == 0 and r["ranks"] == 6 for r in ring)
    assert "pairwise: large-message busbw per pair" in res.stdout
    env = json.loads((out / "env.json").read_text())["hosts"]
    assert set(env) == set(leaf)  # every host reported its environment


def test_killed_host_costs_only_its_pairs(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(["h0", "h1", "h2", "h3"])
    proc, out = start(net, tmp_path, "--pattern", "pairwise", "--pair-batch", "1", "--pair-sizes", "64K,256K",
                      "-k", "all_reduce", "-n", "200", "-w", "1", "--timeout", "8", "--no-report",
                      "--confirm-budget", "0")
    wait_rows(proc, out, 2)  # the first pair has measured
    net.kill_host("h3")  # sshd, its session and its ranks: a node that died
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 2  # the sweep completed but reports the lost host: a failure
    rs = rows(out)
    by_pair: dict[frozenset, set[str]] = {}
    for r in rs:
        if r["pattern"] == "pair":
            by_pair.setdefault(frozenset(r["hosts"]), set()).add(r["status"])
    assert len(by_pair) == 6  # every pair has a row, run or not
    for pair, statuses in by_pair.items():
        if "h3" in pair:
            assert statuses != {"ok"}, pair  # h3's pairs failed (or were not run) ...
        else:
            assert statuses == {"ok"}, (pair, statuses)  # ... the others completed
    failed = [r for r in rs if r["status"] != "ok"]
    assert all("h3" in r["hosts"] for r in failed)
    assert all("h3" in (r["error"] or "") for r in failed)  # the error names the host
    assert "h3" in stderr
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed" and "h3" in run["down_hosts"]
    for h in ("h0", "h1", "h2"):  # no worker left behind on any host
        leftovers = [p for p in net.pids(h)
                     if "netbench.agents.worker" in Path(f"/proc/{p}/cmdline").read_text()]
        assert not leftovers, (h, leftovers)


def test_report_blames_the_link_the_node_and_the_uplink(two_leaf_run) -> None:
    """Diagnosis on the same real measurements: a link fault, a node fault, the cross-leaf penalty."""
    net, res, out = two_leaf_run
    rep = subprocess.run([sys.executable, "-m", "netbench", "report", str(out), "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode in (1, 2), rep.stderr
    findings = json.loads((out / "findings.json").read_text())["findings"]
    by_rule: dict[str, list[dict]] = {}
    for f in findings:
        by_rule.setdefault(f["rule"], []).append(f)
    links = by_rule.get("slow_pair", [])
    assert any(set(f["hosts"]) == set(SLOW_PAIR) for f in links), links  # the planted link, as a link
    assert not any(SLOW_NODE in f["hosts"] for f in links), links  # the slow node's pairs are not links
    nodes = by_rule.get("slow_node", [])
    assert [f["subject"] for f in nodes] == [SLOW_NODE], nodes  # the planted node, and only it
    assert by_rule.get("cross_spine_penalty"), by_rule.keys()  # the uplink penalty, measured
    assert (out / "report.html").stat().st_size > 10_000


def test_ctrl_c_keeps_rows_and_leaves_nothing_behind(netns_factory, tmp_path: Path) -> None:
    import signal

    net = netns_factory(["c0", "c1", "c2"])
    proc, out = start(net, tmp_path, "--pattern", "pairwise", "--pair-sizes", "64K,256K,1M",
                      "-k", "all_reduce", "-n", "300", "-w", "1", "--no-report")
    wait_rows(proc, out, 1)
    kept = len(rows(out))
    proc.send_signal(signal.SIGINT)
    t0 = time.time()
    proc.communicate(timeout=60)
    assert time.time() - t0 < 20
    assert proc.returncode == 130
    assert len(rows(out)) >= kept >= 1  # everything measured before Ctrl-C is still there
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    time.sleep(1.0)
    for h in net.names:
        leftovers = [p for p in net.pids(h)
                     if "netbench.agents.worker" in Path(f"/proc/{p}/cmdline").read_text()]
        assert not leftovers, (h, leftovers)
