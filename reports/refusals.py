"""A host that turned a connection away, in the words a failed row's error carries: the coordinator
writes them (netbench/agents/reach.py) when a group stalls with every rank alive and a host of it
refused its connection, or left it unanswered, on the port that host's agent listens on; the
``host_refuses`` rule reads them back to name the port and how it failed."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PATTERN = re.compile(r"([^\s']+)'s TCP port (\d{1,5}): the coordinator's connection "
                      r"(refused(?: \([a-z ]+\))?|unanswered within [0-9.]+ s)")


@dataclass(frozen=True)
class Refusal:
    host: str
    port: int
    how: str  # "refused", "refused (host unreachable)"... or "unanswered within 2 s"

    @property
    def dropped(self) -> bool:
        """Unanswered: a firewall that drops connections (one that rejects them refuses)."""
        return self.how.startswith("unanswered")


def said(host: str, port: int, error: str, wait_s: float) -> str:
    """The words for a failed row: ``error`` is ``timeout`` (no answer within ``wait_s``) or how the
    connection was refused (``refused``, ``refused (host unreachable)``...)."""
    how = f"unanswered within {wait_s:g} s" if error == "timeout" else error
    return f"{host}'s TCP port {port}: the coordinator's connection {how}"


def read(text: str) -> list[Refusal]:
    """Every refusal ``text`` (a row's error) names; untrusted text: only a port 1..65535 counts."""
    out = []
    for m in _PATTERN.finditer(text or ""):
        port = int(m.group(2))
        if 0 < port < 65536:
            out.append(Refusal(m.group(1), port, m.group(3)))
    return out
