"""``/proc/driver/nvidia/version``: the loaded kernel module's version (open or proprietary)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class ProcDriver:
    driver_version: str | None = None
    open_kernel_module: bool | None = None
    gcc: str | None = None


def parse_proc_driver(text: str) -> ProcDriver:
    """``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...``."""
    out = ProcDriver()
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            m = re.search(r"\s(\d+\.\d+(?:\.\d+)*)\s", line + " ")
            out.driver_version = m.group(1) if m else None
            out.open_kernel_module = "Open Kernel Module" in line
        elif line.startswith("GCC version:"):
            m = re.search(r"gcc version\s+(\S+)", line)
            out.gcc = m.group(1) if m else None
    return out
