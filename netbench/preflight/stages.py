"""Preflight's stages (inventory + policy, quick pass, escalation, report) and ``run_preflight``."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from netbench.common.hosts import HostEntry
from netbench.common.interrupts import Interrupted, StageMark, as_interrupted, on_exit_now
from netbench.confirm import (
    MAX_LAUNCHES,
    PREFLIGHT_WORDS,
    Budget,
    Pair,
    PhaseGate,
    RetestSetup,
    retest_suspects,
    unusable_hosts,
)
from netbench.defaults import PREFLIGHT_PAIR_SIZES
from netbench.inventory.model import shared_runs
from netbench.preflight.judging import quick_rounds
from netbench.preflight.options import (
    MIN_QUICK_PASS_S,
    PreflightError,
    PreflightOptions,
    PreflightResult,
    _Setup,
)
from netbench.preflight.outputs import _size, _write_report
from netbench.preflight.sequential import SequentialSetup, run_sequential
from netbench.reports.analyses import RetestEvidence
from netbench.reports.verdict import drain_and_check
from netbench.sites.base import Site, check_distinct, judged


# -- stage 1: inputs and inventory -------------------------------------------------------------------
def preflight_site(opts: PreflightOptions) -> Site:
    """Sweep's site for these hosts (``netbench.sites``): over SSH with a hosts file, else the Slurm
    allocation this runs in, over srun; PreflightError (exit 3) for what cannot run."""
    from netbench.common.errors import UsageError
    from netbench.common.slurm import Allocation
    from netbench.options import ClusterOptions
    from netbench.sites.base import SITE_OPTIONS
    from netbench.sites.registry import choose_site
    from netbench.sites.ssh import SshSite

    if opts.launcher != "k8s" and opts.hosts_file is None and Allocation.from_env() is None:
        raise PreflightError("--hosts is needed outside a Slurm allocation (inside salloc/sbatch the "
                             "allocation's nodes are checked, over srun; --launcher k8s: a cluster's nodes)")
    given = {k: getattr(opts, k) for k in SITE_OPTIONS if hasattr(opts, k) and k != "launcher"}
    where = ClusterOptions(
        launcher=opts.launcher or ("ssh" if opts.hosts_file else "slurm"), **given,
        concurrency=opts.concurrency, timeout_s=opts.timeout_s, backend=opts.backend,
    )
    try:
        site = choose_site(where)
    except UsageError as exc:
        raise PreflightError(str(exc)) from None
    if isinstance(site, SshSite):  # the probe asks python3: a torch import a host would cost the budget
        site.probe_python = False
    return site


def load_inputs(opts: PreflightOptions, site: Site) -> tuple[list[HostEntry], Any, Path | None]:
    """The site's hosts, the policy and the baseline, or PreflightError (exit 3) naming what is wrong."""
    from netbench.baselines import BaselineStore
    from netbench.common.errors import UsageError
    from netbench.reports.policy import PolicyError, load_policy

    try:
        entries = site.hosts()
        policy = load_policy(opts.policy)
        baseline = BaselineStore().resolve(opts.baseline) if opts.baseline else None
    except (UsageError, PolicyError) as exc:
        raise PreflightError(str(exc)) from None
    dup = [h for h, n in Counter(e.name for e in entries).items() if n > 1]
    if dup:
        raise PreflightError(
            f"{opts.hosts_file}: host {dup[0]} appears twice (preflight measures whole nodes: "
            "no gpus= splits)"
        )
    # A node preflight could not reach cannot be vouched for: a failure unless the policy says otherwise.
    policy.severity.setdefault("node_unreachable", "fail")
    return entries, policy, baseline


def analyse(
    rundir: Any,
    policy: Any,
    topology: dict[str, str] | None,
    baseline: Path | None = None,
    retests: RetestEvidence | None = None,
) -> tuple[Any, list[Any]]:
    """The standard analysis of the run directory as it is now, with the re-test evidence so far:
    (context, findings worst first)."""
    from netbench.reports.engine import load_context, run_rules

    ctx = load_context(rundir.path, baseline, policy, topology or None, retests)
    return ctx, run_rules(ctx)


