"""``ibswitches`` / ``ibhosts``: ``Switch\t: 0x... ports 36 "leaf02" base port 0 lid 3 lmc 0``."""

from __future__ import annotations

import re

from netbench.inventory.parsers._common import norm_guid
from netbench.inventory.parsers._ib import IbNode

_LINE = re.compile(
    r'^(Switch|Ca|Router)\s*:\s*(0x[0-9a-fA-F]+)\s+ports\s+(\d+)\s+"(.*)"(?:.*?\blid\s+(\d+))?')


def parse_ibnodes(text: str) -> list[IbNode]:
    return [IbNode(type=m.group(1), guid=norm_guid(m.group(2)), ports=int(m.group(3)),
                   desc=m.group(4).strip(), lid=int(m.group(5)) if m.group(5) else None)
            for m in map(_LINE.match, (ln.strip() for ln in text.splitlines())) if m]


def parse_smpquery(text: str) -> dict[str, str]:
    """``smpquery`` dotted output (``LinkState:.......Active``) -> {key: value}; capability flag lines
    (tab-indented names) are collected under the key above them, comma-separated."""
    out: dict[str, str] = {}
    last = None
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z][\w ]*?):\.+(.*)$", line)
        if m:
            last = m.group(1).strip()
            out[last] = m.group(2).strip()
        elif line.startswith("\t") and last and line.strip():
            out[last] = ",".join(x for x in (out[last], line.strip()) if x)
    return out
