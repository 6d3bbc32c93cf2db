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
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from netbench.common.errors import UsageError

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

    def __post_init__(self) -> None:
        if self.nodes < 2:
            raise UsageError("--nodes must be at least 2")
        if not 1 <= self.leaves <= self.nodes:
            raise UsageError(f"--leaves must be between 1 and --nodes ({self.nodes})")
        if self.tiers not in (2, 3):
            raise UsageError("--tiers must be 2 or 3")
        if self.tiers == 3 and not 1 <= self.pods <= self.leaves:
            raise UsageError(f"--pods must be between 1 and --leaves ({self.leaves})")
        if self.oversubscription < 1 or self.core_oversubscription < 1:
            raise UsageError("oversubscription must be >= 1 (1 = non-blocking)")
        if self.rails < 1:
            raise UsageError("--rails must be at least 1")
        if self.physics not in ("bottleneck", "multiplicative"):
            raise UsageError("--physics must be bottleneck or multiplicative")


@dataclass
class Fabric:
    """A built fabric: hosts, switches, resources and their capacities, and the faults on them."""

    spec: FabricSpec
    hosts: list[str]
    leaf: dict[str, str]  # host -> leaf
    parent: dict[str, str]  # switch -> parent switch
    faults: tuple[Fault, ...] = ()
    _res: dict[str, int] = field(default_factory=dict)
    _cap: list[float] = field(default_factory=list)
    _paths: dict[tuple[str, str], list[str]] = field(default_factory=dict)

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
        fab = cls(spec, hosts, leaf, parent, tuple(faults))
        fab._check_faults()
        per_leaf = {lf: sum(1 for h in hosts if leaf[h] == lf) for lf in leaves}
        for h in hosts:
            fab._add(f"nic:{h}", spec.nic_GBps)
        for lf in leaves:  # an uplink carries what its hosts can send, divided by the oversubscription
            fab._add(f"up:{lf}", per_leaf[lf] * spec.nic_GBps / spec.oversubscription)
        if spec.tiers == 3:
            for pod in sorted({parent[lf] for lf in leaves}):
                below = sum(fab.capacity(f"up:{lf}") for lf in leaves if parent[lf] == pod)
                fab._add(f"up:{pod}", below / spec.core_oversubscription)
        return fab

    def _add(self, name: str, cap: float) -> None:
        self._res[name] = len(self._cap)
        self._cap.append(cap)

    def capacity(self, name: str) -> float:
        return self._cap[self._res[name]]

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

    def path_uplinks(self, a: str, b: str) -> list[str]:
        """The switches whose uplink a flow between ``a`` and ``b`` crosses (both sides)."""
        key = (self.leaf[a], self.leaf[b])  # hosts of one leaf share every path: cache per leaf pair
        if key not in self._paths:
            self._paths[key] = self._path_uplinks(a, b)
        return self._paths[key]

    def _path_uplinks(self, a: str, b: str) -> list[str]:
        pa, pb = self._path(a), self._path(b)
        common = next(sw for sw in pa if sw in pb)
        return pa[: pa.index(common)] + pb[: pb.index(common)]

    def _path(self, host: str) -> list[str]:
        out = [self.leaf[host]]
        while out[-1] in self.parent:
            out.append(self.parent[out[-1]])
        return out

    def factor(self, kind: str, subject: str, slow_now: frozenset[str] = frozenset()) -> float:
        """The product of the factors of the faults on one part; ``slow_now``: intermittent nodes
        that are slow in the round being simulated."""
        out = 1.0
        for f in self.faults:
            if f.subject != subject:
                continue
            if f.kind == kind or (kind == "node" and f.kind == "intermittent" and subject in slow_now):
                out *= f.factor
        return out

    def rates(
        self, flows: Sequence[tuple[str, str]], slow_now: frozenset[str] = frozenset(), faults: bool = True
    ) -> np.ndarray:
        """Rate (GB/s busbw) of each flow when all of them run at once; ``faults=False``: the same
        flows on the healthy fabric (what truth.json compares against)."""
        if not flows:
            return np.zeros(0)
        fab = self
        if not faults:
            fab = Fabric(self.spec, self.hosts, self.leaf, self.parent, (), self._res, self._cap, self._paths)
        if self.spec.physics == "multiplicative":
            return np.array([fab._product_rate(a, b, slow_now) for a, b in flows])
        return fab._max_min(flows, slow_now)

    def _product_rate(self, a: str, b: str, slow_now: frozenset[str]) -> float:
        s = self.spec
        rate = s.nic_GBps * self.factor("node", a, slow_now) * self.factor("node", b, slow_now)
        rate *= self.factor("link", "|".join(sorted((a, b))))
        for sw in self.path_uplinks(a, b):
            tier_cost = s.oversubscription if sw in self.leaf.values() else s.core_oversubscription
            rate *= self.factor("uplink", sw) / tier_cost ** 0.5  # two uplinks per tier crossed
        return rate

    def _max_min(self, flows: Sequence[tuple[str, str]], slow_now: frozenset[str]) -> np.ndarray:
        """Progressive filling: raise every unfrozen flow's rate together until a resource is full,
        freeze the flows through it, repeat. Each flow: its two NICs, the uplinks on its path and
        its own path (a bad cable between two hosts slows only their flow)."""
        cap = list(self._cap)
        res_of: list[list[int]] = []
        for a, b in flows:
            idx = []
            for h in (a, b):
                k = self._res[f"nic:{h}"]
                cap[k] = self._cap[k] * self.factor("node", h, slow_now)
                idx.append(k)
            for sw in self.path_uplinks(a, b):
                k = self._res[f"up:{sw}"]
                cap[k] = self._cap[k] * self.factor("uplink", sw)
                idx.append(k)
            link = self.factor("link", "|".join(sorted((a, b))))
            if link < 1:  # a private resource: the cable only this pair uses
                cap.append(link * self.spec.nic_GBps)
                idx.append(len(cap) - 1)
            res_of.append(idx)
        width = max(len(r) for r in res_of)
        pad = len(cap)  # a resource of infinite capacity fills the ragged rows
        res = np.array([r + [pad] * (width - len(r)) for r in res_of])
        left = np.array([*cap, np.inf])
        rate = np.zeros(len(flows))
        active = np.ones(len(flows), dtype=bool)
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
