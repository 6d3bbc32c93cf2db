"""The physical links of one node, from its inventory: what a measurement through them cannot beat.

A ceiling is an upper bound from the hardware's own figures (the port rate ibstat/sysfs report, the
PCIe link the NIC trained at, the NVLinks nvidia-smi reports up), never a guess of what software
achieves: ``reports.ceilings`` turns these per-node bounds into the busbw ceiling of a measurement
and compares it with published figures. Every bound that cannot be computed carries the reason, so
a report can say "ceiling unknown: ibstat not installed" rather than show nothing.

Units: link rates in Gb/s as the tools print them, bandwidths in GB/s decimal (nccl-tests' unit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from netbench.inventory.model import NIC, NodeInventory

#: PCIe transfer rate (GT/s per lane) -> usable GB/s per lane and direction, after line coding:
#: 8b/10b up to 5 GT/s, 128b/130b for 8-32 GT/s (PCIe 3.0-5.0 base specifications), and for
#: 64 GT/s the FLIT mode's 242 payload bytes of 256 (PCIe 6.0).
_PCIE_LANE_GBps = {2.5: 0.25, 5.0: 0.5, 8.0: 8 * 128 / 130 / 8, 16.0: 16 * 128 / 130 / 8,
                   32.0: 32 * 128 / 130 / 8, 64.0: 64 * 242 / 256 / 8}
_GEN_GTps = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
_GTPS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", re.I)
# NVIDIA's NVLink generations, by the GPU families that carry them (for the report's wording only:
# the bound itself is the sum of the link speeds nvidia-smi reports).
_NVLINK_GEN = (("B200", 5), ("B300", 5), ("GB200", 5), ("H100", 4), ("H200", 4), ("H800", 4),
               ("H20", 4), ("A100", 3), ("A800", 3), ("V100", 2))


def pcie_GBps(gtps: float | None, width: int | None) -> float | None:
    """One direction of a PCIe link: lanes x the lane's usable rate. None when either is unknown."""
    if gtps is None or not width or width <= 0:
        return None
    lane = _PCIE_LANE_GBps.get(float(gtps))
    return None if lane is None else lane * width


def pcie_gtps(speed: str | None) -> float | None:
    """``"32.0 GT/s PCIe"`` (sysfs current_link_speed) -> 32.0; anything else -> None."""
    m = _GTPS.match(speed or "")
    return float(m.group(1)) if m else None


@dataclass(frozen=True)
class NicLink:
    """One data port: its link rate, the PCIe link its adapter trained at, and the lower of the two."""

    name: str  # mlx5_0/1 or the netdev
    rate_gbps: float
    pcie_GBps: float | None = None
    pcie: str | None = None  # "gen5 x16", for the report

    @property
    def GBps(self) -> float:
        wire = self.rate_gbps / 8
        return wire if self.pcie_GBps is None else min(wire, self.pcie_GBps)


@dataclass(frozen=True)
class NodeLinks:
    """A node's bounds. ``nics``: the data ports counted; ``nic_unknown`` says why there are none."""

    host: str
    nics: tuple[NicLink, ...] = ()
    nic_unknown: str | None = None
    left_out: tuple[str, ...] = ()  # ports not counted, each with why ("mlx5_bond_0: Ethernet front end")
    nvlink_GBps: float | None = None  # one direction, the GPU with the least of it
    nvlink_links: int | None = None  # links up on that GPU
    nvlink_generation: int | None = None
    nvlink_unknown: str | None = None
    gpu_pcie_GBps: float | None = None  # the narrowest GPU's PCIe link, one direction
    gpu_name: str | None = None
    gpus: int = 0

    def nic_GBps(self, ports: int | None = None) -> float | None:
        """The node's network bound with at most ``ports`` ports in use (the fastest ones): NCCL
        drives about one NIC per GPU, gloo one interface. NCCL splits a collective's data evenly over
        its channels and NICs, and the channels run in lock-step: the ports' count times the slowest
        one's rate, not their sum (issue 46). None: no rate known."""
        if not self.nics:
            return None
        best = sorted((n.GBps for n in self.nics), reverse=True)[: ports or len(self.nics)]
        return len(best) * best[-1]

    def nic_text(self, ports: int | None = None) -> str:
        """``8 x 400 Gb/s`` (or ``mlx5_0 400 Gb/s + ...`` when rates differ), capped by PCIe when it is."""
        used = sorted(self.nics, key=lambda n: -n.GBps)[: ports or len(self.nics)]
        rates = {n.rate_gbps for n in used}
        text = (f"{len(used)} x {used[0].rate_gbps:g} Gb/s" if len(rates) == 1
                else " + ".join(f"{n.name} {n.rate_gbps:g} Gb/s" for n in used)
                + f" (in lock-step: {len(used)} x the slowest)")
        capped = [n for n in used if n.pcie_GBps is not None and n.pcie_GBps < n.rate_gbps / 8]
        if capped:
            text += " (PCIe-limited: " + ", ".join(f"{n.name} {n.pcie} = {n.pcie_GBps:.1f} GB/s"
                                                   for n in capped) + ")"
        return text


