"""The one plan builder: options -> backend -> phases -> plan, for every launcher and for preflight.

Every path that measures comes through here: a local ``netbench sweep``, ``sweep --hosts`` (ssh or
``--launcher local``), ``netbench worker`` under torchrun/srun/mpirun, and preflight's launches. Each
caller only says what it observed (the GPUs it can see, the hosts that answered, the ranks that
joined); the decisions are made once, here:

- ``choose_backend``: NCCL when every host has a GPU its torch can use, else gloo; a request wins,
  and a host whose torch cannot use its GPUs is named as such (``HostCaps``);
- ``choose_engine``: how the timed operations are issued, one engine for the whole run: NCCL
  directly (nccl4py) only when the backend is NCCL and every host's python imports nccl4py, else
  torch; an explicit ``--engine nccl|both`` that a host cannot honour is refused before anything starts;
- ``host_slots``: how many ranks each host runs (one per GPU with NCCL);
- ``sweep_spec`` / ``pair_spec``: sizes, collectives, iterations of each kind of group;
- ``default_pair_rounds``: which pairs run together (``PAIR_SCHEDULES``: by leaf when the topology
  places every host, else the circle method);
- ``build_plan``: the phases (world, ring, pairwise rounds, rail rounds, intra groups) and their
  groups, each pair with the load of its round on its uplinks; ``rail_interfaces``: the NIC each
  rank of a rail group binds (gloo), from the inventory.

Launchers then only start processes, and ``plan.json`` in the run directory is what the ranks got.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from netbench.agents.launchers import HostSlot
from netbench.collectives.pairs import IndexedRound, circle_rounds, split_rounds, topology_rounds
from netbench.collectives.plan import (
    ENGINES,
    GroupSpec,
    PairGroups,
    PairHosts,
    Phase,
    SweepSpec,
    WorkerPlan,
)
from netbench.collectives.sizes import size_sweep
from netbench.common.errors import UsageError
from netbench.common.text import terminal_safe
from netbench.defaults import NET_DEPTH, PAIR_SIZES
from netbench.inventory.hosts import HostEntry
from netbench.inventory.topology import RoundLoad, leaf_of
from netbench.run.options import MeasureOptions, Options

if TYPE_CHECKING:
    from netbench.inventory.model import NodeInventory

GLOO_DEFAULT = (8, 64 << 20)  # min, max bytes of the full sweep
NCCL_DEFAULT = (8, 8 << 30)
PATTERNS = ("world", "ring", "pairwise", "rail", "intra")
PAIR_SCHEDULES = ("auto", "circle", "topology")
"""auto: topology when the topology places every host, else circle (collectives/pairs.py)."""


# -- the backend -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HostCaps:
    """What one host offers a run, as observed before the backend is chosen: the GPUs its driver
    shows (nvidia-smi, through the inventory) and what the torch its ranks will import can do (the
    same python, asked by the inventory probe or by this process). ``None``: not known."""

    host: str
    gpus_seen: int | None = None
    """GPUs nvidia-smi lists."""
    torch: str | None = None
    """torch.__version__ of the ranks' python."""
    torch_cuda: str | None = None
    """torch.version.cuda: None for a CPU build."""
    cuda_available: bool | None = None
    """torch.cuda.is_available() there."""
    torch_gpus: int | None = None
    """GPUs that torch can use."""
    nccl4py: bool | None = None
    """Whether nccl4py's bindings import there (the NCCL engine); None: not known (not inventoried,
    an inventory from before it was asked, or a torch without CUDA, where it is never asked)."""
    nccl4py_version: str | None = None
    """The installed nccl4py, importable or not."""
    nccl4py_error: str | None = None
    """Why nccl4py is not usable there, when ``nccl4py`` is False."""

    @classmethod
    def here(cls, host: str) -> HostCaps:
        """This process's torch (the local sweep and external ranks run this python)."""
        from netbench.collectives.envinfo import capabilities

        caps = capabilities(nccl4py=True)
        asked = bool(caps["cuda_available"])  # a torch without CUDA is never asked (no NCCL engine)
        return cls(
            host,
            None,
            caps["torch"],
            caps["torch_cuda"],
            caps["cuda_available"],
            caps["gpus"],
            nccl4py=(caps["nccl4py_error"] is None) if asked else None,
            nccl4py_version=caps["nccl4py"],
            nccl4py_error=caps["nccl4py_error"],
        )

    @classmethod
    def of(cls, host: str, node: Any) -> HostCaps:
        """From a NodeInventory (None: the host was not inventoried)."""
        if node is None:
            return cls(host)
        return cls(
            host,
            len(node.gpus),
            node.torch_version,
            getattr(node, "torch_cuda_build", None),
            getattr(node, "torch_cuda_available", None),
            getattr(node, "torch_gpus", None),
            nccl4py=getattr(node, "nccl4py", None),
            nccl4py_version=getattr(node, "nccl4py_version", None),
            nccl4py_error=(getattr(node, "missing", None) or {}).get("nccl4py"),
        )

    @property
    def gpus(self) -> int | None:
        """GPUs this host can run ranks on: torch's count when torch was asked, else the driver's."""
        if self.cuda_available is not None:
            return self.torch_gpus if self.cuda_available else 0
        return self.gpus_seen


