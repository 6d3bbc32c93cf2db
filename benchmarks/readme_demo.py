"""The README's multi-node outputs, made on real hosts: six network namespaces with a real sshd each,
two leaf switches (Linux bridges) under a spine, every host's link shaped to 400 Mbit/s by tc and one
host's to 200 Mbit/s (a node whose NIC trained at half rate). Then `netbench sweep --hosts` and
`netbench preflight --hosts` as a user runs them; their output is printed as is.

    sudo python3 benchmarks/readme_demo.py [--keep DIR]     # root: namespaces, bridges, tc

The hosts run this interpreter's netbench, so it needs Python >= 3.11 with netbench and torch: a
python3 without them hands over to the checkout's .venv (the README's set-up), else says what is
missing and exits 2. Needs what the tests need besides (openssh-server, iproute2;
docs/development.md). Exit status: 0 when both commands gave a verdict (PASS, WARN or FAIL: 0-2),
else the first other status.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
HOSTS = [f"node{i:02d}" for i in range(1, 7)]
LEAVES = {"leaf1": HOSTS[:3], "leaf2": HOSTS[3:]}
SLOW = "node05"
HANDED_OVER = "NETBENCH_README_DEMO_HANDED_OVER"


def missing() -> str | None:
    """What this interpreter lacks to run the demo's hosts, in words (None: nothing)."""
    if sys.version_info < (3, 11):  # noqa: UP036 - run by whatever python3 the system has
        return f"Python >= 3.11 (this is {sys.version.split()[0]})"
    lacks = [m for m in ("netbench", "torch") if importlib.util.find_spec(m) is None]
    return " and ".join(lacks) or None


def fail(line: str) -> NoReturn:
    print(f"readme_demo: {line}", file=sys.stderr)
    sys.exit(2)


def right_python() -> None:
    """Go on in an interpreter with netbench and torch: this one, or the checkout's .venv (exec'd
    once, the same arguments), or one line saying what is missing and exit 2."""
    lacks = missing()
    if lacks is None:
        return
    # a venv's python is the system's binary with another prefix: only a mark tells that it was tried
    if VENV_PYTHON.exists() and not os.environ.get(HANDED_OVER):
        os.environ[HANDED_OVER] = "1"
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]])
    fail(f"{sys.executable} has no {lacks}: run it with a python that has them (after the README's "
         f"set-up: sudo {VENV_PYTHON} benchmarks/readme_demo.py)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", help="write the run directories here (default: a temporary directory)")
    args = ap.parse_args()
    right_python()
    sys.path.insert(0, str(ROOT / "tests"))
    from netns import TestNetwork, netns_unavailable

    why = netns_unavailable()
    if why:
        fail(f"cannot build the test hosts: {why}")
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
            rc = subprocess.run([*argv, *extra], check=False).returncode
            if rc not in (0, 1, 2):  # no verdict: the demo shows nothing worth reading
                print(f"readme_demo: netbench {command} exited {rc} without a verdict", file=sys.stderr)
                return rc if rc > 0 else 3
    finally:
        net.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
