"""netbench inside a real Slurm cluster (tests/slurm.py): slurmctld, munged and one slurmd per test host.

Few and quick on purpose (CI has 2 cores): one sweep inside an allocation checked for everything the
SSH path gives, preflight as a real prolog that drains with its reason, and the faults that end a
step early (a node lost, a step Slurm cancels).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rowfiles import rows_of

SMALL = ["-b", "1K", "-e", "16K", "-f", "4", "-n", "3", "-w", "1", "--pair-sizes", "64K"]
NOISE = "hostname of the client socket cannot be retrieved"


def _sweep(cluster, out: Path, *extra: str, timeout: float = 150) -> subprocess.CompletedProcess:
    """``salloc -N3 netbench sweep`` on the login node: no --hosts, no --launcher."""
    return cluster.run(["salloc", "-N3", sys.executable, "-m", "netbench", "sweep", "--out", str(out),
                        *SMALL, *extra], timeout=timeout)


def _rows(out: Path) -> list[dict]:
    return rows_of(out)


def test_sweep_inside_allocation_has_hosts_switches_inventory_report(slurm_pool, tmp_path: Path) -> None:
    cluster = slurm_pool.get()
    out = tmp_path / "run"
    r = _sweep(cluster, out, "--timeout", "30")
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-2000:]  # 1: warnings on tiny CPU pairs
    assert NOISE not in r.stdout + r.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed" and run["launcher"] == "slurm"
    # switches from `scontrol show topology`, through the one parser: leaves and the spine above them
    assert run["topology"] == {"h0": "sw0", "h1": "sw0", "h2": "sw1", "sw0": "spine", "sw1": "spine"}
    assert "SwitchName=spine" in (out / "topology.conf").read_text()
    # the inventory ran as a job step on every node (no SSH: netbench was given no key or config)
    inv = [json.loads(line) for line in (out / "inventory.jsonl").read_text().splitlines()]
    seen = [(n["host"], n["status"], n["hostname"]) for n in inv]
    assert seen == [(h, "ok", h) for h in ("h0", "h1", "h2")]
    assert all(n["torch_version"] for n in inv)
    rows = _rows(out)
    pairs = {tuple(row["hosts"]) for row in rows if row["pattern"] == "pair" and row["status"] == "ok"}
    assert {frozenset(p) for p in pairs} == {frozenset(p) for p in (("h0", "h1"), ("h0", "h2"), ("h1", "h2"))}
    assert any(row["pattern"] == "ring" and row["hosts"] == ["h0", "h1", "h2"] for row in rows)
    assert (out / "report.html").is_file() and (out / "findings.json").is_file()


def test_preflight_inside_an_allocation_runs_over_srun(slurm_pool, tmp_path: Path) -> None:
    """No --hosts, no SSH: the allocation's nodes, its switches, the inventory step, agents by srun."""
    cluster = slurm_pool.get()
    out = tmp_path / "pf"
    r = cluster.run(["salloc", "-N3", sys.executable, "-m", "netbench", "preflight", "--out", str(out),
                     "--budget", "90s", "--pair-sizes", "64K", "--rounds", "1", "--no-sequential", "--drain"],
                    timeout=150)
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-3000:]  # pass, or warnings only
    assert NOISE not in r.stdout + r.stderr  # not from preflight's own store either
    assert r.stdout.strip() == ""  # stdout is the drain list: nothing to drain
    assert "netbench: drained " not in r.stderr  # --drain drains only what preflight would drain
    run = json.loads((out / "run.json").read_text())
    assert run["launcher"] == "slurm" and run["topology"]["h2"] == "sw1" and run["topology"]["sw0"] == "spine"
    inv = [json.loads(line) for line in (out / "inventory.jsonl").read_text().splitlines()]
    assert [(n["host"], n["status"]) for n in inv] == [("h0", "ok"), ("h1", "ok"), ("h2", "ok")]
    assert any(row["pattern"] == "pair" and row["status"] == "ok" for row in _rows(out))
    cluster.wait_idle(30)  # nodes pass through "completing" once salloc ends; none is left drained
    assert cluster.node_states() == {"h0": "idle", "h1": "idle", "h2": "idle"}


