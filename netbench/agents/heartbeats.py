"""What the agents' heartbeats say (each agent says it is alive every ``messages.HEARTBEAT_S``,
naming its stopped ranks): the coordinator pins a stalled group on a host whose agent went quiet or
whose rank is stopped, and takes the other silent ranks for alive and waiting. A host never heard
from (ranks an external launcher started: no agent) is judged by silence alone."""

from __future__ import annotations

from typing import Any

from netbench.agents.reach import Reach
from netbench.collectives import messages

AGENT_SILENT_S = 5 * messages.HEARTBEAT_S
"""An agent not heard from for this long, when one of its groups stalls, has stopped answering (the
host froze, or its agent was stopped): the stall is that host's. Five beats: a loaded host's agent
can miss one or two."""


class Heartbeats:
    """When each host's agent was last heard, which of its ranks it saw stopped, and the port it
    listens on (``reach``: whether the host takes connections in)."""

    def __init__(self) -> None:
        self.alive_at: dict[str, float] = {}
        self.stopped: dict[str, set[int]] = {}
        self.reach = Reach()

    def heard(self, host: str, beat: dict[str, Any], now: float) -> None:
        """An ``alive`` message of ``host``'s agent."""
        self.alive_at[host] = now
        self.stopped[host] = set(beat.get("stopped") or ())
        self.reach.heard(host, beat)

    def stalls(self, host: str, rank: int, now: float) -> bool:
        """Whether a silent rank of ``host`` is the cause of a stall: its agent was never heard from or
        stopped answering, or says the rank is stopped."""
        seen = self.alive_at.get(host)
        return seen is None or now - seen > AGENT_SILENT_S or rank in self.stopped.get(host, ())

    def hang_cause(self, host: str, now: float) -> str:
        """What the heartbeats say of a host blamed for a stall, in a fault's words."""
        seen = self.alive_at.get(host)
        if seen is None:
            return "hung"
        if now - seen > AGENT_SILENT_S:
            return f"stopped answering (no word from its agent for {now - seen:.0f} s)"
        stopped = sorted(self.stopped.get(host, ()))
        return f"rank(s) {stopped} stopped (process state T)" if stopped else "hung"
