#!/usr/bin/env python3
"""Start-up inside a Slurm allocation vs over SSH vs mpirun, on the same namespaced test hosts.

For each repeat, on a real Slurm cluster (tests/slurm.py: slurmctld on ``ctl``, slurmd on h0..h2):

* slurm: ``salloc -N3 netbench sweep`` on the login node (inventory as an srun step, then an agent per
  node as a one-task srun step); times from the command's start to the ``# run directory`` line
  (allocation, switches, inventory, plan), from that line to the first row in results.jsonl (the
  agents' steps to the first row), and in all;
* ssh: ``netbench sweep --hosts`` over the same hosts (inventory over SSH, agents over SSH); time from
  the command's start to the first row;
* mpi: ``netbench sweep --hosts --launcher mpi`` (inventory over SSH, then Open MPI's ssh launcher
  starts an agent per host); time from the command's start to the first row. Skipped without mpirun.

Same pattern, sizes and options on both sides. Prints one line per repeat and the medians.
Run as root: ``benchmarks/bench_slurm_startup.py [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from netns import TestNetwork  # noqa: E402
from slurm import SlurmCluster, slurm_unavailable  # noqa: E402

MEASURE = ["-b", "1K", "-e", "16K", "-f", "4", "-n", "3", "-w", "1", "--pair-sizes", "64K", "--no-report"]


def _first_row(proc: subprocess.Popen, out: Path, marker: str | None) -> tuple[float | None, float]:
    """(seconds to the marker line or None, seconds to the first row); reads stdout as it comes."""
    start = time.monotonic()
    t_marker = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if marker and t_marker is None and line.startswith(marker):
            t_marker = time.monotonic() - start
        rows = out / "results.jsonl"
        if rows.exists() and rows.stat().st_size > 0:
            break
    t_row = time.monotonic() - start
    proc.stdout.read()
    proc.wait(120)
    return t_marker, t_row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    reason = slurm_unavailable()
    if reason:
        print(f"cannot run: {reason}")
        return 2
    net = TestNetwork.create(["ctl", "h0", "h1", "h2"], leaves={"sw0": ["ctl", "h0", "h1"], "sw1": ["h2"]})
    cluster = SlurmCluster.start(net, "ctl")
    tmp = Path(tempfile.mkdtemp(prefix="nb-bench-slurm-"))
    slurm_pre, slurm_step, slurm_all, ssh_all, mpi_all = [], [], [], [], []
    here = Path(sys.executable).parent
    has_mpi = (here / "mpirun").exists() or shutil.which("mpirun") is not None
    env = {**os.environ, "PATH": f"{here}:{os.environ.get('PATH', '')}"}  # mpirun beside this python
    try:
        for i in range(args.repeats):
            out = tmp / f"slurm{i}"
            argv = ["env", f"SLURM_CONF={cluster.conf}", "salloc", "-N3", sys.executable, "-u", "-m",
                    "netbench", "sweep", "--out", str(out), *MEASURE]
            proc = net.popen("ctl", argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            t_srun, t_row = _first_row(proc, out, "# run directory")
            assert t_srun is not None, "no '# run directory' line"
            slurm_pre.append(t_srun)
            slurm_step.append(t_row - t_srun)
            slurm_all.append(t_row)
            cluster.wait_idle(30)
            out = tmp / f"ssh{i}"
            argv = [*net.netbench_argv(tmp, hosts=["h0", "h1", "h2"]), "--out", str(out), *MEASURE]
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            _, t_row = _first_row(proc, out, None)
            ssh_all.append(t_row)
            if has_mpi:
                out = tmp / f"mpi{i}"
                argv = [*net.netbench_argv(tmp, hosts=["h0", "h1", "h2"]), "--launcher", "mpi", "--out",
                        str(out), *MEASURE]
                proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        env=env)
                _, t_row = _first_row(proc, out, None)
                mpi_all.append(t_row)
            print(f"repeat {i}: slurm {slurm_all[-1]:.2f} s to the first row (allocation+switches+inventory "
                  f"{slurm_pre[-1]:.2f} s, srun step to first row {slurm_step[-1]:.2f} s); "
                  f"ssh {ssh_all[-1]:.2f} s" + (f"; mpi {mpi_all[-1]:.2f} s" if mpi_all else ""), flush=True)
    finally:
        cluster.stop()
        net.destroy()
    med = statistics.median
    print(f"median over {args.repeats}: slurm {med(slurm_all):.2f} s (before srun {med(slurm_pre):.2f} s, "
          f"srun step to first row {med(slurm_step):.2f} s); ssh {med(ssh_all):.2f} s"
          + (f"; mpi {med(mpi_all):.2f} s" if mpi_all else "; mpi not measured (no mpirun)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
