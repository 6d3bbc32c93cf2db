"""An ``NCCL_DEBUG=INFO`` log: the NCCL version that actually ran, its CUDA build, and the network.

``NCCL version 2.28.9+cuda13.0`` is the library the process loaded (which may differ from the system
one), so it is the most trustworthy NCCL version there is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class NcclDebugInfo:
    version: str | None = None  # 2.28.9
    cuda_build: str | None = None  # 13.0 (the +cudaX.Y suffix)
    cuda_driver_version: str | None = None  # 13.0 (from cudaDriverVersion 13000)
    network: str | None = None  # Socket | IB | the plugin name
    interfaces: list[str] = field(default_factory=list)  # eth0, mlx5_0:1 ...


def parse_nccl_debug(text: str) -> NcclDebugInfo:
    info = NcclDebugInfo()
    m = re.search(r"NCCL version\s+(\d+\.\d+\.\d+)(?:\+cuda(\d+\.\d+))?", text)
    if m:
        info.version, info.cuda_build = m.group(1), m.group(2)
    m = re.search(r"cudaDriverVersion\s+(\d+)", text)
    if m:
        v = int(m.group(1))
        info.cuda_driver_version = f"{v // 1000}.{(v % 1000) // 10}"
    m = re.search(r"NCCL INFO Using network (\S+)", text)
    info.network = m.group(1) if m else None
    for m in re.finditer(r"NET/(?:Socket|IB)\s*: Using (.*)$", text, re.M):
        for dev in re.findall(r"\[\d+\]([\w.:-]+?)(?::[\d.]+)?(?:<\d+>|\s|$)", m.group(1)):
            if dev not in info.interfaces:
                info.interfaces.append(dev)
    return info
