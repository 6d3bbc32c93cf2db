"""``iblinkinfo`` (``CA:``/``Switch:`` blocks) and ``iblinkinfo -l`` (one line per port) -> IbLink.

Port lines: ``<lid> <port>[..] ==( 4X 2.5 Gbps Active/  LinkUp)==> <lid> <port>[..] "<desc>" (...)``;
in ``-l`` form both ends carry a GUID and the local description, right-aligned in quotes. Down ports
read ``==(  Down/ Polling)==>  [  ] "" ( )`` and have no far end.
"""

from __future__ import annotations

import re

from netbench.inventory.parsers._common import norm_guid
from netbench.inventory.parsers._ib import IbLink

_BLOCK = re.compile(r"^(CA|Switch|Router):\s*(?:(0x[0-9a-fA-F]+)\s+)?(.*?):\s*$")
_LINK = re.compile(
    r'^(?:(0x[0-9a-fA-F]+)\s+)?(?:"([^"]*)"\s+)?(\d+)\s+(\d+)\[[^\]]*\]\s*==\(\s*(.*?)\s*\)==>\s*'
    r'(?:(0x[0-9a-fA-F]+)\s+)?(?:(\d+)\s+(\d+))?\s*\[[^\]]*\]\s*"([^"]*)"')
_TYPES = {"CA": "CA", "Switch": "SW", "Router": "RT"}


def parse_iblinkinfo(text: str) -> list[IbLink]:
    """Either layout; raises ValueError when no port line is recognised."""
    links: list[IbLink] = []
    block: tuple[str | None, str | None, str | None] = (None, None, None)
    for raw in text.splitlines():
        line = raw.strip()
        m = _BLOCK.match(line)
        if m:
            block = (_TYPES[m.group(1)], norm_guid(m.group(2)), m.group(3).strip())
            continue
        m = _LINK.match(line)
        if not m:
            continue
        guid, desc, lid, port, mid, dguid, dlid, dport, ddesc = m.groups()
        width = re.search(r"\b(\d+X)\b", mid)
        speed = re.search(r"([\d.]+\s*Gbps)", mid)
        states = re.search(r"(\w+)/\s*(\w+)\s*$", mid)
        links.append(IbLink(
            src_type=block[0] if desc is None else None,
            src_guid=norm_guid(guid) or block[1], src_desc=(desc or "").strip() or block[2],
            src_port=int(port), src_lid=int(lid),
            dst_type=None, dst_guid=norm_guid(dguid), dst_desc=ddesc.strip() or None,
            dst_port=int(dport) if dport else None, dst_lid=int(dlid) if dlid else None,
            width=width.group(1) if width else None, speed=speed.group(1) if speed else None,
            state=states.group(1) if states else None, phys_state=states.group(2) if states else None))
    if not links:
        raise ValueError("no iblinkinfo port lines found")
    return links
