"""The physics of a simulated fat tree: who a flow shares links with, and the rate it gets.

Bottleneck physics (the default, what real fabrics do): every flow crosses a few resources (its two
NICs, the uplinks of the switches below the lowest switch both ends share, and its own path, where a
bad cable would sit); concurrent flows share each resource max-min fairly (progressive filling), so
a pair runs at its narrowest point and a capped part bottlenecks instead of multiplying. Rates are
large-message busbw in GB/s, the unit the rows report.

Multiplicative physics (what the old log-additive pair model assumes, kept to test the analysis
against both): a pair runs at the NIC rate times the factor of every part on its path, its hop class
costing 1/oversubscription per tier crossed whatever the load.

Names: hosts ``node0001``..; leaves ``leaf01``..; two tiers: every leaf under ``spine``; three tiers:
leaves under ``pod01``.. and pods under ``core``. ``uplinks()`` is the map run.json records, so the
report derives the same hop classes a real ``--topology`` would give.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from netbench.common.errors import UsageError
from netbench.defaults import SIM_MAX_NIC_GBPS, SIM_MAX_NODES, SIM_MAX_OVERSUBSCRIPTION, SIM_MAX_RAILS

FAULT_KINDS = ("node", "link", "uplink", "intermittent", "gpu", "nic")
DEFAULT_INTERMITTENT_FRACTION = 1 / 3  # slow in a third of the rounds: the case the issue describes
_FAULT = re.compile(r"^(?P<kind>[a-z]+):(?P<subject>[^=]+)=(?P<factor>[0-9.]+)(?:@(?P<fraction>[0-9.]+))?$")


@dataclass(frozen=True)
class Fault:
    """A planted fault: ``factor`` multiplies the capacity of its part (0.8 = 20% slower)."""

    kind: str  # node | link | uplink | intermittent | gpu (a GPU that drops out: no factor, rank fails) | nic
    subject: str  # a host, "a|b" (sorted) for a link, a switch for its uplink, "host/RAIL" for a nic
    factor: float
    fraction: float = 1.0  # intermittent: the share of pairwise rounds it is slow in

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``node:NAME=0.8``, ``link:A,B=0.5``, ``uplink:LEAF=0.5``, ``intermittent:NAME=0.5[@0.3]``,
        ``gpu:NAME`` (a GPU of NAME falls off the bus: the rank on it fails, nothing is slowed)."""
        if text.strip().startswith("gpu:"):
            name = text.strip()[len("gpu:") :]
            if not name or "=" in name or "," in name:
                raise UsageError(f"bad --fault {text!r}: expected gpu:NAME (a GPU of host NAME drops out)")
            return cls("gpu", name, 1.0)
        m = _FAULT.match(text.strip())
        if not m or m["kind"] not in FAULT_KINDS:
            raise UsageError(
                f"bad --fault {text!r}: expected node:NAME=F, link:A,B=F, uplink:SWITCH=F, "
                "intermittent:NAME=F[@FRACTION], gpu:NAME or nic:NAME/RAIL=F"
            )
        factor = float(m["factor"])
        if not 0 < factor <= 1:
            raise UsageError(f"bad --fault {text!r}: the factor must be in (0, 1]")
        subject = m["subject"]
        if m["kind"] == "link":
            ends = [s.strip() for s in subject.split(",")]
            if len(ends) != 2 or ends[0] == ends[1]:
                raise UsageError(f"bad --fault {text!r}: a link is two different hosts, A,B")
            subject = "|".join(sorted(ends))
        fraction = 1.0
        if m["fraction"] is not None:
            if m["kind"] != "intermittent":
                raise UsageError(f"bad --fault {text!r}: @FRACTION is for intermittent faults")
            fraction = float(m["fraction"])
        elif m["kind"] == "intermittent":
            fraction = DEFAULT_INTERMITTENT_FRACTION
        if not 0 < fraction <= 1:
            raise UsageError(f"bad --fault {text!r}: the fraction must be in (0, 1]")
        return cls(m["kind"], subject, factor, fraction)


