"""``nvidia-smi --query-gpu=... --format=csv``: a header row names the columns (with units in
brackets, ``memory.total [MiB]``), so columns are looked up by name and any subset works."""

from __future__ import annotations

import csv
import io

from netbench.inventory.model import GPU
from netbench.inventory.parsers._common import GpuReport, clean, clean_serial, first_int, norm_bus_id


def parse_nvidia_smi_query(text: str) -> GpuReport:
    """Parse the csv (with header); raises ValueError when there is no header row."""
    rows = [r for r in csv.reader(io.StringIO(text), skipinitialspace=True) if r]
    if not rows or not any(c.strip().startswith(("index", "name", "uuid", "pci")) for c in rows[0]):
        raise ValueError("no --query-gpu csv header")
    names = [c.split("[")[0].strip() for c in rows[0]]
    report = GpuReport()
    for n, row in enumerate(rows[1:]):
        r = dict(zip(names, (c.strip() for c in row), strict=False))
        idx = first_int(r.get("index"))
        report.gpus.append(GPU(
            index=idx if idx is not None else n,
            name=clean(r.get("name")),
            uuid=clean(r.get("uuid")),
            serial=clean_serial(r.get("serial")),
            pci_bus_id=norm_bus_id(r.get("pci.bus_id")),
            vbios=clean(r.get("vbios_version")),
            pcie_gen_current=first_int(r.get("pcie.link.gen.current")),
            pcie_gen_max=first_int(r.get("pcie.link.gen.max")),
            pcie_width_current=first_int(r.get("pcie.link.width.current")),
            pcie_width_max=first_int(r.get("pcie.link.width.max")),
            memory_total_mib=first_int(r.get("memory.total")),
        ))
        report.driver_version = report.driver_version or clean(r.get("driver_version"))
    return report
