"""``nvcc --version``: ``Cuda compilation tools, release 13.0, V13.0.88``."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class NvccInfo:
    release: str | None = None  # 13.0
    version: str | None = None  # 13.0.88


def parse_nvcc(text: str) -> NvccInfo:
    m = re.search(r"release\s+([\d.]+),\s*V([\w.]+)", text)
    if m:
        return NvccInfo(release=m.group(1), version=m.group(2))
    m = re.search(r"release\s+([\d.]+)", text)
    return NvccInfo(release=m.group(1) if m else None)
