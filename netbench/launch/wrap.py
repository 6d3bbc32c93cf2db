"""``netbench sweep --launcher mpi|slurm``: hand the ranks to mpirun or srun.

Nothing is reimplemented: the scheduler starts one ``netbench worker`` per rank (the same worker
torchrun users call directly), rank 0 coordinates and writes the run directory. This module only
builds the two command lines and passes the sweep's options through.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING

from netbench.common.errors import UsageError

if TYPE_CHECKING:
    from netbench.options import ClusterOptions

# sweep option -> worker flag; flags whose value is a list are joined with commas
_PASS = {
    "collectives": "--collectives",
    "min_bytes": "--min-bytes",
    "max_bytes": "--max-bytes",
    "factor": "--factor",
    "iters": "--iters",
    "warmup": "--warmup",
    "dtype": "--dtype",
    "op": "--op",
    "backend": "--backend",
    "pair_sizes": "--pair-sizes",
    "pair_batch": "--pair-batch",
    "pair_schedule": "--pair-schedule",
    "uplink_pairs": "--uplink-pairs",
    "pair_collectives": "--pair-collectives",
    "topology": "--topology",
    "timeout_s": "--timeout",
    "out": "--out",
    "in_place": "--in-place",
    "root": "--root",
    "engine": "--engine",
}


def worker_args(opts: ClusterOptions, patterns: list[str]) -> list[str]:
    """``-m netbench worker`` and every measurement/plan option of the sweep, so the worker builds
    the same plan (``netbench.planner``) as any other launcher would."""
    kw = asdict(opts)
    args = ["-m", "netbench", "worker"]
    for key, flag in _PASS.items():
        value = kw.get(key)
        if value is None:
            continue
        args += [flag, ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)]
    args.append("--check" if opts.check else "--no-check")
    args.append("--report" if opts.report else "--no-report")
    if opts.cuda_graph:
        args.append("--cuda-graph")
    for p in patterns or ["world"]:
        args += ["--pattern", p]
    return args


def find_mpirun() -> str:
    """mpirun on PATH, else beside this python (the pip wheel's); a UsageError without one."""
    mpirun = shutil.which("mpirun") or os.path.join(os.path.dirname(sys.executable), "mpirun")
    if not os.path.exists(mpirun):
        raise UsageError("--launcher mpi needs mpirun on PATH (pip install 'netbench[mpi]' brings Open MPI)")
    return mpirun


def mpirun_argv(
    opts: ClusterOptions, patterns: list[str], nprocs: int | None, hostfile: str | None = None,
    prepared: str | None = None,
) -> list[str]:
    """``mpirun [-np N] [--hostfile FILE] python -m netbench worker ...`` (Open MPI syntax).
    ``hostfile``: Open MPI's form of ``opts.hosts_file`` (:func:`mpi_hostfile`), given with --hosts;
    ``prepared``: the run directory made for the ranks (launch/mpirun.py; rank 0 claims it)."""
    argv = [find_mpirun()]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    if hostfile:
        argv += ["--hostfile", hostfile, "--map-by", "slot"]
    if nprocs:  # this machine alone: as many ranks as asked, even beyond its cores (like --procs)
        argv += ["-np", str(nprocs), "--oversubscribe"]
    worker = worker_args(opts, patterns) + (["--prepared-run", prepared] if prepared else [])
    return argv + [opts.python or sys.executable, *worker]


@contextmanager
def mpi_hostfile(hosts_file: str, default_slots: int) -> Iterator[str]:
    """Open MPI's hostfile (``host slots=N``) from a netbench hosts file (mpirun rejects our labels),
    in a temporary file that exists for the ``with`` block: the caller runs mpirun inside it, so
    the file is removed once mpirun has ended, however it ended."""
    import tempfile

    from netbench.common.hosts import parse_hosts_file

    entries = parse_hosts_file(hosts_file)
    fd, path = tempfile.mkstemp(prefix="netbench-mpi-hosts-", suffix=".txt")
    try:
        with os.fdopen(fd, "w") as fh:
            for e in entries:
                fh.write(f"{e.name} slots={e.slots or default_slots}\n")
        yield path
    finally:
        os.unlink(path)


def srun_argv(opts: ClusterOptions, patterns: list[str], nodes: list[str] | None = None,
              prepared: str | None = None) -> list[str]:
    """``srun python -m netbench worker ...`` inside the current allocation (its task layout).

    ``nodes``: run on these nodes of the allocation only (those the inventory step reached), with
    the allocation's tasks per node. ``prepared``: the run directory ``netbench sweep`` made for
    the ranks (rank 0 writes into it instead of a new one)."""
    if not os.environ.get("SLURM_JOB_ID"):
        raise UsageError(
            "--launcher slurm runs inside a Slurm allocation (salloc/sbatch): SLURM_JOB_ID is unset"
        )
    srun = shutil.which("srun")
    if not srun:
        raise UsageError("--launcher slurm needs srun on PATH")
    argv = [srun, "--kill-on-bad-exit=1"]
    if nodes:
        per_node = os.environ.get("SLURM_NTASKS_PER_NODE", "1")
        per_node = per_node if per_node.isdigit() else "1"
        argv += [f"--nodelist={','.join(nodes)}", "--nodes", str(len(nodes)),
                 "--ntasks", str(len(nodes) * int(per_node)), f"--ntasks-per-node={per_node}"]
    worker = worker_args(opts, patterns)
    if prepared:
        worker += ["--prepared-run", prepared]
    return argv + [opts.python or sys.executable, *worker]
