"""The README's multi-node outputs, made on real hosts: six network namespaces with a real sshd each,
two leaf switches (Linux bridges) under a spine, every host's link shaped to 400 Mbit/s by tc and one
host's to 200 Mbit/s (a node whose NIC trained at half rate). Then `netbench sweep --hosts` and
`netbench preflight --hosts` as a user runs them; their output is printed as is.

    sudo python benchmarks/readme_demo.py [--keep DIR]     # root: namespaces, bridges, tc

Needs what the tests need (openssh-server, iproute2; docs/development.md).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from netns import TestNetwork  # noqa: E402

HOSTS = [f"node{i:02d}" for i in range(1, 7)]
LEAVES = {"leaf1": HOSTS[:3], "leaf2": HOSTS[3:]}
SLOW = "node05"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", help="write the run directories here (default: a temporary directory)")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="nb-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    net = TestNetwork.create(HOSTS, leaves=LEAVES)
    try:
        for h in HOSTS:
            net.limit_host(h, "200mbit" if h == SLOW else "400mbit")
        sweep = ["--pair-sizes", "1M,4M", "-b", "64K", "-e", "4M", "-k", "all_reduce", "-n", "5", "-w", "1"]
        for command, extra in (("sweep", [*sweep, "--out", str(work / "sweep")]),
                               ("preflight", ["--out", str(work / "preflight")])):
            (work / f"{command}-files").mkdir(exist_ok=True)
            argv = net.netbench_argv(work / f"{command}-files", command)
            print(f"$ netbench {command} --hosts hosts.txt {' '.join(extra[:-2])}", flush=True)
            subprocess.run([*argv, *extra], check=False)
    finally:
        net.destroy()


if __name__ == "__main__":
    main()
