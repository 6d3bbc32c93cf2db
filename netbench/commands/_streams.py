"""The command line's standard output and error, kept from ending a command when their reader goes.

A reader that goes away (``netbench sweep | head -1``, a terminal closed under a run, a log file
whose disk filled) must never stop a measurement or change its verdict: the rows in the run
directory are what counts, and ``nohup`` exists because a sweep outlives its terminal. Python turns
such a write into an exception at whichever ``print`` meets it first (a row of the table, the
closing lines of a stop), which then ended the run as ``failed`` or left it ``running``.

So each stream is rebuilt over a raw writer (``_Guarded``) that catches the first refusal of the
OS, records it (``Lost``) and points the descriptor at /dev/null: every later write, a library's
print and the interpreter's last flush included, then succeeds into nothing, and the command goes
on to its end. ``cli.main`` reads ``lost_stdout`` at the end: a reader that went away (EPIPE) is
the reader's choice, the command keeps its status; any other loss of stdout (ENOSPC on
``> /dev/full``, EIO on a dead terminal without its SIGHUP) lost what a script would read, and says
so in one line with its status (docs/exit-status.md).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Lost:
    """A standard stream the OS refused to write."""

    name: str
    """``stdout`` or ``stderr``."""
    path: str
    """What the stream was (``/dev/full``, ``pipe:[81234]``, ``/dev/pts/3``), for the one line."""
    errno: int

    @property
    def reader_left(self) -> bool:
        """A pipe whose reader closed it (``| head -1``): nothing is wrong with the command."""
        return self.errno == errno.EPIPE

    @property
    def line(self) -> str:
        return f"cannot write the standard output ({self.path}): {os.strerror(self.errno)}"


_lost: dict[str, Lost] = {}


class _Guarded(io.RawIOBase):
    """A raw writer over descriptor ``fd`` that never raises the OS's refusal of a write."""

    def __init__(self, fd: int, name: str):
        super().__init__()
        self._fd, self._name = fd, name

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        size = memoryview(data).nbytes
        if self._name in _lost:
            return size
        try:
            return os.write(self._fd, data)
        except BlockingIOError:  # a non-blocking stream only full for now: "would block", as FileIO says
            return None  # type: ignore[return-value]
        except OSError as exc:
            self._lose(exc.errno or errno.EIO)
            return size

    def _lose(self, err: int) -> None:
        try:
            path = os.readlink(f"/proc/self/fd/{self._fd}")
        except OSError:
            path = f"descriptor {self._fd}"
        _lost[self._name] = Lost(self._name, path, err)
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            os.dup2(null, self._fd, inheritable=True)
            os.close(null)


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` rebuilt over ``_Guarded`` writers (same encoding, errors and
    buffering) while inside, the streams before put back after (``main`` is also called in-process,
    by tests); a stream that is no descriptor (a test's capture) stays as it is."""
    _lost.clear()
    before = {name: getattr(sys, name) for name in ("stdout", "stderr")}
    for name, old in before.items():
        try:
            fd = old.fileno()
            old.flush()
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
            continue
        setattr(sys, name, io.TextIOWrapper(
            io.BufferedWriter(_Guarded(fd, name)),
            encoding=old.encoding,
            errors=old.errors,
            line_buffering=old.line_buffering,
            write_through=getattr(old, "write_through", False),
        ))
    try:
        yield
    finally:
        for name, old in before.items():
            with contextlib.suppress(OSError, ValueError):
                getattr(sys, name).flush()
            setattr(sys, name, old)


def lost_stdout() -> Lost | None:
    """How the standard output was lost, if it was (flushed first: the last lines count too)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    return _lost.get("stdout")
