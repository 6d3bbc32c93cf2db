"""Whether a host takes TCP connections in: each agent listens on a port of its own (``listen``, which
takes a connection and closes it) and names it in its heartbeat; the coordinator connects to it once
(``connect_error``), and when a group of the host stalls with every rank alive, a refusal or a
connection that went unanswered is the host's own (a firewall that lets only SSH in), said with the
port and the error the coordinator saw (reports/refusals.py's words, in the failed rows' error,
which the report's ``host_refuses`` rule reads back); ranks that were only slow leave it answering."""

from __future__ import annotations

import errno
import ipaddress
import queue
import socket
import threading
from collections.abc import Iterable
from typing import Any

from netbench.reports.refusals import said

#: how long the coordinator waits for a host's port to answer: a host on the same fabric answers in
#: milliseconds, so one that has not after this drops connections
CONNECT_S = 2.0
#: connections tried at once (each a thread of the coordinator's, most over in a millisecond)
PROBERS = 32
#: errors of a connect that mean the host (or its firewall) turned it away: anything else (no route
#: from here, say) is no evidence about the host, and is not said
REFUSALS = {errno.ECONNREFUSED: "refused", errno.EHOSTUNREACH: "refused (host unreachable)",
            errno.EACCES: "refused (access denied)", errno.EPERM: "refused (not permitted)"}


def listen(store_addr: str) -> dict[str, Any]:
    """Open a port of this host's that takes every connection and closes it at once; the fields that
    name it in the heartbeat (none where it could not be opened)."""
    from netbench.collectives.envinfo import local_address_towards

    try:
        addr = local_address_towards(store_addr)  # the address the coordinator reaches this host at
        server = socket.create_server(("", 0), backlog=64)
    except OSError:
        return {}

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=serve, daemon=True, name="reach").start()
    return {"addr": addr, "port": int(server.getsockname()[1])}


def connect_error(addr: str, port: int, timeout: float = CONNECT_S) -> str | None:
    """What a connection to ``addr:port`` met: ``refused...``, ``timeout``, or None (taken, or an error
    that says nothing of the host)."""
    try:
        with socket.create_connection((addr, port), timeout=timeout):
            return None
    except TimeoutError:
        return "timeout"
    except OSError as exc:
        return REFUSALS.get(exc.errno or 0)


class Reach:
    """The port each host's agent listens on (from its heartbeats) and what a connection to it met.

    Each host's port is tried once, as soon as its first heartbeat names it, on threads of their own:
    a stall reads the answer, long in (a stall takes the operation timeout), and never waits on a
    host that drops connections, however many of them a stalled round has. The threads are daemons
    that end with the coordinator (an interrupted run joins every other thread before it exits)."""

    def __init__(self) -> None:
        self.port: dict[str, tuple[str, int]] = {}
        self.answers: dict[str, str | None] = {}  # host -> what the connection to its port met
        self._todo: queue.SimpleQueue[tuple[str, str, int]] = queue.SimpleQueue()
        self._probers = 0

    def heard(self, host: str, beat: dict[str, Any]) -> None:
        """Note the address and port a heartbeat names, when they are an IP address and a port, and
        try that port (the first time)."""
        addr, port = beat.get("addr"), beat.get("port")
        if host in self.port or not isinstance(addr, str) or not isinstance(port, int):
            return
        if not 0 < port < 65536:
            return
        try:
            ipaddress.ip_address(addr)  # untrusted: the coordinator connects to nothing but an address
        except ValueError:
            return
        self.port[host] = (addr, port)
        self._todo.put((host, addr, port))
        if self._probers < PROBERS:
            self._probers += 1
            threading.Thread(target=self._probe, daemon=True, name="reach").start()

    def _probe(self) -> None:
        while True:
            host, addr, port = self._todo.get()
            self.answers[host] = connect_error(addr, port)

    def refusing(self, hosts: Iterable[str]) -> str:
        """``; HOST's TCP port N: ...`` for each of ``hosts`` whose port turned the coordinator away,
        "" when each took the connection, names no port or has not answered yet."""
        return "".join(f"; {said(h, self.port[h][1], e, CONNECT_S)}" for h in dict.fromkeys(hosts)
                       if (e := self.answers.get(h)) is not None)
