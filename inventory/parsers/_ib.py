"""InfiniBand fabric records shared by the discovery parsers (ibnetdiscover, iblinkinfo),
and the step that turns fabric links into "this node's HCA is cabled to that switch port"."""

from __future__ import annotations

from dataclasses import dataclass

from netbench.inventory.model import SwitchNeighbor


@dataclass
class IbLink:
    """One cable as seen from its ``src`` end. GUIDs are normalised (``0x`` + 16 hex digits); for
    CAs the GUID is the port GUID where the tool prints it, else the node GUID."""

    src_type: str | None  # CA | SW | RT | None when the format does not say
    src_guid: str | None
    src_desc: str | None
    src_port: int | None
    src_lid: int | None
    dst_type: str | None
    dst_guid: str | None
    dst_desc: str | None
    dst_port: int | None
    dst_lid: int | None
    width: str | None = None  # 4X
    speed: str | None = None  # EDR | 2.5 Gbps | ...
    state: str | None = None  # Active | Down ...
    phys_state: str | None = None  # LinkUp | Polling ...

    @property
    def connected(self) -> bool:
        return self.dst_port is not None and bool(self.dst_desc or self.dst_guid)


def _host_match(desc: str | None, hostnames: set[str]) -> str | None:
    """If ``desc`` is '<host> <hca>' for one of ``hostnames``, the HCA name (or '' when absent)."""
    if not desc:
        return None
    parts = desc.strip().split()
    if parts and parts[0].lower() in hostnames:
        return parts[1] if len(parts) > 1 else ""
    return None


def neighbors_from_links(links: list[IbLink], hostnames: list[str] | set[str],
                         local_guids: dict[str, str] | None = None,
                         source: str = "ibnetdiscover") -> list[SwitchNeighbor]:
    """The switch ports this node's HCAs are cabled to.

    A link end is local when its GUID is one of ``local_guids`` (guid -> HCA name, node or port GUIDs)
    or its node description starts with one of ``hostnames`` (the default rdma-ndd description is
    '<hostname> <hca>'). Links are read from either side; each (HCA, switch port) is reported once.
    """
    names = {h.lower() for h in hostnames if h} | {h.split(".")[0].lower() for h in hostnames if h}
    guids = {k.lower(): v for k, v in (local_guids or {}).items()}
    found: dict[tuple, SwitchNeighbor] = {}
    for link in links:
        if not link.connected:
            continue
        for a, b in (("src", "dst"), ("dst", "src")):
            guid, desc = getattr(link, f"{a}_guid"), getattr(link, f"{a}_desc")
            hca = guids.get((guid or "").lower())
            if hca is None:
                hca = _host_match(desc, names)
            if hca is None or getattr(link, f"{b}_type") == "CA":
                continue
            other_guid = getattr(link, f"{b}_guid")
            if other_guid and other_guid.lower() in guids:
                continue  # both ends local: not a switch
            port = getattr(link, f"{b}_port")
            n = SwitchNeighbor(local_port=hca or (desc or "").strip(),
                               switch=(getattr(link, f"{b}_desc") or "").strip() or None,
                               switch_port=str(port) if port is not None else None,
                               switch_id=other_guid, source=source)
            key = (n.local_port, (n.switch or "").lower(), n.switch_port)
            if key not in found:
                found[key] = n
            elif found[key].switch_id is None:
                found[key].switch_id = n.switch_id  # the other side of the cable named the GUID
    return list(found.values())