def stage_inventory(
    entries: list[HostEntry], site: Site, rundir: Any, budget: Budget, echo: Callable[[str], None]
) -> dict[str, Any]:
    """Probe every host (the probe's timeout bounded by the budget); unreachable hosts are records."""
    from netbench.common.errors import UsageError

    timeout = max(1.0, min(60.0, budget.left()))
    nodes = site.inventory(entries, echo, timeout_s=timeout)
    rundir.write_inventory(nodes)
    down = [n for n in nodes if not n.ok]
    rundir.write_run(left_out={n.host: f"{n.status}: {n.error}" for n in down} or None)
    for n in down[:20]:
        echo(f"# {n.host}: {n.status}: {n.error}")
    for other in shared_runs(nodes):  # another netbench run on these hosts (launch/marker.py)
        echo(f"# {other.line()}")
    try:
        check_distinct(entries, nodes)  # one machine under two names: refused before any rank
    except UsageError as exc:
        rundir.write_run(status="failed", error=str(exc))
        raise PreflightError(str(exc)) from None
    if len(down) == len(nodes):
        first = down[0]
        raise PreflightError(
            f"no host could be reached or run a rank ({len(nodes)} tried; {first.host}: {first.status}: "
            f"{first.error})"
        )
    return {n.host: n for n in nodes}


def make_setup(
    opts: PreflightOptions,
    entries: dict[str, Any],
    nodes: dict[str, Any],
    live: list[str],
    site: Site,
    rundir: Any,
    echo: Callable[[str], None],
) -> _Setup:
    """Backend (NCCL when every node has GPUs), ranks per host, and the request every launch plans
    from: one collective at the pair sizes, for the pairs and the ring alike."""
    from netbench.common.errors import UsageError
    from netbench.options import SweepOptions
    from netbench.planner import PlanRequest, choose_backend, choose_engine, host_slots, sweep_spec

    caps = site.caps([entries[h] for h in live], nodes)
    gpus = {c.host: c.gpus for c in caps}
    try:
        backend = choose_backend(opts.backend, caps)
        engine = choose_engine("auto", backend, caps)  # preflight has no --engine: the run's rule
        sizes = sorted(opts.pair_sizes or PREFLIGHT_PAIR_SIZES[backend])
        measure = SweepOptions(
            collectives=[opts.collective],
            iters=opts.iters,
            warmup=opts.warmup,
            in_place="out",
            timeout_s=opts.timeout_s,
            backend=backend,
        )
        request = PlanRequest(measure=measure, sizes=sizes, pair_sizes=sizes, engine=engine.engine)
        sweep_spec(request, backend)  # bad input (a dtype gloo lacks, ...) before anything starts
    except UsageError as exc:
        raise PreflightError(str(exc)) from None
    if engine.note:
        echo(f"# {engine.note}")
    slots = host_slots([entries[h] for h in live], backend, gpus, opts.procs_per_host)
    nprocs = {s.host: s.nprocs for s in slots}
    return _Setup(opts, entries, site, rundir, backend, nprocs, request, echo)


def measure(
    setup: _Setup, pair_phases: list[tuple[str, int, list[Pair]]], ring: list[str], gate: PhaseGate
) -> Any:
    """One launch of ranks on the hosts involved: the pair phases, then the ring (if any hosts)."""
    from dataclasses import replace

    from netbench.engine import RunSettings, execute
    from netbench.launch import HostSlot
    from netbench.planner import PairRound, build_plan

    involved = {h for _, _, pairs in pair_phases for p in pairs for h in p} | set(ring)
    used = [h for h in setup.entries if h in involved]  # hosts-file order: the ring's order
    slots, base = [], 0
    for h in used:
        slots.append(HostSlot(host=h, nprocs=setup.nprocs[h], rank_base=base, labels=setup.entries[h].labels))
        base += setup.nprocs[h]
    request = replace(
        setup.request,
        patterns=["pairwise"] * bool(pair_phases) + ["ring"] * (len(ring) >= 2),
        pair_rounds=[PairRound(name, rnd, pairs) for name, rnd, pairs in pair_phases],
    )
    plan = build_plan(request, setup.rundir.run_id, slots, setup.backend)
    launcher = setup.site.launcher(used)
    settings = RunSettings(
        launcher_name=launcher.name,
        options=asdict(setup.opts),
        fail_fast=False,
        print_table=lambda row: False,
        before_phase=gate,
        clock=gate.budget.clock,
    )
    outcome = execute(plan, slots, launcher, setup.rundir, settings, setup.echo)
    gate.ended = gate.budget.clock()
    if outcome.status == "interrupted":  # execute recorded it; run_preflight says what was established
        raise as_interrupted(KeyboardInterrupt())
    incapable = [f for f in outcome.faults if f.kind == "capability"]
    if incapable:  # the ranks' own report (the probe asks python3, not --python): not nodes to drain
        hosts = sorted({f.host or "?" for f in incapable})
        raise PreflightError(f"{len(hosts)} host(s) cannot run {plan.backend} ({', '.join(hosts)}): "
                             + incapable[0].message)
    return outcome


