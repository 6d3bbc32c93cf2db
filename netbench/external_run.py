"""``netbench worker``: the sweep when torchrun, srun or mpirun started the ranks.

Every rank runs this; rank 0 also coordinates (in a thread) and owns the run directory, so the
output is the same as ``netbench sweep``: nccl-tests' table on rank 0's stdout, rows fsync'd as they
arrive, a report at the end.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from netbench.cluster import PAIR_SIZES, ClusterOptions, build_plan
from netbench.collectives import messages
from netbench.collectives.plan import GroupSpec, Phase, WorkerPlan
from netbench.common.rundir import RunDir
from netbench.launch.external import ExternalLauncher, client, detect, gather_slots, open_store
from netbench.sweep import build_spec, execute, finish_report


@dataclass
class WorkerOptions(ClusterOptions):
    patterns: list[str] = field(default_factory=lambda: ["world"])


def run_worker(opts: WorkerOptions, echo: Callable[[str], None] = print) -> int:
    import torch

    from netbench.worker import run_rank

    env = detect()
    store, addr, port, _server = open_store(env)
    host = socket.gethostname()
    messages.set_sink(messages.StoreSink(store, env.rank))
    slots = gather_slots(store, env, host)
    coord: threading.Thread | None = None
    result: dict[str, Any] = {}
    if env.rank == 0:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        backend = opts.backend or ("nccl" if gpus else "gloo")
        device = "cuda" if backend == "nccl" else "cpu"
        rundir = RunDir.create(opts.out)
        spec = build_spec(opts, backend, None)
        if opts.patterns == ["world"]:
            hosts = [s.host for s in slots]
            plan = WorkerPlan(
                run_id=rundir.run_id,
                backend=backend,
                device=device,
                world_size=env.world,
                phases=[
                    Phase(0, "world", [GroupSpec("world", "world", list(range(env.world)), hosts)], spec)
                ],
                op_timeout_s=opts.timeout_s,
                rank_hosts=[s.host for s in slots for _ in s.ranks],
            )
        else:
            pair_spec = build_spec(opts, backend, None)
            pair_spec.sizes = sorted(opts.pair_sizes or PAIR_SIZES[backend])
            plan = build_plan(rundir.run_id, slots, opts, backend, device, spec, pair_spec)
        echo(
            f"# netbench worker ({env.source}): {env.world} rank(s) on {len(slots)} host(s), {backend}; "
            f"run directory {rundir.path}"
        )

        cstore = client(addr, port)

        def coordinate() -> None:
            result["outcome"] = execute(
                plan,
                slots,
                ExternalLauncher(cstore, env.source),
                rundir,
                opts,
                echo,
                None,
                fail_fast=opts.patterns == ["world"],
                launcher_name=env.source,
                store=cstore,
            )
            result["rundir"] = rundir

        coord = threading.Thread(target=coordinate, daemon=True)
        coord.start()
    try:
        run_rank(store, addr, env.rank, env.local_rank, host)
    except Exception as exc:  # noqa: BLE001 - reported to the coordinator, which names the rank
        messages.emit("group_error", rank=env.rank, phase=-1, group="?", kind="error", error=str(exc))
    code = 0
    if coord is not None:
        coord.join()
        outcome = result.get("outcome")
        if opts.report and result.get("rundir") is not None:
            finish_report(result["rundir"], echo)
        code = 0 if outcome is not None and outcome.status == "completed" and not outcome.faults else 1
    sys.stdout.flush()
    if env.source == "mpi":  # mpirun treats an exit without MPI_Finalize as a crash of the job
        from mpi4py import MPI

        MPI.COMM_WORLD.Barrier()
        MPI.Finalize()
    os._exit(code)