class CapabilityError(UsageError):
    """A host's software cannot do what its hardware (or the request) needs: exit 2 in a sweep,
    3 in preflight (bad environment, not a host to drain)."""


def choose_backend(requested: str | None, hosts: Sequence[HostCaps]) -> str:
    """The backend of a run, from the request and what each host can do. NCCL when every host has
    GPUs that its torch can use, as users expect; gloo otherwise. A host whose driver shows GPUs
    that its torch cannot use (a CPU build of torch on a GPU node), when NCCL is asked for or
    every host shows GPUs, is one error naming the hosts and the cause: running gloo there would
    measure the wrong thing, and NCCL would fail on every rank as if the hosts were down."""
    if requested == "gloo":
        return "gloo"
    seen = [h.gpus_seen if h.gpus_seen is not None else h.gpus for h in hosts]
    every_host_has_gpus = bool(hosts) and all(n for n in seen)
    if requested == "nccl" and hosts and all(n == 0 for n in seen):
        raise UsageError("--backend nccl needs CUDA GPUs; none are visible here")
    if requested != "nccl" and not every_host_has_gpus:
        return "gloo"
    unable = [h for h in hosts if h.cuda_available is False]
    if unable:
        first = unable[0]
        build = " (a CPU build)" if first.torch_cuda is None else ""
        shown = f"nvidia-smi shows {first.gpus_seen} GPU(s)" if first.gpus_seen else "NCCL needs CUDA"
        raise CapabilityError(
            f"host(s) {', '.join(h.host for h in unable)}: torch {terminal_safe(first.torch)}{build} "
            f"cannot use CUDA but {shown}; install a CUDA build of torch for the hosts' python, "
            "or use --backend gloo"
        )
    return "nccl"


# -- the engine -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EngineChoice:
    """The engine every group of a run times with: the plan's ``SweepSpec.engine``."""

    engine: str
    """nccl | torch | both (``collectives.native.PLAN_ENGINES``): concrete, never auto."""
    note: str | None = None
    """One line for the run's output when ``auto`` gave torch on NCCL although NCCL directly was
    wanted (some host without nccl4py, or not known to have it), naming those hosts."""


def _names(hosts: Sequence[HostCaps], limit: int = 5) -> str:
    """Hosts for a message, each with why it has no nccl4py where known: 4,096 hosts must not make
    a line of 4,096 names."""
    shown = [h.host + (f" ({terminal_safe(h.nccl4py_error)})" if h.nccl4py_error else "")
             for h in hosts[:limit]]
    more = f" and {len(hosts) - limit} more" if len(hosts) > limit else ""
    return ", ".join(shown) + more