@dataclass(frozen=True)
class FabricSpec:
    """The fabric's shape and capacities."""

    nodes: int = 16
    leaves: int = 2
    tiers: int = 2
    """2: leaves under one spine layer; 3: leaves grouped into pods, pods under a core layer."""
    pods: int = 2
    """Three tiers only: pods the leaves are split into."""
    oversubscription: float = 1.0
    """Leaf: host-facing capacity / uplink capacity (2 = a leaf's hosts get half their NIC rate
    when all of them cross the spine at once)."""
    core_oversubscription: float = 1.0
    """Three tiers: a pod's leaf-facing capacity / its uplink capacity."""
    nic_GBps: float = 180.0
    """Large-message busbw of a healthy pair on one leaf (8 GPUs a node, NCCL ring)."""
    gpus: int = 8
    physics: str = "bottleneck"  # bottleneck | multiplicative
    rails: int = 1
    """Rail-optimised (``sim.rails``): NICs a node has, NIC k on rail k's switches; ``nic_GBps`` is
    the node's total, each rail carrying an equal share."""

    MAX_NODES: ClassVar[int] = SIM_MAX_NODES
    MAX_OVERSUBSCRIPTION: ClassVar[float] = SIM_MAX_OVERSUBSCRIPTION
    MAX_NIC_GBPS: ClassVar[float] = SIM_MAX_NIC_GBPS
    MAX_RAILS: ClassVar[int] = SIM_MAX_RAILS

    def __post_init__(self) -> None:
        if not 2 <= self.nodes <= self.MAX_NODES:
            raise UsageError(f"--nodes must be between 2 and {self.MAX_NODES}")
        if not 1 <= self.leaves <= self.nodes:
            raise UsageError(f"--leaves must be between 1 and --nodes ({self.nodes})")
        if self.tiers not in (2, 3):
            raise UsageError("--tiers must be 2 or 3")
        if self.tiers == 3 and not 1 <= self.pods <= self.leaves:
            raise UsageError(f"--pods must be between 1 and --leaves ({self.leaves})")
        for over in (self.oversubscription, self.core_oversubscription):
            if not 1 <= over <= self.MAX_OVERSUBSCRIPTION:  # false for nan too
                raise UsageError(
                    f"oversubscription must be between 1 (non-blocking) and {self.MAX_OVERSUBSCRIPTION:g}"
                )
        if not 0 < self.nic_GBps <= self.MAX_NIC_GBPS:
            raise UsageError(f"--nic-gbps must be more than 0 and at most {self.MAX_NIC_GBPS:g}")
        if not 1 <= self.rails <= self.MAX_RAILS:
            raise UsageError(f"--rails must be between 1 and {self.MAX_RAILS}")
        if self.physics not in ("bottleneck", "multiplicative"):
            raise UsageError("--physics must be bottleneck or multiplicative")


