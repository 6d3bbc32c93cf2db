"""Inventory benchmark: N real sshd test hosts (network namespaces) inventoried over SSH.

Measures, for ``--hosts`` hosts (default 32) that all carry fake node tools printing real captured
output (so parsing does real work):

* wall time of ``collect_inventory`` over all hosts at the default concurrency (goal <= 5 s at 32);
* per-host latency of one host probed alone (connect + handshake + auth + probe + parse), which is
  what one host costs on a real fleet where every node has its own CPUs;
* collector CPU per host (this process's CPU time / hosts): SSH crypto and parsing run under the
  GIL, so this serial cost bounds the collector no matter the concurrency;
* the projection for 1,000 hosts at the default concurrency (goal <= 60 s):
  max(ceil(1000 / concurrency) x per-host latency, 1000 x collector CPU per host).

Here every "node" shares this machine's cores with the collector, so the N-host wall time is an
upper bound of what a real fleet of N nodes takes. The probe asks ``--python`` (default
/usr/bin/python3, no torch) for versions: importing torch costs ~1-2 CPU s per node, which on a real
fleet runs in parallel on each node, and here would serialise on two shared cores. Test hosts get
Debian's default /root/.bashrc (``--machine-rc`` keeps this machine's, whose pyenv init bash runs
for every SSH command).

Run (root, openssh-server installed): python benchmarks/bench_inventory.py [--hosts 32] [--repeats 3]
[--machine-rc]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fake_tools import H200_PROFILE, make_fake_tools  # noqa: E402
from netbench.inventory.hosts import parse_hosts_file  # noqa: E402
from netns import TestNetwork, netns_unavailable  # noqa: E402

from netbench.sites.ssh.inventory import DEFAULT_CONCURRENCY, collect_inventory  # noqa: E402
from netbench.sites.ssh.transport import SSHOptions  # noqa: E402


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument(
        "--machine-rc",
        action="store_true",
        help="keep this machine's /root/.bashrc on the test hosts (pyenv init: ~200 ms/command)",
    )
    args = ap.parse_args()
    reason = netns_unavailable()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="nbt-bench-") as tmp_s:
        tmp = Path(tmp_s)
        tools = make_fake_tools(tmp / "tools", {k: v for k, v in H200_PROFILE.items() if k != "hostname"})
        t0 = time.monotonic()
        names = [f"node{i:03d}" for i in range(args.hosts)]
        net = TestNetwork.create(names, tools={n: tools for n in names}, fresh_rc=not args.machine_rc)
        create_s = time.monotonic() - t0
        try:
            opts = SSHOptions(ssh_config=net.write_ssh_config(tmp / "ssh_config"))
            entries = parse_hosts_file(net.hosts_file(tmp / "hosts.txt"))
            # one host alone: the latency a host costs when it has its own CPUs
            singles = []
            for _ in range(max(args.repeats, 3)):
                s = time.monotonic()
                (inv,) = collect_inventory(entries[:1], opts, python=args.python)
                singles.append(time.monotonic() - s)
                assert inv.ok, inv.error
            walls, cpus = [], []
            for _ in range(args.repeats):
                c0, s = _cpu(), time.monotonic()
                nodes = collect_inventory(entries, opts, concurrency=args.concurrency, python=args.python)
                walls.append(time.monotonic() - s)
                cpus.append((_cpu() - c0) / len(nodes))
                bad = [n.host for n in nodes if not n.ok or not n.gpus]
                assert not bad, f"not inventoried: {bad}"
        finally:
            net.destroy()
    latency = statistics.median(singles)
    cpu_per_host = statistics.median(cpus)
    waves = math.ceil(1000 / args.concurrency)
    projected = max(waves * latency, 1000 * cpu_per_host)
    result = {
        "hosts": args.hosts,
        "create_hosts_s": round(create_s, 2),
        "wall_s_median": round(statistics.median(walls), 3),
        "wall_s_all": [round(w, 3) for w in walls],
        "per_host_latency_s": round(latency, 3),
        "collector_cpu_per_host_ms": round(cpu_per_host * 1000, 1),
        "concurrency": args.concurrency,
        "projected_1000_hosts_s": round(projected, 1),
        "projection": f"max({waves} waves x {latency:.3f} s, 1000 x {cpu_per_host * 1000:.1f} ms CPU)",
        "goals": {"wall_32_hosts_s": 5.0, "projected_1000_hosts_s": 60.0},
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
