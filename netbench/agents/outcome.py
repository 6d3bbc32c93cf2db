"""What the coordinator hears from the agents besides their messages (``Invalid``, ``ChannelLost``:
the ``Event`` its queue carries) and what a launch ends with (``Outcome``, its ``Fault``s), which
the engine, the pipeline, preflight and the simulator read. ``netbench.agents.coordinator`` re-exports
them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Fault:
    kind: str  # exit | hang | error | timeout | start | protocol | capability | memory
    message: str
    host: str | None = None
    rank: int | None = None
    ts: float | None = None
    """When the coordinator saw it (its wall clock: a stamp to line faults up, e.g. the hosts behind one
    switch going silent at once, never a duration)."""


@dataclass(frozen=True)
class Invalid:
    """A line from an agent that broke the protocol: the host's fault, never the run's."""

    reason: str
    line: str


@dataclass(frozen=True)
class ChannelLost:
    """The channel to an agent failed (SSH dropped, a read error)."""

    error: str


Event = dict[str, Any] | Invalid | ChannelLost | None  # None: the agent's output ended


@dataclass
class Outcome:
    status: str  # completed | failed | interrupted
    faults: list[Fault] = field(default_factory=list)
    rows: int = 0
    env: dict[str, dict[str, Any]] = field(default_factory=dict)
    down_hosts: set[str] = field(default_factory=set)
    startup_s: float | None = None  # launch until every rank joined (imports, rendezvous)
    phases: list[dict[str, Any]] = field(default_factory=list)  # name, groups, seconds of each phase
