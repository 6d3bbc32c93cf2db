"""``ethtool -i <netdev>``: driver, driver version, firmware (with the PSID in parentheses), bus.

``firmware-version: 28.39.3560 (MT_0000000838)`` -> firmware ``28.39.3560``, board_id
``MT_0000000838``; an empty firmware (virtio) -> None. Lines starting with ``#`` are ignored.
"""

from __future__ import annotations

import re

from netbench.inventory.model import NIC
from netbench.inventory.parsers._common import clean, norm_bus_id


def parse_ethtool_i(text: str, netdev: str) -> NIC:
    kv: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#") or ":" not in line:
            continue
        k, _, v = line.partition(":")
        kv.setdefault(k.strip(), v.strip())
    if "driver" not in kv:
        raise ValueError("not ethtool -i output (no driver: line)")
    fw = clean(kv.get("firmware-version"))
    board = None
    if fw:
        m = re.match(r"^(.*?)\s*\(([^)]*)\)\s*$", fw)
        if m:
            fw, board = clean(m.group(1)), clean(m.group(2))
    bus = clean(kv.get("bus-info"))
    return NIC(name=netdev, netdev=netdev, driver=clean(kv.get("driver")),
               driver_version=clean(kv.get("version")), firmware=fw, board_id=board,
               pci_bus_id=norm_bus_id(bus) if bus and re.match(r"^[0-9a-fA-F:.]+$", bus) else None)
