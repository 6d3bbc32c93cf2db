"""NCCL topology XML (``NCCL_TOPO_DUMP_FILE`` output, or an ``NCCL_TOPO_FILE`` input such as Azure's).

Returns the GPUs and NICs NCCL saw, each with the PCI path that leads to it and its CPU (NUMA node),
plus NVLink fan-out per GPU. Attributes are read as NCCL writes them; ``link_width="0"`` (seen in VMs)
becomes None. Hand-made input files have GPUs/NICs only as ``<pci class=0x0302../0x0207..>``
elements, which are reported too (``dev`` None).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from netbench.inventory.parsers._common import first_float, first_int, safe_xml

_GPU_CLASS = "0x0302"
_NET_CLASSES = ("0x0207", "0x0200")


@dataclass
class NcclTopoGPU:
    busid: str | None
    dev: int | None = None
    sm: int | None = None
    numa: int | None = None
    link_speed: str | None = None
    link_width: int | None = None
    nvlinks: dict[str, int] = field(default_factory=dict)  # target busid -> link count


@dataclass
class NcclTopoNIC:
    name: str | None
    busid: str | None = None
    numa: int | None = None
    speed_mbps: float | None = None
    port: int | None = None
    guid: str | None = None
    gdr: bool | None = None


@dataclass
class NcclTopo:
    gpus: list[NcclTopoGPU] = field(default_factory=list)
    nics: list[NcclTopoNIC] = field(default_factory=list)
    numa_nodes: list[int] = field(default_factory=list)


def _width(pci: ET.Element | None) -> int | None:
    w = first_int(pci.get("link_width")) if pci is not None else None
    return w or None


def parse_nccl_topo_xml(text: str) -> NcclTopo:
    root = safe_xml(text)
    if root.tag != "system":
        raise ValueError(f"expected <system>, got <{root.tag}>")
    topo = NcclTopo()
    for cpu in root.iter("cpu"):
        numa = first_int(cpu.get("numaid"))
        numa = numa if numa is not None and numa >= 0 else None
        if numa is not None:
            topo.numa_nodes.append(numa)
        _walk(cpu, numa, None, topo)
    return topo


def _walk(el: ET.Element, numa: int | None, pci: ET.Element | None, topo: NcclTopo) -> None:
    for child in el:
        if child.tag == "pci":
            cls = (child.get("class") or "").lower()
            has_dev = child.find("gpu") is not None or child.find("nic") is not None
            if not has_dev and cls.startswith(_GPU_CLASS):
                topo.gpus.append(NcclTopoGPU(busid=child.get("busid"), numa=numa,
                                             link_speed=child.get("link_speed"), link_width=_width(child)))
            elif not has_dev and cls.startswith(_NET_CLASSES) and len(child) == 0:
                topo.nics.append(NcclTopoNIC(name=None, busid=child.get("busid"), numa=numa))
            _walk(child, numa, child, topo)
        elif child.tag == "gpu":
            topo.gpus.append(NcclTopoGPU(
                busid=pci.get("busid") if pci is not None else None, dev=first_int(child.get("dev")),
                sm=first_int(child.get("sm")), numa=numa,
                link_speed=pci.get("link_speed") if pci is not None else None, link_width=_width(pci),
                nvlinks={n.get("target", "?"): first_int(n.get("count")) or 0
                         for n in child.findall("nvlink")},
            ))
        elif child.tag == "nic":
            for net in child.findall("net"):
                topo.nics.append(NcclTopoNIC(
                    name=net.get("name"), busid=pci.get("busid") if pci is not None else None, numa=numa,
                    speed_mbps=first_float(net.get("speed")), port=first_int(net.get("port")),
                    guid=net.get("guid"), gdr=net.get("gdr") == "1" if net.get("gdr") is not None else None,
                ))
