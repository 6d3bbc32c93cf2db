"""One sweep, every site: ``netbench sweep`` as a policy (``SweepStages``) over the run's stages,
which every command that measures shares (``netbench.run.stages.run_stages``), in this order

  inventory -> switches -> backend and engine -> slots -> plan -> execute -> confirm -> report -> exit status

whether the hosts are this machine, a hosts file over SSH or on this machine, a Slurm allocation or
mpirun's (``netbench.sites``: a ``Site`` says only where). The patterns:
  world     every local rank in one group (one machine);
  ring      all hosts in one group, in the order given, over the full size range;
  pairwise  rounds of disjoint pairs (leaf against leaf when the topology places every host, else
            the circle method: planner.default_pair_rounds), or ``--pair-batch K`` pairs at a time; a
            pair's group is every rank of both hosts; a few large sizes; then the suspects of the
            analysis re-tested against known-good partners within ``--confirm-budget``;
  rail      GPU k of one host with GPU k of the other, for every pair: each NIC alone;
  intra     the ranks of each host alone.
A host that dies or hangs costs its own groups (rows with status timeout/error naming it); the sweep
goes on with the others and ends with a summary, the report and one exit status (``exit_status``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NoReturn

from netbench import __version__
from netbench.agents.coordinator import Outcome
from netbench.collectives.sizes import format_size
from netbench.common.errors import NetbenchError, UsageError
from netbench.common.interrupts import Interrupted, StageMark, as_interrupted
from netbench.common.rundir import RunDir, new_run_id, utc_now
from netbench.common.text import terminal_safe
from netbench.history.hook import HistoryStage
from netbench.inventory.hosts import HostEntry
from netbench.inventory.model import NodeInventory, shared_runs
from netbench.reports.pairrows import GrowingRows
from netbench.run.execute import exit_status, finish_report
from netbench.run.launch import Launch
from netbench.run.options import Options, RetestOptions
from netbench.run.planner import (
    PlanRequest,
    build_plan,
    choose_backend,
    choose_engine,
    free_gpu_cap,
    host_slots,
    pair_spec,
    sweep_spec,
)
from netbench.run.progress import Progress
from netbench.run.stages import Opened, Planned, run_stages
from netbench.run.table import in_table
from netbench.sites.base import Site, Switches, check_distinct, judged

if TYPE_CHECKING:
    from netbench.confirm import PhaseGate, PhaseList, Retested
    from netbench.reports.pairrows import PairRows
    from netbench.reports.policy import Policy


def plan_run(opts: Options, site: Site, live: list[HostEntry], nodes: dict[str, NodeInventory],
             switches: Switches, run_id: str) -> Planned:
    """Backend and engine, slots, plan: bad input fails here (a UsageError), before any rank starts."""
    caps = site.caps(live, nodes)
    backend = choose_backend(opts.measure.backend, caps)
    engine = choose_engine(opts.measure.engine, backend, caps)  # one for the run: the plan's, every rank's
    slots = host_slots(live, backend, {c.host: c.gpus for c in caps}, opts.site.procs_per_host)
    if site.one_machine and opts.measure.root >= slots[0].nprocs:
        raise UsageError(f"--root {opts.measure.root} is not a rank (there are {slots[0].nprocs})")
    # this machine's GPUs: the sweep stops below what they can hold (remote GPUs: the ranks' check)
    cap = free_gpu_cap() if site.one_machine and backend == "nccl" else None
    request = PlanRequest.of(opts, size_cap=cap, switches=switches.uplinks, engine=engine.engine)
    request = request.with_rails(nodes, slots)
    return Planned(backend, slots, request, build_plan(request, run_id, slots, backend), engine.note)


def announce(
    opts: Options, site: Site, planned: Planned, rundir: RunDir, echo: Callable[[str], None]
) -> None:
    """The opening lines: what runs where, and the run directory."""
    plan, backend = planned.plan, planned.backend
    spec = sweep_spec(planned.request, backend)
    if site.one_machine:
        echo(
            f"# netbench {__version__}: {len(spec.collectives)} collective(s) on {plan.world_size} "
            f"{plan.device} rank(s) ({backend}), {format_size(spec.sizes[0])}..{format_size(spec.sizes[-1])} "
            f"x{opts.measure.factor}, "
            f"iters {spec.iters}, warmup {spec.warmup}, check {'on' if spec.check else 'off'}"
        )
        echo(f"# run directory: {rundir.path}")
        if planned.engine_note:
            echo(f"# {planned.engine_note}")
        return
    echo(f"# run directory {rundir.path}")
    echo(
        f"# {len(planned.slots)} host(s), {plan.world_size} {plan.device} rank(s) ({backend}); phases: "
        + ", ".join(p.name for p in plan.phases[:4])
        + (" ..." if len(plan.phases) > 4 else "")
    )
    if planned.engine_note:
        echo(f"# {planned.engine_note}")
    pair = pair_spec(planned.request, backend)
    echo(
        f"# pair sizes {', '.join(format_size(s) for s in pair.sizes)}; ring sizes "
        f"{format_size(spec.sizes[0])}..{format_size(spec.sizes[-1])}"
    )
    unbound = sorted({h for h, ifaces in (planned.request.rail_ifaces or {}).items() if None in ifaces})
    if backend == "gloo" and unbound:
        echo(f"# rail: no rail NIC known for {', '.join(unbound)} (no GPU-NIC affinity in the inventory): "
             "their gloo ranks use the address that routes here, so their rails share that interface")


def verdict_only(echo: Callable[[str], None]) -> Callable[[str], None]:
    """``--quiet``'s stdout: what ``echo`` would print but the table's lines and the '#' lines around
    it, so the verdict, its findings and the report's path remain."""

    def table_or_comment(line: str) -> bool:
        first = line.split(maxsplit=1)[:1]
        return line.startswith("#") or bool(first and first[0].isdigit())  # a row of the table: its size

    def said(text: str) -> None:
        kept = [ln for ln in text.splitlines() if not table_or_comment(ln)]
        if kept:
            echo("\n".join(kept))

    return said


