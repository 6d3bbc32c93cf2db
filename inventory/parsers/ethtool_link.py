"""``ethtool <netdev>`` (no option): the link settings, read for an Ethernet port's rate and carrier.

``Speed: 100000Mb/s`` -> 100.0 Gb/s; ``Speed: Unknown!`` (no link, or a driver that does not say)
-> None; ``Link detected: yes|no`` -> True/False. Other lines (link modes, netlink errors the tool
prints without privileges) are skipped. sysfs ``speed`` holds the same number, but only ethtool's
text says which device it describes when the probe's output is read back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPEED = re.compile(r"^\s*Speed:\s*(\d+(?:\.\d+)?)\s*([MG])b/s\s*$", re.M)
_UNKNOWN = re.compile(r"^\s*Speed:\s*Unknown", re.M)
_LINK = re.compile(r"^\s*Link detected:\s*(yes|no)\s*$", re.M)


@dataclass(frozen=True)
class EthLink:
    speed_gbps: float | None
    link_detected: bool | None


def parse_ethtool_link(text: str) -> EthLink:
    m = _SPEED.search(text)
    link = _LINK.search(text)
    if m is None and link is None and not _UNKNOWN.search(text):
        raise ValueError("not ethtool link settings (no Speed: or Link detected: line)")
    speed = None
    if m is not None:
        speed = float(m.group(1)) / (1000 if m.group(2) == "M" else 1)
    return EthLink(speed_gbps=speed, link_detected=None if link is None else link.group(1) == "yes")
