"""``ofed_info -s`` (``MLNX_OFED_LINUX-23.07-0.5.1.2:``) or the first line of ``ofed_info``
(``MLNX_OFED_LINUX-23.10-1.1.9.0 (OFED-23.10-1.1.9):``) -> ``MLNX_OFED_LINUX-23.10-1.1.9.0``."""

from __future__ import annotations

import re


def parse_ofed_info(text: str) -> str | None:
    for line in text.splitlines():
        m = re.match(r"^\s*([A-Za-z][\w.]*-[\w.\-]*\d[\w.\-]*?)\s*(?:\(.*\))?\s*:?\s*$", line)
        if m and re.search(r"OFED", m.group(1), re.I):
            return m.group(1)
    return None
