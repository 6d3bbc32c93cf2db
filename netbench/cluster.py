"""``netbench sweep --hosts``: ranks on every host, every node pair in rounds, and the whole ring.

Order of work: read the hosts file, inventory every host (unreachable hosts are recorded and left out
before any rank starts), build the plan, start one agent per host over SSH, run the phases:
  ring      all hosts in one group, in the order given, over the full size range;
  pairwise  rounds of disjoint pairs (leaf against leaf when the topology places every host, else
            the circle method: planner.default_pair_rounds), or ``--pair-batch K`` pairs at a time; a
            pair's group is every rank of both hosts; a few large sizes; then the suspects of the
            analysis re-tested against known-good partners within ``--confirm-budget``;
  intra     the ranks of each host alone (needs several ranks per host).
A host that dies or hangs costs its own groups (rows with status timeout/error naming it); the sweep
goes on with the others and ends with a summary.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from netbench.collectives.sizes import format_size
from netbench.common.errors import UsageError
from netbench.common.rundir import GrowingRows, RunDir
from netbench.common.text import terminal_safe
from netbench.coordinator import Outcome
from netbench.engine import RunSettings, execute
from netbench.launch import HostSlot, Launcher
from netbench.options import ClusterOptions
from netbench.planner import (
    HostCaps,
    PlanRequest,
    build_plan,
    choose_backend,
    choose_engine,
    host_slots,
    pair_spec,
    sweep_spec,
)
from netbench.progress import Progress

if TYPE_CHECKING:
    from netbench.common.pairrows import PairRows
    from netbench.confirm import PhaseGate, PhaseList, Retested


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


def snapshot_counters(
    phase: str, entries: list[Any], ssh_opts: Any, rundir: RunDir, concurrency: int
) -> None:
    """Read every host's port counters (a second, counters-only probe pass) into counters.jsonl, so
    the report can show what the links did during the run (``phase``: before | after)."""
    from netbench.inventory.collect import snapshot_counters as snapshot

    rundir.write_counters(phase, snapshot(entries, ssh_opts, concurrency=concurrency))


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

    if local:  # every host of the file is a process group on this machine: its GPUs are what counts
        gpus: dict[str, int | None] = {}
        caps = [HostCaps.here("this machine")]
    else:
        caps = [HostCaps.of(e.name, nodes.get(e.name)) for e in live]
        gpus = {c.host: c.gpus for c in caps}
    try:
        backend = choose_backend(opts.backend, caps)
        engine = choose_engine(opts.engine, backend, caps)
    except UsageError as exc:  # the directory exists already: it says why nothing was measured
        rundir.write_run(status="failed", error=str(exc))
        raise
    slots = host_slots(live, backend, gpus, opts.procs_per_host)
    request = PlanRequest.of(opts, switches=topology, engine=engine.engine).with_rails(nodes, slots)
    plan = build_plan(request, rundir.run_id, slots, backend)
    unbound = sorted({h for h, ifaces in (request.rail_ifaces or {}).items() if None in ifaces})
    if backend == "gloo" and unbound:
        echo(f"# rail: no rail NIC known for {', '.join(unbound)} (no GPU-NIC affinity in the inventory): "
             "their gloo ranks use the address that routes here, so their rails share that interface")
    ring_spec, pair = sweep_spec(request, backend), pair_spec(request, backend)
    echo(
        f"# {len(slots)} host(s), {plan.world_size} {plan.device} rank(s) ({backend}); phases: "
        + ", ".join(p.name for p in plan.phases[:4])
        + (" ..." if len(plan.phases) > 4 else "")
    )
    if engine.note:
        echo(f"# {engine.note}")
    echo(
        f"# pair sizes {', '.join(format_size(s) for s in pair.sizes)}; ring sizes "
        f"{format_size(ring_spec.sizes[0])}..{format_size(ring_spec.sizes[-1])}"
    )
    def make_launcher(hosts: list[str]) -> Launcher:
        if local:
            from netbench.launch.local import LocalLauncher

            return LocalLauncher(python=opts.python)
        chosen = {e.name: e for e in live if e.name in hosts}
        return SSHLauncher(chosen, ssh_opts, python=opts.python, advertise=opts.advertise)

    launcher = make_launcher([e.name for e in live])
    settings = RunSettings(
        launcher_name=opts.launcher,
        options=asdict(opts),
        fail_fast=False,
        print_table=lambda row: row.get("pattern") not in ("pair", "rail"),
    )
    counters = opts.inventory and not local  # the snapshots go where the inventory went: over SSH
    if counters:
        snapshot_counters("before", live, ssh_opts, rundir, opts.concurrency)
    rows = GrowingRows(rundir)  # read once, by the confirm step and the pair table after it
    try:
        outcome = execute(plan, slots, launcher, rundir, settings, echo, progress)
        if "pairwise" in opts.patterns and opts.confirm_budget_s > 0 and outcome.status == "completed":
            launch = RetestLaunch(request, slots, backend, rundir, make_launcher, echo, progress)
            confirm(launch, outcome, opts.confirm_budget_s, opts.policy, rows)
    finally:  # an interrupted run keeps what its links did until then
        if counters:
            snapshot_counters("after", live, ssh_opts, rundir, opts.concurrency)
    outcome.down_hosts |= {e.name for e in entries if e not in live}
    print_pairs(rows(), echo)
    return rundir, outcome


@dataclass(frozen=True)
class RetestLaunch:
    """The ``Measure`` of a sweep's re-tests (``netbench.confirm``): one more launch of ranks on the
    hosts of the re-test phases, as a follow-up of the run (its run.json and plan.json stay its own,
    the rows go to its results.jsonl). ``sweep --hosts`` launches over SSH or locally, ``netbench
    simulate`` on its fabric (``make_launcher``)."""

    request: PlanRequest
    slots: list[HostSlot]
    backend: str
    rundir: RunDir
    make_launcher: Callable[[list[str]], Launcher]
    echo: Callable[[str], None]
    progress: Progress | None = None
    clock: Callable[[], float] = time.monotonic
    """The hosts' time, which the budget and the phase times are read from (a fabric's own)."""

    def __call__(self, phases: PhaseList, gate: PhaseGate) -> Outcome:
        from dataclasses import replace

        from netbench.planner import PairRound

        by_host = {s.host: s for s in self.slots}
        used = [h for h in by_host if any(h in p for _, _, pairs in phases for p in pairs)]
        base, mine = 0, []
        for h in used:  # the re-test launch numbers its own ranks
            mine.append(HostSlot(host=h, nprocs=by_host[h].nprocs, rank_base=base, labels=by_host[h].labels))
            base += by_host[h].nprocs
        req = replace(self.request, patterns=["pairwise"], pair_rounds=[PairRound(*ph) for ph in phases])

        def before(phase: Any) -> bool:
            go = gate(phase)
            self.echo(f"# {phase.name}: " + (f"{len(phase.groups)} pair(s)" if go else "no budget left"))
            return go

        launcher = self.make_launcher(used)
        settings = RunSettings(
            launcher_name=launcher.name,
            fail_fast=False,
            print_table=lambda row: False,
            before_phase=before,
            follow_up=True,
            clock=self.clock,
        )
        plan = build_plan(req, self.rundir.run_id, mine, self.backend)
        return execute(plan, mine, launcher, self.rundir, settings, self.echo, self.progress)


def confirm(
    launch: RetestLaunch, outcome: Outcome, budget_s: float, policy: str | None, read_rows: GrowingRows
) -> Retested:
    """Re-test the suspects of the pairwise phase (``outcome``: how its launch went) against
    known-good partners within ``budget_s`` (``--confirm-budget``, all of it for measuring: the report
    comes after) with ``netbench.confirm``'s loop, preflight's, and record the verdicts in run.json's
    ``retests``, which the report reads as its re-test evidence, and what ran in its ``confirm``.
    ``read_rows``: the run's rows, not read yet (its first read is the analysis' own)."""
    from netbench.common.pairrows import NO_ROUND, MetPairs
    from netbench.confirm import SWEEP_WORDS, Budget, RetestSetup, retest_suspects, unusable_hosts
    from netbench.reports.engine import load_context, run_rules

    rundir = launch.rundir
    size = rundir.results_path.stat().st_size if rundir.results_path.is_file() else -1
    ctx = load_context(rundir.path, policy=policy)  # before the budget: all of it is for measuring
    findings = run_rules(ctx)
    if size >= 0 and rundir.results_path.stat().st_size == size:  # the rows the analysis read: not again
        read_rows.start_from(ctx.rows, size)
    budget = Budget(budget_s, reserve_s=0.0, clock=launch.clock)
    rows = read_rows()
    rounds = rows.round[rows.round != NO_ROUND]
    live = [s.host for s in launch.slots]
    tested = MetPairs(live)
    tested.add_rows(rows)
    pair_s = [p["seconds"] for p in outcome.phases if str(p.get("name", "")).startswith("pairwise")]

    setup = RetestSetup(
        analyse=lambda: (ctx, findings),
        read_rows=read_rows,
        echo=launch.echo,
        live=live,
        exclude=unusable_hosts(outcome, rows) | outcome.down_hosts,
        tested=tested,
        first_round=int(rounds.max(initial=0)) + 1,
        phase_s=max(pair_s, default=1.0),
        startup_s=outcome.startup_s or 0.0,
        budget=budget,
        words=SWEEP_WORDS,
    )
    done = retest_suspects(setup, launch)
    rundir.write_run(
        retests=done.evidence.to_json(),
        confirm={
            "budget_s": budget.total_s, "seconds": round(budget.elapsed(), 3), "launches": done.launches
        },
    )
    return done


PAIRS_SHOWN = 20
"""Pairs (and failed pairs) the sweep prints at most: results.jsonl and the report have them all."""


def print_pairs(rows: PairRows, echo: Callable[[str], None]) -> None:
    """The slowest pairs at their largest size (mean busbw of its rows there) and the pairs that
    failed, PAIRS_SHOWN of each at most: a 1,024-node sweep has 523,776 pairs."""
    import numpy as np
    import pandas as pd

    if not len(rows):
        return
    ok = rows.ok & np.isfinite(rows.busbw)
    lo, hi = np.minimum(rows.a, rows.b), np.maximum(rows.a, rows.b)
    frame = pd.DataFrame({"lo": lo[ok], "hi": hi[ok], "bytes": rows.nbytes[ok], "bw": rows.busbw[ok]})
    top = frame.groupby(["lo", "hi"])["bytes"].transform("max")
    per = frame[frame["bytes"] == top].groupby(["lo", "hi"]).agg(bw=("bw", "mean"), at=("bytes", "first"))
    slowest = per.sort_values("bw", kind="stable").head(PAIRS_SHOWN)
    if len(per):
        more = f" (the {len(slowest)} slowest of {len(per)})" if len(per) > len(slowest) else ""
        echo(f"#\n# pairwise: large-message busbw per pair (GB/s), slowest first{more}")
    for (x, y), bw, at in zip(slowest.index, slowest["bw"], slowest["at"], strict=True):
        a, b = rows.names[x], rows.names[y]
        echo(terminal_safe(f"#   {a:>16} <-> {b:<16} {bw:10.4f}  (at {format_size(int(at))})"))
    for i, why in list(rows.failed.items())[:PAIRS_SHOWN]:
        echo(terminal_safe(f"#   {rows.names[rows.a[i]]} <-> {rows.names[rows.b[i]]}: {why}"))
    if len(rows.failed) > PAIRS_SHOWN:
        echo(f"#   ... and {len(rows.failed) - PAIRS_SHOWN} more failed pair measurements (results.jsonl)")
    sys.stdout.flush()
