"""Preflight's stages (inventory + policy, quick pass, escalation, sequential tests, report) as a
policy over the run's stages (``PreflightStages``, ``netbench.run.stages``), and ``run_preflight``."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.common.interrupts import Interrupted, StageMark, as_interrupted
from netbench.confirm import (
    MAX_LAUNCHES,
    PREFLIGHT_WORDS,
    Budget,
    Pair,
    PhaseGate,
    RailSetup,
    RetestSetup,
    retest_suspects,
    unusable_hosts,
)
from netbench.defaults import INVENTORY_TIMEOUT_S, PREFLIGHT_PAIR_SIZES
from netbench.history.hook import HistoryStage
from netbench.inventory.hosts import HostEntry
from netbench.inventory.model import shared_runs
from netbench.preflight.judging import quick_rounds
from netbench.preflight.options import (
    MIN_QUICK_PASS_S,
    PreflightError,
    PreflightOptions,
    PreflightResult,
)
from netbench.preflight.outputs import _size, _write_report, with_history
from netbench.preflight.sequential import SequentialSetup, run_sequential
from netbench.reports.analyses import RetestEvidence
from netbench.reports.verdict import drain_and_check
from netbench.sites.base import Site, check_distinct, judged

if TYPE_CHECKING:
    from netbench.agents.coordinator import Outcome
    from netbench.confirm import PhaseList
    from netbench.inventory.model import NodeInventory
    from netbench.reports.analyses import Retest
    from netbench.run.launch import Launch
    from netbench.run.stages import Opened, Planned


# -- stage 1: inputs and inventory -------------------------------------------------------------------
def preflight_site(opts: PreflightOptions) -> Site:
    """Sweep's site for these hosts (``netbench.sites``): over SSH with a hosts file, else the Slurm
    allocation this runs in, over srun; PreflightError (exit 3) for what cannot run."""
    from netbench.common.errors import UsageError
    from netbench.run.options import MeasureOptions, Options
    from netbench.sites.registry import choose_site
    from netbench.sites.slurm.scontrol import Allocation
    from netbench.sites.ssh.site import SshSite

    if opts.site.launcher != "k8s" and opts.site.hosts_file is None and Allocation.from_env() is None:
        raise PreflightError("--hosts is needed outside a Slurm allocation (inside salloc/sbatch the "
                             "allocation's nodes are checked, over srun; --launcher k8s: a cluster's nodes)")
    # the same records, composed: preflight's site as sweep's, its one launcher decided here
    launcher = opts.site.launcher or ("ssh" if opts.site.hosts_file else "slurm")
    where = Options(site=replace(opts.site, launcher=launcher), report=opts.report,
                    measure=MeasureOptions(timeout_s=opts.timeout_s, backend=opts.backend))
    try:
        site = choose_site(where)
    except UsageError as exc:
        raise PreflightError(str(exc)) from None
    if isinstance(site, SshSite):  # the probe asks python3: a torch import a host would cost the budget
        site.probe_python = False
    return site


def load_inputs(opts: PreflightOptions, site: Site) -> tuple[list[HostEntry], Any, Path | None]:
    """The site's hosts, the policy and the baseline, or PreflightError (exit 3) naming what is wrong."""
    from netbench.common.errors import UsageError
    from netbench.run.baselines import BaselineStore

    try:
        entries = site.hosts()
        policy = opts.report.rules  # parsed once, as the options were built
        baseline = BaselineStore().resolve(opts.baseline) if opts.baseline else None
    except UsageError as exc:
        raise PreflightError(str(exc)) from None
    dup = [h for h, n in Counter(e.name for e in entries).items() if n > 1]
    if dup:
        raise PreflightError(
            f"{opts.site.hosts_file}: host {dup[0]} appears twice (preflight measures whole nodes: "
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
    history: HistoryStage | None = None,
) -> tuple[Any, list[Any]]:
    """The standard analysis of the run directory as it is now, with the re-test evidence so far
    (and ``history``: each node against its last good run there): (context, findings worst first)."""
    from netbench.reports.engine import load_context, run_rules

    ctx = load_context(rundir.path, baseline, policy, topology or None, retests)
    if history is not None:
        ctx.last_good = history.last_good(ctx)
    return ctx, run_rules(ctx)