def choose_engine(requested: str, backend: str, hosts: Sequence[HostCaps]) -> EngineChoice:
    """The engine of a run, decided once for all its hosts from the request and each host's
    inventory (``HostCaps.nccl4py``); the ranks do exactly what the plan says.

    The rule: one engine per run. gloo: torch, always (``--engine nccl|both`` is refused: gloo has
    no NCCL). NCCL: ``torch`` is torch; ``auto`` is NCCL directly when every host of the run is known
    to import nccl4py, else torch for every host, said once (``EngineChoice.note``) with the hosts
    that lack it; ``nccl`` or ``both`` is refused (``CapabilityError``, exit 2) when a host is known
    to lack nccl4py, naming the hosts, and trusted for hosts not known (no inventory), whose ranks
    then report a capability fault if they cannot. Why not per group (NCCL for the pairs that both
    have it): the pairs of a run are compared with one another, and the torch engine costs 10-20 us
    more per operation, so a run of mixed engines would show an engine as a slow link; and ``auto``
    on a rank (the old way) could time one group with two engines, or hang it."""
    if backend != "nccl":
        if requested in ("nccl", "both"):
            raise UsageError(f"--engine {requested} needs GPUs (NCCL); gloo runs through torch")
        return EngineChoice("torch")
    if requested == "torch":
        return EngineChoice("torch")
    lacking = [h for h in hosts if h.nccl4py is False]
    if requested in ("nccl", "both"):
        if lacking:
            raise CapabilityError(
                f"--engine {requested} needs nccl4py on every host; {len(lacking)} of {len(hosts)} host(s) "
                f"cannot import it: {_names(lacking)}; install it there (pip install 'netbench[nccl]') "
                "or use --engine auto (torch on every host) or --engine torch"
            )
        return EngineChoice(requested)
    unknown = [h for h in hosts if h.nccl4py is None]
    if hosts and not lacking and not unknown:
        return EngineChoice("nccl")
    if not hosts:  # nothing known (a plan built without hosts: tests, the simulator)
        return EngineChoice("torch")
    parts = []
    if lacking:
        parts.append(f"nccl4py does not import on {len(lacking)} of {len(hosts)} host(s): {_names(lacking)}")
    if unknown:
        parts.append(f"not known on {len(unknown)} host(s) (no inventory of it): {_names(unknown)}")
    return EngineChoice(
        "torch",
        "engine torch for every host (--engine auto gives NCCL directly only when every host has nccl4py): "
        + "; ".join(parts),
    )


def device_of(backend: str) -> str:
    return "cuda" if backend == "nccl" else "cpu"


