"""``ibnetdiscover`` (topology file) and ``ibnetdiscover -p`` (one line per port) -> IbLink list.

Topology format: ``Switch 36 "S-<guid>" # "leaf02" base port 0 lid 3 lmc 0`` headers, then
``[1] "H-<guid>"[1](<portguid>) # "gpu-node03 mlx5_0" lid 6 4xSDR`` port lines (CA ports read
``[1](<portguid>) "S-<guid>"[2] # lid 7 lmc 0 "leaf02" lid 3 4xSDR``). Stray stderr lines (``umad ...
Connection timed out``) and comments are skipped; columns may be tabs or single spaces.
"""

from __future__ import annotations

import re

from netbench.inventory.parsers._common import norm_guid
from netbench.inventory.parsers._ib import IbLink

_HEADER = re.compile(
    r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9a-fA-F]+)"\s*(?:#\s*"(.*?)"(?:.*?\blid\s+(\d+))?)?')
_PORT = re.compile(
    r'^\[(\d+)\](?:\(([0-9a-fA-F]+)\))?\s*"([SHR])-([0-9a-fA-F]+)"\[(\d+)\](?:\(([0-9a-fA-F]+)\))?\s*(?:#\s*(.*))?$')
_TYPES = {"S": "SW", "H": "CA", "R": "RT", "Switch": "SW", "Ca": "CA", "Rt": "RT"}
_LINE_P = re.compile(
    r"^(CA|SW|RT)\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]+)\s+(\d+x)\s+(\S+)\s+"
    r"(?:-\s+(CA|SW|RT)\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]+)\s+\(\s*'(.*)'\s+-\s+'(.*)'\s*\)|'(.*)')\s*$")


def _split_speed(token: str | None) -> tuple[str | None, str | None]:
    m = re.fullmatch(r"(\d+)x(\w+)", token or "", re.I)
    return (f"{m.group(1)}X", m.group(2)) if m else (None, None)


def parse_ibnetdiscover(text: str) -> list[IbLink]:
    """Either format; raises ValueError when no node or port line is recognised."""
    links = _parse_ports_format(text)
    if links:
        return links
    links, node = [], None
    found = False
    for raw in text.splitlines():
        line = raw.strip()
        m = _HEADER.match(line)
        if m:
            found = True
            node = (_TYPES[m.group(1)], norm_guid(m.group(4)), m.group(5),
                    int(m.group(6)) if m.group(6) else None)
            continue
        m = _PORT.match(line)
        if not m or node is None:
            continue
        comment = m.group(7) or ""
        # A CA's port line starts with its own lid ("lid 7 lmc 0 \"leaf02\" lid 3 4xSDR").
        own_lid = node[3]
        mo = re.match(r"^lid\s+(\d+)\s+lmc\s+\d+\s*", comment)
        if mo:
            own_lid, comment = int(mo.group(1)), comment[mo.end():]
        mr = re.match(r'^"(.*?)"\s*(?:lid\s+(\d+))?\s*(\S+)?', comment)
        width, speed = _split_speed(mr.group(3) if mr else None)
        links.append(IbLink(
            src_type=node[0], src_guid=norm_guid(m.group(2)) or node[1], src_desc=node[2],
            src_port=int(m.group(1)), src_lid=own_lid,
            dst_type=_TYPES[m.group(3)], dst_guid=norm_guid(m.group(6)) or norm_guid(m.group(4)),
            dst_desc=mr.group(1) if mr else None, dst_port=int(m.group(5)),
            dst_lid=int(mr.group(2)) if mr and mr.group(2) else None,
            width=width, speed=speed, state="Active"))
    if not found:
        raise ValueError("no ibnetdiscover node lines found")
    return links


def _parse_ports_format(text: str) -> list[IbLink]:
    links = []
    for line in text.splitlines():
        m = _LINE_P.match(line.strip())
        if not m:
            continue
        g = m.groups()
        connected = g[6] is not None
        links.append(IbLink(
            src_type=g[0], src_lid=int(g[1]), src_port=int(g[2]), src_guid=norm_guid(g[3]),
            src_desc=(g[10] if connected else g[12]).strip(),
            width=g[4].upper(), speed=None if g[5] == "???" else g[5],
            dst_type=g[6], dst_lid=int(g[7]) if connected else None,
            dst_port=int(g[8]) if connected else None, dst_guid=norm_guid(g[9]) if connected else None,
            dst_desc=g[11].strip() if connected else None,
            state="Active" if connected else None))
    return links