def stage_inventory(
    entries: list[HostEntry], site: Site, rundir: Any, budget: Budget, echo: Callable[[str], None]
) -> dict[str, Any]:
    """Probe every host (the probe's timeout bounded by the budget); unreachable hosts are records."""
    from netbench.common.errors import UsageError

    timeout = max(1.0, min(INVENTORY_TIMEOUT_S, budget.left()))
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
    fabric's with ``clock`` its own. The stages are the run's (``netbench.run.stages``), with
    preflight's policy (``PreflightStages``)."""
    from netbench.run.stages import run_stages
    from netbench.sites.base import finished

    budget = Budget(opts.budget_s, clock=clock)
    info: dict[str, Any] = {"budget_s": opts.budget_s, "stages_s": {}, "escalations": [], "retests": {}}
    with finished(site or preflight_site(opts)) as where:  # what the site made goes, however it ends
        return run_stages(PreflightStages(opts, budget, info, max_escalations), where, echo)


@dataclass
class SoFar(StageMark):
    """How far a preflight got: its stage (``StageMark``: inventory | quick pass | escalation |
    report), and what it had established when a stop came."""

    started: str = ""
    drain: list[str] = field(default_factory=list)
    """Nodes established as failing: the inventory's checks (no traffic needed), nothing measured."""
    findings: list[Any] = field(default_factory=list)
    """The findings those rest on (the inventory's)."""
    rundir: Any = None

    def last_words(self, stop: Interrupted) -> None:
        """A second signal: the one write it waits for (``interrupts.on_exit_now``)."""
        from netbench.common.rundir import utc_now

        self.rundir.write_run(**self.run_fields(stop, ended=utc_now(), at_once=True))

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