def _pcie_text(gtps: float | None, width: int | None) -> str | None:
    gen = next((g for g, r in _GEN_GTps.items() if r == gtps), None)
    return f"gen{gen} x{width}" if gen and width else None


def _data_ports(inv: NodeInventory) -> tuple[list[NIC], list[str]]:
    """The ports that carry collective traffic, and the others with why they are left out.

    A port must be up (state Active, or no state reported and a rate known). When the node has
    InfiniBand ports, its Ethernet ports are taken as the front-end network (a bond or management
    port beside the compute rails, as on the H100 nodes in the fixtures), since NCCL then uses the
    InfiniBand ones. When ``nvidia-smi topo -m`` pairs NICs with GPUs (PIX/PXB), only those count.
    """
    left: list[str] = []
    up = []
    for n in inv.nics:
        label = f"{n.name}/{n.port}" if n.port is not None else n.name
        if n.state is not None and n.state.lower() != "active":
            left.append(f"{label}: port {n.state}")
        elif n.rate_gbps is None or n.rate_gbps <= 0:
            left.append(f"{label}: no link rate reported")
        else:
            up.append(n)
    if any((n.link_layer or "").lower() == "infiniband" for n in up):
        for n in [n for n in up if (n.link_layer or "").lower() == "ethernet"]:
            left.append(f"{n.name}: Ethernet beside InfiniBand ports (front end)")
            up.remove(n)
    near = _gpu_near_nics(inv)
    if near:
        for n in [n for n in up if n.name not in near]:
            left.append(f"{n.name}: no GPU on its PCIe switch (nvidia-smi topo -m)")
            up.remove(n)
    return up, left


def _gpu_near_nics(inv: NodeInventory) -> set[str]:
    """NIC device names that some GPU reaches through PCIe switches only (PIX/PXB)."""
    topo = inv.topo
    if topo is None or not topo.nic_names:
        return set()
    near = set()
    for dev, rel in topo.relations.items():
        if not dev.startswith("GPU"):
            continue
        for label, code in rel.items():
            if label in topo.nic_names and code in ("PIX", "PXB"):
                near.add(topo.nic_names[label])
    return near


def node_links(inv: NodeInventory) -> NodeLinks:
    """Everything this module can bound for one node, with the reason for each part it cannot."""
    ports, left = _data_ports(inv)
    nics = tuple(
        NicLink(name=f"{n.name}/{n.port}" if n.port not in (None, 1) else n.name,
                rate_gbps=float(n.rate_gbps),
                pcie_GBps=pcie_GBps(pcie_gtps(n.pcie_speed), n.pcie_width),
                pcie=_pcie_text(pcie_gtps(n.pcie_speed), n.pcie_width))
        for n in ports if n.rate_gbps
    )
    nic_unknown = None
    if not nics:
        nic_unknown = (inv.missing.get("nics") or "; ".join(left) or "no network port reported a link rate")
    gpu_name = next((g.name for g in inv.gpus if g.name), None)
    per_gpu: dict[int, list[float]] = {}
    for link in inv.nvlinks:
        if link.up and link.speed_GBps:
            per_gpu.setdefault(link.gpu, []).append(link.speed_GBps)
    nvlink_GBps = nvlink_links = None
    nvlink_unknown = None
    if per_gpu:
        gpu = min(per_gpu, key=lambda g: sum(per_gpu[g]))
        nvlink_GBps, nvlink_links = sum(per_gpu[gpu]), len(per_gpu[gpu])
    elif inv.nvlinks:
        nvlink_unknown = "every NVLink nvidia-smi lists is down"
    else:
        nvlink_unknown = inv.missing.get("nvlinks") or "nvidia-smi reports no NVLink"
    gen = next((g for fam, g in _NVLINK_GEN if gpu_name and fam in gpu_name.upper()), None)
    gpu_pcie = [pcie_GBps(_GEN_GTps.get(g.pcie_gen_current or 0), g.pcie_width_current) for g in inv.gpus]
    known = [b for b in gpu_pcie if b is not None]
    return NodeLinks(
        host=inv.host, nics=nics, nic_unknown=nic_unknown, left_out=tuple(left),
        nvlink_GBps=nvlink_GBps, nvlink_links=nvlink_links, nvlink_generation=gen if nvlink_GBps else None,
        nvlink_unknown=nvlink_unknown, gpu_pcie_GBps=min(known) if known else None,
        gpu_name=gpu_name, gpus=len(inv.gpus),
    )
