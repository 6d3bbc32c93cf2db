"""What the ranks are asked to do: a plan of phases, each a set of groups that run at once.

The coordinator builds a ``WorkerPlan`` and hands it to every rank through the rendezvous store;
ranks only execute it. A phase is a world sweep, one round of pairwise tests, or the intra-node
groups; its groups run concurrently and the coordinator releases the next phase only when the
current one has finished (or timed out), so "the pairs of a round run at the same time" holds.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from netbench.collectives.dtypes import GLOO_UNSUPPORTED, get_dtype, get_op
from netbench.collectives.ops import get_collective

# how the timed operations are issued (collectives.native.engines_for decides on each rank)
ENGINES = ("auto", "nccl", "torch", "both")


@dataclass
class SweepSpec:
    """The sweep every group of a phase runs (nccl-tests' -b/-e/-f/-n/-w/-d/-o/-c/-G)."""

    collectives: list[str]
    sizes: list[int]
    iters: int = 20
    warmup: int = 5
    dtype: str = "float"
    op: str = "sum"
    check: bool = True
    in_place: list[bool] = field(default_factory=lambda: [False, True])
    root: int = 0
    cuda_graph: bool = False
    engine: str = "auto"  # auto | nccl | torch | both (collectives.native.engines_for)

    def __post_init__(self) -> None:
        self.collectives = [get_collective(c).name for c in self.collectives]
        self.dtype = get_dtype(self.dtype).name
        self.op = get_op(self.op)
        if not self.collectives:
            raise ValueError("no collective selected")
        if not self.sizes:
            raise ValueError("no message size selected")
        if self.iters < 1:
            raise ValueError(f"iters must be >= 1, got {self.iters}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; choose from {', '.join(ENGINES)}")

    def validate_for(self, backend: str) -> None:
        if backend == "gloo" and self.dtype in GLOO_UNSUPPORTED:
            raise ValueError(f"dtype {self.dtype} is not supported by gloo")
        if backend == "gloo" and self.cuda_graph:
            raise ValueError("--cuda-graph needs GPUs (NCCL)")
        if backend == "gloo" and self.engine in ("nccl", "both"):
            raise ValueError(f"--engine {self.engine} needs GPUs (NCCL); gloo runs through torch")


@dataclass
class GroupSpec:
    """A set of global ranks that measure together. ``id`` is unique within the plan."""

    id: str
    pattern: str  # world | ring | pair | rail | intra
    ranks: list[int]
    hosts: list[str]
    round: int | None = None
    rail: int | None = None  # pattern rail: the local rank of both members (GPU k, NIC k)
    load: int | None = None
    """A pair's load: the most pairs of its round through one uplink on its path (0 within a leaf;
    ``common.topology.round_load``, the count the pair model compares pairs under). None: the
    topology does not place both hosts, or not a pair."""


@dataclass
class Phase:
    index: int
    name: str  # "ring", "pairwise round 3", ...
    groups: list[GroupSpec]
    spec: SweepSpec


@dataclass
class WorkerPlan:
    run_id: str
    backend: str  # gloo | nccl
    device: str  # cpu | cuda
    world_size: int
    phases: list[Phase]
    op_timeout_s: float = 60.0  # a single collective (or group set-up) taking longer has failed
    rank_hosts: list[str] = field(default_factory=list)  # host of each global rank
    rail_ifaces: list[str | None] = field(default_factory=list)
    """Per global rank: the interface its gloo rail groups bind (its rail's NIC), None or absent:
    the address that routes to the store, as every other group."""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerPlan:
        d: dict[str, Any] = json.loads(text)
        phases = []
        for p in d.pop("phases"):
            spec = SweepSpec(**p.pop("spec"))
            groups = [GroupSpec(**g) for g in p.pop("groups")]
            phases.append(Phase(groups=groups, spec=spec, **p))
        return cls(phases=phases, **d)
