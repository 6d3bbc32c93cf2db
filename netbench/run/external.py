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
from typing import Any

from netbench.collectives import messages
from netbench.common.rundir import RunDir, new_run_id
from netbench.run.execute import exit_status, finish_report
from netbench.run.launch import Launch
from netbench.run.options import Options
from netbench.run.pipeline import Planned, plan_run
from netbench.run.planner import HostCaps
from netbench.sites.external.site import ExternalSite
from netbench.sites.external.store import client, detect, gather_slots, load_mpi, open_store


def plan_here(
    opts: Options, site: ExternalSite, world: int, echo: Callable[[str], None]
) -> tuple[Planned, RunDir]:
    """The sweep's stages before the launch, on the ranks that exist: the switches, then backend,
    engine, slots and plan (``pipeline.plan_run``); then the run directory and the opening lines."""
    entries = site.hosts()
    switches = site.switches(entries, echo)
    run_id = new_run_id()
    planned = plan_run(opts, site, entries, {}, switches, run_id)
    rundir = RunDir.create(opts.report.out, run_id=run_id)
    rundir.write_run(command="worker", topology=switches.uplinks)
    echo(
        f"# netbench worker ({site.name}): {world} rank(s) on {len(planned.slots)} host(s), "
        f"{planned.backend}; run directory {rundir.path}"
    )
    if planned.engine_note:
        echo(f"# {planned.engine_note}")
    return planned, rundir


def run_worker(opts: Options, echo: Callable[[str], None] = print) -> int:
    from netbench.agents.worker import run_rank

    env = detect()
    store, addr, port, secret, _server = open_store(env, connect_timeout_s=opts.measure.timeout_s)
    host = socket.gethostname()
    messages.set_sink(messages.StoreSink(store, env.rank))
    slots = gather_slots(store, env, host)
    coord: threading.Thread | None = None
    result: dict[str, Any] = {}
    if env.rank == 0:
        site = ExternalSite(opts, env.source, slots, HostCaps.here(host), client(addr, port, secret))
        planned, rundir = plan_here(opts, site, env.world, echo)
        launch = Launch(planned.request, planned.slots, planned.backend, rundir, site.launcher, echo,
                        follow_up=False, options=opts.to_json(), store=site.store)

        def coordinate() -> None:
            result["outcome"] = launch.run(
                planned.plan, planned.slots, launcher_name=site.name, print_table=None,
                fail_fast=opts.pairs.patterns == ["world"],  # one group: its first fault is the run's end
            )
            result["rundir"] = rundir

        coord = threading.Thread(target=coordinate, daemon=True)
        coord.start()
    try:
        # a client for each lane that makes groups ahead (collectives/ahead.py)
        run_rank(store, addr, env.rank, env.local_rank, host, open_store=lambda: client(addr, port, secret))
    except Exception as exc:  # noqa: BLE001 - reported to the coordinator, which names the rank
        messages.emit("group_error", rank=env.rank, phase=-1, group="?", kind="error", error=str(exc))
    code = 0  # a rank other than 0 judges nothing: its part is done
    if coord is not None:
        from netbench.reports.verdict import ERROR, exit_code

        coord.join()
        outcome, rundir = result.get("outcome"), result.get("rundir")
        if outcome is None or rundir is None:  # the coordinator broke off: no verdict
            code = exit_code("worker", ERROR)
        else:
            judge = opts.report.report and outcome.status != "interrupted"
            said = opts.report
            findings = finish_report(rundir, echo, policy=said.rules) if judge else None
            code = exit_status(outcome, rundir, findings, judged=said.report, fail_on=said.fail_on,
                               command="worker")
    sys.stdout.flush()
    if env.source == "mpi":  # mpirun treats an exit without MPI_Finalize as a crash of the job
        MPI = load_mpi()  # noqa: N806 - mpi4py's name
        MPI.COMM_WORLD.Barrier()
        MPI.Finalize()
    os._exit(code)
