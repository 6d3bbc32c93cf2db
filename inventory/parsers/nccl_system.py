"""The probe's nccl-system section: the NCCL library the system linker would load.

``lib: /usr/lib/x86_64-linux-gnu/libnccl.so.2 -> /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.9`` (the
version is in the real file name) and ``#define NCCL_MAJOR 2`` ... lines from ``nccl.h``. The header
wins when both are present, since a .so name can be renamed but the header states what was built.
"""

from __future__ import annotations

import re


def parse_nccl_system(text: str) -> str | None:
    defs = dict(re.findall(r"^#define NCCL_(MAJOR|MINOR|PATCH)\s+(\d+)", text, re.M))
    if {"MAJOR", "MINOR", "PATCH"} <= defs.keys():
        return f"{defs['MAJOR']}.{defs['MINOR']}.{defs['PATCH']}"
    for m in re.finditer(r"^lib:\s*\S+\s*->\s*(\S+)", text, re.M):
        v = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)", m.group(1))
        if v:
            return v.group(1)
    return None
