"""``ibstatus``: ``Infiniband device 'mlx5_0' port 1 status:`` blocks (no firmware in this format)."""

from __future__ import annotations

import re

from netbench.inventory.model import NIC
from netbench.inventory.parsers._common import clean, first_float, port_state


def parse_ibstatus(text: str) -> list[NIC]:
    nics: list[NIC] = []
    for line in text.splitlines():
        m = re.match(r"^Infiniband device '([^']+)' port (\d+) status:", line.strip())
        if m:
            nics.append(NIC(name=m.group(1), port=int(m.group(2))))
            continue
        if not nics or ":" not in line:
            continue
        key, _, value = line.strip().partition(":")
        nic, key = nics[-1], key.strip()
        if key == "state":
            nic.state = port_state(value)
        elif key == "phys state":
            nic.phys_state = port_state(value)
        elif key == "rate":
            nic.rate_gbps = first_float(value)
        elif key == "link_layer":
            nic.link_layer = clean(value)
    return nics
