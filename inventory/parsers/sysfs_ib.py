"""``/sys/class/infiniband`` as the probe dumps it: ``<dev>/<attr>: value`` lines.

Read: ``fw_ver``, ``board_id`` (PSID), ``hca_type``, ``node_guid``, ``ports/N/{rate,state,
phys_state,link_layer}``, and the PCI link of the device (``device/current_link_speed`` ...),
``device/net: <netdevs>`` and ``device: <pci address>`` which the probe adds. Paths may carry any
prefix (the probe can be pointed at another root); only the trailing components matter.
"""

from __future__ import annotations

import re
from pathlib import Path

from netbench.inventory.model import NIC
from netbench.inventory.parsers._common import (
    clean,
    first_float,
    first_int,
    norm_bus_id,
    norm_guid,
    port_state,
)

from netbench.common.naming import natural_key

_PORT = re.compile(r"(?:^|/)([^/\s]+)/ports/(\d+)/(\w+)$")
_DEV = re.compile(r"(?:^|/)([^/\s]+)/(fw_ver|board_id|hca_type|node_guid|device|device/\w+)$")
_DEV_ATTRS = ("fw_ver", "board_id", "hca_type", "node_guid")
_PORT_ATTRS = ("rate", "state", "phys_state", "link_layer")
_PCI_ATTRS = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


def parse_sysfs_ib(text: str) -> list[NIC]:
    devs: dict[str, dict[str, str]] = {}
    ports: dict[tuple[str, int], dict[str, str]] = {}
    for line in text.splitlines():
        path, sep, value = line.partition(": ")
        if not sep:
            path, value = line.rstrip(":"), ""
        path = path.strip()
        m = _PORT.search(path)
        if m:
            ports.setdefault((m.group(1), int(m.group(2))), {})[m.group(3)] = value.strip()
            continue
        m = _DEV.search(path)
        if m:
            devs.setdefault(m.group(1), {})[m.group(2)] = value.strip()
    for dev in devs:
        if not any(d == dev for d, _ in ports):
            ports[(dev, 1)] = {}  # device without port files: still report its firmware
    nics = []
    for (dev, port), p in sorted(ports.items(), key=lambda kv: (natural_key(kv[0][0]), kv[0][1])):
        d = devs.get(dev, {})
        netdevs = (d.get("device/net") or "").split()
        nics.append(NIC(
            name=dev, port=port, firmware=clean(d.get("fw_ver")), board_id=clean(d.get("board_id")),
            hca_type=clean(d.get("hca_type")), node_guid=norm_guid(d.get("node_guid")),
            netdev=netdevs[0] if netdevs else None,
            rate_gbps=first_float(p.get("rate")), state=port_state(p.get("state")),
            phys_state=port_state(p.get("phys_state")), link_layer=clean(p.get("link_layer")),
            pci_bus_id=norm_bus_id(d.get("device")),
            pcie_speed=clean(d.get("device/current_link_speed")),
            pcie_width=first_int(d.get("device/current_link_width")),
        ))
    return nics


def dump_tree(root: Path) -> str:
    """The probe's dump format for a directory laid out like /sys/class/infiniband (used by tests
    and by callers that hold a copied tree); files are read as text, never executed."""
    lines = []
    for dev in sorted(p for p in root.iterdir() if p.is_dir()):
        for attr in _DEV_ATTRS:
            f = dev / attr
            if f.is_file():
                lines.append(f"{dev.name}/{attr}: {f.read_text(errors='replace').strip()}")
        for port in sorted((dev / "ports").glob("*")):
            for attr in _PORT_ATTRS:
                f = port / attr
                if f.is_file():
                    value = f.read_text(errors="replace").strip()
                    lines.append(f"{dev.name}/ports/{port.name}/{attr}: {value}")
    return "\n".join(lines) + "\n"
