"""The SSH launcher: one agent per host over one paramiko channel; its stdout carries the rows back.

No shared filesystem is needed: the plan travels through the rendezvous store, results come back as
JSON lines on the channel. The remote command is built from an argv list with shlex quoting (in
netbench.sites.ssh.transport), never from anything a host reported. Ending the channel kills the remote
process group (netbench.sites.ssh.transport's watchdog), so Ctrl-C or a dead coordinator leaves nothing
running on any host; it hangs up the channel's pty too, which ends a login shell whose profile never
let the agent start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from netbench.agents.launchers import HostSlot, agent_argv, forwarded_env


class SSHAgent:
    def __init__(self, host: str, proc: Any, conn: Any):
        self.host = host
        self.proc = proc
        self.conn = conn

    def lines(self) -> Iterator[str]:
        for line in self.proc:
            yield line + "\n"

    def terminate(self) -> None:
        try:
            self.proc.terminate(grace=3.0)
        finally:
            self.conn.close()

    def returncode(self) -> int | None:
        return self.proc.returncode

    def end_reason(self) -> str | None:
        return None  # a lost channel is reported as such (coordinator.ChannelLost)


class SSHLauncher:
    name = "ssh"

    def __init__(
        self, entries: dict[str, Any], ssh_opts: Any, python: str | None = None, advertise: str | None = None
    ):
        self.entries = entries
        self.ssh_opts = ssh_opts
        self.python = python
        self.advertise = advertise

    def python_for(self, host: str) -> str:
        return self.entries[host].labels.get("python") or self.python or "python3"

    def store_host(self) -> tuple[str, str]:
        """Listen on the address this machine uses towards the hosts (or ``--advertise``) alone."""
        if self.advertise:
            return self.advertise, self.advertise
        from netbench.collectives.envinfo import local_address_towards
        from netbench.sites.ssh.transport import resolve

        first = next(iter(self.entries.values()))
        target = resolve(first, self.ssh_opts)
        hop = target.jumps[0].hostname if target.jumps else target.hostname
        import socket

        addr = local_address_towards(socket.gethostbyname(hop))
        return addr, addr

    def start(self, slot: HostSlot, store_addr: str, store_port: int, secret: str) -> SSHAgent:
        from netbench.sites.ssh.transport import connect_entry

        conn = connect_entry(self.entries[slot.host], self.ssh_opts)
        argv = agent_argv(self.python_for(slot.host), slot, store_addr, store_port)
        env = forwarded_env()
        env["PYTHONUNBUFFERED"] = "1"
        try:
            proc = conn.start(argv, env=env, secret=secret)
        except Exception:
            conn.close()
            raise
        return SSHAgent(slot.host, proc, conn)
