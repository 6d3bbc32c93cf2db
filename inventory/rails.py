"""Which NIC and which rail switch each rail of a node uses, from its inventory.

On a rail-optimised fabric GPU k of every node has its own NIC, cabled to rail switch k, and NCCL
drives GPU k's traffic through the NIC nearest to it. ``--pattern rail`` measures rank k of one
node with rank k of another, so a slow rail measurement points at one NIC, one cable, one rail
switch port; this module names them. Rail k is local rank k (GPU k with NCCL); its NIC is the one
``nvidia-smi topo -m`` shows closest to GPU k (PIX, then PXB, then PHB; never one across the CPU
interconnect, NODE/SYS, which is not a rail NIC), each NIC serving one rail; its switch is the
neighbour (LLDP, InfiniBand discovery) cabled to that NIC or its netdev. What cannot be known
carries the reason, so a finding can say "rail 3 (NIC unknown: ...)" instead of guessing.

The planner reads ``netdev`` to bind each gloo rank of a rail group to its rail's interface, the
report reads ``nic``/``switch`` to name the part: one mapping, used by both.
"""

from __future__ import annotations

from dataclasses import dataclass

from netbench.inventory.model import NIC, NodeInventory

#: ``nvidia-smi topo -m`` codes of a NIC that is a GPU's own, closest first (PCIe switch or bridge)
_NEAR = ("PIX", "PXB", "PHB")


@dataclass(frozen=True)
class RailPort:
    """Rail ``rail`` of one node: its NIC port, the netdev of that port, the switch it is cabled to."""

    rail: int
    nic: str | None = None  # "mlx5_3/1" (device/port), or the netdev for plain Ethernet
    netdev: str | None = None
    switch: str | None = None
    switch_port: str | None = None
    unknown: str | None = None  # why ``nic`` is None

    def label(self) -> str:
        """``rail 3 (mlx5_3)`` or ``rail 3 (NIC unknown: why)``."""
        if self.nic is None:
            return f"rail {self.rail} (NIC unknown: {self.unknown})"
        return f"rail {self.rail} ({self.nic})"


def _port_name(nic: NIC) -> str:
    return f"{nic.name}/{nic.port}" if nic.port is not None else nic.name


def gpu_nics(inv: NodeInventory) -> dict[int, str]:
    """GPU index -> the NIC device nearest to it by ``nvidia-smi topo -m``, one NIC per GPU.

    GPUs are served in order of how close their best NIC is (PIX before PXB before PHB), then by
    index, so on nodes where two GPUs share a PCIe switch with two NICs each still gets its own."""
    topo = inv.topo
    if topo is None or not topo.nic_names:
        return {}
    choices: list[tuple[int, int, str]] = []  # (closeness, gpu, nic label)
    for dev, rel in topo.relations.items():
        if not dev.startswith("GPU") or not dev[3:].isdigit():
            continue
        for label, code in rel.items():
            if label in topo.nic_names and code in _NEAR:
                choices.append((_NEAR.index(code), int(dev[3:]), label))
    taken: dict[int, str] = {}
    used: set[str] = set()
    for _, gpu, label in sorted(choices, key=lambda c: (c[0], c[1], _natural(c[2]))):
        if gpu not in taken and label not in used:
            taken[gpu] = topo.nic_names[label]
            used.add(label)
    return taken


def _natural(label: str) -> int:
    digits = "".join(ch for ch in label if ch.isdigit())
    return int(digits) if digits else 0


def rail_ports(inv: NodeInventory | None, rails: int) -> list[RailPort]:
    """Rails 0..rails-1 of this node, each with its NIC and switch or the reason they are unknown."""
    if inv is None or not inv.ok:
        why = "the host was not inventoried" if inv is None else f"inventory failed ({inv.status})"
        return [RailPort(k, unknown=why) for k in range(rails)]
    near = gpu_nics(inv)
    if not near:
        why = inv.missing.get("topo") or (
            "nvidia-smi topo -m shows no NIC beside a GPU" if inv.topo is not None
            else "no GPU-NIC affinity in the inventory (nvidia-smi topo -m)"
        )
        return [RailPort(k, unknown=why) for k in range(rails)]
    # a device's active port, else whichever port it reports: a NIC that is down is still named
    ports = {n.name: n for n in inv.nics if (n.state or "active").lower() == "active"}
    ports.update({n.name: n for n in inv.nics if n.name not in ports})
    switch_of = {nb.local_port: nb for nb in inv.neighbors if nb.switch}
    out = []
    for k in range(rails):
        dev = near.get(k)
        if dev is None:
            out.append(RailPort(k, unknown=f"nvidia-smi topo -m shows no NIC beside GPU{k}"))
            continue
        nic = ports.get(dev)
        netdev = nic.netdev if nic is not None else None
        nb = switch_of.get(netdev or "") or switch_of.get(dev) or (
            switch_of.get(_port_name(nic)) if nic is not None else None)
        out.append(RailPort(
            k, nic=_port_name(nic) if nic is not None else dev, netdev=netdev,
            switch=nb.switch if nb else None, switch_port=nb.switch_port if nb else None,
        ))
    return out


def ports_by_host(records: list[dict], rails: int) -> dict[str, list[RailPort]]:
    """Each inventoried host's rails 0..rails-1 (inventory.jsonl's records): NIC and rail switch, or
    why they are unknown."""
    out = {}
    for d in records:
        inv = NodeInventory.from_dict(d)
        out[inv.host] = rail_ports(inv, rails)
    return out
