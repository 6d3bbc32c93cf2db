"""What a site does with the inventory records it collected, however it collected them (over SSH,
a Slurm step, a pod a node): a progress line, the leaves a topology names, counters.jsonl's lines."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import TextIO

from netbench.inventory.model import NodeInventory, SwitchNeighbor

Progress = Callable[[int, int, NodeInventory], None]


def counter_snapshot(nodes: Sequence[NodeInventory]) -> list[dict]:
    """counters.jsonl's lines of a counters-only probe of each node (over SSH, or a pod's)."""
    return [
        {"host": n.host, "status": n.status, "error": n.error or n.missing.get("counters"),
         "collected_at": n.collected_at, "ports": [asdict(p) for p in n.counters],
         "other_runs": [asdict(r) for r in n.other_runs], "mtu": dict(n.mtu)}
        for n in nodes
    ]


def apply_leaves(nodes: Sequence[NodeInventory], uplinks: Mapping[str, str]) -> None:
    """Add each node's leaf (``uplinks``: host -> leaf, from topology.conf or a cluster's topology
    labels) as a neighbour with ``source="topology"``.

    It goes after discovered neighbours (LLDP / InfiniBand), so what the cables say wins over what
    the file says, and a ``switch=`` label wins over both (see ``NodeInventory.switch``).
    """
    for n in nodes:
        leaf = uplinks.get(n.host)
        if leaf is not None and not any(x.source == "topology" for x in n.neighbors):
            n.neighbors.append(SwitchNeighbor(local_port="-", switch=leaf, source="topology"))


def progress_printer(stream: TextIO) -> Progress:
    """A progress callback that rewrites one status line on a terminal (stderr)."""

    def show(done: int, total: int, inv: NodeInventory) -> None:
        end = "\n" if done == total else ""
        stream.write(f"\r\x1b[Kinventory: {done}/{total} hosts (last: {inv.host} {inv.status}){end}")
        stream.flush()

    return show
