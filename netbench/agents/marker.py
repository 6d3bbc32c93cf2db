"""The marker an agent holds on its host for the run's life, so that another netbench run on the
same host finds it (inventory/probe.sh's netbench-runs section mirrors the folders and names here).

Two runs on one fabric each measure the other's traffic as their own: a fabric judged slow because
another sweep shared it is a false alarm an engineer pays for at the switch. The marker is a file
``netbench-run.<hostname>.<network namespace>.<pid>.lock`` in /run/lock (the system's folder for
lock files), else /tmp, holding one JSON line (run id, coordinator, pid) under an exclusive
flock. The lock, not the file, says the run is live: the kernel drops it when the agent dies,
however it dies, so a marker left by a SIGKILLed agent reads as stale (and is removed by the next
agent on the host). The host is in the name because test hosts (network namespaces) share one
/tmp; the file is readable by every user (another user's run shares the fabric too) and says
nothing secret.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from pathlib import Path
from typing import Any

FOLDERS = ("/run/lock", "/tmp")


def _pattern() -> str:
    """This host's marker names: its hostname and its network namespace (two containers of one
    machine, or test hosts on one machine, share a /tmp and may share a hostname, not a namespace)."""
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        netns = 0
    return f"netbench-run.{socket.gethostname()}.{netns}.*.lock"


class RunMarker:
    """This agent's marker: held from ``hold`` until the process ends (``release`` removes it)."""

    def __init__(self, path: Path, fd: int, coordinator: str):
        self.path, self.fd, self.coordinator = path, fd, coordinator

    @classmethod
    def hold(cls, coordinator: str) -> RunMarker | None:
        """Take a marker in the first folder we can write; None where none is writable (a host
        without one is only not seen by other runs: nothing to stop a run for)."""
        for folder in FOLDERS:
            try:
                _remove_stale(Path(folder))
                path = Path(folder) / _pattern().replace("*", str(os.getpid()))
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            marker = cls(path, fd, coordinator)
            marker.write(None)
            return marker
        return None

    def write(self, run_id: str | None) -> None:
        """The marker's content: which run holds it, and where its coordinator is."""
        text = json.dumps({"run_id": run_id, "coordinator": self.coordinator, "pid": os.getpid()})
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, (text + "\n").encode(), 0)

    def name_run(self, plan_text: Any) -> None:
        """Write the run id once the host's plan arrived (``plan_text``: the agent's fetch, a thread
        to join, whose ``text.common`` is the plan's common part, JSON with its ``run_id``)."""
        plan_text.join()
        if plan_text.text is None:
            return
        try:
            run_id = json.loads(plan_text.text.common).get("run_id")
        except (ValueError, AttributeError):
            return
        if isinstance(run_id, str):
            self.write(run_id)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _remove_stale(folder: Path) -> None:
    """Remove this host's markers that no live agent holds (agents killed before releasing theirs)."""
    for path in folder.glob(_pattern()):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass  # held: a live run
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        finally:
            os.close(fd)
