"""``nvidia-smi -q`` (text): the same facts as the XML, for hosts where only the text was captured.

The format is an indented tree of ``Key : value`` lines (4 spaces a level; some children are indented
under a key that also has a value, e.g. ``HW Slowdown`` / ``HW Thermal Slowdown``). Each GPU starts
with an unindented ``GPU 00000000:19:00.0`` line.
"""

from __future__ import annotations

import re

from netbench.inventory.model import GPU
from netbench.inventory.parsers._common import GpuReport, clean, clean_serial, first_int, norm_bus_id

_GPU_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


def _flatten(lines: list[str]) -> dict[str, str]:
    """Indented ``Key : value`` lines -> {'PCI/GPU Link Info/Link Width/Max': '16x', ...}."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        key = key.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([k for _, k in stack] + [key])
        if sep:
            out.setdefault(path, value.strip())
        stack.append((indent, key))
    return out


def _gpu(index: int, bus: str, f: dict[str, str]) -> GPU:
    link = "PCI/GPU Link Info"
    return GPU(
        index=index,
        name=clean(f.get("Product Name")),
        uuid=clean(f.get("GPU UUID")),
        serial=clean_serial(f.get("Serial Number")),
        pci_bus_id=norm_bus_id(f.get("PCI/Bus Id") or bus),
        vbios=clean(f.get("VBIOS Version")),
        pcie_gen_current=first_int(f.get(f"{link}/PCIe Generation/Current")),
        pcie_gen_max=first_int(f.get(f"{link}/PCIe Generation/Max")),
        pcie_width_current=first_int(f.get(f"{link}/Link Width/Current")),
        pcie_width_max=first_int(f.get(f"{link}/Link Width/Max")),
        memory_total_mib=first_int(f.get("FB Memory Usage/Total")),
    )


def parse_nvidia_smi_text(text: str) -> GpuReport:
    """Parse ``nvidia-smi -q``; raises ValueError when there is no NVSMI LOG in the text."""
    if "NVSMI LOG" not in text and "Driver Version" not in text:
        raise ValueError("not nvidia-smi -q output")
    header: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = _GPU_HEADER.match(line)
        if m:
            blocks.append((m.group(1), []))
        elif blocks:
            blocks[-1][1].append(line)
        else:
            header.append(line)
    top = _flatten(header)
    gpus = [_gpu(i, bus, _flatten(lines)) for i, (bus, lines) in enumerate(blocks)]
    return GpuReport(driver_version=clean(top.get("Driver Version")),
                     cuda_version=clean(top.get("CUDA Version")), gpus=gpus)


def fabric_state(text: str) -> list[tuple[str | None, str | None]]:
    """Per GPU (State, Status) of the NVSwitch fabric block, e.g. ('Completed', 'Success')."""
    out = []
    for block in re.split(r"(?m)^GPU\s+\S+\s*$", text)[1:]:
        f = _flatten(block.splitlines())
        out.append((clean(f.get("Fabric/State")), clean(f.get("Fabric/Status"))))
    return out