def free_gpu_cap() -> int:
    """Largest size that fits every GPU, as nccl-tests caps -e, less what the harness needs besides.

    Each point holds a send and a receive buffer of up to the size, and the check's comparison makes
    a mask of one byte per element (up to the size again for int8): three buffers' worth, as nccl-tests
    reserves for its expected-result buffer. 2 GiB stay free for the CUDA context and NCCL's own
    buffers."""
    import torch

    free = min(torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count()))
    return max(1 << 20, (free - (2 << 30)) // 3)


# -- ranks per host ----------------------------------------------------------------------------------
def host_slots(
    hosts: Sequence[HostEntry], backend: str, gpus: Mapping[str, int | None], procs_per_host: int
) -> list[HostSlot]:
    """One slot per host, ranks numbered in host order. NCCL: one rank per GPU (a ``gpus=`` label
    names a subset; else the GPUs the inventory saw; else the host's ``slots`` or 1). gloo: the
    host's ``slots``, else ``procs_per_host``."""
    slots, base = [], 0
    for e in hosts:
        if backend == "nccl" and e.labels.get("gpus"):
            n = len(e.labels["gpus"].split(","))
        elif backend == "nccl":
            n = gpus.get(e.name) or e.slots or 1
        else:
            n = e.slots or procs_per_host
        slots.append(HostSlot(host=e.name, nprocs=n, rank_base=base, labels=e.labels))
        base += n
    return slots


# -- what each group measures ------------------------------------------------------------------------
@dataclass(frozen=True)
class PairRound:
    """Pairs of hosts that measure at the same time: one phase of the plan."""

    name: str  # "pairwise round 2/3", "re-test 1/2", ...
    number: int  # the rows' ``round``
    pairs: Sequence[tuple[str, str]]
    """A list, or the schedule's own ``IndexedRound``."""


@dataclass
class PlanRequest:
    """What to measure and on which groups, before any host is known: the options as the builder
    reads them. ``PlanRequest.of(options)`` is how a sweep makes one; preflight fills it directly."""

    measure: MeasureOptions
    patterns: list[str] = field(default_factory=lambda: ["world"])
    """In the order they run: world, ring, pairwise, rail, intra."""
    sizes: list[int] | None = None
    """Explicit sizes of the world/ring/intra groups; None: min..max by factor (backend defaults)."""
    size_cap: int | None = None
    """Largest size the GPUs can hold (local NCCL); the sweep stops below it."""
    pair_sizes: list[int] | None = None
    """None: PAIR_SIZES of the backend."""
    pair_collectives: list[str] | None = None
    """None: the measure's collectives."""
    pair_batch: int | None = None
    """At most this many pairs at once; None: whole circle-method rounds."""
    pair_rounds: list[PairRound] | None = None
    """Explicit rounds (preflight's chosen pairs); None: every pair of the hosts, in rounds."""
    rail_ifaces: Mapping[str, Sequence[str | None]] | None = None
    """Host -> the netdev of each rail (local rank), from the inventory (``rail_interfaces``): what
    gloo ranks of rail groups bind. None or a missing entry: the usual address."""
    pair_schedule: str = "auto"
    """Which pairs of every pair run together (``PAIR_SCHEDULES``)."""
    uplink_pairs: int | None = None
    """Topology schedule: at most this many pairs of a round through one uplink."""
    switches: Mapping[str, str] | None = None
    """The uplinks (``common.topology``): host -> leaf, switch -> parent; None: not known."""
    engine: str | None = None
    """The run's engine as ``choose_engine`` decided it for the hosts (nccl | torch | both), which
    every plan built from this request carries (re-tests and preflight's launches too). None: decided
    from the request and backend alone, no host known (auto: torch)."""

    def __post_init__(self) -> None:
        bad = [p for p in self.patterns if p not in PATTERNS]
        if bad:
            raise UsageError(f"unknown pattern {bad[0]!r}; choose from {', '.join(PATTERNS)}")
        if self.pair_schedule not in PAIR_SCHEDULES:
            raise UsageError(
                f"unknown pair schedule {self.pair_schedule!r}; choose from {', '.join(PAIR_SCHEDULES)}"
            )
        if self.engine is not None and self.engine not in ENGINES:
            raise UsageError(f"the plan's engine must be one of {', '.join(ENGINES)}, not {self.engine!r}")

    @classmethod
    def of(
        cls,
        opts: Options,
        size_cap: int | None = None,
        switches: Mapping[str, str] | None = None,
        engine: str | None = None,
    ) -> PlanRequest:
        return cls(
            measure=opts.measure,
            patterns=list(opts.pairs.patterns),
            size_cap=size_cap,
            pair_sizes=opts.pairs.pair_sizes,
            pair_collectives=opts.pairs.pair_collectives,
            pair_batch=opts.pairs.pair_batch,
            pair_schedule=opts.pairs.pair_schedule,
            uplink_pairs=opts.pairs.uplink_pairs,
            switches=switches,
            engine=engine,
        )

    def plan_engine(self, backend: str) -> str:
        """The engine the plan's phases carry (``engine``, else decided with no host known)."""
        return self.engine or choose_engine(self.measure.engine, backend, ()).engine

    def with_rails(self, nodes: Mapping[str, NodeInventory], slots: Sequence[HostSlot]) -> PlanRequest:
        """This request with each host's rail interfaces from its inventory, when rails are measured."""
        if "rail" not in self.patterns:
            return self
        return dataclasses.replace(self, rail_ifaces=rail_interfaces(nodes, slots))


def _spec(req: PlanRequest, backend: str, collectives: list[str], sizes: list[int]) -> SweepSpec:
    m = req.measure
    engine = req.plan_engine(backend)
    try:
        spec = SweepSpec(
            collectives=collectives,
            sizes=sizes,
            iters=m.iters,
            warmup=m.warmup,
            dtype=m.dtype,
            op=m.op,
            check=m.check,
            in_place=m.modes(),
            root=m.root,
            cuda_graph=m.cuda_graph,
            engine=engine,
            step_work=m.step_work,
            per_iter=m.per_iter,
            hot_buffers=m.hot_buffers,
        )
        spec.validate_for(backend)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return spec


def sweep_spec(req: PlanRequest, backend: str) -> SweepSpec:
    """The full sweep (world, ring, intra): min..max by factor, the backend's defaults where unset."""
    m = req.measure
    if req.sizes is not None:
        return _spec(req, backend, m.collectives, sorted(req.sizes))
    lo, hi = GLOO_DEFAULT if backend == "gloo" else NCCL_DEFAULT
    lo = m.min_bytes if m.min_bytes is not None else lo
    hi = m.max_bytes if m.max_bytes is not None else hi
    if m.min_bytes is not None and m.max_bytes is None and lo > hi:
        hi = lo
    if req.size_cap is not None and hi > req.size_cap:
        hi = max(lo, 1 << (req.size_cap.bit_length() - 1))
    try:
        sizes = size_sweep(lo, hi, m.factor)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if not any(sizes):
        raise UsageError("every size is 0 bytes, so nothing would be measured: give --max-bytes of 1 or more")
    return _spec(req, backend, m.collectives, sizes)


def pair_spec(req: PlanRequest, backend: str) -> SweepSpec:
    """A pair measures a few large sizes (a pair per round costs N-1 rounds, not a full sweep each).
    A size of 0 is refused: the pair model judges bandwidth, and 0 bytes have none."""
    sizes = sorted(req.pair_sizes or PAIR_SIZES[backend])
    if sizes[0] <= 0:
        raise UsageError(
            "pair sizes must be 1 byte or more: a pair measured at 0 bytes has no bandwidth to judge"
        )
    return _spec(req, backend, req.pair_collectives or req.measure.collectives, sizes)


def rail_interfaces(
    nodes: Mapping[str, NodeInventory], slots: Sequence[HostSlot]
) -> dict[str, list[str | None]]:
    """Host -> the netdev of rail k for each of its ranks (None where the inventory cannot say)."""
    from netbench.inventory.rails import rail_ports

    return {s.host: [p.netdev for p in rail_ports(nodes.get(s.host), s.nprocs)] for s in slots}


def rail_group_id(a: str, b: str, rail: int) -> str:
    return f"rail{rail}:" + "|".join(sorted((a, b)))


def default_pair_rounds(
    hosts: list[str],
    batch: int | None,
    schedule: str = "auto",
    switches: Mapping[str, str] | None = None,
    uplink_pairs: int | None = None,
) -> list[PairRound]:
    """Every pair once, in rounds of disjoint pairs: scheduled by leaf (``topology_rounds``) when
    ``schedule`` is topology, or auto and the topology places every host; else the circle method.
    ``batch``: at most that many pairs at once, whatever the schedule."""
    unplaced = [h for h in hosts if leaf_of(h, switches or {}) is None]
    if schedule == "topology" and unplaced:
        raise UsageError(
            f"--pair-schedule topology needs every host under a switch (--topology or switch= labels); "
            f"not placed: {', '.join(unplaced[:5])}{' ...' if len(unplaced) > 5 else ''}"
        )
    if uplink_pairs is not None and (schedule == "circle" or unplaced):
        raise UsageError("--uplink-pairs needs the topology schedule (every host under a switch)")
    by_leaf = schedule != "circle" and not unplaced and switches is not None
    rounds = topology_rounds(hosts, switches, uplink_pairs) if by_leaf else circle_rounds(hosts)
    if batch:
        rounds = split_rounds(rounds, batch)
    return [PairRound(f"pairwise round {i + 1}/{len(rounds)}", i + 1, rnd) for i, rnd in enumerate(rounds)]


def _positions(pairs: Sequence[tuple[str, str]], hosts: list[str], pos: Mapping[str, int]) -> np.ndarray:
    """A round's pairs as positions in ``hosts`` (a schedule of these hosts already has them)."""
    if isinstance(pairs, IndexedRound) and pairs.hosts is hosts:
        return pairs.index
    return np.array([(pos[a], pos[b]) for a, b in pairs], dtype=np.int32).reshape(-1, 2)


# -- the plan ----------------------------------------------------------------------------------------
def build_plan(req: PlanRequest, run_id: str, slots: list[HostSlot], backend: str) -> WorkerPlan:
    """The phases the ranks run, one per pattern (one per round for pairs), in the request's order.

    world: every rank in one group. ring: every host in one group, in slot order (at least 2 hosts).
    pairwise: a pair's group is every rank of both hosts. intra: the ranks of each host alone (hosts
    with one rank have no group). rail: for each pair (in the pairwise rounds), one group per local
    rank k of both hosts, all at once."""
    hosts = [s.host for s in slots]
    ranks_of = {s.host: s.ranks for s in slots}
    spec = sweep_spec(req, backend)
    phases: list[Phase] = []

    def add(name: str, groups: list[GroupSpec], spec: SweepSpec) -> None:
        if groups:
            phases.append(Phase(index=len(phases), name=name, groups=groups, spec=spec))

    every_rank = [r for h in hosts for r in ranks_of[h]]
    for pattern in req.patterns:
        if pattern == "world":
            add("world", [GroupSpec(id="world", pattern="world", ranks=every_rank, hosts=hosts)], spec)
        elif pattern == "ring" and len(hosts) >= 2:
            add("ring", [GroupSpec(id="ring", pattern="ring", ranks=every_rank, hosts=hosts)], spec)
        elif pattern == "pairwise":
            pspec = pair_spec(req, backend)
            rounds = req.pair_rounds or default_pair_rounds(
                hosts, req.pair_batch, req.pair_schedule, req.switches, req.uplink_pairs
            )
            table = PairHosts(hosts, [ranks_of[h] for h in hosts])
            pos = {h: i for i, h in enumerate(hosts)}
            # a pair's load and hop class, worked out here once from the switches that scheduled
            # the rounds and recorded in the plan (and by the coordinator in every row of the
            # pair): the analysis reads them, never works them out again (None unless the
            # topology places both hosts)
            loads = RoundLoad(req.switches) if req.switches else None
            if loads is not None:
                leaves = loads.leaves(hosts)
                placed = np.array([leaf_of(h, loads.uplinks) is not None for h in hosts])
            for rnd in rounds:
                index = _positions(rnd.pairs, hosts, pos)
                load = tier = None
                if loads is not None:
                    both = placed[index].all(axis=1)
                    load = np.where(both, loads.indexed(leaves, index), -1)
                    tier = np.where(both, loads.tiers(leaves, index), -1).astype(np.int8)
                add(rnd.name, PairGroups(rnd.number, table, index, load, tier), pspec)
        elif pattern == "rail":
            # nccl-tests' split mode: rank k of one node with rank k of the other, every rail of the
            # pair at once, so each NIC and cable carries its own rail's traffic and nothing else
            pspec = pair_spec(req, backend)
            rounds = req.pair_rounds or default_pair_rounds(  # explicit: a rail re-test's (netbench.confirm)
                hosts, req.pair_batch, req.pair_schedule, req.switches, req.uplink_pairs
            )
            for i, rnd in enumerate(rounds):
                groups = [
                    GroupSpec(
                        id=rail_group_id(a, b, k),
                        pattern="rail",
                        hosts=[a, b],
                        round=rnd.number,
                        ranks=[ranks_of[a][k], ranks_of[b][k]],
                        rail=k,
                    )
                    for a, b in rnd.pairs
                    for k in range(min(len(ranks_of[a]), len(ranks_of[b])))
                ]
                add(rnd.name if req.pair_rounds else f"rail round {i + 1}/{len(rounds)}", groups, pspec)
        elif pattern == "intra":
            groups = [
                GroupSpec(id=f"intra:{h}", pattern="intra", hosts=[h], ranks=ranks_of[h])
                for h in hosts
                if len(ranks_of[h]) > 1
            ]
            add("intra", groups, spec)
    if not phases:
        raise UsageError(
            "nothing to run: pairwise, rail and ring need at least 2 reachable hosts, "
            "intra needs several ranks per host"
        )
    return WorkerPlan(
        run_id=run_id,
        backend=backend,
        device=device_of(backend),
        world_size=sum(s.nprocs for s in slots),
        phases=phases,
        op_timeout_s=req.measure.timeout_s,
        ahead=groups_ahead(req.measure.groups_ahead, backend, phases),
        rank_hosts=[s.host for s in slots for _ in s.ranks],
        rail_ifaces=_rank_rail_ifaces(req, slots) if "rail" in req.patterns else [],
    )


def groups_ahead(requested: int | None, backend: str, phases: Sequence[Phase]) -> int:
    """How many groups each rank makes ahead of their turn (collectives/ahead.py): ``requested``,
    else ``ahead.NET_DEPTH`` when NCCL groups span hosts after the first phase (a communicator
    across nodes takes seconds to make, several rounds' worth of measuring), else none: gloo and
    one node's NCCL groups are made in milliseconds, and a lane would only compete with the
    measurement for the CPU."""
    if requested is not None:
        return requested
    spans = any(len(p.groups) and len(p.groups[0].hosts) > 1 for p in phases[1:])
    return NET_DEPTH if backend == "nccl" and spans else 0


def _rank_rail_ifaces(req: PlanRequest, slots: list[HostSlot]) -> list[str | None]:
    """Per global rank, the interface of its rail (local rank k binds rail k's netdev)."""
    known = req.rail_ifaces or {}
    out: list[str | None] = []
    for s in slots:
        ifaces = list(known.get(s.host) or [])
        out += [ifaces[k] if k < len(ifaces) else None for k in range(s.nprocs)]
    return out
