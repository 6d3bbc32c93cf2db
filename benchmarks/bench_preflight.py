"""Benchmark: `netbench preflight` on real test hosts, and its projected time at 512 hosts.

Measured here (root, openssh-server): preflight end to end on N test hosts (network namespaces, a real
sshd each, gloo ranks over SSH), once healthy and once with one node rate-limited (the escalation
path), with the CLI's defaults (1M,4M, 10 iterations, 3 rounds, ring, 2 re-test partners) and a
policy for this noisy 2-core VM. Then the cost of each term the projection needs, each measured:

  inventory   wall time of one concurrent wave and collector CPU per host (collect_inventory);
  launch      SSH handshake + agent start per host (the launcher), and rank start-up from the runs;
  phases      seconds of a pair round and of the ring; the ring's per-hop latency (an 8-byte
              all_reduce ring over the N hosts is 2(N-1) hops, `netbench sweep --pattern ring`);
  rows        appending one result row to results.jsonl (fsync'd, in the coordinator's thread);
  analysis    the rules + report.html on a synthetic fleet of the target size shaped like a preflight
              (3 circle rounds of pairs at 2 sizes, the ring, 8 GPUs a node).

    python benchmarks/bench_preflight.py [--hosts 8] [--target 512] [--slow-rate 200mbit] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

NOISY_VM = "[thresholds]\nslow_pair_factor = 0.35\nslow_node_factor = 0.5\n"
CONCURRENCY = 64


def run_preflight(net, tmp: Path, name: str) -> dict:
    (tmp / "policy.toml").write_text(NOISY_VM)
    out, js = tmp / name, tmp / f"{name}.json"
    t0 = time.monotonic()
    res = subprocess.run(
        [
            *net.netbench_argv(tmp, "preflight"),
            "--policy",
            str(tmp / "policy.toml"),
            "--out",
            str(out),
            "--json",
            str(js),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.monotonic() - t0
    doc = json.loads(js.read_text())
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
    return {
        "rc": res.returncode,
        "wall_s": round(wall, 2),
        "drain": doc["drain"],
        "preflight": doc["preflight"],
        "rows": rows,
        "stderr_tail": res.stderr[-1500:],
    }


def ring_hop_latency_us(net, tmp: Path, n: int) -> float:
    """Per-hop latency of the ring: an 8-byte all_reduce over the n hosts (latency-bound: 2(n-1) hops),
    measured with `netbench sweep --pattern ring` on the same hosts."""
    out = tmp / "ring-latency"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "netbench",
            "sweep",
            "--hosts",
            str(tmp / "hosts.txt"),
            "--ssh-config",
            str(tmp / "ssh_config"),
            "--python",
            sys.executable,
            "--pattern",
            "ring",
            "-k",
            "all_reduce",
            "-b",
            "8",
            "-e",
            "8",
            "-n",
            "50",
            "-w",
            "10",
            "--in-place",
            "out",
            "--no-report",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
    t = statistics.median(r["time_us"] for r in rows if r["status"] == "ok" and r["pattern"] == "ring")
    return t / (2 * (n - 1))


def measure_inventory(net, tmp: Path) -> dict:
    from netbench.inventory.hosts import parse_hosts_file

    from netbench.sites.ssh.inventory import collect_inventory
    from netbench.sites.ssh.transport import SSHOptions

    entries = parse_hosts_file(net.hosts_file(tmp / "hosts.txt"))
    opts = SSHOptions(ssh_config=str(net.write_ssh_config(tmp / "ssh_config")))
    collect_inventory(entries, opts)  # warm: imports, probe script
    c0, t0 = time.process_time(), time.monotonic()
    nodes = collect_inventory(entries, opts)
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    assert all(n.ok for n in nodes)
    return {"wave_s": round(wall, 3), "cpu_per_host_s": round(cpu / len(entries), 4)}


def measure_handshake(net, tmp: Path) -> dict:
    from netbench.inventory.hosts import parse_hosts_file

    from netbench.sites.ssh.transport import SSHOptions, connect_entry

    entries = parse_hosts_file(net.hosts_file(tmp / "hosts.txt"))
    opts = SSHOptions(ssh_config=str(net.write_ssh_config(tmp / "ssh_config")))
    times, c0 = [], time.process_time()
    for e in entries:
        t0 = time.monotonic()
        connect_entry(e, opts).close()
        times.append(time.monotonic() - t0)
    return {
        "handshake_s": round(statistics.median(times), 4),
        "cpu_per_handshake_s": round((time.process_time() - c0) / len(entries), 4),
    }


def measure_row_cost(tmp: Path, n: int = 2000) -> float:
    from netbench.common.rundir import RunDir

    rd = RunDir.create(tmp / "rows")
    row = {
        "run_id": rd.run_id,
        "collective": "all_reduce",
        "pattern": "pair",
        "hosts": ["a", "b"],
        "bytes": 1 << 20,
        "busbw_GBps": 1.0,
        "time_us": 100.0,
        "rank_time_us": [100.0] * 16,
        "status": "ok",
    }
    with rd.writer() as w:
        t0 = time.monotonic()
        for _ in range(n):
            w.write(row)
        return (time.monotonic() - t0) / n


def measure_analysis(n: int, tmp: Path, rounds: int = 3) -> dict:
    """The rules + report.html on a synthetic preflight of ``n`` nodes (3 rounds at 2 sizes, the ring)."""
    from netbench.reports.policy import Policy
    from synthetic import host_names, make_fleet, plant_faults, write_run_dir

    from netbench.common.rundir import RunDir
    from netbench.preflight import PreflightOptions, _write_report, analyse

    sizes = (256 << 20, 1 << 30)
    hosts = host_names(n)
    slow_nodes, _ = plant_faults(hosts, 2, 0, seed=3)
    fleet = make_fleet(n, max(1, n // 32), pair_sizes=sizes, ring_sizes=sizes, slow_nodes=slow_nodes, seed=3)
    fleet.rows = [r for r in fleet.rows if r["pattern"] != "pair" or (r.get("round") or 0) <= rounds]
    path = write_run_dir(fleet, tmp / f"synthetic-{n}")
    rd = RunDir.open(path)
    t0 = time.monotonic()
    ctx, findings = analyse(rd, Policy(), None)
    t1 = time.monotonic()
    _write_report(rd, ctx, findings, html=True)
    t2 = time.monotonic()
    found = sorted(f.subject for f in findings if f.rule == "slow_node")
    assert PreflightOptions  # the same code preflight runs
    return {
        "rows": len(fleet.rows),
        "analysis_s": round(t1 - t0, 3),
        "report_s": round(t2 - t1, 3),
        "slow_found": found == sorted(slow_nodes),
    }


def project(n: int, m: dict) -> dict:
    """Seconds per stage at ``n`` hosts from the measured terms (see benchmarks/README.md).

    Clean: the quick pass only. With a suspect: its rounds and ring are as slow as they were with the
    slow node here, then one more launch of every host with ``confirm`` re-test phases."""
    waves = math.ceil(n / CONCURRENCY)
    inventory = max(waves * m["inventory"]["wave_s"], n * m["inventory"]["cpu_per_host_s"])
    connect = max(waves * m["handshake"]["handshake_s"], n * m["handshake"]["cpu_per_handshake_s"])
    launch = connect + m["rank_startup_s"]
    rows = n // 2 * 2 * m["row_s"]  # pairs x 2 sizes, appended one by one by the coordinator
    ring_growth = 2 * (n - m["hosts"]) * m["ring_hop_us"] * 1e-6 * m["ring_ops"]
    analysis, report = m["analysis_s"](n), m["report_s"](n)
    out: dict = {"hosts": n, "inventory": inventory, "launch": launch, "analysis": analysis, "report": report}
    for case in ("clean", "slow"):
        phase = m[f"phase_s_{case}"] + rows
        quick = launch + m["rounds"] * phase + m[f"ring_s_{case}"] + ring_growth
        escalation = launch + m["confirm"] * phase + analysis if case == "slow" else 0.0
        out[f"quick_pass_{case}"] = quick
        out[f"total_{case}"] = inventory + quick + analysis + escalation + report
    out["escalation"] = (
        out["total_slow"] - out["total_clean"] - (out["quick_pass_slow"] - out["quick_pass_clean"])
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--target", type=int, default=512)
    ap.add_argument("--slow-rate", default="200mbit")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from netns import TestNetwork

    tmp = Path(tempfile.mkdtemp(prefix="bench-preflight-"))
    net = TestNetwork.create(args.hosts)
    slow = net.names[args.hosts // 2]
    try:
        clean = run_preflight(net, tmp, "clean")
        net.limit_host(slow, args.slow_rate)
        faulty = run_preflight(net, tmp, "slow")
        net.clear_limits()
        hop = ring_hop_latency_us(net, tmp, args.hosts)
        inv = measure_inventory(net, tmp)
        hs = measure_handshake(net, tmp)
    finally:
        net.destroy()
    row_s = measure_row_cost(tmp)
    pf, pf_slow = clean["preflight"], faulty["preflight"]
    rounds = pf["rounds"]
    analysis = {n: measure_analysis(n, tmp) for n in (args.hosts * 8, args.target)}
    xs = sorted(analysis)

    def interp(key: str):  # noqa: ANN202 - a function of n, linear in pairs measured (~n)
        (n0, n1), (a0, a1) = xs, (analysis[x][key] for x in xs)
        return lambda n: max(a0 + (a1 - a0) * (n - n0) / (n1 - n0), 0.0)

    terms = {
        "hosts": args.hosts,
        "inventory": inv,
        "handshake": hs,
        "rounds": rounds,
        "phase_s_clean": statistics.median(pf["quick_phase_s"][:rounds]),
        "ring_s_clean": pf["quick_phase_s"][rounds],
        "phase_s_slow": statistics.median(pf_slow["quick_phase_s"][:rounds]),
        "ring_s_slow": pf_slow["quick_phase_s"][rounds],
        "ring_hop_us": hop,
        "ring_ops": 2 * (10 + 2 + 1),
        "row_s": row_s,
        "rank_startup_s": max(pf["startup_s"] - hs["handshake_s"], 0.0),
        "confirm": 2,
        "analysis_s": interp("analysis_s"),
        "report_s": interp("report_s"),
    }
    grow = [project(n, terms) for n in (args.hosts, 64, 128, 256, args.target, 2 * args.target)]
    result = {
        "measured": {
            k: {x: v[x] for x in ("rc", "wall_s", "drain", "preflight")}
            for k, v in (("clean", clean), ("slow_node", faulty))
        },
        "slow_node": slow,
        "terms": {k: v for k, v in terms.items() if not callable(v)},
        "analysis": analysis,
        "projection": [{k: round(v, 1) if isinstance(v, float) else v for k, v in g.items()} for g in grow],
    }
    print(json.dumps(result, indent=1, default=str))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    for name, r in (("clean", clean), ("slow node", faulty)):
        if r["rc"] not in (0, 2) or (name == "clean") != (r["rc"] == 0):
            print(f"# {name}: unexpected exit {r['rc']}\n{r['stderr_tail']}", file=sys.stderr)


if __name__ == "__main__":
    main()
