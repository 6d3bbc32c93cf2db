"""The line protocol from ranks to the coordinator: one JSON object per line, prefixed.

Ranks write these on stdout; whatever carries stdout (a pipe, an SSH channel, an agent forwarding
its children) carries the protocol, so no shared filesystem is needed. Lines without the prefix
(library chatter) are not protocol and are passed on as logs.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

PREFIX = "@@nb "
_lock = threading.Lock()


def emit(msg_type: str, /, **fields: Any) -> None:
    line = PREFIX + json.dumps({"type": msg_type, **fields}, default=str) + "\n"
    with _lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def parse(line: str) -> dict[str, Any] | None:
    """The message in ``line``, or None when the line is not protocol (or is damaged)."""
    if not line.startswith(PREFIX):
        return None
    try:
        obj = json.loads(line[len(PREFIX):])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and "type" in obj else None
