"""``ibv_devinfo``: ``hca_id:`` blocks with firmware, PSID (``board_id``), part id and per-port state.

Separators are tabs or runs of spaces (``fw_ver:\t\t\t\t20.35.1012`` / ``fw_ver:   28.41.1000``).
"""

from __future__ import annotations

from netbench.inventory.model import NIC
from netbench.inventory.parsers._common import clean, norm_guid, port_state


def parse_ibv_devinfo(text: str) -> list[NIC]:
    nics: list[NIC] = []
    dev: dict[str, str] = {}
    name: str | None = None
    current: NIC | None = None
    for raw in text.splitlines():
        key, sep, value = raw.strip().partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            name, dev, current = value, {}, None
        elif name is None:
            continue
        elif key == "port":
            part = dev.get("vendor_part_id")
            current = NIC(name=name, port=int(value) if value.isdigit() else None,
                          firmware=clean(dev.get("fw_ver")), board_id=clean(dev.get("board_id")),
                          hca_type=f"MT{part}" if part and part.isdigit() else None,
                          node_guid=norm_guid(dev.get("node_guid")))
            nics.append(current)
        elif current is None:
            dev[key] = value
        elif key == "state":
            current.state = port_state(value)
        elif key == "link_layer":
            current.link_layer = clean(value)
        elif key == "phys_state":
            current.phys_state = port_state(value)
    return nics
