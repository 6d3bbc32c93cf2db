"""Stopping a run from outside: SIGINT, SIGTERM, SIGHUP, and a run directory that is full.

SIGTERM is what ``timeout``, Slurm's time limit and Kubernetes' pod termination send, SIGHUP what a
closed terminal or SSH session sends: each is handled as Ctrl-C is, by raising ``Interrupted`` (a
``KeyboardInterrupt``, so every stage that already stops cleanly on Ctrl-C stops the same way) in
the main thread. The run keeps what it measured, run.json says ``interrupted`` with the signal, and
the exit status is 128 + the signal's number, as a shell reports a process the signal killed. A
second signal ends the process at once (``os._exit``) after its last words (``on_exit_now``): one
run.json write, and what a site must not leave running (Kubernetes: one request deleting the run's
parent object, whose garbage collector takes the pods). A teardown that hangs (an SSH channel that
will not close) never holds a user or a scheduler's ``KillWait``.

A run directory that cannot be written any more (ENOSPC, EDQUOT) stops the run the same way
(``DiskFull``): nothing more can be kept, so measuring on would only be lost.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

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
    KeyboardInterrupt is Ctrl-C's SIGINT). Recorded, so later stages report the same one; and
    taken, so ``checkpoint`` no longer raises it."""
    _state.pop("pending", None)
    first = _state.get("first")
    if isinstance(first, Interrupted):
        return first
    stop = exc if isinstance(exc, Interrupted) else Interrupted("SIGINT")
    _state["first"] = stop
    return stop


def checkpoint() -> None:
    """Raise the stop a signal recorded that nothing has taken yet (``as_interrupted``).

    Python runs a signal's handler wherever the main thread happens to be, and some places drop
    what it raises: a ``__del__`` or a weakref callback (printed and ignored), a C extension that
    turns an error into its own. A preflight once ran to its verdict past a SIGTERM sent during its
    inventory. The long stages call this between their steps, so a dropped stop still ends them
    there."""
    pending = _state.get("pending")
    if isinstance(pending, Interrupted):
        raise pending


@dataclass
class StageMark:
    """Where a measuring command is (run.json's ``stopped_in`` when a stop comes), for sweep's
    ``pipeline.Stage`` and preflight's ``SoFar`` alike: moving on is a checkpoint, so a stop that
    was dropped on the way ends the command at the next stage, and a stop in the ``report`` stage
    leaves every measurement in and the run ``completed``, whichever command it was."""

    name: str

    def enter(self, name: str) -> None:
        """On to stage ``name``, after raising a stop nothing has taken (``checkpoint``)."""
        checkpoint()
        self.name = name

    @property
    def all_measured(self) -> bool:
        """Stopped here, the run keeps ``completed``: the report is all that was left."""
        return self.name == "report"


def stopped() -> Interrupted | None:
    """The stop recorded so far, if any."""
    first = _state.get("first")
    return first if isinstance(first, Interrupted) else None


def on_exit_now(last_words: Callable[[Interrupted], None] | None, key: str = "run") -> None:
    """What a second signal does before it ends the process, for ``key`` (``run``: mark run.json;
    ``site``: what must not be left running, ``sites.base.finished``); None: nothing for it. Each
    must be short and bounded: the process waits for nothing else."""
    words = _state.setdefault("last", {})
    assert isinstance(words, dict)
    if last_words is None:
        words.pop(key, None)
    else:
        words[key] = last_words


def _handler(signum: int, frame: object) -> None:
    stop = Interrupted(signal.Signals(signum).name)
    first = stopped()
    if first is not None:  # the second signal: end now, the teardown of the first is not waited for
        # a third one must not cut the last words short (a site's request half sent leaves its pods)
        signal.pthread_sigmask(signal.SIG_BLOCK, {getattr(signal, name) for name in SIGNALS})
        words = dict(_state.get("last") or {})  # type: ignore[call-overload]
        for key in sorted(words, key=lambda k: k != "run"):  # run.json first: it is local and quick
            last = words[key]
            try:
                last(first)
            except BaseException:  # noqa: BLE001 - nothing may keep this process from ending now
                pass
        os._exit(first.exit_code)
    _state["first"] = _state["pending"] = stop
    raise stop


def _ended(signum: int, frame: object) -> None:
    os._exit(128 + signum)


def _end_stopped(code: object) -> NoReturn:
    """End a stopped process with ``code`` as the interpreter would, less its module teardown.

    CPython puts the default handlers back (``_PySignal_Fini``) before it destroys the modules, and
    with torch loaded that takes a while: a second signal then killed the process (a status of -15
    to a parent, not 143). So the steps before that are taken here: the other non-daemon threads
    joined, the atexit functions run (logging's flush among them), the standard streams flushed;
    then the process ends. ``_handler`` stays in place meanwhile: a second signal ends it with the
    first one's status."""
    import atexit

    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    if code is not None and not isinstance(code, int):  # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code or 0)


@contextmanager
def handling(restore: bool = True) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise ``Interrupted`` while inside (main thread only: elsewhere
    signals cannot be caught, and the defaults stay; an ignored one stays ignored); the handlers
    before are restored after, or (``restore=False``: the command line's, whose process is ending)
    each ends the process at once: a signal while the interpreter shuts down (threads joined) still
    exits 128 + n, never killed by it. A command line that was stopped ends on leaving, without the
    interpreter's module teardown (``_end_stopped``)."""
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
    except SystemExit as exc:
        if not restore and stopped() is not None:  # a stopped command line ends here, not in finalisation
            _end_stopped(exc.code)
        raise
    finally:
        for name, old in before.items():
            if restore or old is signal.SIG_IGN:
                signal.signal(getattr(signal, name), old)
            else:
                signal.signal(getattr(signal, name), _ended)
        _state.clear()
