"""``netbench sweep`` inside a Slurm allocation: what ``--hosts`` gives over SSH, from Slurm itself.

Order of work (the same as cluster.py's, with Slurm as the source of each part):
  hosts      the allocation's nodes (``SLURM_JOB_NODELIST``; netbench.common.slurm);
  switches   ``scontrol show topology``, saved as ``topology.conf`` in the run directory and read
             with the one topology parser (``--topology FILE`` wins, as over SSH);
  inventory  inventory/probe.sh as one job step on every node (inventory/slurm_step.py, no SSH);
             nodes the step could not reach are recorded and left out, as over SSH;
  ranks      ``srun ... netbench worker`` on the nodes left, into this same run directory (made
             here, status ``prepared``; rank 0 claims it), so the rows, the report and its
             findings sit beside the inventory.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from netbench.common.errors import UsageError
from netbench.common.hostlist import compress_hostlist
from netbench.common.hosts import validate_hostname
from netbench.common.rundir import RunDir
from netbench.common.slurm import Allocation, SlurmError, show_topology
from netbench.common.text import terminal_safe
from netbench.options import ClusterOptions

TOPOLOGY_FILE = "topology.conf"


def current_allocation() -> Allocation:
    """The allocation to run in; a UsageError (exit 2) outside one or from inside a step."""
    alloc = Allocation.from_env()
    if alloc is None:
        raise UsageError(
            "--launcher slurm runs inside a Slurm allocation (salloc/sbatch): SLURM_JOB_ID is unset"
        )
    if alloc.in_step:
        raise UsageError("netbench sweep --launcher slurm starts its own srun steps: run it from the "
                         "allocation's shell or batch script, not under srun (srun runs `netbench worker`)")
    return alloc


def allocation_switches(rundir: RunDir, given: str | None, echo: Callable[[str], None]) -> str | None:
    """The topology file the ranks and the report will read: ``given`` (``--topology``), else what
    ``scontrol show topology`` says, saved in the run directory (None when Slurm has no switches)."""
    if given:
        return given
    try:
        text, topo = show_topology()
    except SlurmError as exc:  # no switches is a poorer report, not a reason to measure nothing
        echo(f"# switches: {exc}; pairs will not be judged by hop class")
        return None
    if topo is None:
        echo("# switches: Slurm has no topology (TopologyPlugin=topology/none); pairs not judged by hop "
             "class")
        return None
    path = rundir.path / TOPOLOGY_FILE
    path.write_text(text)
    for w in topo.warnings:
        echo(f"# topology warning: {terminal_safe(w, keep_newlines=False)}")
    echo(f"# switches from scontrol show topology: {len(topo.leaves)} leaf switch(es), saved as {path.name}")
    return str(path)


def inventory_nodes(nodes: list[str], opts: ClusterOptions, rundir: RunDir,
                    echo: Callable[[str], None]) -> list[str]:
    """Probe every node as a job step, write inventory.jsonl; return the nodes that answered."""
    from netbench.inventory.slurm_step import collect_inventory_srun

    # the probe asks the python the ranks will run (srun starts them with this one)
    python = opts.python or sys.executable
    records = collect_inventory_srun(nodes, python, timeout_s=max(opts.timeout_s, 30.0))
    rundir.write_inventory(records)
    for r in records:
        if not r.ok:
            line = f"# {r.host}: {r.status}: {r.error} (left out of the sweep)"
            echo(terminal_safe(line, keep_newlines=False))
    return [r.host for r in records if r.ok]


# what Slurm says when it ends a step or loses a task; the node names are validated before use
_CANCELLED = re.compile(
    r"\*\*\* (?:STEP|JOB) ([\d.]+) ON ([A-Za-z0-9_.-]+) CANCELLED AT \S+ ?(.*?) ?\*\*\*"
)
_TASK_LOST = re.compile(r"^srun: error: ([A-Za-z0-9_.-]+): tasks? [\d,-]+: (.+)$")
_NODE_FAILED = re.compile(r"^srun: error: Node failure on ([A-Za-z0-9_.-]+)$")  # slurmd silent too long


@dataclass
class StepEvents:
    """What srun's stderr said about the step's end: a cancellation, tasks that died (by node)."""

    cancelled: str | None = None  # "step 3.1 on h0 (DUE TO TIME LIMIT)"
    lost: dict[str, str] = field(default_factory=dict)  # node -> srun's reason

    def read(self, line: str) -> None:
        if (m := _CANCELLED.search(line)) and self.cancelled is None:
            why = m.group(3).strip()
            self.cancelled = f"Slurm cancelled step {m.group(1)} on {m.group(2)}"
            self.cancelled += f" ({why})" if why else ""
        elif (m := _NODE_FAILED.match(line.strip())) and validate_hostname(m.group(1)) is None:
            # the cause, whichever of srun's two lines comes first (they race)
            self.lost[m.group(1)] = "node failure: its slurmd stopped answering"
        elif self.cancelled is not None:  # tasks "Terminated" by the cancellation are not the cause
            return
        elif (m := _TASK_LOST.match(line.strip())) and validate_hostname(m.group(1)) is None:
            self.lost.setdefault(m.group(1), m.group(2)[:120])

    def ask_slurm(self, nodes: list[str]) -> None:
        """srun's stderr named no node lost (its line raced the step's end, or never came): ask
        Slurm which node of the step it holds down (validated names; no shell)."""
        from netbench.common.slurm import nodes_down

        try:
            down = nodes_down(nodes)
        except SlurmError:  # Slurm cannot say: the line names what srun said, no more
            return
        for node, state in down.items():
            self.lost.setdefault(node, f"Slurm reports it {state}")

    def describe(self, rc: int) -> str:
        """One line: the cancellation and the nodes lost before it (a node failure cancels the step
        "on" its first node, so the node that failed is only in srun's earlier line)."""
        nodes = ", ".join(f"{n} ({why})" for n, why in self.lost.items())
        lost = f"the step lost {nodes}" if nodes else ""
        if self.cancelled:
            return f"{self.cancelled}; {lost}" if lost else self.cancelled
        return lost or f"srun exited {rc}"


class StepEnd(Protocol):
    """What a launcher's stderr said about how the ranks ended (StepEvents; MpirunEvents)."""

    def describe(self, rc: int) -> str: ...


def run_quietly(argv: list[str], env: dict[str, str]) -> tuple[int, StepEvents]:
    """Run srun with its stdout ours and its stderr copied line by line, less torch's noise."""
    from netbench.launch.srun import copy_stderr

    events = StepEvents()
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
    assert proc.stderr is not None

    pump = copy_stderr(proc.stderr, events.read)
    try:
        rc = proc.wait()
    except KeyboardInterrupt:  # srun passes the first Ctrl-C on to the step; wait for its end
        proc.send_signal(signal.SIGINT)
        rc = proc.wait()
    pump.join(5)
    return rc, events


def after_step(rundir: RunDir, rc: int, events: StepEnd, topology: str | None, report: bool,
               echo: Callable[[str], None]) -> int:
    """The exit status once srun (or mpirun) returned. When rank 0 did not finish the run (Slurm cancelled the
    step, a node died with rank 0's partner tasks), say so in one line naming the node, mark the
    run and report on what was measured: every row was fsync'd as it arrived."""
    from netbench.engine import finish_report

    status = rundir.read_run().get("status")
    if status == "prepared":  # rank 0 never claimed it
        why = events.describe(rc)
        rundir.write_run(status="failed", error=f"{why} before rank 0 started")
        line = f"# {why} before rank 0 started; run directory {rundir.path}"
        echo(terminal_safe(line, keep_newlines=False))
        return rc or 1
    if status not in ("starting", "running"):  # rank 0 finished and reported
        return rc
    why = events.describe(rc)
    rows = rundir.read_rows()
    rundir.write_run(status="interrupted", error=why)
    echo(terminal_safe(f"# {why}: the run ended early; {len(rows)} row(s) measured stay in {rundir.path}",
                       keep_newlines=False))
    if report and rows:
        finish_report(rundir, echo, topology=topology)
    return rc or 1


def run_in_allocation(opts: ClusterOptions, patterns: list[str], echo: Callable[[str], None]) -> int:
    """The whole sweep inside the allocation; srun's exit status (1 when no rank started)."""
    from netbench.launch import SECRET_ENV, new_secret
    from netbench.launch.wrap import srun_argv

    if opts.hosts_file:
        raise UsageError("--launcher slurm takes its hosts from the allocation: leave out --hosts")
    alloc = current_allocation()
    rundir = RunDir.create(opts.out)
    echo(f"# netbench sweep inside Slurm job {alloc.job_id}: {len(alloc.nodes)} node(s) "
         f"{compress_hostlist(alloc.nodes)}; run directory {rundir.path}")
    topology = allocation_switches(rundir, opts.topology, echo)
    live = inventory_nodes(alloc.nodes, opts, rundir, echo) if opts.inventory else list(alloc.nodes)
    if not live:
        rundir.write_run(status="failed", error="no node of the allocation answered the inventory step")
        echo("# no node of the allocation answered the inventory step: nothing to measure")
        return 1
    rundir.write_run(status="prepared", launcher="slurm", slurm_job_id=alloc.job_id, hosts=live)
    argv = srun_argv(replace(opts, topology=topology), patterns,
                     nodes=live if live != alloc.nodes else None, prepared=str(rundir.path))
    echo(f"# srun on {compress_hostlist(live)}: netbench worker, pattern(s) {', '.join(patterns)}")
    # srun hands our environment to every rank: the store's secret goes there, not in argv
    rc, events = run_quietly(argv, env={**os.environ, SECRET_ENV: new_secret()})
    if rc != 0 and not events.lost and rundir.read_run().get("status") in ("prepared", "starting", "running"):
        events.ask_slurm(live)
    return after_step(rundir, rc, events, topology, opts.report, echo)
