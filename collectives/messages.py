"""The line protocol from ranks to the coordinator: one JSON object per line, prefixed.

Ranks write these on stdout; whatever carries stdout (a pipe, an SSH channel, an agent forwarding
its children) carries the protocol, so no shared filesystem is needed. Lines without the prefix
(library chatter) are not protocol and are passed on as logs.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

PREFIX = "@@nb "
_lock = threading.Lock()
_sink: Callable[[str], None] | None = None


def set_sink(sink: Callable[[str], None] | None) -> None:
    """Send protocol lines somewhere other than stdout (under mpirun/torchrun/srun stdout belongs to
    the launcher, so ranks post their lines to the rendezvous store instead: see StoreSink)."""
    global _sink
    _sink = sink


def emit(msg_type: str, /, **fields: Any) -> None:
    line = PREFIX + json.dumps({"type": msg_type, **fields}, default=str) + "\n"
    with _lock:
        if _sink is not None:
            _sink(line)
            return
        sys.stdout.write(line)
        sys.stdout.flush()


class StoreSink:
    """Posts a rank's lines to the store: ``msg/<rank>/<n>`` then bumps ``msgn/<rank>`` (in that
    order, so a reader that sees the count always finds the line)."""

    def __init__(self, store: Any, rank: int):
        self.store, self.rank, self.n = store, rank, 0

    def __call__(self, line: str) -> None:
        self.n += 1
        self.store.set(f"msg/{self.rank}/{self.n}", line)
        self.store.add(f"msgn/{self.rank}", 1)


def store_lines(store: Any, rank: int, seen: int) -> tuple[list[str], int]:
    """Lines rank ``rank`` posted after the first ``seen``; returns them and the new count."""
    count = store.add(f"msgn/{rank}", 0)
    lines = [store.get(f"msg/{rank}/{i}").decode() for i in range(seen + 1, count + 1)]
    return lines, count


def parse(line: str) -> dict[str, Any] | None:
    """The message in ``line``, or None when the line is not protocol (or is damaged)."""
    if not line.startswith(PREFIX):
        return None
    try:
        obj = json.loads(line[len(PREFIX) :])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and "type" in obj else None
