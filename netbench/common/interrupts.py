"""Stopping a run from outside: SIGINT, SIGTERM, SIGHUP, and a run directory that is full.

SIGTERM is what ``timeout``, Slurm's time limit and Kubernetes' pod termination send, SIGHUP what a
closed terminal or SSH session sends: each is handled as Ctrl-C is, by raising ``Interrupted`` (a
``KeyboardInterrupt``, so every stage that already stops cleanly on Ctrl-C stops the same way) in
the main thread. The run keeps what it measured, run.json says ``interrupted`` with the signal, and
the exit status is 128 + the signal's number, as a shell reports a process the signal killed. A
second signal ends the process at once (``os._exit``) after one last run.json write: a teardown
that hangs (an SSH channel that will not close) never holds a user or a scheduler's ``KillWait``.

A run directory that cannot be written any more (ENOSPC, EDQUOT) stops the run the same way
(``DiskFull``): nothing more can be kept, so measuring on would only be lost.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
"""The signals handled; others keep their default (SIGKILL cannot be caught: ``netbench report``
on such a run says it never recorded its end)."""

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
EXIT_DISK_FULL = 3
"""No verdict (docs/exit-status.md): the report cannot be written either; the rows stay."""


class Interrupted(KeyboardInterrupt):
    """The run was told to stop: by ``signal`` (its name), or by ``reason`` (``DiskFull``)."""

    def __init__(self, signal_name: str = "SIGINT"):
        super().__init__(signal_name)
        self.signal: str | None = signal_name

    @property
    def exit_code(self) -> int:
        """128 + the signal's number (130 SIGINT, 143 SIGTERM, 129 SIGHUP)."""
        return 128 + int(getattr(signal, self.signal or "SIGINT"))

    @property
    def what(self) -> str:
        """How run.json's ``error`` and the log say it: "interrupted by SIGTERM"."""
        return f"interrupted by {self.signal}"


class DiskFull(Interrupted):
    """A file of the run directory could not be written: no space (ENOSPC) or over quota (EDQUOT)."""

    def __init__(self, path: str | Path, err: int = errno.ENOSPC):
        super().__init__("SIGINT")
        self.signal = None
        self.path = str(path)
        self.errno = err
        self.args = (self.what,)

    @property
    def exit_code(self) -> int:
        return EXIT_DISK_FULL

    @property
    def what(self) -> str:
        return f"stopped: cannot write {self.path}: {os.strerror(self.errno)}"


def disk_full(exc: OSError, path: str | Path) -> DiskFull | None:
    """``exc`` as a DiskFull about ``path`` when it is one, else None (any other OSError stays one)."""
    return DiskFull(path, exc.errno) if exc.errno in DISK_FULL_ERRNOS else None


_state: dict[str, object] = {}
"""The first stop of this process (``first``) and the last words of an immediate exit (``last``)."""


def as_interrupted(exc: BaseException) -> Interrupted:
    """What stopped the run: the first stop this process recorded, else ``exc`` (a plain
    KeyboardInterrupt is Ctrl-C's SIGINT). Recorded, so later stages report the same one."""
    first = _state.get("first")
    if isinstance(first, Interrupted):
        return first
    stop = exc if isinstance(exc, Interrupted) else Interrupted("SIGINT")
    _state["first"] = stop
    return stop


def stopped() -> Interrupted | None:
    """The stop recorded so far, if any."""
    first = _state.get("first")
    return first if isinstance(first, Interrupted) else None


def on_exit_now(last_words: Callable[[Interrupted], None] | None) -> None:
    """What a second signal does before it ends the process (mark run.json); None: nothing."""
    _state["last"] = last_words


def _handler(signum: int, frame: object) -> None:
    stop = Interrupted(signal.Signals(signum).name)
    first = stopped()
    if first is not None:  # the second signal: end now, the teardown of the first is not waited for
        last = _state.get("last")
        if callable(last):
            try:
                last(first)
            except BaseException:  # noqa: BLE001 - nothing may keep this process from ending now
                pass
        os._exit(first.exit_code)
    _state["first"] = stop
    raise stop


def _ended(signum: int, frame: object) -> None:
    os._exit(128 + signum)


@contextmanager
def handling(restore: bool = True) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise ``Interrupted`` while inside (main thread only: elsewhere
    signals cannot be caught, and the defaults stay; an ignored one stays ignored); the handlers
    before are restored after, or (``restore=False``: the command line's, whose process is ending)
    each ends the process at once: a signal while the interpreter shuts down (threads joined) still
    exits 128 + n, never killed by it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {name: signal.getsignal(getattr(signal, name)) for name in SIGNALS}
    _state.clear()
    for name, old in before.items():
        if old is not signal.SIG_IGN:  # ``nohup netbench ...`` asked for SIGHUP to be ignored: it stays so
            signal.signal(getattr(signal, name), _handler)
    try:
        yield
    finally:
        for name, old in before.items():
            if restore or old is signal.SIG_IGN:
                signal.signal(getattr(signal, name), old)
            else:
                signal.signal(getattr(signal, name), _ended)
        _state.clear()
