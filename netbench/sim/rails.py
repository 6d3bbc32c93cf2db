"""A rail-optimised fabric: every node has R NICs, NIC k of every node on rail k's own switches.

The fabric is R planes, each a ``fabric.Fabric`` of the same shape whose switches carry the rail's
prefix (``r2-leaf01``): plane k holds NIC k of every host (``nic_GBps / R`` each), rail k's leaves
(one per group of nodes, the "scalable unit" a plain fat tree calls a leaf) and their uplinks. A
flow on rail k shares only plane k's resources, so rails share nothing with each other.

Two ways to measure, the data a rail pattern of the planner can use:
- ``rates``: pairs measured all rails at once (NCCL spreads a pair's traffic over every rail): each
  pair is R flows, one per plane, and runs at the sum of its rails' rates;
- ``rail_rates``: flows on one rail only (``rail_of``/``rail_switches`` name the switches).

Faults: ``node:X=F`` caps every NIC of X, ``link:A,B=F`` the pair's path on every rail,
``intermittent:X`` every NIC in the rounds it is slow, ``uplink:r2-leaf01=F`` one rail switch's
uplink, ``nic:X/2=F`` NIC 2 of X alone (rails count from 1). ``uplinks()`` is the unit view (host ->
``leaf01``, leaf -> spine/pod), the same hop classes on every rail, which run.json records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from netbench.common.errors import UsageError
from netbench.sim.fabric import Fabric, FabricSpec, Fault


def rail_prefix(rail: int) -> str:
    return f"r{rail}-"


@dataclass
class RailFabric:
    spec: FabricSpec
    planes: list[Fabric]
    """planes[k - 1]: rail k."""
    unit: Fabric
    """The fabric's shape without rails: host and switch names for the report's hop classes."""
    faults: tuple[Fault, ...]

    @classmethod
    def build(cls, spec: FabricSpec, faults: Sequence[Fault] = ()) -> RailFabric:
        rails = spec.rails
        plane_spec = replace(spec, rails=1, nic_GBps=spec.nic_GBps / rails)
        unit = Fabric.build(replace(spec, rails=1))
        per_rail: list[list[Fault]] = [[] for _ in range(rails)]
        for f in faults:
            if f.kind == "nic":
                host, _, rail = f.subject.partition("/")
                if host not in unit.leaf or not rail.isdigit() or not 1 <= int(rail) <= rails:
                    raise UsageError(f"--fault nic:{f.subject}: expected HOST/RAIL, a host of this fabric "
                                     f"and a rail 1..{rails}")
                per_rail[int(rail) - 1].append(replace(f, kind="node", subject=host))
            elif f.kind == "uplink":
                rail = next((k for k in range(1, rails + 1) if f.subject.startswith(rail_prefix(k))), None)
                if rail is None:
                    raise UsageError(f"--fault uplink:{f.subject}: name a rail switch, e.g. "
                                     f"{rail_prefix(1)}leaf01")
                per_rail[rail - 1].append(f)
            else:  # the node, its path or its GPU: every rail
                for lst in per_rail:
                    lst.append(f)
        planes = [Fabric.build(plane_spec, per_rail[k], prefix=rail_prefix(k + 1)) for k in range(rails)]
        return cls(spec, planes, unit, tuple(faults))

    @property
    def hosts(self) -> list[str]:
        return self.unit.hosts

    @property
    def leaf(self) -> dict[str, str]:
        return self.unit.leaf

    def uplinks(self) -> dict[str, str]:
        return self.unit.uplinks()

    def rail_switches(self, host: str) -> list[str]:
        """The leaf of each of ``host``'s NICs, rail 1 first."""
        return [p.leaf[host] for p in self.planes]

    def path_uplinks(self, a: str, b: str) -> list[str]:
        """The rail switches whose uplinks an all-rails pair crosses, every rail."""
        return [sw for p in self.planes for sw in p.path_uplinks(a, b)]

    def rates(
        self, flows: Sequence[tuple[str, str]], slow_now: frozenset[str] = frozenset(), faults: bool = True
    ) -> np.ndarray:
        """Each pair measured on all rails at once: the sum of its rails' rates."""
        total = np.zeros(len(flows))
        for p in self.planes:
            total += p.rates(flows, slow_now, faults)
        return total

    def rail_rates(
        self, flows: Sequence[tuple[str, str]], rail: int, slow_now: frozenset[str] = frozenset()
    ) -> np.ndarray:
        """Flows on rail ``rail`` alone (1..R), all at once."""
        return self.planes[rail - 1].rates(flows, slow_now)


def build_fabric(spec: FabricSpec, faults: Sequence[Fault] = ()) -> Fabric | RailFabric:
    """The fabric ``spec`` describes: a fat tree, or its rail-optimised variant when it has rails."""
    return RailFabric.build(spec, faults) if spec.rails > 1 else Fabric.build(spec, faults)
