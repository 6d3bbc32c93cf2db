"""Launchers start one agent per host; the coordinator talks to them through their stdout."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class HostSlot:
    """One host of the run: its name, how many ranks it runs, and the first global rank."""

    host: str
    nprocs: int
    rank_base: int
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        return list(range(self.rank_base, self.rank_base + self.nprocs))


class AgentProcess(Protocol):
    """A running agent: yields its stdout lines, can be stopped, has an exit code once done."""

    host: str

    def lines(self):  # noqa: ANN201 - an iterator of str
        ...

    def terminate(self) -> None: ...

    def returncode(self) -> int | None: ...


class Launcher(Protocol):
    name: str

    def store_host(self) -> tuple[str, str]:
        """(address to bind the store on, address the hosts use to reach it)."""
        ...

    def start(self, slot: HostSlot, store_addr: str, store_port: int) -> AgentProcess: ...


def agent_argv(python: str, slot: HostSlot, store_addr: str, store_port: int) -> list[str]:
    """The command that starts a host's agent (netbench.worker), the same for every launcher."""
    return [
        python,
        "-m",
        "netbench.worker",
        "agent",
        "--store-addr",
        store_addr,
        "--store-port",
        str(store_port),
        "--host",
        slot.host,
        "--rank-base",
        str(slot.rank_base),
        "--nprocs",
        str(slot.nprocs),
    ]
