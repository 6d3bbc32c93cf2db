"""LLDP neighbours from ``lldpcli -f json`` (also ``-f json0`` and ``-f keyvalue``).

Shapes differ: ``interface`` is a list of one-key objects (several ports) or a single object (one
port); the chassis is keyed by its system name, or has no name key at all (``id`` directly under
chassis); ``json0`` wraps every value in ``[{"value": ...}]``. Each local port gives one
SwitchNeighbor(local_port, switch=system name, switch_port=port id, switch_id=chassis id).
"""

from __future__ import annotations

import json
from typing import Any

from netbench.inventory.model import SwitchNeighbor


def _v(x: Any) -> str | None:
    """A scalar from json (plain) or json0 ([{"value": ...}]) shapes."""
    while isinstance(x, list):
        if not x:
            return None
        x = x[0]
    if isinstance(x, dict):
        x = x.get("value")
    return None if x is None else str(x)


def _interfaces(lldp: Any) -> list[tuple[str, dict]]:
    if isinstance(lldp, list):  # json0: "lldp": [ {"interface": [ {"name": ..., ...} ]} ]
        out = []
        for block in lldp:
            for itf in block.get("interface", []) if isinstance(block, dict) else []:
                if isinstance(itf, dict) and "name" in itf:
                    out.append((str(itf["name"]), itf))
        return out
    itfs = lldp.get("interface", []) if isinstance(lldp, dict) else []
    if isinstance(itfs, dict):
        itfs = [{k: v} for k, v in itfs.items()]
    return [(name, body) for itf in itfs if isinstance(itf, dict) for name, body in itf.items()
            if isinstance(body, dict)]


def _chassis(body: dict) -> tuple[str | None, str | None]:
    ch = body.get("chassis")
    if isinstance(ch, list):  # json0
        ch = ch[0] if ch else {}
        return _v(ch.get("name")), _v(ch.get("id"))
    if not isinstance(ch, dict):
        return None, None
    if "id" in ch:  # no system name: the id sits directly under chassis
        return _v(ch.get("name")), _v(ch["id"])
    for name, inner in ch.items():
        if isinstance(inner, dict):
            return name, _v(inner.get("id"))
    return None, None


def parse_lldp_json(text: str) -> list[SwitchNeighbor]:
    data = json.loads(text)
    if not isinstance(data, dict) or "lldp" not in data:
        raise ValueError("no 'lldp' key in LLDP json")
    out = []
    for local, body in _interfaces(data["lldp"]):
        switch, chassis_id = _chassis(body)
        port = body.get("port")
        if isinstance(port, list):
            port = port[0] if port else {}
        port_id = _v(port.get("id")) if isinstance(port, dict) else None
        out.append(SwitchNeighbor(local_port=local, switch=switch, switch_port=port_id,
                                  switch_id=chassis_id, source="lldp"))
    return out


def parse_lldp_keyvalue(text: str) -> list[SwitchNeighbor]:
    """``lldpcli -f keyvalue show neighbors``: ``lldp.<port>.chassis.name=leaf01`` lines."""
    ports: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        parts = key.split(".")
        if not sep or len(parts) < 3 or parts[0] != "lldp":
            continue
        ports.setdefault(parts[1], {}).setdefault(".".join(parts[2:]), value)
    out = []
    for local, kv in ports.items():
        port_id = next((v for k, v in kv.items() if k.startswith("port.") and k not in
                        ("port.descr", "port.ttl", "port.mfs") and "." not in k[5:]), None)
        chassis_id = next((v for k, v in kv.items()
                           if k in ("chassis.mac", "chassis.local", "chassis.ip")), None)
        out.append(SwitchNeighbor(local_port=local, switch=kv.get("chassis.name"), switch_port=port_id,
                                  switch_id=chassis_id, source="lldp"))
    return out
