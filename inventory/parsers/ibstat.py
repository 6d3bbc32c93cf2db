"""``ibstat``: one NIC per CA port with firmware, rate, state and link layer.

Indentation is tabs or spaces depending on the source. When a device disappears mid-run ibstat
prints what it had, then ``ibpanic: ... stat of IB device 'mlx5_8' failed`` and exits 255: the ports
before the panic are kept and ``ibpanic_message`` reports the rest.
"""

from __future__ import annotations

import re

from netbench.inventory.model import NIC
from netbench.inventory.parsers._common import clean, first_float, norm_guid, port_state


def parse_ibstat(text: str) -> list[NIC]:
    nics: list[NIC] = []
    ca: dict[str, str] = {}
    name: str | None = None
    current: NIC | None = None
    for raw in text.splitlines():
        line = raw.strip()
        m = re.match(r"^CA '([^']+)'$", line)
        if m:
            name, ca, current = m.group(1), {}, None
            continue
        if name is None or not line:
            continue
        m = re.match(r"^Port (\d+):$", line)
        if m:
            current = NIC(name=name, port=int(m.group(1)), hca_type=clean(ca.get("CA type")),
                          firmware=clean(ca.get("Firmware version")),
                          node_guid=norm_guid(ca.get("Node GUID")))
            nics.append(current)
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if current is None:
            ca[key] = value
        elif key == "State":
            current.state = port_state(value)
        elif key == "Physical state":
            current.phys_state = port_state(value)
        elif key == "Rate":
            current.rate_gbps = first_float(value)
        elif key == "Link layer":
            current.link_layer = clean(value)
        elif key == "Port GUID":
            current.port_guid = norm_guid(value) if norm_guid(value) != "0x" + "0" * 16 else None
    return nics


def ibpanic_message(text: str) -> str | None:
    """The ``ibpanic: ...`` line when ibstat died part-way, else None."""
    m = re.search(r"^ibpanic:.*$", text, re.M)
    return m.group(0).strip() if m else None
