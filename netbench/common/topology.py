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

Uplinks: what the rest of netbench passes around (and run.json records as ``topology``) is one flat
map ``name -> the switch it hangs off``: every host to its leaf, every switch to its parent. Hosts
placed only by ``switch=`` labels or discovered neighbours have a leaf without a parent.

Hop classes (the tier of the lowest switch two hosts share; users write these words in policy files,
``hop_class = "spine"``, and findings show them):

* ``intra``   the same host;
* ``leaf``    the same leaf switch (or Slurm block);
* ``spine``   through the leaves' parent (tier 2);
* ``core``    through a third-tier switch;
* ``tier-N``  through a switch N >= 4 tiers above the hosts;
* ``unknown`` either host is not placed.

A switch's tier counts from the hosts: its leaf is tier 1, the leaf's parent tier 2, and so on;
in an unbalanced tree the longer of the two paths counts. Two hosts whose switches share no listed
ancestor (two leaves of a flat map, or two root switches) are taken to meet one tier above the
highest switch listed for either, since the fabric that joins them is not in the file: two leaves
without parents meet at ``spine``, as the two-tier vocabulary always said.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from netbench.common.errors import UsageError
from netbench.common.files import parse_toml, read_user_text
from netbench.common.hostlist import expand_hostlist
from netbench.common.hosts import validate_hostname

INTRA, LEAF, SPINE, CORE, UNKNOWN = "intra", "leaf", "spine", "core", "unknown"
MAX_TIERS = 64
"""The deepest tree a topology may describe: real fabrics have 2 to 4 tiers; a file deeper than this
is a mistake or an attack (each pair's path is walked), refused with exit 2."""
UNPLACED_SHOWN = 5  # hosts named in the warning about hosts the topology does not place
HOP_CLASSES = (INTRA, LEAF, SPINE, CORE, UNKNOWN)
"""The hop classes with a name (``tier-N`` for N >= 4 besides): what a policy's ``hop_class`` says."""
_TIER_NAMES = {1: LEAF, 2: SPINE, 3: CORE}
_DEEP = re.compile(r"tier-(\d+)")
_KNOWN_KEYS = {"switchname", "nodes", "switches", "linkspeed", "blockname", "blocksizes"}
# keys only ``scontrol show topology`` prints (Level of a switch; the block plugin's index and size)
_SHOW_KEYS = {"level", "blockindex", "blocksize"}
_PREFIX = re.compile(r"^(.*?)\d+$")
_SLURM = re.compile(r"(?im)^\s*(switchname|blockname)=")  # Slurm keys are case-insensitive

Uplinks = Mapping[str, str]
"""host -> its leaf switch, switch -> its parent switch (see the module docstring)."""


class TopologyError(UsageError):
    """A topology file that cannot be used at all (missing, unreadable, not a topology)."""


def tier_name(tier: int) -> str:
    """The hop class of a pair whose lowest common switch is ``tier`` tiers above the hosts."""
    if tier < 1:
        raise ValueError(f"tier must be >= 1, got {tier}")
    return _TIER_NAMES.get(tier, f"tier-{tier}")


def is_hop_class(word: str) -> bool:
    """Whether ``word`` is a hop class of the vocabulary (``tier-N`` only for N >= 4: lower tiers
    have names, and one tier must not have two spellings)."""
    if word in (INTRA, UNKNOWN) or word in _TIER_NAMES.values():
        return True
    m = _DEEP.fullmatch(word)
    return bool(m) and int(m.group(1)) > max(_TIER_NAMES)


def _lookup(name: str, uplinks: Uplinks) -> str | None:
    """The key ``name`` is known by: itself, else its short name (hosts files often use FQDNs,
    topology files short names)."""
    if name in uplinks:
        return name
    short = name.split(".", 1)[0]
    return short if short in uplinks else None


def leaf_of(host: str, uplinks: Uplinks) -> str | None:
    """The switch the host hangs off; None if it is not placed."""
    key = _lookup(host, uplinks)
    return uplinks[key] if key is not None else None


def switch_path(host: str, uplinks: Uplinks) -> list[str]:
    """The host's switches from its leaf up to the highest one listed (stops on a loop)."""
    out: list[str] = []
    cur = leaf_of(host, uplinks)
    while cur is not None and cur not in out:
        out.append(cur)
        cur = uplinks.get(cur)
    return out


def meeting_tier(path_a: list[str], path_b: list[str]) -> int:
    """Tier of the lowest switch two leaf-to-top paths share (module docstring: unbalanced trees,
    no common switch)."""
    on_b = {sw: i for i, sw in enumerate(path_b)}
    for i, sw in enumerate(path_a):
        if sw in on_b:
            return max(i, on_b[sw]) + 1
    return max(len(path_a), len(path_b)) + 1