def run_pipeline(opts: Options, site: Site, echo: Callable[[str], None] = print,
                 progress: Progress | None = None) -> int:
    """The whole sweep on ``site``: the run's stages (``netbench.run.stages``) with sweep's policy;
    its exit status (``run.execute.exit_status``). A signal or a full disk at any stage
    (``netbench.common.interrupts``) ends it with run.json saying so."""
    echo = verdict_only(echo) if opts.report.quiet else echo
    plain = not opts.report.quiet  # off a terminal, the rounds on stderr; --quiet (cron) keeps its mail short
    return run_stages(SweepStages(opts, progress or Progress(plain=plain, own_terminal=True)), site, echo)


@dataclass
class SweepStages:
    """Sweep's policy over the run's stages (``netbench.run.stages.StagePolicy``): the inventory and
    the plan before the run directory (bad input leaves none, what the inventory found stays), the
    whole plan in one launch, its suspects re-tested within ``--confirm-budget``, the report and
    ``run.execute.exit_status``."""

    opts: Options
    progress: Progress | None = None
    entries: list[HostEntry] = field(default_factory=list)
    records: list[NodeInventory] = field(default_factory=list)
    switches: Switches = field(default_factory=Switches)
    planned: Planned | None = None
    rows: GrowingRows | None = None
    """The run's pair rows, read once, by the confirm step and the pair table after it."""

    def open(self, site: Site, echo: Callable[[str], None]) -> Opened:
        """Hosts, inventory, switches and the plan, then the run directory."""
        opts = self.opts
        self.entries = entries = site.hosts()
        run_id = getattr(site, "run_id", None) or new_run_id()  # a site may label what it makes with it
        RunDir.check_free(opts.report.out, run_id)  # an --out holding a run: before the inventory, not after
        if not site.one_machine:
            where = opts.site.hosts_file or getattr(site, "source", None) or f"the {site.name} allocation"
            echo(f"# netbench sweep over {len(entries)} host(s) from {where} ({site.name})"
                 + ("; inventory first" if opts.site.inventory else ""))
        self.records, self.switches = _inventory_first(opts, site, entries, run_id, echo)
        live = self._live(echo)
        try:
            check_distinct(entries, self.records)  # one machine under two names: refused before any rank
            if not live:
                first = self.records[0]
                # not the command line's fault: nothing measured is the table's ``error`` (3)
                raise NetbenchError(f"no host could be reached or run a rank ({len(entries)} tried; "
                                    f"{first.host}: {first.status}: {first.error}): nothing to measure",
                                    exit_code=3)
            nodes = {n.host: n for n in self.records}
            self.planned = plan_run(opts, site, live, nodes, self.switches, run_id)
        except NetbenchError as exc:
            if self.records:  # what the inventory found stays, with why nothing was measured
                rundir = RunDir.create(opts.report.out, run_id=run_id)
                rundir.write_inventory(self.records)
                rundir.write_run(command="sweep", launcher=site.name, status="failed", error=str(exc))
            raise
        rundir = RunDir.create(opts.report.out, run_id=run_id)
        counted = live if self.records else []  # the counters go where the inventory went
        return Opened(site, rundir, Stage("measuring", rundir), echo, progress=self.progress, counted=counted,
                      history=HistoryStage(self.opts.report.history))

    def _live(self, echo: Callable[[str], None]) -> list[HostEntry]:
        """The hosts the inventory found able to run ranks (all of them without one), the others said."""
        nodes = {n.host: n for n in self.records}
        for n in [n for n in self.records if not n.ok][:20]:
            said = f"# {n.host}: {n.status}: {n.error} (left out of the sweep)"
            echo(terminal_safe(said, keep_newlines=False))
        for other in shared_runs(self.records):  # another netbench run on these hosts (launch/marker.py)
            echo(f"# {other.line()}")
        return [e for e in self.entries if e.name not in nodes or nodes[e.name].ok]

    def inventory(self, run: Opened) -> None:
        """What the inventory and the switches found, and the run so far, into the run directory."""
        assert self.planned is not None
        # --confirm-budget auto becomes seconds here, where the hosts are known: run.json's options say them
        retest = RetestOptions(self.opts.retest.seconds(len(self.planned.slots)))
        self.opts = replace(self.opts, retest=retest)
        rundir, records = run.rundir, self.records
        for name, text in self.switches.saved.items():
            (rundir.path / name).write_text(text)
        if records:
            rundir.write_inventory(records)
        rundir.write_run(
            command="sweep", topology=self.switches.uplinks,
            host_labels={e.name: e.labels for e in self.entries}, hosts_file=self.opts.site.hosts_file,
            scheduler_job=run.site.job_id,
            left_out={n.host: f"{n.status}: {n.error}" for n in records if not n.ok} or None,
        )

    def plan(self, run: Opened) -> Planned:
        """The plan made before the run directory, said."""
        assert self.planned is not None
        announce(self.opts, run.site, self.planned, run.rundir, run.echo)
        return replace(self.planned, options=self.opts.to_json(),
                       start_timeout_s=self.opts.site.start_timeout_s)

    def measure(self, run: Opened, planned: Planned, launch: Launch) -> Outcome:
        """The whole plan in one launch."""
        assert planned.plan is not None
        self.rows = GrowingRows(run.rundir)
        return launch.run(planned.plan, planned.slots, launcher_name=run.site.name, print_table=in_table,
                          # one group: its first fault ends it
                          fail_fast=self.opts.pairs.patterns == ["world"])

    def confirm(self, run: Opened, planned: Planned, launch: Launch, outcome: Outcome) -> None:
        """The pairwise phase's suspects re-tested (``confirm``), each launch a follow-up of the run."""
        retest_s = self.opts.retest.confirm_budget_s
        assert retest_s is not None and self.rows is not None
        if "pairwise" in self.opts.pairs.patterns and retest_s > 0 and outcome.status == "completed":
            run.mark.enter("re-tests")
            confirm(replace(launch, follow_up=True), outcome, retest_s, self.opts.report.rules, self.rows)

    def report(self, run: Opened, outcome: Outcome | None, confirmed: None) -> int:
        """The closing lines, the report, and the exit status."""
        assert outcome is not None and self.rows is not None
        if outcome.status == "completed":
            run.mark.enter("report")  # every measurement is in: the closing lines and the report
        print_pairs(self.rows(), run.echo)
        if outcome.status == "interrupted":  # execute recorded the stop; ``stopped`` says where it came
            raise as_interrupted(KeyboardInterrupt())
        findings = None
        if self.opts.report.report:
            findings = finish_report(run.rundir, run.echo, policy=self.opts.report.rules, history=run.history)
            judged(run.site, run.rundir, findings, None, run.echo)  # Kubernetes' --k8s-label / --k8s-taint
        fail_on = self.opts.report.fail_on
        return exit_status(outcome, run.rundir, findings, judged=self.opts.report.report, fail_on=fail_on)

    def stopped(self, run: Opened, stop: Interrupted) -> NoReturn:
        """run.json says where the stop came (``Stage``), and the stop goes on up."""
        assert isinstance(run.mark, Stage)
        raise run.mark.stopped(stop, run.echo) from None


