"""``nvidia-smi -L``: ``GPU 0: NVIDIA H200 (UUID: GPU-...)`` lines (MIG lines are skipped)."""

from __future__ import annotations

import re

from netbench.inventory.model import GPU

_LINE = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*\(UUID:\s*([^)\s]+)\)\s*$")


def parse_nvidia_smi_list(text: str) -> list[GPU]:
    """One GPU per ``GPU n:`` line with index, name and UUID."""
    return [GPU(index=int(m.group(1)), name=m.group(2) or None, uuid=m.group(3))
            for m in map(_LINE.match, text.splitlines()) if m]
