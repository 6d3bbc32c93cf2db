"""``nvidia-smi --version``: ``DRIVER version : 580.159.04`` / ``CUDA Version : 13.0``."""

from __future__ import annotations

from netbench.inventory.parsers._common import GpuReport, clean


def parse_nvidia_smi_version(text: str) -> GpuReport:
    """Driver and CUDA versions (no GPUs); keys are matched case-insensitively."""
    kv = {k.strip().lower(): v for k, _, v in (line.partition(":") for line in text.splitlines()) if v}
    return GpuReport(driver_version=clean(kv.get("driver version")),
                     cuda_version=clean(kv.get("cuda version")))