@dataclass
class Fabric:
    """A built fabric: hosts, switches, resources and their capacities, and the faults on them.

    Resources are numbered: NIC i is host i's (``hosts[i]``), then each leaf's uplink, then each
    pod's (three tiers). ``flow_rates`` takes flows as host positions (numpy arrays), the form the
    simulator measures a 2,048-pair round in; ``rates`` takes a few flows by name."""

    spec: FabricSpec
    hosts: list[str]
    leaf: dict[str, str]  # host -> leaf
    parent: dict[str, str]  # switch -> parent switch
    faults: tuple[Fault, ...] = ()
    pos: dict[str, int] = field(default_factory=dict)
    """host -> its position in ``hosts``."""
    _res: dict[str, int] = field(default_factory=dict)  # nic:HOST, up:SWITCH -> resource id
    _cap: np.ndarray = field(default_factory=lambda: np.zeros(0))  # healthy capacity of each resource
    _factor: np.ndarray = field(default_factory=lambda: np.zeros(0))  # what the lasting faults leave of it
    _pod_ups: int = 0  # resource ids from here on are pods' uplinks (core tier)
    _path: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    """(hosts, tiers): the switches from each host's leaf up to the top, as switch ids."""
    _uplink: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Switch id -> the resource id of its uplink (-1: the top switch has none)."""
    _links: dict[int, float] = field(default_factory=dict)
    """Slow cables: the key of a host pair (``_pair_key``) -> the product of their factors."""

    @classmethod
    def build(cls, spec: FabricSpec, faults: Sequence[Fault] = (), prefix: str = "") -> Fabric:
        """``prefix``: before every switch name (one rail's plane of a rail-optimised fabric)."""
        width = max(4, len(str(spec.nodes)))
        hosts = [f"node{i + 1:0{width}d}" for i in range(spec.nodes)]
        leaf = {h: f"{prefix}leaf{i * spec.leaves // spec.nodes + 1:02d}" for i, h in enumerate(hosts)}
        leaves = sorted(set(leaf.values()))
        if spec.tiers == 2:
            parent = {lf: f"{prefix}spine" for lf in leaves}
        else:
            parent = {lf: f"{prefix}pod{k * spec.pods // len(leaves) + 1:02d}" for k, lf in enumerate(leaves)}
            parent |= {pod: f"{prefix}core" for pod in set(parent.values())}
        fab = cls(spec, hosts, leaf, parent, tuple(faults), {h: i for i, h in enumerate(hosts)})
        fab._check_faults()
        per_leaf = Counter(leaf.values())
        cap = [spec.nic_GBps] * len(hosts)
        fab._res = {f"nic:{h}": i for i, h in enumerate(hosts)}
        for lf in leaves:  # an uplink carries what its hosts can send, divided by the oversubscription
            fab._res[f"up:{lf}"] = len(cap)
            cap.append(per_leaf[lf] * spec.nic_GBps / spec.oversubscription)
        fab._pod_ups = len(cap)
        if spec.tiers == 3:
            for pod in sorted({parent[lf] for lf in leaves}):
                below = sum(cap[fab._res[f"up:{lf}"]] for lf in leaves if parent[lf] == pod)
                fab._res[f"up:{pod}"] = len(cap)
                cap.append(below / spec.core_oversubscription)
        fab._cap = np.array(cap)
        switches = [*leaves, *sorted(set(parent.values()) - set(leaves))]
        sw_id = {sw: k for k, sw in enumerate(switches)}
        fab._uplink = np.array([fab._res.get(f"up:{sw}", -1) for sw in switches], dtype=np.int64)
        fab._path = np.array([[sw_id[sw] for sw in fab._up_from(leaf[h])] for h in hosts], dtype=np.int64)
        fab._factor = np.ones(len(cap))
        for f in fab.faults:
            if f.kind == "node":
                fab._factor[fab._res[f"nic:{f.subject}"]] *= f.factor
            elif f.kind == "uplink" and f"up:{f.subject}" in fab._res:
                fab._factor[fab._res[f"up:{f.subject}"]] *= f.factor
            elif f.kind == "link":
                a, b = (fab.pos[h] for h in f.subject.split("|"))
                key = fab._pair_key(np.array([a]), np.array([b]))[0]
                fab._links[int(key)] = fab._links.get(int(key), 1.0) * f.factor
        return fab

    def _up_from(self, switch: str) -> list[str]:
        out = [switch]
        while out[-1] in self.parent:
            out.append(self.parent[out[-1]])
        return out

    def _check_faults(self) -> None:
        switches = set(self.parent)
        for f in self.faults:
            if f.kind == "nic":
                raise UsageError(f"--fault nic:{f.subject}: one NIC of a node needs a rail-optimised fabric "
                                 "(--rails)")
            names = f.subject.split("|") if f.kind == "link" else [f.subject]
            known = switches if f.kind == "uplink" else set(self.leaf)
            for name in names:
                if name not in known:
                    what = "switch with an uplink" if f.kind == "uplink" else "host"
                    raise UsageError(f"--fault {f.kind}:{f.subject}: no {what} {name!r} in this fabric")

    def uplinks(self) -> dict[str, str]:
        """host -> leaf and switch -> parent: the topology run.json records."""
        return dict(self.leaf) | dict(self.parent)

    def positions(self, flows: Sequence[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        """Flows by name as (first hosts, second hosts) positions."""
        index = np.array([(self.pos[a], self.pos[b]) for a, b in flows], dtype=np.int64).reshape(-1, 2)
        return index[:, 0], index[:, 1]

    def rail_of(self, local_rank: int, gpus: int) -> int:
        """The rail of GPU ``local_rank``'s NIC: one NIC, rail 1 (``RailFabric.rail_of``)."""
        return 1

    def switch_rail(self, switch: str) -> int:
        """The rail a switch is on: 1, the only one (``RailFabric.switch_rail``)."""
        return 1

    def rail_parts(self, host: str) -> None:
        """What a probe shows of a node's rails: none on this fabric (``RailFabric.rail_parts``)."""
        return None

    def crosses(self, a: np.ndarray, b: np.ndarray, switch: str) -> np.ndarray:
        """Which flows cross ``switch``'s uplink."""
        res = self._res.get(f"up:{switch}")
        if res is None:
            return np.zeros(len(a), dtype=bool)
        return (self._crossed(a, b) == res).any(axis=1)

    def _crossed(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(flows, 2 x tiers): the uplink resources each flow crosses, those of the switches below
        the lowest switch both ends share, ``a``'s side from its leaf up, then ``b``'s; -1 for none."""
        pa, pb = self._path[a], self._path[b]
        below = np.cumprod(pa != pb, axis=1).astype(bool)  # below the first switch they share
        return np.concatenate(
            [np.where(below, self._uplink[pa], -1), np.where(below, self._uplink[pb], -1)], axis=1
        )

    def _pair_key(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.minimum(a, b) * len(self.hosts) + np.maximum(a, b)

    def _factors(self, slow_now: frozenset[str], faults: bool) -> np.ndarray:
        """What the faults leave of each resource's capacity (``slow_now``: intermittent nodes slow
        in this round); all 1 for the healthy fabric."""
        if not faults:
            return np.ones(len(self._cap))
        factor = self._factor
        slow = [f for f in self.faults if f.kind == "intermittent" and f.subject in slow_now]
        if slow:
            factor = factor.copy()
            for f in slow:
                factor[self._res[f"nic:{f.subject}"]] *= f.factor
        return factor

    def _link_factor(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.ones(len(a))
        if self._links:
            key = self._pair_key(a, b)
            for k, factor in self._links.items():
                out[key == k] *= factor
        return out

    def rates(
        self, flows: Sequence[tuple[str, str]], slow_now: frozenset[str] = frozenset(), faults: bool = True
    ) -> np.ndarray:
        """``flow_rates`` of flows given by name."""
        return self.flow_rates(*self.positions(flows), slow_now, faults)

    def flow_rates(
        self,
        a: np.ndarray,
        b: np.ndarray,
        slow_now: frozenset[str] = frozenset(),
        faults: bool = True,
        rail: int | None = None,
    ) -> np.ndarray:
        """Rate (GB/s busbw) of each flow (``a[i]`` to ``b[i]``, host positions) when all of them run
        at once; ``slow_now``: intermittent nodes slow in this round; ``faults=False``: the same
        flows on the healthy fabric (what truth.json compares against). ``rail``: as a rail fabric
        takes it; this fabric has one."""
        if rail not in (None, 1):
            raise ValueError(f"a fabric without rails has no rail {rail}")
        if len(a) == 0:
            return np.zeros(0)
        factor = self._factors(slow_now, faults)
        up = self._crossed(a, b)
        link = self._link_factor(a, b) if faults else np.ones(len(a))
        if self.spec.physics == "multiplicative":
            return self._product(a, b, up, factor, link)
        return self._max_min(a, b, up, self._cap * factor, link)

    def _product(
        self, a: np.ndarray, b: np.ndarray, up: np.ndarray, factor: np.ndarray, link: np.ndarray
    ) -> np.ndarray:
        """A pair at the NIC rate times the factor of every part on its path, each uplink crossed
        costing the square root of its tier's oversubscription (two uplinks a tier)."""
        s = self.spec
        rate = s.nic_GBps * factor[a] * factor[b]
        rate *= link
        for k in range(up.shape[1]):
            r = up[:, k]
            tier_cost = np.where(r < self._pod_ups, s.oversubscription, s.core_oversubscription)
            rate *= np.where(r >= 0, factor[r] / tier_cost ** 0.5, 1.0)
        return rate

    def _max_min(
        self, a: np.ndarray, b: np.ndarray, up: np.ndarray, cap: np.ndarray, link: np.ndarray
    ) -> np.ndarray:
        """Progressive filling: raise every unfrozen flow's rate together until a resource is full,
        freeze the flows through it, repeat. Each flow: its two NICs, the uplinks on its path and
        its own path (a bad cable between two hosts slows only their flow)."""
        n = len(a)
        slow = np.flatnonzero(link < 1)  # a private resource each: the cable only this pair uses
        pad = len(cap) + len(slow)  # a resource of infinite capacity fills the unused places
        private = np.full(n, pad)
        private[slow] = len(cap) + np.arange(len(slow))
        res = np.column_stack([a, b, np.where(up >= 0, up, pad), private])
        left = np.concatenate([cap, link[slow] * self.spec.nic_GBps, [np.inf]])
        rate = np.zeros(n)
        active = np.ones(n, dtype=bool)
        while active.any():
            users = np.bincount(res[active].ravel(), minlength=len(left))
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(users > 0, left / users, np.inf)
            level = share[:pad].min()
            done = active & (share[res].min(axis=1) <= level * (1 + 1e-9))
            rate[done] = level
            np.subtract.at(left, res[done].ravel(), level)
            left[pad] = np.inf
            active &= ~done
        return rate
