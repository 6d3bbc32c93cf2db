"""``nvidia-smi -q -x``: driver, CUDA and one GPU record per ``<gpu>`` element.

The XML names a DTD (``nvsmi_device_v13.dtd``) that is never fetched (see ``safe_xml``). Old drivers
(418) have no DOCTYPE and fewer elements; MIG GPUs nest ``fb_memory_usage`` inside ``mig_devices``, so
only direct children are read. The GPU index is the element order, which is nvidia-smi's own index
(PCI bus order), not ``minor_number``. ``<fabric>`` (state, status) is the NVSwitch fabric
registration, present since driver 470 and ``N/A`` on GPUs without NVSwitches.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from netbench.inventory.model import GPU
from netbench.inventory.parsers._common import (
    GpuReport,
    clean,
    clean_serial,
    first_int,
    norm_bus_id,
    safe_xml,
)


def _text(el: ET.Element, path: str) -> str | None:
    found = el.find(path)
    return clean(found.text) if found is not None and found.text is not None else None


def parse_gpu(index: int, g: ET.Element) -> GPU:
    link = "pci/pci_gpu_link_info"
    return GPU(
        index=index,
        name=_text(g, "product_name"),
        uuid=_text(g, "uuid"),
        serial=clean_serial(_text(g, "serial")),
        pci_bus_id=norm_bus_id(_text(g, "pci/pci_bus_id") or g.get("id")),
        vbios=_text(g, "vbios_version"),
        pcie_gen_current=first_int(_text(g, f"{link}/pcie_gen/current_link_gen")),
        pcie_gen_max=first_int(_text(g, f"{link}/pcie_gen/max_link_gen")),
        pcie_width_current=first_int(_text(g, f"{link}/link_widths/current_link_width")),
        pcie_width_max=first_int(_text(g, f"{link}/link_widths/max_link_width")),
        memory_total_mib=first_int(_text(g, "fb_memory_usage/total")),
        numa_node=first_int(_text(g, "numa_node")),
        fabric_state=_text(g, "fabric/state"),
        fabric_status=_text(g, "fabric/status"),
    )


def parse_nvidia_smi_xml(text: str) -> GpuReport:
    """Parse ``nvidia-smi -q -x`` output; raises ValueError when it is not an nvidia_smi_log."""
    root = safe_xml(text)
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"expected <nvidia_smi_log>, got <{root.tag}>")
    gpus = [parse_gpu(i, g) for i, g in enumerate(root.findall("gpu"))]
    return GpuReport(driver_version=_text(root, "driver_version"),
                     cuda_version=_text(root, "cuda_version"), gpus=gpus)
