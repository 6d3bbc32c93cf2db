"""Port counters: ``/sys/class/infiniband/<dev>/ports/<n>/{counters,hw_counters}/<name>`` as the
probe dumps them (``mlx5_0/ports/1/counters/symbol_error: 0``), and ``ethtool -S <netdev>``
(``NIC statistics:`` then ``     rx_errors: 0`` lines).

Values must be plain non-negative integers: anything else (a sysfs read error, ``N/A``) is skipped,
not guessed. Names are kept as the tool gives them; names are checked against a conservative
pattern so a hostile device cannot smuggle markup or control characters into a report.
"""

from __future__ import annotations

import re

from netbench.inventory.model import PortCounters

_IB = re.compile(r"(?:^|/)([A-Za-z0-9_.:-]+)/ports/(\d+)/(counters|hw_counters)/([A-Za-z0-9_.-]+)$")
_NAME = re.compile(r"^[A-Za-z0-9_.:\[\]-]{1,80}$")
_VALUE = re.compile(r"^\d{1,20}$")
_MAX_COUNTERS = 1000  # per port: a real mlx5 has a few hundred ethtool counters


def parse_ib_counters(text: str) -> list[PortCounters]:
    ports: dict[str, PortCounters] = {}
    for line in text.splitlines():
        path, sep, value = line.partition(": ")
        m = _IB.search(path.strip())
        if not sep or not m or not _VALUE.match(value.strip()):
            continue
        port = f"{m.group(1)}/{m.group(2)}"
        pc = ports.setdefault(port, PortCounters(port=port, source="sysfs-ib"))
        # counters/ and hw_counters/ share no names on mlx5; should they, the port counter wins
        if len(pc.counters) < _MAX_COUNTERS and (m.group(3) == "counters" or m.group(4) not in pc.counters):
            pc.counters[m.group(4)] = int(value.strip())
    return list(ports.values())


def parse_ethtool_s(text: str, netdev: str) -> PortCounters:
    """``ethtool -S``; raises ValueError when the text is not its output (``no stats available``
    is a device without statistics: an empty record, not an error)."""
    pc = PortCounters(port=netdev, source="ethtool")
    if "no stats available" in text.lower():
        return pc
    if not any(line.strip().endswith("statistics:") for line in text.splitlines()):
        raise ValueError("not ethtool -S output (no 'statistics:' header)")
    for line in text.splitlines():
        name, sep, value = line.strip().partition(": ")
        if sep and _NAME.match(name) and _VALUE.match(value.strip()) and len(pc.counters) < _MAX_COUNTERS:
            pc.counters[name] = int(value.strip())
    return pc
