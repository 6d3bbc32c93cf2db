"""``uname -a``: system, node name, kernel release and machine."""

from __future__ import annotations

from dataclasses import dataclass

_ARCHES = {"x86_64", "aarch64", "arm64", "ppc64le", "ppc64", "s390x", "riscv64", "i686", "armv7l"}


@dataclass
class Uname:
    system: str | None = None
    nodename: str | None = None
    kernel: str | None = None
    machine: str | None = None


def parse_uname(text: str) -> Uname:
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    parts = line.split()
    if len(parts) < 3:
        raise ValueError("not uname -a output")
    machine = next((p for p in reversed(parts[3:]) if p in _ARCHES), None)
    return Uname(system=parts[0], nodename=parts[1], kernel=parts[2], machine=machine)