def _inventory_first(
    opts: Options, site: Site, entries: list[HostEntry], run_id: str, echo: Callable[[str], None]
) -> tuple[list[NodeInventory], Switches]:
    """The inventory (``--inventory``) and the switches, before the run directory: stopped here, a
    run directory still says how the run ended."""
    try:
        timeout_s = opts.site.inventory_timeout_s
        records = site.inventory(entries, echo, timeout_s=timeout_s) if opts.site.inventory else []
        return records, site.switches(entries, echo)
    except KeyboardInterrupt as exc:
        rundir = RunDir.create(opts.report.out, run_id=run_id)
        rundir.write_inventory([])  # none came back: a run directory, with nothing judged
        stop = as_interrupted(exc)
        rundir.write_run(command="sweep", launcher=site.name, hosts_file=opts.site.hosts_file,
                         scheduler_job=site.job_id, status="interrupted", signal=stop.signal,
                         error=f"{stop.what} during the inventory", stopped_in="inventory", ended=utc_now())
        echo(f"# {stop.what} during the inventory; run directory {rundir.path}")
        raise stop from None


@dataclass
class Stage(StageMark):
    """Where a sweep is (``StageMark``), and how run.json says a stop there."""

    rundir: RunDir | None = None

    def fields(self, stop: Interrupted) -> dict[str, Any]:
        """run.json's fields for ``stop`` here: stopped in the report, every measurement is in and the
        status stays; before it, the run is ``interrupted``."""
        assert self.rundir is not None
        said = {"signal": stop.signal, "stopped_in": self.name}
        if self.all_measured:
            return {**said, "error": f"{stop.what} while writing the report: every measurement is in "
                                     f"(netbench report {self.rundir.path} writes it)"}
        where = {"measuring": " while measuring",
                 "re-tests": " during the re-tests: the suspects' re-tests were cut short"}.get(self.name, "")
        return {**said, "status": "interrupted", "error": stop.what + where, "ended": utc_now()}

    def stopped(self, stop: Interrupted, echo: Callable[[str], None]) -> Interrupted:
        """Record ``stop`` (a stop ``execute`` recorded already is said again, the same), say it, and
        give it back to be raised."""
        assert self.rundir is not None
        self.rundir.write_run(**self.fields(stop))
        echo(f"# {stop.what} ({self.name}); what was measured stays in {self.rundir.path}")
        return stop

    def last_words(self, stop: Interrupted) -> None:
        """A second signal: the one write it waits for (``interrupts.on_exit_now``)."""
        fields = self.fields(stop)
        fields["error"] = fields["error"] + "; a second signal ended it at once"
        assert self.rundir is not None
        self.rundir.write_run(**fields)


