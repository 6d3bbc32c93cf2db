"""Which leaf switch each host hangs off, and so the hop class of every pair.

A pair is judged against pairs of its own hop class: two hosts on one leaf ("leaf") go through one
switch, two on different leaves ("spine") cross the spine and share its (often oversubscribed)
uplinks, so comparing the two classes with each other would flag every cross-spine pair.

Sources, strongest first: a ``--topology`` file, the ``switch=`` label of a host, then the
switch neighbours its inventory discovered (InfiniBand discovery before LLDP, since LLDP often
only sees the management network).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

INTRA, LEAF, SPINE, UNKNOWN = "intra", "leaf", "spine", "unknown"

_RANGE = re.compile(r"\[([^\]]+)\]")


class TopologyError(ValueError):
    pass


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm-style host list: ``gpu[01-03,07],cpu1`` -> gpu01 gpu02 gpu03 gpu07 cpu1."""
    out: list[str] = []
    parts, depth, cur = [], 0, ""
    for ch in expr:  # split on commas outside brackets
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for part in (p.strip() for p in parts):
        if not part:
            continue
        m = _RANGE.search(part)
        if not m:
            out.append(part)
            continue
        head, tail = part[: m.start()], part[m.end() :]
        for item in m.group(1).split(","):
            lo, _, hi = item.partition("-")
            if hi:
                width = len(lo)
                for i in range(int(lo), int(hi) + 1):
                    out.extend(expand_hostlist(f"{head}{i:0{width}d}{tail}"))
            else:
                out.extend(expand_hostlist(f"{head}{item}{tail}"))
    return out


def parse_topology(text: str, name: str = "topology") -> dict[str, str]:
    """host -> switch from a topology file.

    Accepted forms: JSON or TOML ``{"switches": {"leaf1": ["h1", "h2"]}}`` (or the switch table
    at top level), or Slurm's topology.conf (``SwitchName=leaf1 Nodes=gpu[01-16]``; lines without
    ``Nodes=`` describe spines and are skipped).
    """
    data: Any = None
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise TopologyError(f"{name}: not valid JSON: {exc}") from None
    elif "SwitchName=" in text:
        mapping: dict[str, str] = {}
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if "SwitchName" in fields and "Nodes" in fields:
                for host in expand_hostlist(fields["Nodes"]):
                    mapping[host] = fields["SwitchName"]
        return mapping
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise TopologyError(f"{name}: neither JSON, TOML nor Slurm topology.conf: {exc}") from None
    table = data.get("switches", data) if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise TopologyError(f"{name}: expected a table of switch -> list of hosts")
    mapping = {}
    for switch, hosts in table.items():
        if isinstance(hosts, str):
            hosts = expand_hostlist(hosts)
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise TopologyError(f"{name}: switch {switch!r} must list host names")
        for h in hosts:
            mapping[h] = str(switch)
    return mapping


def load_topology(path: str | Path) -> dict[str, str]:
    path = Path(path)
    try:
        return parse_topology(path.read_text(encoding="utf-8"), str(path))
    except FileNotFoundError:
        raise TopologyError(f"topology file not found: {path}") from None


def switch_from_inventory(node: dict[str, Any]) -> str | None:
    """A node's leaf from its ``switch=`` label or discovered neighbours.

    Rail-optimised nodes connect each HCA to a different leaf; such a node's "leaf" is the set of
    its leaves (``leafA+leafB``), so nodes of one scalable unit still compare as same-leaf.
    """
    labels = node.get("labels") or {}
    if labels.get("switch"):
        return str(labels["switch"])
    neigh = [n for n in node.get("neighbors") or [] if n.get("switch")]
    ib = [n for n in neigh if (n.get("source") or "").startswith("ib")]
    use = ib or neigh
    if not use:
        return None
    names = sorted({str(n["switch"]) for n in use})
    return "+".join(names)


def build_switch_map(
    inventory: list[dict[str, Any]], topology: dict[str, str] | None = None
) -> dict[str, str]:
    """host -> switch for every host we can place."""
    out: dict[str, str] = {}
    for node in inventory:
        sw = switch_from_inventory(node)
        if sw and node.get("host"):
            out[node["host"]] = sw
    if topology:
        out.update(topology)
    return out


def hop_class(a: str, b: str, switches: dict[str, str]) -> str:
    if a == b:
        return INTRA
    sa, sb = switches.get(a), switches.get(b)
    if sa is None or sb is None:
        return UNKNOWN
    return LEAF if sa == sb else SPINE


def ring_crossings(hosts: list[str], switches: dict[str, str]) -> tuple[int, int]:
    """(leaf changes walking the ring in this order, the fewest any order could have).

    A ring through L leaves must change leaf at least L times (0 when L == 1); an interleaved
    order changes far more often, and every change is traffic through the spine.
    """
    if len(hosts) < 2:
        return 0, 0
    sw = [switches.get(h, "?") for h in hosts]
    crossings = sum(1 for i in range(len(sw)) if sw[i] != sw[(i + 1) % len(sw)])
    leaves = len(set(sw))
    return crossings, (0 if leaves == 1 else leaves)


def grouped_order(hosts: list[str], switches: dict[str, str]) -> list[str]:
    """The same hosts ordered leaf by leaf (stable within a leaf): the order that crosses least."""
    first_seen: dict[str, int] = {}
    for h in hosts:
        first_seen.setdefault(switches.get(h, "?"), len(first_seen))
    return sorted(hosts, key=lambda h: first_seen[switches.get(h, "?")])


def majority(values: list[Any]) -> Any:
    """The most common value (ties: the first seen)."""
    return Counter(values).most_common(1)[0][0] if values else None