# -- the procedure -----------------------------------------------------------------------------------
def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_preflight(
    opts: PreflightOptions,
    echo: Callable[[str], None] = _stderr,
    clock: Callable[[], float] = time.monotonic,
    max_escalations: int = MAX_LAUNCHES,
    site: Site | None = None,
) -> PreflightResult:
    """Inventory, quick pass, suspects, escalation, report: see the module docstring.

    Escalation repeats (at most ``max_escalations`` launches) while the analysis of everything
    measured names suspects not re-tested yet and the budget allows. ``site``: where the hosts are
    (``netbench.sites``; default: over SSH with a hosts file, else the Slurm allocation), a simulated
    fabric's with ``clock`` its own."""
    from netbench.sites.base import finished

    budget = Budget(opts.budget_s, clock=clock)
    info: dict[str, Any] = {"budget_s": opts.budget_s, "stages_s": {}, "escalations": [], "retests": {}}
    with finished(site or preflight_site(opts)) as where:  # what the site made goes, however it ends
        return _run(opts, where, budget, info, echo, max_escalations)


def _run(opts: PreflightOptions, site: Site, budget: Budget, info: dict[str, Any],
         echo: Callable[[str], None], max_escalations: int) -> PreflightResult:
    from netbench.common.errors import UsageError
    from netbench.common.rundir import RunDir, utc_now

    entries, policy, baseline = load_inputs(opts, site)
    by_name = {e.name: e for e in entries}
    try:  # a site may label what it makes with the run id (Kubernetes' pods)
        rundir = RunDir.create(opts.out, run_id=getattr(site, "run_id", None))
    except UsageError as exc:  # an existing run directory: exit 3 (could not run), 2 means "drain"
        raise PreflightError(str(exc)) from None
    rundir.hold_reserve()  # run.json's last words on a full disk
    sofar = SoFar("inventory", started=utc_now())
    on_exit_now(lambda stop: rundir.write_run(**sofar.run_fields(stop, ended=utc_now(), at_once=True)))
    try:
        return _stages(opts, site, entries, policy, baseline, rundir, budget, info, sofar, echo,
                       max_escalations)
    except KeyboardInterrupt as exc:
        return _interrupted(as_interrupted(exc), sofar, rundir, list(by_name), budget, info, echo)
    finally:
        on_exit_now(None)
        rundir.release_reserve()


@dataclass
class SoFar(StageMark):
    """How far a preflight got: its stage (``StageMark``: inventory | quick pass | escalation |
    report), and what it had established when a stop came."""

    started: str = ""
    drain: list[str] = field(default_factory=list)
    """Nodes established as failing: the inventory's checks (no traffic needed), nothing measured."""
    findings: list[Any] = field(default_factory=list)
    """The findings those rest on (the inventory's)."""

    def run_fields(self, stop: Interrupted, ended: str, at_once: bool = False) -> dict[str, Any]:
        said = f"{stop.what} during the {self.name}"
        said += "; a second signal ended it at once" if at_once else ""
        # the preflight itself gives no verdict either way; ``netbench report`` judges a completed run
        status = "completed" if self.all_measured else "interrupted"
        if status == "completed":
            said += ": every measurement is in (netbench report on the run directory judges it)"
        return {"status": status, "signal": stop.signal, "stopped_in": self.name, "error": said,
                "ended": ended, "verdict": "interrupted"}


def _interrupted(
    stop: Interrupted, sofar: SoFar, rundir: Any, hosts: list[str], budget: Budget, info: dict[str, Any],
    echo: Callable[[str], None],
) -> PreflightResult:
    """A preflight stopped by a signal or a full disk: no verdict on what was not measured, the drain
    list of what was established before (``SoFar``), run.json ``interrupted``; its exit status is the
    stop's (128 + the signal, 3 for a full disk)."""
    from netbench.common.rundir import utc_now

    fields = sofar.run_fields(stop, utc_now())
    info.update(elapsed_s=round(budget.elapsed(), 3), drain=sofar.drain, check=[],
                interrupted={"signal": stop.signal, "stage": sofar.name, "error": fields["error"]})
    if not rundir.inventory_path.exists():
        rundir.write_inventory([])  # none came back: still a run directory `netbench report` reads
    loaded = rundir.load_rows().records
    rundir.write_run(**fields, rows=len(loaded), rows_failed=sum(r.get("status") != "ok" for r in loaded),
                     preflight=info)
    echo(f"# {fields['error']}; what was measured stays in {rundir.path}")
    return PreflightResult(exit_code=stop.exit_code, verdict="interrupted", drain=sofar.drain, check=[],
                           findings=sofar.findings, rundir=rundir, hosts=hosts, info=info)


