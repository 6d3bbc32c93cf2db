"""The line protocol from ranks to the coordinator: one JSON object per line, prefixed.

Ranks write these on stdout; whatever carries stdout (a pipe, an SSH channel, an agent forwarding
its children) carries the protocol, so no shared filesystem is needed. Lines without the prefix
(library chatter) are not protocol and are passed on as logs.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import threading
from collections.abc import Callable
from typing import Any

PREFIX = "@@nb "
HEARTBEAT_S = 2.0
"""How often a host's agent says it is alive (``alive``, naming its stopped ranks): one line a host,
not a rank, so 4,096 hosts cost the coordinator 2,048 lines a second."""
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
    """The message in ``line``, or None when the line is not protocol (or is damaged). For what
    stays inside one process; whatever crossed a host boundary goes through ``decode``."""
    if not line.startswith(PREFIX):
        return None
    try:
        obj = json.loads(line[len(PREFIX) :])
    except (json.JSONDecodeError, RecursionError):
        return None
    return obj if isinstance(obj, dict) and "type" in obj else None


# -- validation at the boundary ------------------------------------------------------------------
# Everything below judges lines that came from another host, so nothing is trusted: a line is
# either a message whose every field has the type and range the coordinator relies on, or a
# ProtocolError naming the first thing wrong. The coordinator then checks what only it can (the
# group is in the plan, the sender is one of its hosts).

MAX_LINE = 1 << 20  # a row with 4096 per-rank times is ~100 KB; anything far beyond is not ours
MAX_TEXT = 4096  # an error message, a host name, an interface name


class ProtocolError(ValueError):
    """A protocol line that is not a valid message; the text says why (safe to quote)."""


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


def _is_num(v: object) -> bool:
    return (_is_int(v) or isinstance(v, float)) and not isinstance(v, bool) and math.isfinite(v)


def _text(v: object) -> bool:
    return isinstance(v, str) and len(v) <= MAX_TEXT


# field -> (check, what it must be); a field whose name ends in "?" may be missing or null
Check = tuple[Callable[[object], bool], str]
INT: Check = (_is_int, "an integer")
COUNT: Check = (lambda v: _is_int(v) and v >= 0, "an integer >= 0")
NUM: Check = (lambda v: _is_num(v) and v >= 0, "a finite number >= 0")
TEXT: Check = (_text, "a string")
BOOL: Check = (lambda v: isinstance(v, bool), "true or false")
OBJ: Check = (lambda v: isinstance(v, dict), "an object")

SCHEMAS: dict[str, dict[str, Check]] = {
    "hello": {"rank": COUNT, "host": TEXT, "pid?": COUNT, "addr?": TEXT, "iface?": TEXT, "caps?": OBJ},
    "env": {"host": TEXT, "info": OBJ},
    "row": {"row": OBJ, "phase": COUNT},
    "step": {"rank": COUNT, "phase": COUNT, "group": TEXT, "step?": COUNT},
    "group_done": {"rank": COUNT, "phase": COUNT, "group": TEXT, "seconds?": NUM, "setup_s?": NUM,
                   "wait_s?": NUM},
    "group_error": {
        "rank": COUNT,
        "phase": INT,  # -1: the rank failed before any phase (external launchers)
        "group": TEXT,
        # memory: the sizes asked for could not be allocated (collectives.rank.BuffersTooLarge)
        "kind": (lambda v: v in ("timeout", "error", "memory"), "timeout, error or memory"),
        "error": TEXT,
        "detail?": (lambda v: isinstance(v, str), "a string"),
    },
    "phase_done": {"rank": COUNT, "phase": COUNT},
    "bye": {"rank": COUNT},
    "exit": {"rank": COUNT, "rc": INT},
    "alive": {
        "host": TEXT,
        "stopped?": (lambda v: isinstance(v, list) and all(_is_int(r) and r >= 0 for r in v), "a rank list"),
    },
    "restarted": {"rank": COUNT, "phase": COUNT},
}


def _check_fields(obj: dict[str, Any], schema: dict[str, Check], what: str) -> None:
    for name, (ok, must) in schema.items():
        key, optional = name.rstrip("?"), name.endswith("?")
        value = obj.get(key)
        if value is None and optional:
            continue
        if key not in obj:
            raise ProtocolError(f"{what} has no {key!r}")
        if not ok(value):
            raise ProtocolError(f"{what} field {key!r} must be {must}")


def decode(line: str) -> dict[str, Any] | None:
    """The validated message in ``line``; None when the line is not protocol (no prefix: library
    chatter, passed on as a log); ProtocolError when it carries the prefix but is not a valid
    message of a known type."""
    if not line.startswith(PREFIX):
        return None
    if len(line) > MAX_LINE:
        raise ProtocolError(f"line of {len(line)} characters (at most {MAX_LINE})")
    try:
        obj = json.loads(line[len(PREFIX) :])
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ProtocolError(f"not JSON ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"a JSON {type(obj).__name__}, not an object")
    kind = obj.get("type")
    schema = SCHEMAS.get(kind) if isinstance(kind, str) else None
    if schema is None:
        raise ProtocolError("unknown message type " + repr(kind)[:60])
    _check_fields(obj, schema, f"{kind} message")
    if kind == "row":
        check_row(obj["row"])
    return obj


@functools.cache
def _known_names() -> tuple[frozenset[str], frozenset[str]]:
    """(collectives, dtypes). Imported on the first row check, not at the top: the per-host agent
    forwards lines with this module and must not pay for torch (ops and dtypes import it: ~2 s of
    CPU per host per run)."""
    from netbench.collectives.dtypes import DTYPES
    from netbench.collectives.ops import COLLECTIVES

    return frozenset(COLLECTIVES), frozenset(DTYPES)


ROW_SCHEMA: dict[str, Check] = {
    "run_id": TEXT,
    "collective": (lambda v: isinstance(v, str) and v in _known_names()[0], "a known collective"),
    "backend": (lambda v: v in ("gloo", "nccl", "mpi"), "gloo, nccl or mpi"),
    "pattern": TEXT,
    "hosts": (
        lambda v: isinstance(v, list) and 0 < len(v) and all(_text(h) and h for h in v),
        "a list of host names",
    ),
    "ranks": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "round?": COUNT,
    "bytes": COUNT,
    "count": COUNT,
    "dtype": (lambda v: isinstance(v, str) and v in _known_names()[1], "a known dtype"),
    "op?": TEXT,
    "in_place": BOOL,
    "iters": COUNT,
    "warmup": COUNT,
    "time_us?": NUM,
    "time_us_min?": NUM,
    "time_us_max?": NUM,
    "rank_time_us?": (
        lambda v: isinstance(v, list) and all(_is_num(t) and t >= 0 for t in v),
        "a list of finite times",
    ),
    "algbw_GBps?": NUM,
    "busbw_GBps?": NUM,
    "wrong?": COUNT,
    "status": (lambda v: v in ("ok", "timeout", "error"), "ok, timeout or error"),
    "error?": TEXT,
    "root?": COUNT,
    "group?": TEXT,
    "device?": (lambda v: v in ("cpu", "cuda"), "cpu or cuda"),
    "cuda_graph?": BOOL,
    "engine?": (lambda v: v in ("torch", "nccl"), "torch or nccl"),
    "ts?": NUM,
    "schema?": TEXT,
    "extra?": OBJ,
}


def check_row(row: object) -> None:
    """A result row as a rank sends it: every contract field with its type, finite numbers, and an
    ``ok`` row carrying the numbers that make it a measurement (ProtocolError otherwise)."""
    if not isinstance(row, dict):
        raise ProtocolError("row is not an object")
    _check_fields(row, ROW_SCHEMA, "row")
    if row["status"] == "ok":
        missing = [k for k in ("time_us", "algbw_GBps", "busbw_GBps") if row.get(k) is None]
        if missing:
            raise ProtocolError(f"ok row without {missing[0]!r}")
        times = row.get("rank_time_us")
        if times is not None and len(times) != row["ranks"]:
            raise ProtocolError(f"row has {len(times)} rank times for {row['ranks']} ranks")
