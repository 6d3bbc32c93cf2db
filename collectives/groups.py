"""A group's life in a rank: made fresh, released once its peers are done, or abandoned after a failure.

A rank lives for the whole sweep and joins one group per round, so whatever a finished group holds
must go back: an NCCL communicator holds ~390 MiB of GPU memory (NCCL's own, not torch's allocator;
issue 29 measured an H200 out of memory after ~360 groups kept alive), a gloo group its sockets and
worker threads.

Release is ``shutdown()`` of the backend object. It is not cheap: measured on the H200 (torch 2.11,
NCCL 2.28.9, 1-rank groups) ``shutdown`` returns after ~0.50 s and ``abort`` after ~1.0 s whatever
the group did (torch joins its watchdog threads; TORCH_NCCL_ENABLE_MONITORING=0 and
TORCH_NCCL_COORD_CHECK_MILSEC change nothing), 20x the ~22 ms of making the group. So a release runs
on a thread of its own while the rank goes on, and at most ``IN_FLIGHT`` releases run at once: the
next release waits for a slot, which bounds the communicators alive to ``IN_FLIGHT`` + 1 (the
group in use), however long the sweep. Measured on the H200 with this scheme and 3 slots: 1,000
1-rank groups, GPU memory flat at 1,430 MiB above the CUDA context (at most 4 communicators), 7.6
groups a second; 2 slots keep 3 communicators (~1.1 GiB) and still release 4 groups a second, more
than a real sweep makes (a pair group measures for 0.2 s or more after seconds of set-up across
nodes), so the rank never waits for a slot there.

Reuse (``ncclCommSplit`` from one world communicator, torch's ``split_group`` / ``split_from``) was
measured and not taken (benchmarks/README.md, "Group set-up"): on the H200 a split 1-rank group
costs what a fresh one does (16-23 ms against 18-25 ms), its release the same 0.5 s, and the world
communicator it splits from stays alive beside it (652 MiB above base against 264). A split is
collective over the parent, so every rank of the world would have to split in every round, in
step: one dead or hung rank would stall every later group of the sweep, where a fresh pair group
costs only that pair. Every group is therefore made fresh, either when its turn comes or ahead of
it while earlier groups measure (collectives/ahead.py: set-up off the round's path); rows say which
(``group_made``: fresh | ahead) and how long the rank waited for it (``setup_wait_s``).
"""

from __future__ import annotations

import datetime as _dt
import threading
from dataclasses import dataclass
from typing import Any

#: releases running at once; the next one waits for a slot (see the module's docstring)
IN_FLIGHT = 2
_SLOTS = threading.BoundedSemaphore(IN_FLIGHT)
_KEPT: list[Any] = []  # groups no slot freed up for in time (``release``): alive until the process ends


@dataclass(frozen=True)
class MadeGroup:
    """A group made for this rank: the backend object (and the native engine's communicator, when
    the phase measures with it), this rank's place in it, how it was made and what making it cost
    (rendezvous, connections, the first operation), for its rows."""

    pg: Any
    grank: int
    how: str  # fresh: made when its turn came; ahead: made on a lane while earlier groups measured
    setup_s: float
    wait_s: float | None = None
    """How long the rank waited for it when its turn came: ``setup_s`` for a group made then, what
    was left of its making for one made ahead (collectives/ahead.py)."""
    native: Any = None  # collectives.native.NativeComm, or None


def make(
    backend: str, store: Any, grank: int, size: int, timeout_s: float, gloo_device: dict[str, str] | None,
    rendezvous_s: float | None = None,
) -> Any:
    """A fresh ``ProcessGroupNCCL`` / ``ProcessGroupGloo`` over the group's own ``store`` (a prefix of
    the run's), never through the default process group, so it lives and dies alone. ``gloo_device``:
    the keyword of ``ProcessGroupGloo.create_device`` (``interface`` or ``hostname``), None for
    gloo's default. ``rendezvous_s``: how long its making may wait for the other members, when
    longer than an operation's ``timeout_s`` (a group made ahead waits until its members' turn,
    collectives/ahead.py); its operations still time out after ``timeout_s``."""
    pg = _make(backend, store, grank, size, rendezvous_s or timeout_s, gloo_device)
    if rendezvous_s:
        pg._set_default_timeout(_dt.timedelta(seconds=timeout_s))
    return pg


def _make(
    backend: str, store: Any, grank: int, size: int, timeout_s: float, gloo_device: dict[str, str] | None
) -> Any:
    import torch
    import torch.distributed as dist

    timeout = _dt.timedelta(seconds=timeout_s)
    if backend == "nccl":
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = timeout
        pg = dist.ProcessGroupNCCL(store, grank, size, opts)
        # eager connect so set-up failures surface here, not inside the first timed loop; on a
        # stream of its own, waited for alone: a group made ahead (collectives/ahead.py) must
        # neither join the timed work of the group being measured nor wait for it
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            pg.allreduce([torch.zeros(1, device="cuda")]).wait()
        side.synchronize()
        return pg
    gopts = dist.ProcessGroupGloo._Options()
    gopts._timeout = timeout
    if gloo_device:
        gopts._devices = [dist.ProcessGroupGloo.create_device(**gloo_device)]
    else:
        gopts._devices = [dist.ProcessGroupGloo.create_default_device()]
    return dist.ProcessGroupGloo(store, grank, size, gopts)


def release(pg: Any, wait_s: float) -> None:
    """Give a finished group's resources back, on a thread of its own once a slot is free.

    Call it only after the group's last operation completed on this rank, and only when that
    operation was a collective every member took part in (rank.py's ``_gather``): then every peer
    has finished its part too, nothing is in flight, and ``shutdown`` neither waits on a peer nor
    finds work to abort. Shut down, a ProcessGroupNCCL is destroyed without torch's
    "destroy_process_group() was not called" warning. A release that fails is left alone: the
    process's exit takes the rest. ``wait_s``: the longest a rank waits for a slot (its plan's
    operation timeout)."""
    if not _SLOTS.acquire(timeout=wait_s):
        # every slot is held by a shutdown that does not return (a peer that died after the last
        # operation, in a way NCCL waits on): keep this group rather than stop the rank here
        _KEPT.append(pg)
        return
    threading.Thread(target=_shutdown, args=(pg,), name="netbench-release", daemon=True).start()


def _shutdown(pg: Any) -> None:
    try:
        pg.shutdown()
    except Exception:  # noqa: BLE001 - best effort: the group's rows are already out
        pass
    finally:
        _SLOTS.release()


def abandon(pg: Any, native: Any = None) -> None:
    """Drop a failed (or unwanted) group without waiting on it: ``abort`` (NCCL: ncclCommAbort;
    gloo: its pairs closed) never waits for a peer, which may be dead or hung mid-operation.
    Synchronous, as a failure is rare and the next group must not meet this one's half-finished
    work. ``native``: the group's native-engine communicator, aborted too."""
    if native is not None:
        native.close(failed=True)
    if pg is None:
        return
    try:
        pg.abort()
    except Exception:  # noqa: BLE001 - best effort on a group that already failed
        pass
