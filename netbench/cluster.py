"""``netbench sweep --hosts``: ranks on every host, every node pair in rounds, and the whole ring.

Order of work: read the hosts file, inventory every host (unreachable hosts are recorded and left out
before any rank starts), build the plan, start one agent per host over SSH, run the phases:
  ring      all hosts in one group, in the order given, over the full size range;
  pairwise  circle-method rounds (N-1 rounds of N/2 disjoint pairs at once), or ``--pair-batch K``
            pairs at a time; a pair's group is every rank of both hosts; a few large sizes;
  intra     the ranks of each host alone (needs several ranks per host).
A host that dies or hangs costs its own groups (rows with status timeout/error naming it); the sweep
goes on with the others and ends with a summary.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from netbench.collectives.pairs import batched_rounds, circle_rounds
from netbench.collectives.plan import GroupSpec, Phase, SweepSpec, WorkerPlan
from netbench.collectives.sizes import format_size
from netbench.common.errors import UsageError
from netbench.common.rundir import RunDir
from netbench.coordinator import Outcome
from netbench.launch import HostSlot
from netbench.progress import Progress
from netbench.sweep import SweepOptions, build_spec, detect_backend, execute

PATTERNS = ("ring", "pairwise", "intra")
PAIR_SIZES = {"gloo": [1 << 20, 4 << 20, 16 << 20], "nccl": [64 << 20, 256 << 20, 1 << 30]}


@dataclass
class ClusterOptions(SweepOptions):
    hosts_file: str | None = None
    ssh_config: str | None = None
    accept_new_host_keys: bool = False
    python: str | None = None
    procs_per_host: int = 1  # gloo ranks per host; NCCL: one rank per GPU
    patterns: list[str] = field(default_factory=lambda: ["ring", "pairwise"])
    pair_batch: int | None = None  # None: whole circle rounds at once
    pair_sizes: list[int] | None = None
    pair_collectives: list[str] | None = None
    topology: str | None = None
    inventory: bool = True
    concurrency: int = 64
    advertise: str | None = None  # address hosts use to reach this machine's store
    launcher: str = "ssh"  # ssh | local (every host of the file is a process group on this machine)


def pair_group_id(a: str, b: str) -> str:
    return "pair:" + "|".join(sorted((a, b)))


def build_plan(
    run_id: str,
    slots: list[HostSlot],
    opts: ClusterOptions,
    backend: str,
    device: str,
    ring_spec: SweepSpec,
    pair_spec: SweepSpec,
) -> WorkerPlan:
    hosts = [s.host for s in slots]
    ranks_of = {s.host: s.ranks for s in slots}
    phases: list[Phase] = []

    def add(name: str, groups: list[GroupSpec], spec: SweepSpec) -> None:
        if groups:
            phases.append(Phase(index=len(phases), name=name, groups=groups, spec=spec))

    for pattern in opts.patterns:
        if pattern == "ring" and len(hosts) >= 2:
            add(
                "ring",
                [
                    GroupSpec(
                        id="ring", pattern="ring", hosts=hosts, ranks=[r for h in hosts for r in ranks_of[h]]
                    )
                ],
                ring_spec,
            )
        elif pattern == "pairwise":
            rounds = batched_rounds(hosts, opts.pair_batch) if opts.pair_batch else circle_rounds(hosts)
            for i, rnd in enumerate(rounds):
                add(
                    f"pairwise round {i + 1}/{len(rounds)}",
                    [
                        GroupSpec(
                            id=pair_group_id(a, b),
                            pattern="pair",
                            hosts=[a, b],
                            round=i + 1,
                            ranks=ranks_of[a] + ranks_of[b],
                        )
                        for a, b in rnd
                    ],
                    pair_spec,
                )
        elif pattern == "intra":
            add(
                "intra",
                [
                    GroupSpec(id=f"intra:{h}", pattern="intra", hosts=[h], ranks=ranks_of[h])
                    for h in hosts
                    if len(ranks_of[h]) > 1
                ],
                ring_spec,
            )
    if not phases:
        raise UsageError(
            "nothing to run: pairwise and ring need at least 2 reachable hosts, "
            "intra needs several ranks per host"
        )
    world = sum(s.nprocs for s in slots)
    return WorkerPlan(
        run_id=run_id,
        backend=backend,
        device=device,
        world_size=world,
        phases=phases,
        op_timeout_s=opts.timeout_s,
        rank_hosts=[s.host for s in slots for _ in s.ranks],
    )


def _inventory(
    entries: list[Any], opts: ClusterOptions, ssh_opts: Any, rundir: RunDir, echo: Callable[[str], None]
) -> dict[str, Any]:
    """Inventory every host; return the records by host. Hosts that fail are reported, not fatal."""
    try:
        from netbench.inventory.collect import collect_inventory
    except ImportError:
        return {}
    nodes = collect_inventory(entries, ssh_opts, concurrency=opts.concurrency, python=opts.python)
    rundir.write_inventory(nodes)
    for n in nodes:
        if not n.ok:
            echo(f"# {n.host}: {n.status}: {n.error} (left out of the sweep)")
    return {n.host: n for n in nodes}


def host_switches(
    entries: list[Any], topology_file: str | None, echo: Callable[[str], None]
) -> dict[str, str]:
    """Uplinks (host -> leaf, switch -> parent; netbench.common.topology): a topology file wins over
    ``switch=`` labels of the hosts file. Recorded in run.json so the report can judge pairs against
    pairs of the same hop class."""
    out = {e.name: e.labels["switch"] for e in entries if e.labels.get("switch")}
    if topology_file:
        from netbench.common.topology import load_topology

        topo = load_topology(topology_file)
        for w in topo.warnings:
            echo(f"# topology warning: {w}")
        out.update(topo.uplinks(e.name for e in entries))
    return out


def run_cluster(
    opts: ClusterOptions, echo: Callable[[str], None] = print, progress: Progress | None = None
) -> tuple[RunDir, Outcome]:
    from netbench.common.hosts import parse_hosts_file
    from netbench.common.ssh import SSHOptions
    from netbench.launch.ssh import SSHLauncher

    entries = parse_hosts_file(opts.hosts_file)
    if len({e.name for e in entries}) != len(entries):
        raise UsageError("a host appears twice in the hosts file")
    bad = [p for p in opts.patterns if p not in PATTERNS]
    if bad:
        raise UsageError(f"unknown pattern {bad[0]!r}; choose from {', '.join(PATTERNS)}")
    ssh_opts = SSHOptions(ssh_config=opts.ssh_config, accept_new_host_keys=opts.accept_new_host_keys)
    rundir = RunDir.create(opts.out)
    echo(f"# netbench sweep over {len(entries)} host(s) from {opts.hosts_file}; run directory {rundir.path}")
    topology = host_switches(entries, opts.topology, echo)
    rundir.write_run(
        topology=topology, host_labels={e.name: e.labels for e in entries}, hosts_file=str(opts.hosts_file)
    )
    local = opts.launcher == "local"
    nodes = _inventory(entries, opts, ssh_opts, rundir, echo) if opts.inventory and not local else {}
    live = [e for e in entries if e.name not in nodes or nodes[e.name].ok]

    backend = opts.backend
    if backend is None and local:
        backend = detect_backend(None)[0]
    if backend is None:
        gpu_counts = [len(nodes[e.name].gpus) for e in live if e.name in nodes]
        backend = "nccl" if gpu_counts and len(gpu_counts) == len(live) and min(gpu_counts) > 0 else "gloo"
    device = "cuda" if backend == "nccl" else "cpu"
    slots, base = [], 0
    for e in live:
        if backend == "nccl" and e.labels.get("gpus"):
            n = len(e.labels["gpus"].split(","))
        elif backend == "nccl":
            n = len(nodes[e.name].gpus) if e.name in nodes else (e.slots or 1)
        else:
            n = e.slots or opts.procs_per_host
        slots.append(HostSlot(host=e.name, nprocs=n, rank_base=base, labels=e.labels))
        base += n
    ring_spec = build_spec(opts, backend, None)
    pair_opts = SweepOptions(**{f.name: getattr(opts, f.name) for f in fields(SweepOptions)})
    pair_opts.collectives = opts.pair_collectives or opts.collectives
    sizes = opts.pair_sizes or PAIR_SIZES[backend]
    pair_opts.min_bytes, pair_opts.max_bytes = min(sizes), max(sizes)
    pair_spec = build_spec(pair_opts, backend, None)
    pair_spec.sizes = sorted(sizes)
    plan = build_plan(rundir.run_id, slots, opts, backend, device, ring_spec, pair_spec)
    echo(
        f"# {len(slots)} host(s), {plan.world_size} {device} rank(s) ({backend}); phases: "
        + ", ".join(p.name for p in plan.phases[:4])
        + (" ..." if len(plan.phases) > 4 else "")
    )
    echo(
        f"# pair sizes {', '.join(format_size(s) for s in pair_spec.sizes)}; ring sizes "
        f"{format_size(ring_spec.sizes[0])}..{format_size(ring_spec.sizes[-1])}"
    )
    if local:
        from netbench.launch.local import LocalLauncher

        launcher: Any = LocalLauncher(python=opts.python)
    else:
        launcher = SSHLauncher(
            {e.name: e for e in live}, ssh_opts, python=opts.python, advertise=opts.advertise
        )
    outcome = execute(
        plan,
        slots,
        launcher,
        rundir,
        opts,
        echo,
        progress,
        fail_fast=False,
        launcher_name=opts.launcher,
        print_table=lambda row: row.get("pattern") != "pair",
    )
    outcome.down_hosts |= {e.name for e in entries if e not in live}
    print_pairs(rundir.read_rows(), echo)
    return rundir, outcome


def print_pairs(rows: list[dict[str, Any]], echo: Callable[[str], None]) -> None:
    """Pair results, slowest first: large-message busbw per pair, and the pairs that failed."""
    pairs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    failed = []
    for r in rows:
        if r.get("pattern") != "pair":
            continue
        if r.get("status") != "ok":
            failed.append(r)
            continue
        pairs.setdefault(tuple(r["hosts"]), []).append(r)
    if not pairs and not failed:
        return
    echo("#\n# pairwise: large-message busbw per pair (GB/s), slowest first")
    scored = []
    for hosts, rs in pairs.items():
        top = max(r["bytes"] for r in rs)
        sel = [r["busbw_GBps"] for r in rs if r["bytes"] == top]
        scored.append((sum(sel) / len(sel), hosts, top))
    for bw, hosts, top in sorted(scored):
        echo(f"#   {hosts[0]:>16} <-> {hosts[1]:<16} {bw:10.4f}  (at {format_size(top)})")
    for r in failed:
        echo(f"#   {' <-> '.join(r['hosts'])}: {r['status']}: {r['error']}")
    sys.stdout.flush()
