"""``netbench sweep`` on this machine: every GPU with NCCL, else a few CPU ranks with gloo.

The plan comes from ``netbench.planner`` and runs through ``netbench.engine``, like every other
launcher's; this module only observes the machine (its GPUs, its name) and starts the local ranks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict

from netbench import __version__
from netbench.collectives.sizes import format_size
from netbench.common.errors import UsageError
from netbench.common.rundir import RunDir, new_run_id
from netbench.coordinator import Outcome
from netbench.engine import RunSettings, execute
from netbench.inventory.local import probe_local
from netbench.inventory.model import NodeInventory
from netbench.launch import HostSlot
from netbench.options import SweepOptions, default_procs
from netbench.planner import HostCaps, PlanRequest, build_plan, choose_backend, choose_engine, free_gpu_cap
from netbench.progress import Progress


def inventory_here(
    rundir: RunDir, host: str, echo: Callable[[str], None], env: dict[str, str] | None = None
) -> NodeInventory:
    """Probe this machine (nvidia-smi, ibstat, sysfs: the probe and parsers of ``--hosts``) into the
    run's inventory.jsonl, so the headline of a GPU sweep has its NVLink/PCIe ceiling. CPU ranks
    skip it: gloo on one host crosses no link the inventory describes. ``env``: added to the
    probe's environment (tests put fake tools first on PATH)."""
    node = probe_local(host=host, env=env)
    rundir.write_inventory([node])
    if not node.ok:
        echo(f"# inventory of this host: {node.status}: {node.error}")
    return node


def run_local(
    opts: SweepOptions,
    echo: Callable[[str], None] = print,
    progress: Progress | None = None,
    patterns: list[str] | None = None,
) -> tuple[RunDir, Outcome]:
    """One host, its ranks as child processes. ``patterns``: world (default) or intra, which on one
    machine is the same group of every local rank, labelled as the host's own."""
    from netbench.launch.local import LocalLauncher

    host = os.uname().nodename
    caps = HostCaps.here(host)
    backend = choose_backend(opts.backend, [caps])
    engine = choose_engine(opts.engine, backend, [caps])
    nprocs = (caps.gpus or 0) if backend == "nccl" else (opts.procs or default_procs())
    if opts.root >= nprocs:
        raise UsageError(f"--root {opts.root} is not a rank (there are {nprocs})")
    cap = free_gpu_cap() if backend == "nccl" else None
    request = PlanRequest(
        measure=opts, patterns=list(patterns or ["world"]), size_cap=cap, engine=engine.engine
    )
    slots = [HostSlot(host=host, nprocs=nprocs, rank_base=0)]
    run_id = new_run_id()
    plan = build_plan(request, run_id, slots, backend)  # bad input fails here, before a directory exists
    rundir = RunDir.create(opts.out, run_id=run_id)
    spec = plan.phases[0].spec
    echo(
        f"# netbench {__version__}: {len(spec.collectives)} collective(s) on {nprocs} {plan.device} rank(s) "
        f"({backend}), {format_size(spec.sizes[0])}..{format_size(spec.sizes[-1])} x{opts.factor}, "
        f"iters {spec.iters}, warmup {spec.warmup}, check {'on' if spec.check else 'off'}"
    )
    echo(f"# run directory: {rundir.path}")
    if engine.note:
        echo(f"# {engine.note}")
    if backend == "nccl":
        inventory_here(rundir, host, echo)
    settings = RunSettings(launcher_name="local", options=asdict(opts), fail_fast=True)
    return rundir, execute(plan, slots, LocalLauncher(), rundir, settings, echo, progress)
