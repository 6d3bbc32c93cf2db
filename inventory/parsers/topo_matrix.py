"""``nvidia-smi topo -m``: the GPU/NIC relation matrix, CPU/NUMA affinity and the NIC legend.

Traps handled (see fixtures/public/SOURCES.md): ANSI underline codes around the header; tab-separated
output (real nvidia-smi, with an empty cell before ``GPU NUMA ID``) and space-aligned copies from a
terminal; NIC rows with no affinity cells; old drivers without ``NUMA Affinity`` / ``GPU NUMA ID``
columns or with NICs named directly (``mlx5_0``) instead of ``NIC0`` + legend; 2017-era ``SOC``.
"""

from __future__ import annotations

import re

from netbench.inventory.model import TopoMatrix
from netbench.inventory.parsers._common import clean, strip_ansi

_AFFINITY = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_RELATION = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|N/A)$")


def _cells(line: str) -> list[str]:
    """Split a row into cells: on tabs when the line has them, else on runs of 2+ spaces."""
    if "\t" in line:
        return [c.strip() for c in line.split("\t")]
    return [c.strip() for c in re.split(r"\s{2,}", line)]


def _is_header(line: str) -> bool:
    """The header names GPU0 as a column: its first cell is empty (indented) or not a row label."""
    if not re.search(r"(^|\s)GPU0(\s|$)", line):
        return False
    cells = [c for c in _cells(line.strip()) if c]
    return line[:1].isspace() or len(cells) < 2 or not _RELATION.match(cells[1])


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Parse the matrix; raises ValueError when no header row with GPU columns is found."""
    lines = strip_ansi(text).splitlines()
    head = next((i for i, ln in enumerate(lines) if _is_header(ln)), None)
    if head is None:
        raise ValueError("no topo -m header row (GPU0 ...)")
    header = [c for c in _cells(lines[head]) if c]
    devices = [c for c in header if c not in _AFFINITY]
    extra = [c for c in header if c in _AFFINITY]
    topo = TopoMatrix(devices=devices)
    for line in lines[head + 1:]:
        if not line.strip():
            break  # the matrix ends at the first blank line; the legend follows
        cells = _cells(line.strip())
        label, rest = cells[0], cells[1:]
        if label not in devices:
            continue
        # Relation cells are the first len(devices) cells; in space-aligned rows they are all non-empty.
        rel = rest[: len(devices)]
        topo.relations[label] = {d: r for d, r in zip(devices, rel, strict=False) if r}
        values = [c for c in rest[len(devices):] if c]  # drops nvidia-smi's empty spacer cell
        for name, value in zip(extra, values, strict=False):
            v = clean(value)
            if v is None:
                continue
            target = {"CPU Affinity": topo.cpu_affinity, "NUMA Affinity": topo.numa_affinity,
                      "GPU NUMA ID": topo.gpu_numa_id}[name]
            target[label] = v
    for line in lines:
        m = _LEGEND.match(line)
        if m and m.group(1) in devices:
            topo.nic_names[m.group(1)] = m.group(2)
    for d in devices:
        if not d.startswith("GPU") and d not in topo.nic_names and not re.fullmatch(r"NIC\d+", d):
            topo.nic_names[d] = d  # old format: the NIC is its own label (mlx5_0)
    return topo


def relation(topo: TopoMatrix, a: str, b: str) -> str | None:
    """The relation code between two devices (``GPU0``, ``NIC1`` or a NIC name like ``mlx5_0``)."""
    by_name = {v: k for k, v in topo.nic_names.items()}
    a, b = by_name.get(a, a), by_name.get(b, b)
    return topo.relations.get(a, {}).get(b)


def nvlink_count(code: str | None) -> int:
    """``NV12`` -> 12, anything else -> 0."""
    m = re.fullmatch(r"NV(\d+)", code or "")
    return int(m.group(1)) if m else 0


def parse_topo_p2p(text: str) -> dict[str, dict[str, str]]:
    """``nvidia-smi topo -p2p r`` (or w, n, a): the same matrix layout with OK / NS / CNS ... codes."""
    return parse_topo_matrix(text).relations
