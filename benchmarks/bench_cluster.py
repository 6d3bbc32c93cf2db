"""Issue-4 benchmarks on real test hosts (network namespaces + sshd; run as root).

A. One test link: netbench's 2-host large-message sendrecv and all_reduce busbw against iperf3's
   single-stream throughput on the same link (goal: ratio >= 0.8), on the raw veth link and on a link
   shaped to a fixed rate (tc htb, as a NIC of known speed).
B. 8 hosts pairwise: wall time of the circle-method rounds (4 pairs at once) against one pair at a
   time, and the set-up overhead per round against the collective time measured in it (goal <= 10 %).

Run: sudo python benchmarks/bench_cluster.py [--rate 1gbit] [--hosts 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from netns import TestNetwork  # noqa: E402


def sweep(net: TestNetwork, tmp: Path, *args: str) -> tuple[Path, float]:
    out = tmp / f"run-{time.monotonic_ns()}"
    t0 = time.perf_counter()
    subprocess.run(
        # the sweep alone, as its figures were measured: no re-test launch (--confirm-budget 0)
        [*net.netbench_argv(tmp), "--out", str(out), "--no-report", "--confirm-budget", "0", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return out, time.perf_counter() - t0


def rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]


def iperf(net: TestNetwork, a: str, b: str, seconds: int = 5, bidir: bool = False) -> float:
    """iperf3 single-stream throughput a -> b in bits/s (with ``bidir``: per direction, both at once)."""
    server = net.popen(
        b,
        ["iperf3", "-s", "-1", "-B", net.host(b).addr],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    try:
        argv = ["iperf3", "-c", net.host(b).addr, "-t", str(seconds), "-J"] + (["--bidir"] if bidir else [])
        r = net.run(a, argv, capture_output=True, text=True)
        end = json.loads(r.stdout)["end"]
        if bidir:
            return (
                end["sum_received"]["bits_per_second"] + end["sum_received_bidir_reverse"]["bits_per_second"]
            ) / 2
        return end["sum_received"]["bits_per_second"]
    finally:
        server.kill()


PLAIN = r"""
import os, sys, time, torch, torch.distributed as dist
rank, addr = int(sys.argv[1]), sys.argv[2]
os.environ["GLOO_SOCKET_IFNAME"] = "eth0"
dist.init_process_group("gloo", init_method=f"tcp://{addr}:29555", rank=rank, world_size=2)
n = 64 << 20; s = torch.ones(n // 4); r = torch.empty(n // 4); other = 1 - rank
def sendrecv():
    a = dist.isend(s, other); b = dist.irecv(r, other); a.wait(); b.wait()
sendrecv(); sendrecv()
res = []
for trial in range(3):
    dist.barrier(); t = time.perf_counter()
    for _ in range(5): sendrecv()
    res.append(n / ((time.perf_counter() - t) / 5) * 8 / 1e9)
if rank == 0: print(sorted(res)[1])
"""


def plain_torch_sendrecv(net: TestNetwork) -> float:
    """Gbit/s per direction of a bare torch.distributed isend/irecv exchange (gloo) on the same link."""
    a = net.host("n0").addr
    procs = [
        net.popen(
            h,
            [sys.executable, "-c", PLAIN, str(i), a],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for i, h in enumerate(("n0", "n1"))
    ]
    out = procs[0].communicate(timeout=300)[0]
    procs[1].wait(timeout=60)
    return float(out.strip().splitlines()[-1])


def link(rate: str | None) -> None:
    with tempfile.TemporaryDirectory() as d, TestNetwork.create(["n0", "n1"]) as net:
        if rate:
            net.limit_pair("n0", "n1", rate)
        bps = iperf(net, "n0", "n1")
        bidir = iperf(net, "n0", "n1", bidir=True)
        out, _ = sweep(
            net,
            Path(d),
            "--pattern",
            "pairwise",
            "-k",
            "sendrecv,all_reduce",
            "--pair-sizes",
            "16M,64M",
            "-n",
            "10",
            "-w",
            "2",
            "--no-check",
            "--timeout",
            "300",
        )
        rs = [
            r for r in rows(out) if r["pattern"] == "pair" and r["status"] == "ok" and r["bytes"] == 64 << 20
        ]
        label = rate or "veth (no limit)"
        plain = plain_torch_sendrecv(net)
        for coll in ("sendrecv", "all_reduce"):
            bw = [r["busbw_GBps"] for r in rs if r["collective"] == coll]
            gbps = sum(bw) / len(bw) * 8
            print(
                f"| {label} | {coll} | {gbps:.3f} | {bps / 1e9:.3f} | {gbps / (bps / 1e9):.2f} | "
                f"{bidir / 1e9:.3f} | {gbps / (bidir / 1e9):.2f} | {plain:.3f} |"
            )


def rounds(n: int) -> None:
    with tempfile.TemporaryDirectory() as d, TestNetwork.create(n) as net:
        args = [
            "--pattern",
            "pairwise",
            "-k",
            "all_reduce",
            "--pair-sizes",
            "4M,16M",
            "-n",
            "10",
            "-w",
            "2",
            "--timeout",
            "300",
        ]
        for label, extra in (
            ("rounds (N/2 pairs at once)", []),
            ("one pair at a time", ["--pair-batch", "1"]),
        ):
            out, wall = sweep(net, Path(d), *args, *extra)
            run = json.loads((out / "run.json").read_text())
            rs = rows(out)
            overheads, setups = [], []
            for ph in run["phases"]:
                # the group in the phase that measured longest bounds the phase from below
                inside = {}
                for r in rs:
                    if r["pattern"] == "pair" and r["status"] == "ok" and r["round"] == ph["index"] + 1:
                        inside[r["group"]] = (
                            inside.get(r["group"], 0.0) + r["time_us"] * (r["iters"] + r["warmup"] + 1) / 1e6
                        )
                busy = max(inside.values()) if inside else 0.0
                if busy:
                    overheads.append((ph["seconds"] - busy) / busy)
                    # the round's own set-up: release, group creation, completion signalling
                    setups.append(
                        (ph["seconds"] - ph.get("group_s", 0.0) + ph.get("group_setup_s", 0.0)) / busy
                    )
            phase_s = sum(p["seconds"] for p in run["phases"])
            print(
                f"| {n} hosts, {label} | {len(run['phases'])} | {phase_s:.1f} | {wall:.1f} | "
                f"{run['startup_s']:.1f} | {100 * sorted(overheads)[len(overheads) // 2]:.1f} % | "
                f"{100 * sorted(setups)[len(setups) // 2]:.1f} % |"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--parts", default="link,rounds", help="link, rounds or both")
    args = ap.parse_args()
    print(
        "| link | collective | netbench busbw (Gbit/s) | iperf3 1 stream (Gbit/s) | ratio | "
        "iperf3 --bidir, per direction (Gbit/s) | ratio | bare torch isend/irecv, per direction (Gbit/s) |"
        "\n|---|---|---|---|---|---|---|---|"
    )
    if "link" in args.parts:
        link(None)
        link(args.rate)
    print(
        "\n| sweep | phases | pairwise wall (s) | command wall (s) | start-up (s) | median set-up overhead "
        "per round (all untimed time) | round set-up alone (release, group creation, signalling) |"
        "\n|---|---|---|---|---|---|---|"
    )
    if "rounds" in args.parts:
        rounds(args.hosts)


if __name__ == "__main__":
    main()
