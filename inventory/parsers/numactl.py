"""``numactl -H``: NUMA nodes with their CPUs, memory and the distance matrix."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class NumaNode:
    node: int
    cpus: list[int] = field(default_factory=list)
    size_mb: int | None = None
    free_mb: int | None = None


@dataclass
class NumaInfo:
    nodes: list[NumaNode] = field(default_factory=list)
    distances: dict[int, dict[int, int]] = field(default_factory=dict)


def parse_numactl(text: str) -> NumaInfo:
    if not re.search(r"^available:\s*\d+\s+nodes", text, re.M):
        raise ValueError("not numactl -H output")
    nodes: dict[int, NumaNode] = {}
    info = NumaInfo()
    in_dist, cols = False, []
    for line in text.splitlines():
        m = re.match(r"^node\s+(\d+)\s+(cpus|size|free):\s*(.*)$", line)
        if m:
            n = nodes.setdefault(int(m.group(1)), NumaNode(int(m.group(1))))
            if m.group(2) == "cpus":
                n.cpus = [int(c) for c in m.group(3).split()]
            else:
                num = re.match(r"(\d+)", m.group(3))
                setattr(n, f"{m.group(2)}_mb", int(num.group(1)) if num else None)
            continue
        if line.startswith("node distances"):
            in_dist = True
            continue
        if in_dist:
            if line.startswith("node"):
                cols = [int(c) for c in line.split()[1:]]
            else:
                m = re.match(r"^\s*(\d+):\s*(.*)$", line)
                if m:
                    row = map(int, m.group(2).split())
                    info.distances[int(m.group(1))] = dict(zip(cols, row, strict=False))
    info.nodes = [nodes[k] for k in sorted(nodes)]
    return info