def _when_rows(out: Path, n: int, then, timeout: float = 60) -> threading.Thread:
    """Call ``then()`` once results.jsonl holds ``n`` rows (in a thread, while the sweep runs)."""

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(rows_of(out)) >= n:
                then()
                return
            time.sleep(0.1)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _sweep_with_fault(cluster, out: Path, fault, *extra: str, timeout: float = 150):  # noqa: ANN001, ANN202
    """A sweep inside the allocation with ``fault()`` striking once 2 rows are measured: its result,
    its wall time and its output."""
    watcher = _when_rows(out, 2, fault)
    start = time.monotonic()
    r = _sweep(cluster, out, *extra, timeout=timeout)
    took = time.monotonic() - start
    watcher.join(1)
    return r, took, r.stdout + r.stderr


def test_a_step_cancelled_by_slurm_costs_its_node_only_and_names_why(slurm_pool, tmp_path: Path) -> None:
    """Each node's agent is a one-task srun step: Slurm cancelling one (a time limit, scancel) ends that
    node's part of the run, named with Slurm's words; the other nodes go on."""
    cluster = slurm_pool.get()
    out = tmp_path / "run"
    cancelled: list[str] = []

    def cancel() -> None:  # the same end as a time limit: slurmstepd signals the step's task
        steps = cluster.run(["squeue", "-h", "-s", "-o", "%i|%N"]).stdout.split()
        agent = [s for s in steps if s.split("|")[1] == "h2" and not s.split("|")[0].endswith(".0")]
        cancelled.append(agent[0].split("|")[0])
        cluster.run(["scancel", cancelled[0]])

    r, took, text = _sweep_with_fault(cluster, out, cancel, "--timeout", "10", "-n", "50", "-e", "1M",
                                      "--confirm-budget", "0", timeout=120)
    assert r.returncode == 2 and took < 60, text[-3000:]
    assert NOISE not in text
    said = [line for line in text.splitlines() if "host h2: agent ended before its ranks finished" in line]
    assert said and f"Slurm cancelled step {cancelled[0]} on h2" in said[0], text[-3000:]
    run = json.loads((out / "run.json").read_text())
    # the run goes on and ends; a partner blocked in a group with h2 may be named too (a ring waits
    # on its slowest member: the "faults mid-run" issue tells those apart)
    assert run["status"] == "completed" and "h2" in run["down_hosts"]
    assert any(r["status"] == "ok" for r in _rows(out))  # what was measured stays
    assert (out / "report.html").is_file()


def test_node_lost_during_a_sweep_costs_its_pairs_and_names_it(slurm_pool, tmp_path: Path) -> None:
    with slurm_pool.take() as cluster:  # h2 is killed: no later test gets this cluster
        _lose_a_node(cluster, tmp_path)


