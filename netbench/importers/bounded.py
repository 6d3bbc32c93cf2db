"""Reading one untrusted file with bounds, for the importers: bytes, time, and what the data it holds
may expand to (objects once every shared reference is counted again, characters of text, nesting
depth, the size of an integer). A file past a bound is ``Refused``: the importer skips it with one
line saying which file and why, and goes on with the rest.

Why the expanded size and not only the file's: a pickle (and so a Flight Recorder dump) can refer to
one container many times (its memo), so 20 KB can describe a tree of 2^40 leaves; loading it is
quick, but anything that then walks it (printing, ``json.dumps``, comparing) never ends. Counting a
shared container's size at every reference to it (``Reading.check_plain``, linear in the objects
actually built) finds that before any of it is used.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netbench.common import files
from netbench.common.errors import UsageError

_CONTAINERS = (dict, list, tuple, set, frozenset)
_TEXT = (str, bytes, bytearray)
#: plain data's types, by class: what a pickle without classes or JSON can build (no subclasses)
_SCALAR = (float, bool, type(None))
_KIND: dict[type, Any] = {t: kind for kind in (_CONTAINERS, _TEXT, _SCALAR) for t in kind} | {int: int}


class Refused(UsageError):
    """A file an importer does not read, and why (one line: ``path: why``). Uncaught, it is the
    command's one error line, exit 2; an importer that reads several files catches it and goes on."""

    def __init__(self, path: str | Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = str(path)
        self.why = why


@dataclass(frozen=True)
class Limits:
    """What one file may hold. The defaults are far above any real Flight Recorder dump (a few MB,
    a few hundred thousand objects, nesting of 6) or Inspector log."""

    bytes: int = 256 << 20
    objects: int = 10_000_000
    """Objects (and references to them) the file's data may build."""
    expanded: int = 20_000_000
    """Objects once every shared reference is expanded (a container counted at each reference)."""
    text: int = 1 << 30
    """Characters of text (strings and bytes), expanded likewise."""
    depth: int = 64
    int_bits: int = 128
    seconds: float = 60.0
    line: int = 1 << 16
    """The longest line of a text log kept (longer ones are read past and counted as unreadable)."""


def size_text(n: int) -> str:
    return f"{n >> 20:,} MiB" if n >= 1 << 20 else f"{n:,} bytes"


class _OpenRefused(Exception):
    """open_regular's refusal, turned into ``Refused`` with the file's path once."""


class Reading:
    """One file being read: its path, its limits and its deadline (from when the reading started)."""

    def __init__(self, path: str | Path, limits: Limits | None = None) -> None:
        self.path = Path(path)
        self.limits = limits or Limits()
        self._end = time.monotonic() + self.limits.seconds
        self._steps = 0

    def refuse(self, why: str) -> Refused:
        return Refused(self.path, why)

    def tick(self) -> None:
        """Refuse the file once its time is up (called every so many steps of a long loop)."""
        if time.monotonic() > self._end:
            raise self.refuse(f"not read within {self.limits.seconds:g} s")

    def _open(self) -> Any:
        try:
            return files.open_regular(self.path, "file", _OpenRefused)
        except _OpenRefused as exc:
            raise self.refuse(str(exc).removeprefix(f"{self.path}: ").removeprefix(f"{self.path} ")) from None

    def read_bytes(self) -> bytes:
        """The whole file, if it is a regular file of at most ``limits.bytes``."""
        try:
            with self._open() as fh:
                raw = fh.read(self.limits.bytes + 1)
        except OSError as exc:
            raise self.refuse(f"cannot read it: {exc.strerror or exc}") from None
        if len(raw) > self.limits.bytes:
            raise self.refuse(f"larger than {size_text(self.limits.bytes)}")
        return raw

    def lines(self) -> Iterator[bytes | None]:
        """The file's lines, each of at most ``limits.line`` bytes (None for a longer one, whose rest is
        read past in pieces), at most ``limits.bytes`` in all; refused when its time is up."""
        total = 0
        try:
            with self._open() as fh:
                for count in itertools.count(1):
                    if count % 4096 == 0:
                        self.tick()
                    line = fh.readline(self.limits.line + 1)
                    if not line:
                        return
                    total += len(line)
                    too_long = len(line) > self.limits.line
                    while too_long and line and not line.endswith(b"\n") and total <= self.limits.bytes:
                        line = fh.readline(1 << 20)  # the rest of a line too long to keep, read past
                        total += len(line)
                    if total > self.limits.bytes:
                        raise self.refuse(f"larger than {size_text(self.limits.bytes)}")
                    yield None if too_long else line
        except OSError as exc:
            raise self.refuse(f"cannot read it: {exc.strerror or exc}") from None

    def check_plain(self, root: Any) -> None:
        """Refuse ``root`` unless it is plain data within the limits: dicts, lists, tuples, sets, text,
        numbers, None; no container inside itself; nested at most ``limits.depth``; integers of at most
        ``limits.int_bits`` bits; at most ``limits.expanded`` objects and ``limits.text`` characters
        once shared references are expanded. Linear in the objects built, not in the expansion: a
        container met again adds the size measured the first time."""
        done: dict[int, tuple[int, int]] = {}  # id -> (objects, characters) of a container measured
        inside: set[int] = set()  # the containers on the path from the root
        # a frame: [container, its items' iterator, objects, characters so far]
        stack: list[list[Any]] = [[None, iter((root,)), 0, 0]]
        while stack:
            frame = stack[-1]
            for item in frame[1]:
                kind = _KIND.get(type(item))
                if kind is _TEXT:
                    frame[2] += 1
                    frame[3] += len(item)
                elif kind is int:
                    frame[2] += 1
                    if not -(1 << 63) <= item < 1 << 63:
                        self.check_int(item)
                elif kind is None:
                    raise self.refuse(f"holds a {type(item).__name__[:40]}: not plain data")
                elif kind is not _CONTAINERS:
                    frame[2] += 1
                elif id(item) in done:
                    self._add(frame, *done[id(item)])
                else:
                    self._enter(item, stack, inside)
                    break
            else:  # every item measured: the frame's container is
                stack.pop()
                self._add(frame, 0, 0)
                if stack:
                    inside.discard(id(frame[0]))
                    done[id(frame[0])] = (frame[2], frame[3])
                    self._add(stack[-1], frame[2], frame[3])

    def _enter(self, item: Any, stack: list[list[Any]], inside: set[int]) -> None:
        if id(item) in inside:
            raise self.refuse("holds a container inside itself: not plain data")
        if len(stack) > self.limits.depth:
            raise self.refuse(f"nested more than {self.limits.depth} levels deep")
        self._steps += 1
        if self._steps % 4096 == 0:
            self.tick()
        inside.add(id(item))
        items = itertools.chain.from_iterable(item.items()) if isinstance(item, dict) else iter(item)
        stack.append([item, items, 1, 0])

    def _add(self, frame: list[Any], objects: int, chars: int) -> None:
        frame[2] += objects
        frame[3] += chars
        if frame[2] > self.limits.expanded:
            raise self.refuse(f"expands to more than {self.limits.expanded:,} objects once its shared "
                              "references are counted each time they are used")
        if frame[3] > self.limits.text:
            raise self.refuse(f"expands to more than {size_text(self.limits.text)} of text once its shared "
                              "references are counted each time they are used")

    def check_int(self, value: int) -> None:
        if value.bit_length() > self.limits.int_bits:
            digits = int(value.bit_length() * 0.30103) + 1
            raise self.refuse(f"holds an integer of about {digits:,} digits (more than "
                              f"{self.limits.int_bits} bits): no field of a real file is that large")
