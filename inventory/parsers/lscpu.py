"""``lscpu``: CPU model, sockets, cores and NUMA nodes (``Key:   value`` lines)."""

from __future__ import annotations

from dataclasses import dataclass

from netbench.inventory.parsers._common import clean, first_int, key_values


@dataclass
class CpuInfo:
    model: str | None = None
    sockets: int | None = None
    cores: int | None = None  # physical cores in total (sockets x cores per socket)
    threads: int | None = None  # logical CPUs
    numa_nodes: int | None = None


def parse_lscpu(text: str) -> CpuInfo:
    kv = key_values(text)
    sockets = first_int(kv.get("Socket(s)"))
    per_socket = first_int(kv.get("Core(s) per socket")) or first_int(kv.get("Core(s) per cluster"))
    return CpuInfo(
        model=clean(kv.get("Model name")),
        sockets=sockets,
        cores=sockets * per_socket if sockets and per_socket else None,
        threads=first_int(kv.get("CPU(s)")),
        numa_nodes=first_int(kv.get("NUMA node(s)")),
    )
