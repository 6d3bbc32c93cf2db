"""The srun launcher: inside a Slurm allocation, one agent per node as a one-task job step.

The same agent the SSH and local launchers start (``netbench.agents.worker agent``), reached the way those
reach theirs: srun forwards our stdin to the task (the store's secret, first line; its EOF stops the
agent and its ranks) and its stdout back to us (the protocol lines). No SSH to the nodes is needed;
the nodes must share netbench's Python with this machine (or ``--python`` names theirs).

``--whole`` gives the step every CPU and GPU the job holds on that node (the agent starts one rank
per GPU itself), ``--overlap`` lets it run beside the job's other steps.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from netbench.agents.launchers import TORCH_NOISE, HostSlot, agent_argv
from netbench.inventory.hosts import validate_hostname
from netbench.sites.local.launcher import LocalAgent
from netbench.sites.slurm.scontrol import slurm_tool

# what Slurm says when it ends a step or loses a task; the node names are validated before use
_CANCELLED = re.compile(
    r"\*\*\* (?:STEP|JOB) ([\d.]+) ON ([A-Za-z0-9_.-]+) CANCELLED AT \S+ ?(.*?) ?\*\*\*"
)
_TASK_LOST = re.compile(r"^srun: error: ([A-Za-z0-9_.-]+): tasks? [\d,-]+: (.+)$")
_NODE_FAILED = re.compile(r"^srun: error: Node failure on ([A-Za-z0-9_.-]+)$")  # slurmd silent too long


@dataclass
class StepEvents:
    """What srun's stderr said about an agent's step (one node) ending: Slurm cancelled it (a time
    limit, a node failure), or the task was lost."""

    cancelled: str | None = None  # "Slurm cancelled step 3.1 on h0 (DUE TO TIME LIMIT)"
    lost: str | None = None  # "node failure: its slurmd stopped answering"

    def read(self, line: str) -> None:
        if (m := _CANCELLED.search(line)) and self.cancelled is None:
            why = m.group(3).strip()
            self.cancelled = f"Slurm cancelled step {m.group(1)} on {m.group(2)}"
            self.cancelled += f" ({why})" if why else ""
        elif (m := _NODE_FAILED.match(line.strip())) and validate_hostname(m.group(1)) is None:
            self.lost = "node failure: its slurmd stopped answering"  # the cause, whichever line came first
        elif (m := _TASK_LOST.match(line.strip())) and validate_hostname(m.group(1)) is None:
            self.lost = self.lost or m.group(2)[:120]

    def ask_slurm(self, node: str) -> None:
        """srun said nothing of the node (its line raced the step's end, or never came): ask Slurm
        whether it holds the node down (a validated name; no shell)."""
        from netbench.sites.slurm.scontrol import SlurmError, nodes_down

        try:
            state = nodes_down([node]).get(node)
        except SlurmError:  # Slurm cannot say: what srun said, no more
            return
        if state:
            self.lost = self.lost or f"Slurm reports it {state}"

    def describe(self) -> str | None:
        """One line, or None when neither srun nor Slurm said anything about the end."""
        return "; ".join(p for p in (self.cancelled, self.lost) if p) or None


class SrunAgent(LocalAgent):
    """An agent's srun step: srun's stderr is read for why the step ended."""

    def __init__(self, host: str, proc: subprocess.Popen):
        super().__init__(host, proc)
        self.events = StepEvents()
        assert proc.stderr is not None
        self.stderr_pump = copy_stderr(proc.stderr, self.events.read)

    def end_reason(self) -> str | None:
        self.stderr_pump.join(2.0)  # its last lines may trail the closed stdout
        if self.events.lost is None and self.proc.poll() not in (None, 0):
            self.events.ask_slurm(self.host)
        return self.events.describe()


def copy_stderr(stream: IO[bytes], on_line: Callable[[str], None] | None = None) -> threading.Thread:
    """Copy srun's stderr to ours line by line, less torch's noise, in a thread; ``on_line`` sees
    every line (what srun says about the step's end)."""

    def pump() -> None:
        for raw in stream:
            line = raw.decode("utf-8", errors="replace")
            if on_line is not None:
                on_line(line)
            if not TORCH_NOISE.search(line):
                sys.stderr.write(line)
                sys.stderr.flush()

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    return t


class SrunLauncher:
    name = "slurm"

    def __init__(self, nodes: list[str], python: str | None = None, advertise: str | None = None):
        self.nodes = nodes  # validated by netbench.sites.slurm.scontrol.Allocation
        self.python = python or sys.executable
        self.advertise = advertise

    def store_host(self) -> tuple[str, str]:
        """Listen on ``--advertise``, else the address this machine uses towards the first node."""
        from netbench.collectives.envinfo import local_address_towards

        if self.advertise:
            return self.advertise, self.advertise

        addr = local_address_towards(socket.gethostbyname(self.nodes[0]))
        return addr, addr

    def start(self, slot: HostSlot, store_addr: str, store_port: int, secret: str) -> SrunAgent:
        if slot.host not in self.nodes:
            raise ValueError(f"{slot.host} is not a node of this allocation")
        argv = [slurm_tool("srun"), f"--nodelist={slot.host}", "--nodes=1", "--ntasks=1", "--whole",
                "--overlap", "--kill-on-bad-exit=1", "--job-name=netbench-agent",
                *agent_argv(self.python, slot, store_addr, store_port), "--watch-stdin"]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
        assert proc.stdin is not None
        agent = SrunAgent(slot.host, proc)
        proc.stdin.write((secret + "\n").encode())  # the pipe stays open: its EOF stops the agent
        proc.stdin.flush()
        return agent
