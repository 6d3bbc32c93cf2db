"""Inventory many hosts over SSH at once: one session per host, the probe on stdin, parsing here.

Why this shape: the node runs only ``sh -s`` with inventory/probe.sh on stdin (nothing to install,
nothing left behind); all parsing happens locally with the same assembler the local probe uses.
Hosts are independent: a host that is down, refuses our key or hangs becomes its own record with a
status and a reason, and the others finish. A probe that hangs is killed (its whole remote process
group) when the per-host timeout expires.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from netbench.common.interrupts import checkpoint
from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.inventory.assemble import build_inventory, split_sections
from netbench.inventory.fleet import Progress, counter_snapshot
from netbench.inventory.hosts import HostEntry
from netbench.inventory.local import read_probe_script
from netbench.inventory.model import NodeInventory, check_can_run
from netbench.sites.ssh.transport import SSHConnection, SSHError, SSHOptions, connect, resolve

DEFAULT_CONCURRENCY = 64
# NodeInventory.status for each SSHError kind (a changed key is a refused key, with its own message).
STATUS_OF_KIND = {
    "unreachable": "unreachable",
    "auth_failed": "auth_failed",
    "host_key_refused": "host_key_refused",
    "host_key_changed": "host_key_refused",
    "timeout": "timeout",
    "error": "error",
}



def _unique(entries: Sequence[HostEntry]) -> list[HostEntry]:
    """One probe per node even when a hosts file splits a node by ``gpus=`` (labels of the first line)."""
    seen: dict[str, HostEntry] = {}
    for e in entries:
        if e.name in seen:
            seen[e.name].labels.pop("gpus", None)
        else:
            seen[e.name] = HostEntry(e.name, e.slots, dict(e.labels), e.source, e.line)
    return list(seen.values())


def probe_host(entry: HostEntry, opts: SSHOptions, script: str, probe_timeout: float = INVENTORY_TIMEOUT_S,
               python: str | None = None, active: _Active | None = None, only: str = "",
               ranks_python: bool | None = None) -> NodeInventory:
    """Inventory one host over SSH; never raises for the host's own failures (they become the status).

    ``active`` (internal) tracks open connections so an interrupted collection can close them all.
    ``only="counters"``: the probe reads the port counters and nothing else (a run's snapshots).
    ``ranks_python``, for a run's inventory: whether the ranks of a host without a ``python=`` label
    run ``python`` (a label is both the probe's and the ranks'); where they do, a host where it
    cannot run a rank is marked ``cannot_run`` (``check_can_run``). None (``netbench inventory``
    alone): no rank runs, none is judged.
    """
    start = time.monotonic()
    labels = dict(entry.labels)
    py = labels.get("python") or python or ""
    nonce = secrets.token_hex(8)  # headers must carry it: tool output cannot forge a section
    address = None
    try:
        target = resolve(entry, opts)
        address = target.endpoint()
        with connect(target, opts) as conn:
            if active is not None:
                active.add(conn)
            try:
                argv = ["sh", "-s", "--", py, nonce] + ([only] if only else [])
                rc, out, err = conn.run(argv, stdin=script.encode(), timeout=probe_timeout)
            finally:
                if active is not None:
                    active.discard(conn)
    except SSHError as exc:
        return NodeInventory(host=entry.name, labels=labels, status=STATUS_OF_KIND[exc.kind],
                             error=exc.message, probe_seconds=round(time.monotonic() - start, 3))
    except Exception as exc:  # noqa: BLE001 - one host's surprise must not stop the fleet
        return NodeInventory(host=entry.name, labels=labels, status="error",
                             error=f"{type(exc).__name__}: {exc}"[:300],
                             probe_seconds=round(time.monotonic() - start, 3))
    sections = split_sections(out.decode("utf-8", errors="replace"), nonce=nonce)
    inv = build_inventory(entry.name, sections, labels)
    inv.probe_seconds = round(time.monotonic() - start, 3)
    inv.address = address
    inv.ranks_python = None if ranks_python is None else bool(labels.get("python")) or ranks_python
    if rc != 0 and inv.status == "ok":
        inv.status = "partial"
        inv.error = f"probe exited {rc}: {err.decode('utf-8', errors='replace').strip()[:200]}"
    elif rc != 0 and not inv.error:
        inv.error = f"probe exited {rc}: {err.decode('utf-8', errors='replace').strip()[:200]}"
    return inv if only else check_can_run(inv)


def collect_inventory(
    entries: Sequence[HostEntry],
    opts: SSHOptions,
    concurrency: int = DEFAULT_CONCURRENCY,
    probe_timeout: float = INVENTORY_TIMEOUT_S,
    python: str | None = None,
    progress: Progress | None = None,
    ranks_python: bool | None = None,
) -> list[NodeInventory]:
    """Probe every host, ``concurrency`` at a time; one record per distinct host, in hosts-file order.

    ``python``: interpreter the probe asks for python/torch/NCCL versions when a host has no
    ``python=`` label; ``ranks_python``: whether a run's ranks run that one too (``probe_host``).
    ``progress(done, total, record)`` is called as each host finishes.
    """
    return _probe_all(entries, opts, concurrency, probe_timeout, python, progress, only="",
                      ranks_python=ranks_python)


def snapshot_counters(
    entries: Sequence[HostEntry],
    opts: SSHOptions,
    concurrency: int = DEFAULT_CONCURRENCY,
    probe_timeout: float = 30,
) -> list[dict]:
    """Every host's port counters now, for counters.jsonl: {host, status, error, collected_at,
    ports, other_runs} per host (other_runs: other netbench runs live there then, which shared the
    links). A host that cannot be read says why; it never stops the run."""
    nodes = _probe_all(entries, opts, concurrency, probe_timeout, None, None, only="counters")
    return counter_snapshot(nodes)




def _probe_all(entries: Sequence[HostEntry], opts: SSHOptions, concurrency: int, probe_timeout: float,
               python: str | None, progress: Progress | None, only: str,
               ranks_python: bool | None = None) -> list[NodeInventory]:
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    hosts = _unique(entries)
    if not hosts:
        return []
    script = read_probe_script()
    done = 0
    lock = threading.Lock()
    active = _Active()

    def one(entry: HostEntry) -> NodeInventory:
        nonlocal done
        inv = probe_host(entry, opts, script, probe_timeout, python, active, only, ranks_python)
        if progress is not None:
            with lock:
                done += 1
                progress(done, len(hosts), inv)
        return inv

    pool = ThreadPoolExecutor(max_workers=min(concurrency, len(hosts)), thread_name_prefix="inventory")
    try:
        futures = [pool.submit(one, e) for e in hosts]
        results = [f.result() for f in futures]
        checkpoint()  # a stop dropped on the way (interrupts.checkpoint) ends the inventory here
    except BaseException:  # Ctrl-C: start no more hosts and cut the sessions in flight
        pool.shutdown(wait=False, cancel_futures=True)
        active.close_all()
        raise
    pool.shutdown(wait=True)
    return results


class _Active:
    """The SSH connections in flight, so Ctrl-C can close them instead of waiting for every probe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: set[SSHConnection] = set()

    def add(self, conn: SSHConnection) -> None:
        with self._lock:
            self._conns.add(conn)

    def discard(self, conn: SSHConnection) -> None:
        with self._lock:
            self._conns.discard(conn)

    def close_all(self) -> None:
        """Kill the probes in flight (their remote process groups) and close the sessions, in parallel."""
        with self._lock:
            conns = list(self._conns)
        if conns:
            with ThreadPoolExecutor(max_workers=min(32, len(conns))) as pool:
                list(pool.map(lambda c: c.abort(), conns))




