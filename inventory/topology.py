"""The switch topology and its hop classes: one parser, one vocabulary, for every command.

Why: a pair is only comparable with pairs of the same hop class (two hosts on one leaf go through
one switch; two on different leaves cross the spine and share its, often oversubscribed, uplinks).
``sweep --topology``, ``preflight --topology``, ``inventory --topology`` and ``report --topology``
all read the file here, so they cannot disagree about a pair.

Files (``load_topology``):

* Slurm topology/tree: ``SwitchName=s0 Nodes=dev[0-5] LinkSpeed=...`` and ``SwitchName=s3 Switches=s[0-2]``
  (any depth);
* Slurm topology/block: ``BlockName=block1 Nodes=node[1-32]`` (+ ``BlockSizes=30,120``); a block is a leaf;
* ``scontrol show topology`` (what a job inside an allocation can read): the same lines plus ``Level=``
  (and ``BlockIndex=``/``BlockSize=``), an upper switch listing every node below it in ``Nodes=``;
* JSON or TOML: ``{"switches": {"leaf1": ["h1", "h2"], "leaf2": "h[3-4]"}}`` (or the switch table at the
  top level): leaves only.

Work is linear in the file: a chain of switches, each under the next, is checked for loops with a
union-find, and a tree more than ``MAX_TIERS`` tiers deep (no fabric has more than a handful) is a
``TopologyError``, as is a host or switch name that is not one (``node0009;rm``: the names reach
SSH commands and reports; the rule of hosts files, ``hosts.validate_hostname``).

Real Slurm files carry mistakes (a node under two switches, a hostlist that lost its prefix, a switch
listed under a parent that is never defined). Those become ``warnings`` with the line number; the
parser keeps going, because a half-right topology still labels most pairs correctly. A file that is
missing, unreadable or not a topology at all is a ``TopologyError`` (one line, exit 2).

Uplinks and hop classes (``netbench.inventory.hops``, whose names this module re-exports): what the
rest of netbench passes around is one flat map ``name -> the switch it hangs off``, and the hop
class of a pair is the tier of the lowest switch its two hosts share.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbench.inventory.hops import (
    CORE,
    HOP_CLASSES,
    INTRA,
    LEAF,
    SPINE,
    UNKNOWN,
    RoundLoad,
    Uplinks,
    build_switch_map,
    crossed_uplinks,
    grouped_order,
    hop_class,
    is_hop_class,
    leaf_of,
    meeting_tier,
    ring_crossings,
    round_load,
    switch_from_inventory,
    switch_path,
    tier_name,
)
from netbench.inventory.hostlist import expand_hostlist
from netbench.inventory.hosts import validate_hostname

from netbench.common.errors import UsageError
from netbench.common.files import parse_toml, read_user_text

__all__ = [
    "CORE", "HOP_CLASSES", "INTRA", "LEAF", "MAX_TIERS", "SPINE", "UNKNOWN", "UNPLACED_SHOWN", "RoundLoad",
    "Switch", "Topology", "TopologyError", "Uplinks", "build_switch_map", "crossed_uplinks", "depth",
    "grouped_order", "hop_class", "is_hop_class", "leaf_of", "load_topology", "meeting_tier",
    "parse_slurm_topology", "parse_topology", "require_placed", "ring_crossings", "round_load",
    "switch_from_inventory", "switch_path", "tier_name",
]

MAX_TIERS = 64
"""The deepest tree a topology may describe: real fabrics have 2 to 4 tiers; a file deeper than this
is a mistake or an attack (each pair's path is walked), refused with exit 2."""
UNPLACED_SHOWN = 5  # hosts named in the warning about hosts the topology does not place
_KNOWN_KEYS = {"switchname", "nodes", "switches", "linkspeed", "blockname", "blocksizes"}
# keys only ``scontrol show topology`` prints (Level of a switch; the block plugin's index and size)
_SHOW_KEYS = {"level", "blockindex", "blocksize"}
_PREFIX = re.compile(r"^(.*?)\d+$")
_SLURM = re.compile(r"(?im)^\s*(switchname|blockname)=")  # Slurm keys are case-insensitive



class TopologyError(UsageError):
    """A topology file that cannot be used at all (missing, unreadable, not a topology)."""



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

    def uplinks(self, hosts: Iterable[str] | None = None) -> dict[str, str]:
        """Every switch's parent and the leaf of each of ``hosts`` (as the caller spells them, FQDNs
        matched by short name); every listed node when ``hosts`` is None."""
        out = {s.name: s.parent for s in self.switches.values() if s.parent is not None}
        if hosts is None:
            out.update(self.node_leaf)
            return out
        for h in hosts:
            leaf = self.leaf_of(h)
            if leaf is not None:
                out[h] = leaf
        return out

    def leaf_of(self, host: str) -> str | None:
        """The switch (or block) the host is directly under; None if the topology does not list it."""
        return leaf_of(host, self.node_leaf)

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
        """The hop class of two hosts (module docstring)."""
        return hop_class(a, b, self.uplinks())

    def unknown_hosts(self, hosts: list[str]) -> list[str]:
        """Hosts (e.g. from a hosts file) that the topology does not place under any switch."""
        return [h for h in hosts if self.leaf_of(h) is None]

    def unplaced_warning(self, hosts: list[str]) -> str | None:
        """One line saying how many of ``hosts`` the topology does not place and the first few;
        None when it places every one. Their pairs can only be judged as hop class ``unknown``."""
        missing = self.unknown_hosts(hosts)
        if not missing:
            return None
        shown = ", ".join(missing[:UNPLACED_SHOWN]) + (" ..." if len(missing) > UNPLACED_SHOWN else "")
        return (f"{self.source}: {len(missing)} of {len(hosts)} host(s) are not in the topology ({shown}); "
                "their pairs are judged as hop class unknown")


def _warn(topo: Topology, line: int, msg: str) -> None:
    topo.warnings.append(f"{topo.source}:{line}: {msg}" if line else f"{topo.source}: {msg}")


def _expand(topo: Topology, value: str, lineno: int, what: str) -> list[str]:
    try:
        names = expand_hostlist(value)
    except ValueError as exc:
        _warn(topo, lineno, f"bad {what} list: {exc}; ignored")
        return []
    for name in names:
        _check_name(name, f"{topo.source}:{lineno}: {what}=")
    return names


def _check_name(name: str, where: str) -> None:
    """TopologyError naming ``where`` when ``name`` is not a host or switch name."""
    why = validate_hostname(name)
    if why:
        raise TopologyError(f"{where}: {why}: {name[:60]!r}")


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


def parse_slurm_topology(text: str, source: str = "<topology>") -> Topology:
    """Parse Slurm topology.conf text (tree or block plugin).

    Never raises for content problems; records ``warnings`` instead.
    """
    topo = Topology(source=source)
    node_line: dict[str, int] = {}
    child_refs: list[tuple[str, str, int]] = []
    for lineno, body in _logical_lines(text):
        fields = _fields(topo, lineno, body)
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
        _add_switch(topo, name, fields, lineno, node_line)
        if "switches" in fields:
            for child in _expand(topo, fields["switches"], lineno, "Switches"):
                child_refs.append((name, child, lineno))
    _join_switches(topo, child_refs)
    deepest = depth({s.name: s.parent for s in topo.switches.values() if s.parent is not None})
    if deepest > MAX_TIERS:
        raise TopologyError(f"{source}: switches {deepest} tiers deep; netbench takes at most {MAX_TIERS} "
                            "(real fabrics have 2 to 4)")
    _check_prefixes(topo, node_line)
    if topo.kind == "tree" and len(topo.roots) > 1 and any(s.children for s in topo.switches.values()):
        _warn(topo, 0, f"{len(topo.roots)} top-level switches ({', '.join(topo.roots)}): hosts under "
              "different roots have no common switch")
    return topo


def _fields(topo: Topology, lineno: int, body: str) -> dict[str, str]:
    """One logical line's ``Key=Value`` tokens (keys lower-cased), the unknown ones warned about."""
    fields: dict[str, str] = {}
    for tok in body.split():
        key, eq, value = tok.partition("=")
        if not eq:
            _warn(topo, lineno, f"expected Key=Value, got {tok!r}; ignored")
            continue
        lk = key.lower()
        if lk in _SHOW_KEYS:
            continue
        if lk not in _KNOWN_KEYS:
            _warn(topo, lineno, f"unknown key {key}=; ignored")
            continue
        fields[lk] = value
    return fields


def _add_switch(topo: Topology, name: str, fields: dict[str, str], lineno: int,
                node_line: dict[str, int]) -> None:
    """A SwitchName= or BlockName= line: the switch (merged with an earlier line of the same name)
    and the nodes directly under it (``node_line``: where each node was first placed)."""
    kind = "block" if "blockname" in fields else "switch"
    _check_name(name, f"{topo.source}:{lineno}: {'BlockName' if kind == 'block' else 'SwitchName'}=")
    if name in topo.switches:
        first = topo.switches[name].line
        _warn(topo, lineno, f"{kind} {name} defined again (first at line {first}); merged")
        sw = topo.switches[name]
    else:
        sw = topo.switches[name] = Switch(name=name, kind=kind, line=lineno)
    if "linkspeed" in fields:
        sw.link_speed = fields["linkspeed"]
    # ``scontrol show topology`` gives an upper switch both Switches= and Nodes=, the nodes being
    # every one below it: only a switch without Switches= holds its Nodes= directly.
    if "nodes" in fields and "switches" not in fields:
        for node in _expand(topo, fields["nodes"], lineno, "Nodes"):
            if node in topo.node_leaf and topo.node_leaf[node] != name:
                old = topo.node_leaf[node]
                _warn(topo, lineno, f"node {node} is under {old} (line {node_line[node]}) "
                      f"and again under {name}; keeping {old}")
                continue
            if node not in topo.node_leaf:
                topo.node_leaf[node], node_line[node] = name, lineno
                sw.nodes.append(node)
    if "nodes" not in fields and "switches" not in fields:
        _warn(topo, lineno, f"{kind} {name} has neither Nodes= nor Switches=")


def _join_switches(topo: Topology, child_refs: list[tuple[str, str, int]]) -> None:
    """Each ``Switches=`` child under its parent, unless it is undefined, already under another
    parent, or the link would close a loop (each warned about, with its line)."""
    trees = _Trees()
    for parent, child, lineno in child_refs:
        sw = topo.switches.get(child)
        if sw is None:
            _warn(topo, lineno, f"switch {child} listed under {parent} is never defined")
            continue
        if sw.parent == parent:  # listed twice under the same parent
            continue
        if sw.parent is not None:
            _warn(topo, lineno, f"switch {child} is under both {sw.parent} and {parent}; keeping {sw.parent}")
            continue
        if not trees.join(child, parent):  # child is the root of its tree: a loop iff parent is in it
            _warn(topo, lineno, f"switch {child} under {parent} makes a loop; ignored")
            continue
        sw.parent = parent
        topo.switches[parent].children.append(child)


class _Trees:
    """Union-find over switches: which tree (set of switches joined under one root) each is in, so
    a parent link is checked for a loop in near constant time (a chain of 10,000 switches walked
    from every link was quadratic)."""

    def __init__(self) -> None:
        self._up: dict[str, str] = {}

    def _find(self, name: str) -> str:
        root = name
        while (up := self._up.get(root, root)) != root:
            root = up
        while name != root:  # path compression
            self._up[name], name = root, self._up.get(name, name)
        return root

    def join(self, child: str, parent: str) -> bool:
        """Put ``child``'s tree under ``parent``'s; False (nothing joined) when they are one tree
        already, which for a child without a parent means the link would close a loop."""
        a, b = self._find(child), self._find(parent)
        if a == b:
            return False
        self._up[a] = b
        return True


def depth(uplinks: Uplinks) -> int:
    """The most switches on one path up through ``uplinks`` (switch -> parent; a host's entry counts
    as one more hop), in time linear in the map: each name's height is worked out once. A loop
    counts its switches once."""
    height: dict[str, int] = {}
    for start in uplinks:
        path: list[str] = []
        on_path: set[str] = set()
        cur: str | None = start
        while cur is not None and cur not in height and cur not in on_path:
            path.append(cur)
            on_path.add(cur)
            cur = uplinks.get(cur)
        above = height.get(cur, 0) if cur is not None else 0
        for name in reversed(path):
            above += 1
            height[name] = above
    return max(height.values(), default=0)


def _check_prefixes(topo: Topology, node_line: dict[str, int]) -> None:
    """Flag node names whose prefix is a truncated form of a common one (``n019`` among ``circe-n0NN``)."""
    by_prefix: dict[str, list[str]] = {}
    for n in topo.node_leaf:
        if m := _PREFIX.match(n):
            by_prefix.setdefault(m.group(1), []).append(n)
    prefixes = Counter({p: len(ns) for p, ns in by_prefix.items()})
    longer_of: dict[str, list[str]] = {}  # a prefix -> the longer prefixes that end with it
    for p in prefixes:
        for i in range(1, len(p) + 1):  # every proper suffix, the empty one too
            if p[i:] in prefixes:
                longer_of.setdefault(p[i:], []).append(p)
    for short, count in prefixes.items():
        longer = [p for p in longer_of.get(short, []) if prefixes[p] > count]
        if not longer:
            continue
        best = max(longer, key=lambda p: prefixes[p])
        nodes = by_prefix[short]
        line = min(node_line[n] for n in nodes)
        shown = ", ".join(nodes[:4]) + (" ..." if len(nodes) > 4 else "")
        _warn(topo, line, f"{shown}: prefix {short!r} looks truncated ({prefixes[best]} nodes use {best!r}); "
              "these nodes will match no host")


def parse_topology(text: str, source: str = "<topology>") -> Topology:
    """A topology from text in any accepted form (module docstring): Slurm when the text has
    ``SwitchName=`` or ``BlockName=``, JSON when it starts with ``{``, else TOML.

    Raises TopologyError when the text is none of them or its table does not map switches to hosts.
    """
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise TopologyError(f"{source}: not valid JSON: {exc}") from None
        except RecursionError:
            raise TopologyError(f"{source}: not valid JSON: nested too deeply") from None
        return _from_table(data, source)
    if _SLURM.search(text):
        return parse_slurm_topology(text, source)
    where = f"{source}: neither JSON, TOML nor Slurm topology.conf"
    return _from_table(parse_toml(text, where, TopologyError), source)



def _from_table(data: Any, source: str) -> Topology:
    """``{"switches": {leaf: [hosts] | "hostlist"}}`` (or the table at the top level): leaves only."""
    table = data.get("switches", data) if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise TopologyError(f"{source}: expected a table of switch -> list of hosts")
    topo = Topology(source=source)
    for name, hosts in table.items():
        if isinstance(hosts, str):
            try:
                hosts = expand_hostlist(hosts)
            except ValueError as exc:
                raise TopologyError(f"{source}: switch {name!r}: {exc}") from None
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise TopologyError(f"{source}: switch {name!r} must list host names")
        _check_name(str(name), f"{source}: switch")
        for h in hosts:
            _check_name(h, f"{source}: switch {name!r}")
        sw = topo.switches.setdefault(str(name), Switch(name=str(name)))
        for h in hosts:
            if h in topo.node_leaf and topo.node_leaf[h] != sw.name:
                _warn(topo, 0, f"node {h} is under {topo.node_leaf[h]} and again under {sw.name}; "
                      f"keeping {topo.node_leaf[h]}")
                continue
            topo.node_leaf[h] = sw.name
            sw.nodes.append(h)
    return topo


def load_topology(path: str | Path) -> Topology:
    """Read a topology file in any accepted form; a missing, unreadable or malformed file is a
    TopologyError (a UsageError: one line, exit 2), and so is one that places no host (empty, only
    comments, switches without nodes): given to a report it would replace the run's own topology
    with nothing, every pair's hop class unknown ("slow with 0 of 15 partners")."""
    p = Path(path)
    topo = parse_topology(read_user_text(p, "topology file", TopologyError), str(p))
    if not topo.node_leaf:
        what = "is empty: it" if not topo.switches else f"lists {len(topo.switches)} switch(es) but"
        raise TopologyError(f"{p}: the topology file {what} places no host under a switch")
    return topo


def require_placed(uplinks: Uplinks, hosts: Iterable[str], source: str) -> None:
    """TopologyError when ``uplinks`` place none of ``hosts`` (when there are hosts): a topology of
    other hosts (another cluster's file, names spelt otherwise) would judge every pair as hop class
    unknown and, given to a report, replace the topology the run was measured with."""
    names = list(hosts)
    if not names or any(leaf_of(h, uplinks) is not None for h in names):
        return
    shown = ", ".join(names[:UNPLACED_SHOWN]) + (" ..." if len(names) > UNPLACED_SHOWN else "")
    raise TopologyError(f"{source} places none of the run's {len(names)} host(s) ({shown})")
