"""The probe's ``net-mtu`` section: ``name mtu operstate`` of every interface but lo, one a line
(read from /sys/class/net). Only interfaces that are up (or whose driver reports ``unknown``, as
tunnels and some virtual devices do) are kept: a down port's MTU carries no traffic."""

from __future__ import annotations

import re

_NAME = re.compile(r"[A-Za-z0-9_.:@-]{1,32}")
MIN_MTU, MAX_MTU = 68, 65536  # IPv4's floor; the largest a Linux netdev takes


def parse_net_mtu(text: str) -> dict[str, int]:
    """interface -> MTU of the interfaces up; lines of another shape are skipped (remote text)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or not _NAME.fullmatch(parts[0]) or not parts[1].isdigit():
            continue
        mtu = int(parts[1])
        if MIN_MTU <= mtu <= MAX_MTU and parts[2] in ("up", "unknown") and len(out) < 256:
            out[parts[0]] = mtu
    return out