def _lose_a_node(cluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # h2 dies (slurmd, its step and every process on it) once the ring has begun
    r, took, text = _sweep_with_fault(cluster, out, lambda: cluster.net.kill_host("h2"), "--timeout", "10",
                                      "--pattern", "ring", "--pattern", "pairwise", timeout=120)
    assert r.returncode != 0 and took < 100, text[-3000:]
    assert NOISE not in text
    said = [line for line in text.splitlines() if "h2" in line and ("lost" in line or "timeout" in line
                                                                   or "failed" in line)]
    assert said, text[-3000:]
    rows = _rows(out)
    assert any(row["status"] == "ok" for row in rows)  # what was measured stays
    run = json.loads((out / "run.json").read_text())
    assert run["status"] in ("completed", "interrupted")


def test_slurmd_killed_during_a_sweep_ends_the_step_naming_the_node(slurm_pool, tmp_path: Path) -> None:
    with slurm_pool.take() as cluster:  # h2's slurmd is killed: no later test gets this cluster
        _kill_a_slurmd(cluster, tmp_path)


def _kill_a_slurmd(cluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    r, took, text = _sweep_with_fault(cluster, out, lambda: cluster.kill_slurmd("h2"),  # its ranks live on
                                      "--timeout", "20", "-n", "100", "-e", "4M", "-f", "2",
                                      "--pair-sizes", "4M", "--confirm-budget", "0")
    assert r.returncode == 2 and took < 90, text[-3000:]  # SlurmdTimeout=10: Slurm sees it in ~20 s
    said = [line for line in text.splitlines() if "host h2: agent ended before its ranks finished" in line]
    why = said[0] if said else ""
    assert "node failure" in why or "NODE FAILURE" in why or "down" in why, text[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert "h2" in run["down_hosts"] and _rows(out)
    assert cluster.node_states()["h2"].startswith("down")
    # the fallback when srun's stderr names no node: Slurm itself, through sinfo, names h2 alone
    ask = ("from netbench.sites.slurm.scontrol import nodes_down; "
           "print(sorted(nodes_down(['h0', 'h1', 'h2'])))")
    said = cluster.run([sys.executable, "-c", ask])
    assert said.returncode == 0 and said.stdout.strip() == "['h2']", said.stderr[-2000:]


def test_preflight_as_a_prolog_drains_the_node_with_its_reason(slurm_factory, tmp_path: Path) -> None:
    """docs/recipes.md's prolog with --drain, run by slurmd itself at allocation time."""
    prolog = tmp_path / "prolog.sh"
    policy = tmp_path / "policy.toml"
    policy.write_text("[expect]\ngpus_per_node = 8\n")  # these nodes have no GPU: a failure of their own
    cluster = slurm_factory([f"Prolog={prolog}", "PrologFlags=Alloc"])
    cfg = cluster.net.write_ssh_config(tmp_path / "ssh_config")
    prolog.write_text(f"""#!/bin/bash
node=$(hostname -s)
echo "$node" > "{tmp_path}/hosts-$SLURM_JOB_ID.txt"
timeout 120 {sys.executable} -m netbench preflight --hosts "{tmp_path}/hosts-$SLURM_JOB_ID.txt" \\
    --ssh-config {cfg} --python {sys.executable} --policy {policy} --drain \\
    --out "{tmp_path}/prolog-$SLURM_JOB_ID" > "{tmp_path}/prolog-$node.log" 2>&1
[ $? -ge 2 ] && exit 1
exit 0
""")
    prolog.chmod(0o755)
    r = cluster.run(["srun", "-N1", "-w", "h1", "--immediate=30", "hostname"], timeout=90)
    assert r.returncode != 0  # the job never ran on the failing node
    log = (tmp_path / "prolog-h1.log").read_text()
    assert "netbench: drained h1 in Slurm (Reason='netbench: gpu_count_low:" in log
    reasons = cluster.run(["sinfo", "-R", "-h", "-o", "%n|%E"]).stdout
    line = next(x for x in reasons.splitlines() if x.startswith("h1|"))
    # the reason leads back to the evidence: the run's id and its report
    assert line.startswith("h1|netbench: gpu_count_low: h1: 0 GPUs visible, policy expects 8 [run "), line
    run_id = json.loads(next(tmp_path.glob("prolog-*/run.json")).read_text())["run_id"]
    assert f"[run {run_id} report {tmp_path}/prolog-" in line and line.endswith("/report.html]"), line
    assert cluster.node_states()["h1"].startswith("drain") and cluster.node_states()["h0"] == "idle"


MEASURE = ["--pattern", "pairwise", "--pair-sizes", "1M", "-k", "all_reduce", "-n", "5", "-w", "1",
           "--timeout", "30", "--confirm-budget", "0"]  # the analysis alone, both ways: the re-tests on
# every site are tests/test_sites.py's


def _both_ways(cluster, tmp_path: Path, hosts: list[str], *ssh_extra: str) -> tuple[Path, Path]:
    """The same pairwise sweep inside ``salloc`` (hosts and switches from Slurm) and over SSH."""
    slurm_out, ssh_out = tmp_path / "slurm", tmp_path / "ssh"
    r = cluster.run(["salloc", f"-N{len(hosts)}", sys.executable, "-m", "netbench", "sweep", "--out",
                     str(slurm_out), *MEASURE], timeout=150)
    # over SSH: the same pipeline
    argv = [*cluster.net.netbench_argv(tmp_path, hosts=hosts), "--out", str(ssh_out), *MEASURE, *ssh_extra]
    r2 = subprocess.run(argv, capture_output=True, text=True, timeout=150)
    # a planted fault each time: the same verdict, so the same exit status (docs/exit-status.md)
    assert r.returncode == r2.returncode and r.returncode in (1, 2), (
        r.stdout[-2000:] + r.stderr[-2000:] + r2.stdout[-2000:] + r2.stderr[-2000:])
    return slurm_out, ssh_out


ONE_LEAF = ["h0", "h1", "h2", "h3", "h4", "h5"]  # a node needs 3 partners to be judged: h1 and h5 have 3
# fine ones besides the slow node h3 and their slow link
# The planted fault: 0.4x of the healthy 100mbit, far below the default thresholds (0.9x a node,
# 0.8x a link, 0.5x the spine) and twice as quick to measure as 0.2x; the healthy rate stays where
# a stall on a loaded 2-core machine cannot outweigh a pair's transfer time.
SLOW = "40mbit"


def _network_bound(cluster, hosts: list[str], rate: str = "100mbit") -> None:
    """Every host's link capped, so every pair is bound by the network, not by CPU time on a shared
    2-core machine (whose noise would otherwise make a fast pair look slow in one run only)."""
    for h in hosts:
        cluster.net.limit_host(h, rate)


def _findings(out: Path, kind: str | None = None) -> set[tuple[str, str]]:
    """(rule, subject) of the run's findings that are not info (of one subject kind if given)."""
    found = json.loads((out / "findings.json").read_text())["findings"]
    return {(f["rule"], f["subject"]) for f in found
            if f["severity"] != "info" and kind in (None, f["subject_kind"])}


def test_a_slow_node_and_a_slow_link_give_the_same_findings_inside_slurm_and_over_ssh(
        slurm_pool, tmp_path: Path) -> None:
    """h3 capped (a node: slow with every partner), and the path h1 <-> h5 capped while both are fine
    with everyone else (a link): one sweep each way names both, each as what it is."""
    cluster = slurm_pool.get(hosts=["ctl", *ONE_LEAF], leaves={"sw0": ["ctl", *ONE_LEAF]})
    _network_bound(cluster, ONE_LEAF)
    cluster.net.limit_host("h3", SLOW)
    cluster.net.limit_pair("h1", "h5", SLOW)
    slurm_out, ssh_out = _both_ways(cluster, tmp_path, ONE_LEAF)
    assert _findings(slurm_out, "node") == _findings(ssh_out, "node") == {("slow_node", "h3")}
    links = [_findings(out, "pair") for out in (slurm_out, ssh_out)]
    assert [{(rule, frozenset(s.split("|"))) for rule, s in found} for found in links] == [
        {("slow_pair", frozenset({"h1", "h5"}))}] * 2
    assert _findings(slurm_out) == _findings(ssh_out)


def test_cross_switch_hop_classes_and_findings_are_the_same_inside_slurm_and_over_ssh(
        slurm_pool, tmp_path: Path) -> None:
    """Two leaves under a capped spine: `scontrol show topology` inside the allocation, the same
    switches as a topology file over SSH; the same hop classes, the same spine penalty."""
    from netbench.inventory.topology import hop_class

    hosts = ["h0", "h1", "h2", "h3"]
    cluster = slurm_pool.get(hosts=["ctl", *hosts], leaves={"sw0": ["ctl", "h0", "h1"], "sw1": ["h2", "h3"]},
                             uplink_rate=SLOW)
    _network_bound(cluster, hosts)  # leaf ports 100mbit, the spine 40mbit (20mbit a pair in a cross round)
    topo_file = tmp_path / "topology.conf"
    topo_file.write_text(cluster.topology_conf())
    slurm_out, ssh_out = _both_ways(cluster, tmp_path, hosts, "--topology", str(topo_file))
    switches = [json.loads((out / "run.json").read_text())["topology"] for out in (slurm_out, ssh_out)]
    assert switches[0] == switches[1] == {"h0": "sw0", "h1": "sw0", "h2": "sw1", "h3": "sw1",
                                          "sw0": "spine", "sw1": "spine"}
    classes = [{(a, b): hop_class(a, b, sw) for a in hosts for b in hosts if a < b} for sw in switches]
    assert classes[0] == classes[1] and sorted(classes[0].values()).count("spine") == 4
    assert _findings(slurm_out) == _findings(ssh_out)
    assert ("cross_spine_penalty", "spine") in _findings(slurm_out)


@pytest.mark.parametrize("node", ["nosuch-node9"])
def test_worker_gives_up_on_an_unresolvable_node_within_its_timeout(node: str) -> None:
    """What srun gives a rank whose allocation names a node that does not resolve (no Slurm needed)."""
    env = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": node,
           "PATH": "/usr/bin:/bin"}
    start = time.monotonic()
    argv = [sys.executable, "-m", "netbench", "worker", "--timeout", "5", "--out", "/nonexistent/x"]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 15
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines == [f"netbench: error: rank 0's node '{node}' does not resolve (Name or service not known): "
                     "cannot reach the run's store"]
