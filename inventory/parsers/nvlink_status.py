"""``nvidia-smi nvlink --status``: per GPU, per link speed or ``<inactive>``.

``GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)`` then ``Link 0: 25 GB/s`` lines. A link that is
down prints ``Link 3: <inactive>`` (or ``Link 3: Inactive`` on some drivers); a GPU without NVLink
prints only its header line.
"""

from __future__ import annotations

import re

from netbench.inventory.model import NVLink
from netbench.inventory.parsers._common import first_float

_GPU = re.compile(r"^GPU\s+(\d+):\s*(.*?)(?:\s*\(UUID:\s*([^)]+)\))?\s*$")
_LINK = re.compile(r"^Link\s+(\d+):\s*(.*)$")


def parse_nvlink_status(text: str) -> list[NVLink]:
    links: list[NVLink] = []
    gpu: int | None = None
    for raw in text.splitlines():
        line = raw.strip()
        m = _GPU.match(line)
        if m:
            gpu = int(m.group(1))
            continue
        m = _LINK.match(line)
        if m and gpu is not None:
            value = m.group(2).strip()
            speed = first_float(value) if re.search(r"\d", value) else None
            up = speed is not None and speed > 0 and "inactive" not in value.lower()
            links.append(NVLink(gpu=gpu, link=int(m.group(1)), up=up, speed_GBps=speed if up else None))
    return links


def gpu_uuids(text: str) -> dict[int, str]:
    """The ``(UUID: GPU-...)`` of each GPU header line: index -> UUID."""
    matches = (m for m in map(_GPU.match, text.splitlines()) if m and m.group(3))
    return {int(m.group(1)): m.group(3).strip() for m in matches}