def crossed_uplinks(path_a: list[str], path_b: list[str]) -> list[str]:
    """The switches whose uplink a pair between two leaf-to-top paths goes through: those below the
    lowest switch both paths share, on both sides (every switch of both when they share none: the
    fabric that joins them is above them all). Empty for two hosts of one leaf."""
    common = next((sw for sw in path_a if sw in path_b), None)
    if common is None:
        return path_a + path_b
    return path_a[: path_a.index(common)] + path_b[: path_b.index(common)]


def round_load(pairs: Iterable[tuple[str, str]], uplinks: Uplinks) -> dict[tuple[str, str], int]:
    """Per pair of one round (pairs that run at the same time): the most pairs of that round that
    go through one uplink on its path, the "flows per uplink in their round" the pair model compares
    pairs under (``reports.pairmodel``). 0 within a leaf and for a host the topology does not place.
    Many rounds of one fabric: ``RoundLoad(uplinks)`` once, then call it per round."""
    return RoundLoad(uplinks)(pairs)


class RoundLoad:
    """``round_load`` for many rounds of one fabric: each host's leaf and the uplinks between two
    leaves are worked out once (a 4,096-node plan has 8M pairs), and a round is counted per pair of
    leaves (hosts of one leaf share every path), with numpy (``indexed``: a round as host positions,
    ``collectives.pairs.IndexedRound``)."""

    def __init__(self, uplinks: Uplinks) -> None:
        self.uplinks = uplinks
        self._leaf_id: dict[str | None, int] = {}
        self._switch_id: dict[str, int] = {}
        self._row: dict[int, int] = {}  # leaf pair key -> its row of _matrix
        # per leaf pair: the ids of the switches whose uplinks it crosses, -1 past the row's end
        self._matrix = np.zeros((0, 0), dtype=np.int64)

    def leaves(self, hosts: Sequence[str]) -> np.ndarray:
        """Each host's leaf as an id for ``indexed`` (one id for every host the topology does not place)."""
        ids = self._leaf_id
        return np.array([ids.setdefault(leaf_of(h, self.uplinks), len(ids)) for h in hosts], dtype=np.int64)

    def indexed(self, leaves: np.ndarray, index: np.ndarray, rounds: np.ndarray | None = None) -> np.ndarray:
        """``round_load`` of one round: ``index[i]`` the positions of pair i's hosts in the list
        ``leaves`` was made from. One load per pair. ``rounds``: each pair's round, to count many
        rounds at once (each its own round_load; a pair listed twice in a round counts twice)."""
        if len(index) == 0:
            return np.zeros(0, dtype=np.int64)
        key = leaves[index[:, 0]] * _LEAF_KEY + leaves[index[:, 1]]
        keys, pair_leaves = np.unique(key, return_inverse=True)
        up = self._crossed(keys.tolist())  # (leaf pairs, switches) ids, -1 past a row's end
        if up.shape[1] == 0:
            return np.zeros(len(index), dtype=np.int64)
        n_rounds, round_of = 1, np.zeros(len(index), dtype=np.int64)
        if rounds is not None:
            values, round_of = np.unique(rounds, return_inverse=True)
            n_rounds, round_of = len(values), round_of.ravel()
        # a cell: one leaf pair in one round; its pairs all cross the same uplinks
        cells, inverse, count = np.unique(round_of * len(keys) + pair_leaves.ravel(),
                                          return_inverse=True, return_counts=True)
        n_sw = len(self._switch_id)
        cell_up = up[cells % len(keys)]
        on = cell_up >= 0
        slot = np.where(on, (cells // len(keys))[:, None] * n_sw + cell_up, 0)  # (round, uplink)
        through = np.bincount(slot[on], weights=np.broadcast_to(count[:, None], cell_up.shape)[on],
                              minlength=n_rounds * n_sw)
        load = np.where(on, through[slot], 0).max(axis=1)
        return load.astype(np.int64)[inverse.ravel()]

    def tiers(self, leaves: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Each pair's hop class as its tier (``tier_name``: 1 leaf, 2 spine, 3 core, ...), -1 where
        the topology does not place both hosts: ``hop_class`` worked out once per pair of leaves
        (``indexed``'s arguments)."""
        if len(index) == 0:
            return np.zeros(0, dtype=np.int8)
        keys, inverse = np.unique(leaves[index[:, 0]] * _LEAF_KEY + leaves[index[:, 1]], return_inverse=True)
        name = {i: leaf for leaf, i in self._leaf_id.items()}
        out = []
        for k in keys.tolist():
            a, b = name[k // _LEAF_KEY], name[k % _LEAF_KEY]
            out.append(-1 if a is None or b is None else meeting_tier(self._path(a), self._path(b)))
        return np.array(out, dtype=np.int8)[inverse.ravel()]

    def _crossed(self, keys: list[int]) -> np.ndarray:
        new = [k for k in keys if k not in self._row]
        if new:
            name = {i: leaf for leaf, i in self._leaf_id.items()}
            rows = []
            for k in new:
                a, b = name[k // _LEAF_KEY], name[k % _LEAF_KEY]
                crossed = [] if a is None or b is None else crossed_uplinks(self._path(a), self._path(b))
                self._row[k] = len(self._row)
                rows.append([self._switch_id.setdefault(sw, len(self._switch_id)) for sw in crossed])
            width = max(self._matrix.shape[1], *map(len, rows))
            added = np.full((len(rows), width), -1, dtype=np.int64)
            for i, r in enumerate(rows):
                added[i, : len(r)] = r
            known = np.pad(self._matrix, ((0, 0), (0, width - self._matrix.shape[1])), constant_values=-1)
            self._matrix = np.concatenate([known, added])
        return self._matrix[[self._row[k] for k in keys]]

    def _path(self, leaf: str) -> list[str]:
        out: list[str] = []
        cur: str | None = leaf
        while cur is not None and cur not in out:  # as switch_path, from the leaf
            out.append(cur)
            cur = self.uplinks.get(cur)
        return out

    def __call__(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        pairs = list(pairs)
        hosts = list({h: None for p in pairs for h in p})
        pos = {h: i for i, h in enumerate(hosts)}
        index = np.array([(pos[a], pos[b]) for a, b in pairs], dtype=np.int64).reshape(-1, 2)
        load = self.indexed(self.leaves(hosts), index)
        return {p: int(n) for p, n in zip(pairs, load.tolist(), strict=True)}


_LEAF_KEY = 1 << 32  # a pair of leaf ids as one integer: first * _LEAF_KEY + second


def hop_class(a: str, b: str, uplinks: Uplinks) -> str:
    """``intra`` | ``leaf`` | ``spine`` | ``core`` | ``tier-N`` | ``unknown`` (module docstring)."""
    if a == b:
        return INTRA
    pa, pb = switch_path(a, uplinks), switch_path(b, uplinks)
    if not pa or not pb:
        return UNKNOWN
    return tier_name(meeting_tier(pa, pb))


def ring_crossings(hosts: list[str], switches: Uplinks) -> tuple[int, int]:
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


def grouped_order(hosts: list[str], switches: Uplinks) -> list[str]:
    """The same hosts ordered leaf by leaf (stable within a leaf): the order that crosses least."""
    first_seen: dict[str, int] = {}
    for h in hosts:
        first_seen.setdefault(switches.get(h, "?"), len(first_seen))
    return sorted(hosts, key=lambda h: first_seen[switches.get(h, "?")])


def switch_from_inventory(node: Mapping[str, Any]) -> str | None:
    """A node's leaf from its ``switch=`` label or discovered neighbours (an inventory.jsonl record).

    InfiniBand discovery wins over LLDP, since LLDP often only sees the management network.
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
    return "+".join(sorted({str(n["switch"]) for n in use}))


def build_switch_map(
    inventory: Iterable[Mapping[str, Any]], topology: Uplinks | None = None, hosts: Iterable[str] = ()
) -> dict[str, str]:
    """Uplinks for every host we can place. Strongest source last: discovered neighbours and
    ``switch=`` labels of the inventory, then a topology (file or run.json), which also brings the
    switches' parents. ``hosts`` (names as the run spells them) are looked up by short name too."""
    out: dict[str, str] = {}
    for node in inventory:
        sw = switch_from_inventory(node)
        if sw and node.get("host"):
            out[node["host"]] = sw
    if topology:
        out.update(topology)
        for h in hosts:
            leaf = leaf_of(h, topology)
            if leaf is not None:
                out[h] = leaf
    return out


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
        _check_name(name, f"{source}:{lineno}: {'BlockName' if kind == 'block' else 'SwitchName'}=")
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
        if "switches" in fields:
            for child in _expand(topo, fields["switches"], lineno, "Switches"):
                child_refs.append((name, child, lineno))
        if "nodes" not in fields and "switches" not in fields:
            _warn(topo, lineno, f"{kind} {name} has neither Nodes= nor Switches=")
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
    deepest = depth({s.name: s.parent for s in topo.switches.values() if s.parent is not None})
    if deepest > MAX_TIERS:
        raise TopologyError(f"{source}: switches {deepest} tiers deep; netbench takes at most {MAX_TIERS} "
                            "(real fabrics have 2 to 4)")
    _check_prefixes(topo, node_line)
    if topo.kind == "tree" and len(topo.roots) > 1 and any(s.children for s in topo.switches.values()):
        _warn(topo, 0, f"{len(topo.roots)} top-level switches ({', '.join(topo.roots)}): hosts under "
              "different roots have no common switch")
    return topo


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
    TopologyError (a UsageError: one line, exit 2)."""
    p = Path(path)
    return parse_topology(read_user_text(p, "topology file", TopologyError), str(p))