def _stages(
    opts: PreflightOptions, site: Site, entries: list[HostEntry], policy: Any, baseline: Path | None,
    rundir: Any, budget: Budget, info: dict[str, Any], sofar: SoFar, echo: Callable[[str], None],
    max_escalations: int,
) -> PreflightResult:
    """The stages once the run directory is made (``run_preflight``); ``sofar`` follows them."""
    from netbench import __version__
    from netbench.common.findings import worst
    from netbench.common.pairrows import MetPairs
    from netbench.common.rundir import GrowingRows, utc_now
    from netbench.reports.verdict import judge

    stages: dict[str, float] = info["stages_s"]

    def spent(name: str, seconds: float) -> None:
        stages[name] = round(stages.get(name, 0.0) + seconds, 3)

    def mark(name: str, since: float) -> float:
        now = budget.elapsed()
        spent(name, now - since)
        return now

    by_name = {e.name: e for e in entries}
    started = sofar.started
    switches = site.switches(entries, echo)
    for name, text in switches.saved.items():
        (rundir.path / name).write_text(text)
    topology = switches.uplinks
    rundir.write_run(
        command="preflight",
        status="running",
        started=started,
        netbench_version=__version__,
        launcher=site.name,
        scheduler_job=site.job_id,
        hosts=list(by_name),
        hosts_file=str(opts.hosts_file),
        topology=topology,
        host_labels={e.name: e.labels for e in entries},
        budget_s=opts.budget_s,
    )
    echo(
        f"# netbench preflight: {len(entries)} host(s) from "
        f"{opts.hosts_file or ('the cluster' if site.name == 'k8s' else 'the Slurm allocation')}, "
        f"budget {opts.budget_s:g} s; "
        f"run directory {rundir.path}"
    )

    # 1. inventory and policy
    nodes = stage_inventory(entries, site, rundir, budget, echo)
    _, inv_findings = analyse(rundir, policy, topology)
    inv_findings = [f for f in inv_findings if f.rule != "run_incomplete"]  # this run: under way
    failing, _ = drain_and_check(inv_findings, len(entries))
    sofar.drain, sofar.findings = failing, inv_findings
    live = [h for h in by_name if nodes[h].ok and h not in failing]
    t = mark("inventory", 0.0)
    echo(
        f"# inventory: {sum(n.ok for n in nodes.values())} of {len(nodes)} reachable in {t:.1f} s; "
        + (f"failing before any traffic: {', '.join(failing)}" if failing else "no node fails it")
    )
    stop = opts.fail_fast and worst(inv_findings) == "fail"
    if stop:
        echo("# --fail-fast: the inventory already fails; nothing measured")
    elif len(live) < 2:
        echo(f"# {len(live)} node(s) left to measure: inventory checks only")

    evidence = RetestEvidence({}, PREFLIGHT_WORDS.not_suspect)
    if not stop and len(live) >= 2:
        # 2. quick pass
        if budget.left() < MIN_QUICK_PASS_S:
            raise PreflightError(
                f"budget {opts.budget_s:g} s is too small: the inventory took {t:.1f} s and the quick pass "
                f"needs at least {MIN_QUICK_PASS_S + budget.reserve_s:g} s more; run directory {rundir.path}"
            )
        sofar.enter("quick pass")
        setup = make_setup(opts, by_name, nodes, live, site, rundir, echo)
        measured = [by_name[h] for h in live]
        site.counters("before", measured, rundir)  # where the site can read them (SSH)
        rounds = quick_rounds(live, opts.rounds or policy.thresholds.min_partners, topology)
        gate = PhaseGate(budget)
        echo(
            f"# quick pass: {len(rounds)} round(s) of pairs{' + the ring' if opts.ring else ''} over "
            f"{len(live)} node(s), {setup.backend}, {opts.collective} at "
            + ", ".join(_size(s) for s in setup.request.pair_sizes or [])
        )
        quick = measure(
            setup,
            [(f"pairs {i + 1}/{len(rounds)}", i + 1, rnd) for i, rnd in enumerate(rounds)],
            live if opts.ring else [],
            gate,
        )
        t = mark("quick_pass", t)
        # the hosts and ranks of the run are the quick pass's: later launches (the re-tests) rewrite
        # run.json with theirs, fewer when nodes were drained or lost, and are put back before the report
        quick_run = {k: rundir.read_run().get(k) for k in ("hosts", "world_size")}
        startup_s = quick.startup_s or 0.0
        phase_s = max(gate.durations()[: len(rounds)] or [gate.estimate()])
        info.update(
            startup_s=startup_s, quick_phase_s=[round(d, 3) for d in gate.durations()], rounds=len(rounds)
        )
        if gate.skipped:
            rundir.write_run(status="budget", ended=utc_now())
            raise PreflightError(
                f"budget {opts.budget_s:g} s is too small for the quick pass: {len(gate.skipped)} of its "
                f"phases did not fit (start-up {startup_s:.1f} s, {gate.estimate():.1f} s a phase); what was "
                f"measured is in {rundir.path}"
            )

        # 3. suspects, 4. escalation (again while new suspects appear and the budget allows)
        sofar.enter("escalation")
        read_rows = GrowingRows(rundir)
        retesting = RetestSetup(
            analyse=lambda: analyse(rundir, policy, topology),
            read_rows=read_rows,
            echo=echo,
            live=live,
            exclude=unusable_hosts(quick, read_rows()),
            tested=MetPairs(live, (p for rnd in rounds for p in rnd)),
            first_round=len(rounds) + 1,
            phase_s=phase_s, startup_s=startup_s,  # the quick pass's: what a re-test launch will take
            budget=budget, words=PREFLIGHT_WORDS, partners=opts.confirm, max_launches=max_escalations,
        )
        done = retest_suspects(retesting, lambda phases, gate: measure(setup, phases, [], gate))
        spent("analysis", done.analysis_s)
        if done.launches:
            spent("escalation", done.launch_s)
        info["escalations"] = done.launches

        # 5. sequential tests: the budget left decides every node it can
        retests = done.retests
        if opts.sequential:
            sofar.enter("sequential tests")
            measured_rows = read_rows()
            seq = run_sequential(
                SequentialSetup(
                    hosts=[h for h in live if h not in retesting.exclude],
                    switches=topology or {},
                    factor=policy.thresholds.slow_node_factor,
                    fwer=policy.thresholds.fwer,
                    read_rows=read_rows,
                    budget=budget,
                    first_round=max(retesting.first_round, int(measured_rows.round.max(initial=0)) + 1),
                    phase_s=phase_s,
                    startup_s=startup_s,
                    echo=echo,
                ),
                lambda phases, gate: measure(setup, phases, [], gate),
            )
            if seq.launches:
                spent("sequential", seq.launch_s)
            retests = retests | seq.decisions.retests(done.retests)
            info["sequential"] = seq.to_json()
        t = budget.elapsed()
        info["retests"] = {k: asdict(v) for k, v in retests.items()}
        evidence = RetestEvidence(retests, done.untested_reason, done.from_round)
        rundir.write_run(**quick_run)
        site.counters("after", measured, rundir)

    # 6. report: every measurement is in
    sofar.enter("report")
    rundir.write_run(status="completed")
    ctx, findings = analyse(rundir, policy, topology, baseline, evidence)
    drain, check = drain_and_check(findings, len(entries))
    html = _write_report(rundir, ctx, findings, opts.html)
    judged(site, rundir, findings, drain, echo)  # Kubernetes' --k8s-label / --k8s-taint
    mark("report", t)
    info.update(elapsed_s=round(budget.elapsed(), 3), drain=drain, check=check)
    v, code = (said := judge(findings, len(entries), command="preflight")).status, said.code
    rundir.write_run(
        status="completed",
        started=started,
        ended=utc_now(),
        finished=utc_now(),
        seconds=info["elapsed_s"],
        rows=len(loaded := rundir.read_rows()),
        rows_failed=sum(r.get("status") != "ok" for r in loaded),
        preflight=info,
        retests=evidence.to_json(),  # `netbench report` of this run weighs the same re-tests
        options=asdict(opts),
        verdict=v,
    )
    return PreflightResult(
        exit_code=code,
        verdict=v,
        drain=drain,
        check=check,
        findings=findings,
        rundir=rundir,
        hosts=list(by_name),
        info=info,
        report_html=html,
    )
