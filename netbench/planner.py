"""The one plan builder: options -> backend -> phases -> plan, for every launcher and for preflight.

Every path that measures comes through here: a local ``netbench sweep``, ``sweep --hosts`` (ssh or
``--launcher local``), ``netbench worker`` under torchrun/srun/mpirun, and preflight's launches. Each
caller only says what it observed (the GPUs it can see, the hosts that answered, the ranks that
joined); the decisions are made once, here:

- ``choose_backend``: NCCL when every host has a GPU, else gloo; a request wins;
- ``host_slots``: how many ranks each host runs (one per GPU with NCCL);
- ``sweep_spec`` / ``pair_spec``: sizes, collectives, iterations of each kind of group;
- ``build_plan``: the phases (world, ring, pairwise rounds, intra groups) and their groups.

Launchers then only start processes, and ``plan.json`` in the run directory is what the ranks got.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from netbench.collectives.pairs import batched_rounds, circle_rounds
from netbench.collectives.plan import GroupSpec, Phase, SweepSpec, WorkerPlan
from netbench.collectives.sizes import size_sweep
from netbench.common.errors import UsageError
from netbench.common.hosts import HostEntry
from netbench.launch import HostSlot
from netbench.options import ClusterOptions, SweepOptions

GLOO_DEFAULT = (8, 64 << 20)  # min, max bytes of the full sweep
NCCL_DEFAULT = (8, 8 << 30)
PAIR_SIZES = {"gloo": [1 << 20, 4 << 20, 16 << 20], "nccl": [64 << 20, 256 << 20, 1 << 30]}
PATTERNS = ("world", "ring", "pairwise", "intra")


# -- the backend -------------------------------------------------------------------------------------
def visible_gpus() -> int:
    """CUDA GPUs this process can use (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def choose_backend(requested: str | None, gpu_counts: Sequence[int | None]) -> str:
    """The backend of a run, from the request and the GPU count of each host as the caller saw it
    (``None``: not known, e.g. no inventory). NCCL whenever every host has GPUs, as users expect;
    gloo otherwise. Asking for NCCL where every host was seen without a GPU is bad input."""
    known = [n for n in gpu_counts if n is not None]
    if requested == "nccl" and gpu_counts and len(known) == len(gpu_counts) and not any(known):
        raise UsageError("--backend nccl needs CUDA GPUs; none are visible here")
    if requested:
        return requested
    return "nccl" if gpu_counts and len(known) == len(gpu_counts) and min(known) > 0 else "gloo"


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
    pairs: list[tuple[str, str]]


@dataclass
class PlanRequest:
    """What to measure and on which groups, before any host is known: the options as the builder
    reads them. ``PlanRequest.of(options)`` is how a sweep makes one; preflight fills it directly."""

    measure: SweepOptions
    patterns: list[str] = field(default_factory=lambda: ["world"])
    """In the order they run: world, ring, pairwise, intra."""
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

    def __post_init__(self) -> None:
        bad = [p for p in self.patterns if p not in PATTERNS]
        if bad:
            raise UsageError(f"unknown pattern {bad[0]!r}; choose from {', '.join(PATTERNS)}")

    @classmethod
    def of(cls, opts: ClusterOptions, size_cap: int | None = None) -> PlanRequest:
        return cls(
            measure=opts.local(),
            patterns=list(opts.patterns),
            size_cap=size_cap,
            pair_sizes=opts.pair_sizes,
            pair_collectives=opts.pair_collectives,
            pair_batch=opts.pair_batch,
        )


def _spec(m: SweepOptions, backend: str, collectives: list[str], sizes: list[int]) -> SweepSpec:
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
            engine=m.engine,
        )
        spec.validate_for(backend)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return spec


def sweep_spec(req: PlanRequest, backend: str) -> SweepSpec:
    """The full sweep (world, ring, intra): min..max by factor, the backend's defaults where unset."""
    m = req.measure
    if req.sizes is not None:
        return _spec(m, backend, m.collectives, sorted(req.sizes))
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
    return _spec(m, backend, m.collectives, sizes)


def pair_spec(req: PlanRequest, backend: str) -> SweepSpec:
    """A pair measures a few large sizes (a pair per round costs N-1 rounds, not a full sweep each)."""
    sizes = sorted(req.pair_sizes or PAIR_SIZES[backend])
    return _spec(req.measure, backend, req.pair_collectives or req.measure.collectives, sizes)


def pair_group_id(a: str, b: str) -> str:
    return "pair:" + "|".join(sorted((a, b)))


def default_pair_rounds(hosts: list[str], batch: int | None) -> list[PairRound]:
    """Every pair once: circle-method rounds of disjoint pairs, or at most ``batch`` pairs at once."""
    rounds = batched_rounds(hosts, batch) if batch else circle_rounds(hosts)
    return [PairRound(f"pairwise round {i + 1}/{len(rounds)}", i + 1, rnd) for i, rnd in enumerate(rounds)]


# -- the plan ----------------------------------------------------------------------------------------
def build_plan(req: PlanRequest, run_id: str, slots: list[HostSlot], backend: str) -> WorkerPlan:
    """The phases the ranks run, one per pattern (one per round for pairs), in the request's order.

    world: every rank in one group. ring: every host in one group, in slot order (at least 2 hosts).
    pairwise: a pair's group is every rank of both hosts. intra: the ranks of each host alone (hosts
    with one rank have no group)."""
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
            for rnd in req.pair_rounds or default_pair_rounds(hosts, req.pair_batch):
                groups = [
                    GroupSpec(
                        id=pair_group_id(a, b),
                        pattern="pair",
                        hosts=[a, b],
                        round=rnd.number,
                        ranks=ranks_of[a] + ranks_of[b],
                    )
                    for a, b in rnd.pairs
                ]
                add(rnd.name, groups, pspec)
        elif pattern == "intra":
            groups = [
                GroupSpec(id=f"intra:{h}", pattern="intra", hosts=[h], ranks=ranks_of[h])
                for h in hosts
                if len(ranks_of[h]) > 1
            ]
            add("intra", groups, spec)
    if not phases:
        raise UsageError(
            "nothing to run: pairwise and ring need at least 2 reachable hosts, "
            "intra needs several ranks per host"
        )
    return WorkerPlan(
        run_id=run_id,
        backend=backend,
        device=device_of(backend),
        world_size=sum(s.nprocs for s in slots),
        phases=phases,
        op_timeout_s=req.measure.timeout_s,
        rank_hosts=[s.host for s in slots for _ in s.ranks],
    )
