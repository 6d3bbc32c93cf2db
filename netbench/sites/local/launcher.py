"""The local launcher: one agent process on this machine, its ranks its children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

from netbench.agents.launchers import HostSlot, agent_argv


class LocalAgent:
    def __init__(self, host: str, proc: subprocess.Popen):
        self.host = host
        self.proc = proc

    def lines(self) -> Iterator[str]:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            yield raw.decode("utf-8", "replace")

    def terminate(self) -> None:
        """Stop the agent and every rank: the agent's session is its own process group."""
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def returncode(self) -> int | None:
        return self.proc.poll()

    def end_reason(self) -> str | None:
        return None  # a child process: its exit is the whole story


class LocalLauncher:
    name = "local"

    def __init__(self, python: str | None = None):
        self.python = python or sys.executable

    def store_host(self) -> tuple[str, str]:
        return "127.0.0.1", "127.0.0.1"

    def start(self, slot: HostSlot, store_addr: str, store_port: int, secret: str) -> LocalAgent:
        cmd = agent_argv(self.python, slot, store_addr, store_port) + ["--watch-stdin"]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if slot.labels.get("gpus"):  # a "host" that is a subset of this machine's GPUs
            env["CUDA_VISIBLE_DEVICES"] = slot.labels["gpus"]
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True
        )
        assert proc.stdin is not None
        proc.stdin.write((secret + "\n").encode())  # the pipe stays open: its EOF stops the agent
        proc.stdin.flush()
        return LocalAgent(slot.host, proc)