@dataclass
class PreflightStages:
    """Preflight's policy over the run's stages (``netbench.run.stages.StagePolicy``): the run
    directory first, the inventory within the budget and its rules at once, the quick pass
    (``judging.quick_rounds``), escalations (``netbench.confirm``) and sequential rounds
    (``preflight.sequential``) while the budget lasts, then the report and the drain rule
    (``reports.verdict.drain_and_check``). ``info`` is run.json's ``preflight`` as it grows."""

    opts: PreflightOptions
    budget: Budget
    info: dict[str, Any]
    max_escalations: int = MAX_LAUNCHES
    sofar: SoFar = field(default_factory=lambda: SoFar("inventory"))
    entries: list[HostEntry] = field(default_factory=list)
    policy: Any = None
    baseline: Path | None = None
    topology: dict[str, str] = field(default_factory=dict)
    live: list[str] = field(default_factory=list)
    """Hosts to measure: reachable, not failing the inventory's rules."""
    rounds: list[list[Pair]] = field(default_factory=list)
    """The quick pass's rounds of pairs."""
    stop_early: bool = False
    """``--fail-fast`` and the inventory fails: nothing is measured."""
    nodes: dict[str, NodeInventory] = field(default_factory=dict)
    t: float = 0.0
    """The budget's elapsed time at the end of the last stage timed (``_mark``)."""
    phase_s: float = 0.0
    """A quick-pass phase's time: what a re-test phase will take, until one is measured."""

    def _spent(self, name: str, seconds: float) -> None:
        stages = self.info["stages_s"]
        stages[name] = round(stages.get(name, 0.0) + seconds, 3)

    def _mark(self, name: str) -> None:
        now = self.budget.elapsed()
        self._spent(name, now - self.t)
        self.t = now

    def open(self, site: Site, echo: Callable[[str], None]) -> Opened:
        """The hosts, the policy and the baseline (bad input: exit 3), then the run directory, so that
        the inventory's time is the budget's and its failures are recorded."""
        from netbench.common.errors import UsageError
        from netbench.common.rundir import RunDir, utc_now
        from netbench.run.stages import Opened

        self.entries, self.policy, self.baseline = load_inputs(self.opts, site)
        try:  # a site may label what it makes with the run id (Kubernetes' pods)
            rundir = RunDir.create(self.opts.report.out, run_id=getattr(site, "run_id", None))
        except UsageError as exc:  # an existing run directory: exit 3 (could not run), 2 means "drain"
            raise PreflightError(str(exc)) from None
        self.sofar = SoFar("inventory", started=utc_now(), rundir=rundir)
        return Opened(site, rundir, self.sofar, echo, clock=self.budget.clock,
                      history=HistoryStage(self.opts.report.history))

    def inventory(self, run: Opened) -> None:
        """Switches, run.json, then every host probed and the rules that need no traffic: the nodes
        already failing, and the hosts left to measure."""
        from netbench import __version__
        from netbench.common.findings import worst

        opts, site, rundir, echo, entries = self.opts, run.site, run.rundir, run.echo, self.entries
        switches = site.switches(entries, echo)
        for name, text in switches.saved.items():
            (rundir.path / name).write_text(text)
        self.topology = switches.uplinks
        rundir.write_run(
            command="preflight", status="running", started=self.sofar.started, netbench_version=__version__,
            launcher=site.name, scheduler_job=site.job_id, hosts=[e.name for e in entries],
            hosts_file=str(opts.site.hosts_file), topology=self.topology,
            host_labels={e.name: e.labels for e in entries}, budget_s=opts.budget_s,
        )
        echo(
            f"# netbench preflight: {len(entries)} host(s) from "
            f"{opts.site.hosts_file or ('the cluster' if site.name == 'k8s' else 'the Slurm allocation')}, "
            f"budget {opts.budget_s:g} s; "
            f"run directory {rundir.path}"
        )
        self.nodes = nodes = stage_inventory(entries, site, rundir, self.budget, echo)
        _, found = analyse(rundir, self.policy, self.topology)
        found = [f for f in found if f.rule != "run_incomplete"]  # this run: under way
        failing, _ = drain_and_check(found, len(entries))
        self.sofar.drain, self.sofar.findings = failing, found
        self.live = [e.name for e in entries if nodes[e.name].ok and e.name not in failing]
        self._mark("inventory")
        echo(
            f"# inventory: {sum(n.ok for n in nodes.values())} of {len(nodes)} reachable in {self.t:.1f} s; "
            + (f"failing before any traffic: {', '.join(failing)}" if failing else "no node fails it")
        )
        self.stop_early = opts.fail_fast and worst(found) == "fail"
        if self.stop_early:
            echo("# --fail-fast: the inventory already fails; nothing measured")
        elif len(self.live) < 2:
            echo(f"# {len(self.live)} node(s) left to measure: inventory checks only")

    def plan(self, run: Opened) -> Planned | None:
        """Backend (NCCL when every node has GPUs), ranks per host, and the request every launch plans
        from: one collective at the pair sizes, for the pairs and the ring alike; None when the
        inventory decided (``--fail-fast``) or fewer than two nodes are left."""
        from netbench.common.errors import UsageError
        from netbench.run.options import MeasureOptions
        from netbench.run.planner import PlanRequest, choose_backend, choose_engine, host_slots, sweep_spec
        from netbench.run.stages import Planned

        opts, budget = self.opts, self.budget
        if self.stop_early or len(self.live) < 2:
            return None
        if budget.left() < MIN_QUICK_PASS_S:
            from netbench.common.rundir import utc_now

            said = (f"budget {opts.budget_s:g} s is too small: the inventory took {self.t:.1f} s and the "
                    f"quick pass needs at least {MIN_QUICK_PASS_S + budget.reserve_s:g} s more")
            # ended, not left ``running``; ``failed`` with why, so `netbench report` on it is no PASS
            run.rundir.write_run(status="failed", ended=utc_now(), error=said)
            raise PreflightError(f"{said}; run directory {run.rundir.path}")
        self.sofar.enter("quick pass")
        measured = [e for e in self.entries if e.name in self.live]
        caps = run.site.caps(measured, self.nodes)
        try:
            backend = choose_backend(opts.backend, caps)
            engine = choose_engine("auto", backend, caps)  # preflight has no --engine: the run's rule
            sizes = sorted(opts.pair_sizes or PREFLIGHT_PAIR_SIZES[backend])
            measure = MeasureOptions(collectives=[opts.collective], iters=opts.iters, warmup=opts.warmup,
                                     in_place="out", timeout_s=opts.timeout_s, backend=backend)
            request = PlanRequest(measure=measure, sizes=sizes, pair_sizes=sizes, engine=engine.engine)
            sweep_spec(request, backend)  # bad input (a dtype gloo lacks, ...) before anything starts
        except UsageError as exc:
            raise PreflightError(str(exc)) from None
        if engine.note:
            run.echo(f"# {engine.note}")
        run.counted = measured  # where the site can read them (SSH)
        slots = host_slots(measured, backend, {c.host: c.gpus for c in caps}, opts.site.procs_per_host)
        return Planned(backend, slots, request, engine_note=engine.note, options=opts.to_json())

    def _launch(
        self, launch: Launch, phases: PhaseList, gate: PhaseGate, ring: Sequence[str] = (),
        rails: bool = False,
    ) -> Outcome:
        """One launch (``launch``): the pair phases (as rail groups: ``rails``), then the ring (if any
        hosts); a stop or hosts that cannot run the backend end the preflight."""
        outcome = launch(phases, gate, ring, rails=rails)
        gate.ended = gate.budget.clock()
        if outcome.status == "interrupted":  # execute recorded it; ``stopped`` says what was established
            raise as_interrupted(KeyboardInterrupt())
        incapable = [f for f in outcome.faults if f.kind == "capability"]
        if incapable:  # the ranks' own report (the probe asks python3, not --python): not nodes to drain
            hosts = sorted({f.host or "?" for f in incapable})
            raise PreflightError(f"{len(hosts)} host(s) cannot run {launch.backend} ({', '.join(hosts)}): "
                                 + incapable[0].message)
        return outcome

    def measure(self, run: Opened, planned: Planned, launch: Launch) -> Outcome:
        """The quick pass: a few rounds of pairs and the ring, in one launch."""
        from netbench.common.rundir import utc_now

        opts, rundir = self.opts, run.rundir
        live = self.live
        self.rounds = rounds = quick_rounds(live, opts.rounds or self.policy.thresholds.min_partners,
                                            self.topology)
        gate = PhaseGate(self.budget)
        run.echo(
            f"# quick pass: {len(rounds)} round(s) of pairs{' + the ring' if opts.ring else ''} over "
            f"{len(live)} node(s), {planned.backend}, {opts.collective} at "
            + ", ".join(_size(s) for s in planned.request.pair_sizes or [])
        )
        phases = [(f"pairs {i + 1}/{len(rounds)}", i + 1, rnd) for i, rnd in enumerate(rounds)]
        quick = self._launch(launch, phases, gate, live if opts.ring else [])
        self._mark("quick_pass")
        startup_s = quick.startup_s or 0.0
        self.phase_s = max(gate.durations()[: len(rounds)] or [gate.estimate()])
        self.info.update(
            startup_s=startup_s, quick_phase_s=[round(d, 3) for d in gate.durations()], rounds=len(rounds)
        )
        if gate.skipped:
            said = (f"budget {opts.budget_s:g} s is too small for the quick pass: {len(gate.skipped)} of its "
                    f"phases did not fit (start-up {startup_s:.1f} s, {gate.estimate():.1f} s a phase)")
            rundir.write_run(status="failed", ended=utc_now(), error=said)
            raise PreflightError(f"{said}; what was measured is in {rundir.path}")
        return quick

    def confirm(self, run: Opened, planned: Planned, launch: Launch, quick: Outcome) -> RetestEvidence:
        """3. suspects, 4. escalation (again while new suspects appear and the budget allows), 5. the
        sequential tests; every launch is ``launch``'s, each recording itself as the run's."""
        from netbench.reports.pairrows import GrowingRows, MetPairs

        # the hosts and ranks of the run are the quick pass's: later launches (the re-tests) rewrite
        # run.json with theirs, fewer when nodes were drained or lost, and are put back before the report
        rundir, live, rounds = run.rundir, self.live, self.rounds
        quick_run = {k: rundir.read_run().get(k) for k in ("hosts", "world_size")}
        self.sofar.enter("escalation")
        read_rows = GrowingRows(rundir)
        retesting = RetestSetup(
            analyse=lambda: analyse(rundir, self.policy, self.topology),
            read_rows=read_rows,
            echo=run.echo,
            live=live,
            exclude=unusable_hosts(quick, read_rows()),
            tested=MetPairs(live, (p for rnd in rounds for p in rnd)),
            first_round=len(rounds) + 1,
            phase_s=self.phase_s, startup_s=quick.startup_s or 0.0,  # what a re-test launch will take
            budget=self.budget, words=PREFLIGHT_WORDS, partners=self.opts.confirm,
            max_launches=self.max_escalations,
            rails=RailSetup(lambda phases, gate: self._launch(launch, phases, gate, rails=True), rundir),
        )
        done = retest_suspects(retesting, lambda phases, gate: self._launch(launch, phases, gate))
        self._spent("analysis", done.analysis_s)
        if done.launches:
            self._spent("escalation", done.launch_s)
        self.info["escalations"] = done.launches
        retests = done.retests
        if self.opts.sequential:
            retests = retests | self._sequential(run, launch, retesting, done.retests)
        self.t = self.budget.elapsed()
        self.info["retests"] = {k: asdict(v) for k, v in retests.items()}
        rundir.write_run(**quick_run)
        return RetestEvidence(retests, done.untested_reason, done.from_round)

    def _sequential(
        self, run: Opened, launch: Launch, retesting: RetestSetup, earlier: dict[str, Retest]
    ) -> dict[str, Retest]:
        """5. sequential tests: the budget left decides every node it can; its verdicts."""
        self.sofar.enter("sequential tests")
        measured_rows = retesting.read_rows()
        seq = run_sequential(
            SequentialSetup(
                hosts=[h for h in self.live if h not in retesting.exclude],
                switches=self.topology or {},
                factor=self.policy.thresholds.slow_node_factor,
                fwer=self.policy.thresholds.fwer,
                read_rows=retesting.read_rows,
                budget=self.budget,
                first_round=max(retesting.first_round, int(measured_rows.round.max(initial=0)) + 1),
                phase_s=retesting.phase_s,
                startup_s=retesting.startup_s,
                echo=run.echo,
            ),
            lambda phases, gate: self._launch(launch, phases, gate),
        )
        if seq.launches:
            self._spent("sequential", seq.launch_s)
        self.info["sequential"] = seq.to_json()
        return seq.decisions.retests(earlier)

    def report(
        self, run: Opened, outcome: Outcome | None, evidence: RetestEvidence | None
    ) -> PreflightResult:
        """6. report: every measurement is in; the drain list and the verdict."""
        from netbench.common.rundir import utc_now
        from netbench.reports.verdict import judge

        rundir, info = run.rundir, self.info
        evidence = evidence or RetestEvidence({}, PREFLIGHT_WORDS.not_suspect)
        self.sofar.enter("report")
        rundir.write_run(status="completed")
        ctx, findings = analyse(rundir, self.policy, self.topology, self.baseline, evidence, run.history)
        with_history(run.history, ctx, findings, info)
        said = judge(findings, len(self.entries), command="preflight")  # the one rule (reports.verdict)
        drain, check = list(said.drain), list(said.check)
        html = _write_report(rundir, ctx, findings, self.opts.html, run.history)
        judged(run.site, rundir, findings, drain, run.echo)  # Kubernetes' --k8s-label / --k8s-taint
        self._mark("report")
        info.update(elapsed_s=round(self.budget.elapsed(), 3), drain=drain, check=check)
        v, code = said.status, said.code
        rundir.write_run(
            status="completed", started=self.sofar.started, ended=utc_now(), finished=utc_now(),
            seconds=info["elapsed_s"], rows=len(loaded := rundir.read_rows()),
            rows_failed=sum(r.get("status") != "ok" for r in loaded), preflight=info,
            retests=evidence.to_json(),  # `netbench report` of this run weighs the same re-tests
            options=self.opts.to_json(), verdict=v,
        )
        hosts = [e.name for e in self.entries]
        return PreflightResult(exit_code=code, verdict=v, drain=drain, check=check, findings=findings,
                               rundir=rundir, hosts=hosts, info=info, report_html=html)

    def stopped(self, run: Opened, stop: Interrupted) -> PreflightResult:
        """A stop at any stage: the drain list established so far, no verdict (``_interrupted``)."""
        return _interrupted(stop, self.sofar, run.rundir, [e.name for e in self.entries], self.budget,
                            self.info, run.echo)
