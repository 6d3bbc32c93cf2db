"""Slurm ``topology.conf``: which leaf switch (or block) each node hangs off.

Why: a pair is only comparable with pairs of the same hop class (same leaf vs across the spine),
and clusters already describe their fabric in Slurm's topology.conf. Both plugins are read:

* topology/tree: ``SwitchName=s0 Nodes=dev[0-5] LinkSpeed=...`` and ``SwitchName=s3 Switches=s[0-2]``
* topology/block: ``BlockName=block1 Nodes=node[1-32]`` (+ ``BlockSizes=30,120``)

Real files carry mistakes (a node under two switches, a hostlist that lost its prefix, a switch
listed under a parent that is never defined). Those become ``warnings`` with the line number; the
parser keeps going, because a half-right topology still labels most pairs correctly.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from netbench.common.errors import UsageError
from netbench.common.hostlist import expand_hostlist

SAME_LEAF, CROSS_LEAF, UNKNOWN = "same-leaf", "cross-leaf", "unknown"
_KNOWN_KEYS = {"switchname", "nodes", "switches", "linkspeed", "blockname", "blocksizes"}
_PREFIX = re.compile(r"^(.*?)\d+$")


@dataclass
class Switch:
    """A switch (tree plugin) or a block (block plugin)."""

    name: str
    kind: str = "switch"  # switch | block
    nodes: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    parent: str | None = None
    link_speed: str | None = None
    line: int = 0


@dataclass
class Topology:
    switches: dict[str, Switch] = field(default_factory=dict)
    node_leaf: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    block_sizes: list[int] = field(default_factory=list)
    source: str = "<topology>"

    @property
    def kind(self) -> str:
        kinds = {s.kind for s in self.switches.values()}
        return "block" if kinds == {"block"} else "tree" if kinds else "empty"

    @property
    def leaves(self) -> list[str]:
        return [s.name for s in self.switches.values() if s.nodes]

    @property
    def roots(self) -> list[str]:
        return [s.name for s in self.switches.values() if s.parent is None]

    def _node(self, host: str) -> str | None:
        if host in self.node_leaf:
            return host
        short = host.split(".", 1)[0]  # hosts files often use FQDNs, topology.conf short names
        return short if short in self.node_leaf else None

    def leaf_of(self, host: str) -> str | None:
        """The switch (or block) the host is directly under; None if topology.conf does not list it."""
        node = self._node(host)
        return self.node_leaf[node] if node else None

    def ancestors(self, switch: str) -> list[str]:
        """``switch`` and its parents up to the root (stops on a cycle)."""
        out: list[str] = []
        cur: str | None = switch
        while cur is not None and cur not in out:
            out.append(cur)
            sw = self.switches.get(cur)
            cur = sw.parent if sw else None
        return out

    def hop_class(self, a: str, b: str) -> str:
        """``same-leaf`` | ``cross-leaf`` | ``unknown`` (either host missing from the topology)."""
        la, lb = self.leaf_of(a), self.leaf_of(b)
        if la is None or lb is None:
            return UNKNOWN
        return SAME_LEAF if la == lb else CROSS_LEAF

    def switch_hops(self, a: str, b: str) -> int | None:
        """Switches a packet crosses between two hosts (1: same leaf, 3: leaf-spine-leaf); None if unknown."""
        la, lb = self.leaf_of(a), self.leaf_of(b)
        if la is None or lb is None:
            return None
        up_a, up_b = self.ancestors(la), self.ancestors(lb)
        common = next((s for s in up_a if s in up_b), None)
        if common is None:
            return None
        return up_a.index(common) + up_b.index(common) + 1

    def unknown_hosts(self, hosts: list[str]) -> list[str]:
        """Hosts (e.g. from a hosts file) that the topology does not place under any switch."""
        return [h for h in hosts if self._node(h) is None]


def _warn(topo: Topology, line: int, msg: str) -> None:
    topo.warnings.append(f"{topo.source}:{line}: {msg}" if line else f"{topo.source}: {msg}")


def _expand(topo: Topology, value: str, lineno: int, what: str) -> list[str]:
    try:
        return expand_hostlist(value)
    except ValueError as exc:
        _warn(topo, lineno, f"bad {what} list: {exc}; ignored")
        return []


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Strip comments, join ``\\`` continuations; keep the first line number of each."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        body = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = n
        if body.endswith("\\"):
            pending += body[:-1] + " "
            continue
        body = (pending + body).strip()
        pending = ""
        if body:
            out.append((start, body))
    if pending.strip():
        out.append((start, pending.strip()))
    return out


def parse_topology_text(text: str, source: str = "<topology>") -> Topology:
    """Parse topology.conf text; never raises for content problems, records ``warnings`` instead."""
    topo = Topology(source=source)
    node_line: dict[str, int] = {}
    child_refs: list[tuple[str, str, int]] = []
    for lineno, body in _logical_lines(text):
        fields: dict[str, str] = {}
        for tok in body.split():
            key, eq, value = tok.partition("=")
            if not eq:
                _warn(topo, lineno, f"expected Key=Value, got {tok!r}; ignored")
                continue
            lk = key.lower()
            if lk not in _KNOWN_KEYS:
                _warn(topo, lineno, f"unknown key {key}=; ignored")
                continue
            fields[lk] = value
        if "blocksizes" in fields:
            try:
                topo.block_sizes = [int(x) for x in fields["blocksizes"].split(",") if x]
            except ValueError:
                _warn(topo, lineno, f"bad BlockSizes={fields['blocksizes']}")
            continue
        name = fields.get("switchname") or fields.get("blockname")
        if not name:
            if fields:
                _warn(topo, lineno, "line has neither SwitchName= nor BlockName=; ignored")
            continue
        kind = "block" if "blockname" in fields else "switch"
        if name in topo.switches:
            first = topo.switches[name].line
            _warn(topo, lineno, f"{kind} {name} defined again (first at line {first}); merged")
            sw = topo.switches[name]
        else:
            sw = topo.switches[name] = Switch(name=name, kind=kind, line=lineno)
        if "linkspeed" in fields:
            sw.link_speed = fields["linkspeed"]
        if "nodes" in fields:
            for node in _expand(topo, fields["nodes"], lineno, "Nodes"):
                if node in topo.node_leaf and topo.node_leaf[node] != name:
                    old = topo.node_leaf[node]
                    _warn(topo, lineno, f"node {node} is under {old} (line {node_line[node]}) "
                          f"and again under {name}; keeping {old}")
                    continue
                if node not in topo.node_leaf:
                    topo.node_leaf[node], node_line[node] = name, lineno
                    sw.nodes.append(node)
        if "switches" in fields:
            for child in _expand(topo, fields["switches"], lineno, "Switches"):
                child_refs.append((name, child, lineno))
        if "nodes" not in fields and "switches" not in fields:
            _warn(topo, lineno, f"{kind} {name} has neither Nodes= nor Switches=")
    for parent, child, lineno in child_refs:
        sw = topo.switches.get(child)
        if sw is None:
            _warn(topo, lineno, f"switch {child} listed under {parent} is never defined")
            continue
        if sw.parent is not None and sw.parent != parent:
            _warn(topo, lineno, f"switch {child} is under both {sw.parent} and {parent}; keeping {sw.parent}")
            continue
        if child in topo.ancestors(parent):
            _warn(topo, lineno, f"switch {child} under {parent} makes a loop; ignored")
            continue
        sw.parent = parent
        topo.switches[parent].children.append(child)
    _check_prefixes(topo, node_line)
    if topo.kind == "tree" and len(topo.roots) > 1 and any(s.children for s in topo.switches.values()):
        _warn(topo, 0, f"{len(topo.roots)} top-level switches ({', '.join(topo.roots)}): hosts under "
              "different roots have no common switch")
    return topo


def _check_prefixes(topo: Topology, node_line: dict[str, int]) -> None:
    """Flag node names whose prefix is a truncated form of a common one (``n019`` among ``circe-n0NN``)."""
    prefixes = Counter(m.group(1) for n in topo.node_leaf if (m := _PREFIX.match(n)))
    for short, count in prefixes.items():
        longer = [p for p in prefixes if p != short and p.endswith(short) and prefixes[p] > count]
        if not longer:
            continue
        best = max(longer, key=lambda p: prefixes[p])
        nodes = [n for n in topo.node_leaf if (m := _PREFIX.match(n)) and m.group(1) == short]
        line = min(node_line[n] for n in nodes)
        shown = ", ".join(nodes[:4]) + (" ..." if len(nodes) > 4 else "")
        _warn(topo, line, f"{shown}: prefix {short!r} looks truncated ({prefixes[best]} nodes use {best!r}); "
              "these nodes will match no host")


def parse_topology_file(path: str | Path) -> Topology:
    """Read a topology.conf; a missing or unreadable file is a UsageError (exit 2)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise UsageError(f"{p}: topology file not found") from None
    except OSError as exc:
        raise UsageError(f"{p}: cannot read topology file: {exc.strerror}") from None
    return parse_topology_text(text, str(p))
