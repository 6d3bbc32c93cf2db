"""The srun launcher: inside a Slurm allocation, one agent per node as a one-task job step.

The same agent the SSH and local launchers start (``netbench.worker agent``), reached the way those
reach theirs: srun forwards our stdin to the task (the store's secret, first line; its EOF stops the
agent and its ranks) and its stdout back to us (the protocol lines). No SSH to the nodes is needed;
the nodes must share netbench's Python with this machine (or ``--python`` names theirs).

``--whole`` gives the step every CPU and GPU the job holds on that node (the agent starts one rank
per GPU itself), ``--overlap`` lets it run beside the job's other steps.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO

from netbench.common.slurm import slurm_tool
from netbench.launch import TORCH_NOISE, HostSlot, agent_argv
from netbench.launch.local import LocalAgent


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

    def __init__(self, nodes: list[str], python: str | None = None):
        self.nodes = nodes  # validated by netbench.common.slurm.Allocation
        self.python = python or sys.executable

    def store_host(self) -> tuple[str, str]:
        """Listen on the address this machine uses towards the allocation's first node."""
        from netbench.collectives.envinfo import local_address_towards

        addr = local_address_towards(socket.gethostbyname(self.nodes[0]))
        return addr, addr

    def start(self, slot: HostSlot, store_addr: str, store_port: int, secret: str) -> LocalAgent:
        if slot.host not in self.nodes:
            raise ValueError(f"{slot.host} is not a node of this allocation")
        argv = [slurm_tool("srun"), f"--nodelist={slot.host}", "--nodes=1", "--ntasks=1", "--whole",
                "--overlap", "--kill-on-bad-exit=1", "--job-name=netbench-agent",
                *agent_argv(self.python, slot, store_addr, store_port), "--watch-stdin"]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
        assert proc.stdin is not None and proc.stderr is not None
        copy_stderr(proc.stderr)
        proc.stdin.write((secret + "\n").encode())  # the pipe stays open: its EOF stops the agent
        proc.stdin.flush()
        return LocalAgent(slot.host, proc)