RetestLaunch = Launch
"""A run's re-test launch (``netbench simulate``'s confirm step makes one): the run's one ``Launch``."""


def confirm(
    launch: Launch, outcome: Outcome, budget_s: float, policy: Policy | None, read_rows: GrowingRows
) -> Retested:
    """Re-test the suspects of the pairwise phase (``outcome``: how its launch went) against
    known-good partners within ``budget_s`` (``--confirm-budget``, all of it for measuring: the report
    comes after) with ``netbench.confirm``'s loop, preflight's, and record the verdicts in run.json's
    ``retests``, which the report reads as its re-test evidence, and what ran in its ``confirm``.
    ``read_rows``: the run's rows, not read yet (its first read is the analysis' own)."""
    from netbench.confirm import SWEEP_WORDS, Budget, RailSetup, RetestSetup, retest_suspects, unusable_hosts
    from netbench.reports.engine import load_context, run_rules
    from netbench.reports.pairrows import NO_ROUND, MetPairs

    rundir = launch.rundir
    launch.echo(f"# re-tests within {budget_s:g} s (--confirm-budget)")
    files = read_rows.files_now()
    ctx = load_context(rundir.path, policy=policy)  # before the budget: all of it is for measuring
    findings = run_rules(ctx)
    read_rows.take(ctx.pairs, ctx.row_count, files)  # the rows the analysis read: not again
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
        rails=RailSetup(lambda phases, gate: measure(phases, gate, rails=True), rundir),
    )

    def measure(phases: PhaseList, gate: PhaseGate, rails: bool = False) -> Outcome:
        def before(phase: Any) -> bool:  # each re-test phase said as it starts, or why not
            go = gate(phase)
            what = "rail group(s)" if rails else "pair(s)"
            launch.echo(f"# {phase.name}: " + (f"{len(phase.groups)} {what}" if go else "no budget left"))
            return go

        return launch(phases, before, rails=rails)

    done = retest_suspects(setup, measure)
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
    for i, failure in list(rows.failed.items())[:PAIRS_SHOWN]:
        echo(terminal_safe(f"#   {rows.names[rows.a[i]]} <-> {rows.names[rows.b[i]]}: {failure.why}"))
    if len(rows.failed) > PAIRS_SHOWN:
        echo(f"#   ... and {len(rows.failed) - PAIRS_SHOWN} more failed pair measurements (results.jsonl)")
    sys.stdout.flush()
