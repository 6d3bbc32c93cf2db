"""Running a plan: the coordinator, the run directory, nccl-tests' table, the summary, the report.

Every path that measures ends here with a plan and started-or-startable ranks: each launch of a
run (``netbench.run.launch.Launch``: sweep on every site, its re-tests, preflight's launches) and
``netbench worker`` (rank 0). This module imports none of them, so they can all import it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from netbench import __version__
from netbench.agents.coordinator import Coordinator, Outcome
from netbench.agents.launchers import HostSlot, Launcher
from netbench.collectives.ops import get_collective
from netbench.collectives.plan import Phase, WorkerPlan
from netbench.collectives.planfile import plan_file_chunks
from netbench.common.interrupts import DiskFull, Interrupted, as_interrupted
from netbench.common.rundir import FOLLOW_UP_PLAN, RunDir, utc_now
from netbench.common.runrecord import rows_line
from netbench.common.text import coloured, terminal_safe
from netbench.defaults import START_TIMEOUT_S
from netbench.reports.rowstore import RowWriter
from netbench.run.progress import Progress, phase_counts
from netbench.run.table import TablePrinter, avg_busbw_lines

if TYPE_CHECKING:
    from netbench.history.hook import HistoryStage


@dataclass
class RunSettings:
    """How a plan is run, besides the plan itself."""

    launcher_name: str
    """Recorded in run.json: local, ssh, mpi, slurm, torchrun."""
    options: dict[str, Any] = field(default_factory=dict)
    """The options as asked, recorded in run.json."""
    fail_fast: bool = True
    """One local run: the first fault ends it. A cluster sweep: a fault costs only its host's groups."""
    print_table: Callable[[dict[str, Any]], bool] | None = None
    """Which rows go to nccl-tests' table; None: all."""
    store: Any = None
    """The rendezvous store when someone else started the ranks (torchrun, srun, mpirun)."""
    before_phase: Callable[[Phase], bool] | None = None
    """Asked before each phase; False skips it (preflight's budget)."""
    follow_up: bool = False
    """A later launch of the same run (``sweep --hosts`` re-testing its suspects): run.json,
    env.json and plan.json stay the run's own, its plan goes to ``FOLLOW_UP_PLAN``, the caller
    records what it ran, and the closing summary is not printed again."""
    clock: Callable[[], float] = time.monotonic
    """What start-up and phase times are read from: a simulated fabric's clock (netbench.sim)."""
    start_timeout_s: float = START_TIMEOUT_S
    """Every agent and rank started within this, or its host is down (``--start-timeout``)."""



def execute(
    plan: WorkerPlan,
    slots: list[HostSlot],
    launcher: Launcher,
    rundir: RunDir,
    settings: RunSettings,
    echo: Callable[[str], None],
    progress: Progress | None = None,
) -> Outcome:
    """Run a plan and keep the run directory true at every moment (run.json says 'running' first).
    Everything echoed goes through the terminal sanitiser: rows, notes and faults carry hosts' text.
    Called by ``netbench.run.launch.Launch`` alone: the one engine every command that measures shares
    (tests/test_one_engine.py)."""
    raw_echo = echo

    def echo(text: str) -> None:
        raw_echo(terminal_safe(text))

    progress = progress or Progress()
    progress.begin(phase_counts(plan.phases))
    gate = settings.before_phase

    def before_phase(phase: Phase) -> bool:  # the phase released is the one progress counts
        progress.clear()  # the gate may say why it stops (a budget)
        go = gate is None or gate(phase)
        if go:
            progress.phase(phase.index)
        return go

    t0 = time.monotonic()
    _record_start(plan, slots, rundir, settings)
    sink = _RowSink(plan, rundir, settings, TablePrinter(write=lambda s: (progress.clear(), echo(s))))
    coord = Coordinator(
        plan,
        slots,
        launcher,
        on_row=sink,
        on_progress=progress.update,
        on_note=lambda s: progress.note(f"netbench: {terminal_safe(s)}"),
        fail_fast=settings.fail_fast,
        store=settings.store,
        before_phase=before_phase,
        clock=settings.clock,
        start_timeout_s=settings.start_timeout_s,
    )
    outcome: Outcome | None = None
    stop: Interrupted | None = None
    try:
        outcome = coord.run()
    except KeyboardInterrupt as exc:  # a signal (netbench.common.interrupts) or a full disk
        stop = as_interrupted(exc)
        outcome = coord.outcome
        outcome.status = "interrupted"
    except BaseException:  # run.json must not say 'completed' for a run that broke off
        coord.outcome.status = "failed"
        raise
    finally:
        progress.end(completed=outcome is not None and stop is None)
        sink.close()
        out = outcome or coord.outcome
        _record_launch(rundir, settings, out, stop, round(time.monotonic() - t0, 3), sink.rows)
    if stop is not None and settings.follow_up:  # a later launch's caller records where it stopped
        raise stop
    if not settings.follow_up:
        summarize(sink.rows, out, echo, rundir.read_inventory() if rundir.inventory_path.exists() else [])
    return out


def _record_start(plan: WorkerPlan, slots: list[HostSlot], rundir: RunDir, settings: RunSettings) -> None:
    """run.json says 'running' and plan.json holds the plan before any rank starts; a follow-up
    launch leaves the run's own and writes its plan beside them (``FOLLOW_UP_PLAN``)."""
    if settings.follow_up:
        rundir.write_plan(plan_file_chunks(plan), FOLLOW_UP_PLAN)
        return
    rundir.write_run(
        status="running",
        started=utc_now(),
        netbench_version=__version__,
        launcher=settings.launcher_name,
        backend=plan.backend,
        device=plan.device,
        hosts=[s.host for s in slots],
        world_size=plan.world_size,
        options=settings.options,
    )
    rundir.write_plan(plan_file_chunks(plan))


class _RowSink:
    """The coordinator's ``on_row``: each row to results.parquet as it comes (its arrivals beside it),
    and to nccl-tests' table when the settings ask for it."""

    def __init__(self, plan: WorkerPlan, rundir: RunDir, settings: RunSettings, table: TablePrinter) -> None:
        self.rundir, self.settings, self.table = rundir, settings, table
        self.modes = {m for p in plan.phases for m in p.spec.in_place}
        self.writer = RowWriter(rundir)  # results.parquet: each row fsync'd in its part's tail first
        self.arrivals: list[Any] = []  # arrivals.jsonl's writer, opened with the first record
        self.rows: list[dict[str, Any]] = []
        self.full: list[DiskFull] = []  # the run directory's disk is full: the rows still coming are lost

    def __call__(self, row: dict[str, Any]) -> None:
        if self.full:
            return
        extra = row.get("extra")
        # a point's arrivals travel in its row and are kept beside it (arrivals.jsonl), not in it:
        # the rows stay one flat measurement each; the reader checks every record
        record = extra.pop("arrivals", None) if isinstance(extra, dict) else None
        try:
            self.writer.write(row)
            if isinstance(record, dict):
                self._keep_arrivals(record)
        except DiskFull as exc:
            self.full.append(exc)
            raise
        self.rows.append(row)
        if self.settings.print_table is None or self.settings.print_table(row):
            coll = get_collective(row["collective"])
            engine = row.get("engine") or "torch"
            n = int(row.get("ranks") or 2)
            oop, ip = (coll.runs(m, engine, n) and m in self.modes for m in (False, True))
            notes = [why for m in self.modes if (why := coll.unmeasured(m, engine, n))]
            self.table.add(row, oop, ip, notes=notes)

    def _keep_arrivals(self, record: dict[str, Any]) -> None:
        if not self.arrivals:
            self.arrivals.append(self.rundir.arrivals_writer())
        extra = record.get("extra")
        samples = extra.pop("samples", None) if isinstance(extra, dict) else None
        self.arrivals[0].write(record)
        if samples is not None:  # --per-iter: every sample, beside the summary, compressed
            self.rundir.append_samples(record, samples)

    def close(self) -> None:
        self.writer.close()
        for w in self.arrivals:
            w.close()


def _record_launch(
    rundir: RunDir, settings: RunSettings, out: Outcome, stop: Interrupted | None, seconds: float,
    rows: list[dict[str, Any]],
) -> None:
    """run.json after a launch, however it ended. A run's hosts lost in any of its launches (a
    re-test, preflight's escalation) stay named: a later launch adds to what an earlier one
    recorded, never replaces it."""
    earlier = rundir.read_run()
    lost = {"down_hosts": sorted(set(earlier.get("down_hosts") or []) | out.down_hosts),
            "faults": list(earlier.get("faults") or []) + [asdict(f) for f in out.faults]}
    if settings.follow_up:
        rundir.write_run(**lost)
    else:
        _record_end(rundir, out, stop, seconds, rows, lost)


def _record_end(
    rundir: RunDir, out: Outcome, stop: Interrupted | None, seconds: float, rows: list[dict[str, Any]],
    lost: dict[str, Any],
) -> None:
    """run.json's end of a launch: its status first (and, when stopped, by what; ``lost``: the hosts
    lost so far, this launch's added), then env.json, which a full disk may cost (run.json has the
    reserve: ``RunDir.hold_reserve``)."""
    said = {"signal": stop.signal, "error": stop.what} if stop is not None else {}
    rundir.write_run(
        status=out.status,
        ended=utc_now(),
        seconds=seconds,
        rows=len(rows),
        rows_failed=sum(1 for r in rows if r.get("status") != "ok"),
        startup_s=out.startup_s,
        phases=out.phases,
        **lost,
        **said,
    )
    try:
        rundir.write_env(out.env)
    except DiskFull:
        if stop is None:
            raise


def summarize(
    rows: list[dict[str, Any]],
    outcome: Outcome,
    echo: Callable[[str], None],
    inventory: list[dict[str, Any]] | None = None,
) -> None:
    """The closing lines: each headline (large-message busbw) with its % of the physical ceiling the
    inventory gives (or why that is unknown) and the published reference it matches (the bundled
    table; a policy's own references apply in the report)."""
    from netbench.reports.ceilings import (
        TERMINAL_PATTERNS,
        headline_lines,
        headlines,
        large_message_summary,
        references,
    )

    summary = [s for s in large_message_summary(rows) if s["pattern"] in TERMINAL_PATTERNS]
    echo("#")
    for line in headline_lines(headlines(rows, inventory or [], references(), TERMINAL_PATTERNS),
                               TERMINAL_PATTERNS):
        echo(line)
    if summary and all(s["ranks"] < 2 for s in summary):
        echo(
            "# one rank: nothing crossed a link, so there is no bus bandwidth to report; out-of-place "
            "times are this device's local copy, in-place ones the call's own cost"
        )
    wrong = sum(r.get("wrong") or 0 for r in rows if r.get("status") == "ok")
    failed = [r for r in rows if r.get("status") != "ok"]
    echo(f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}")
    for line in avg_busbw_lines(rows):  # nccl-tests' closing line, one a collective (scripts grep for it)
        echo(line)
    echo(f"# {rows_line(len(rows), len(failed))}; status {outcome.status}")
    for f in outcome.faults:
        echo(f"# fault: {f.message}")


class Judged(list):
    """``finish_report``'s findings, with the row counts of the rows the analysis read (ok and
    right, failed or wrong): ``exit_status`` takes them from here, so nothing reads the rows again
    after the verdict line (at 4,096 nodes that second pass took minutes)."""

    row_counts: tuple[int, int] | None = None


def finish_report(
    rundir: RunDir,
    echo: Callable[[str], None],
    baseline: str | None = None,
    policy: str | None = None,
    topology: str | None = None,
    history: HistoryStage | None = None,
) -> list[Any] | None:
    """Write findings.json and report.html and print the summary; the findings, or None when the
    report could not be made: that never costs the measurements (they are on disk already), it only
    warns, and the run gets no verdict (``exit_status``). ``history``: the run's history stage (the
    report's history section, the run's tables kept for it)."""
    try:
        from netbench.reports.report import report_run
        from netbench.reports.summary import format_summary

        done = report_run(rundir.path, baseline=baseline, policy=policy, topology=topology,
                          history=history.section if history is not None else None)
        findings, html = Judged(done.findings), done.html
        findings.row_counts = done.row_counts
        said = format_summary(findings, "text", rundir.read_run(), 10, verdict=done.verdict())
        echo(coloured(terminal_safe(said)))
        if html is not None:
            echo(f"report: {html}")
        return findings
    except Exception as exc:  # noqa: BLE001 - measurements are already safe on disk
        print(f"netbench: warning: report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def exit_status(
    outcome: Outcome, rundir: RunDir, findings: list[Any] | None, judged: bool = True, fail_on: str = "fail",
    command: str = "sweep",
) -> int:
    """The exit status of a run that measured, the same on every site (docs/exit-status.md): what
    the run says of itself is read here (a stop, a capability fault, the rows and the coordinator's
    counts), the status is ``reports.verdict``'s (``run_situation`` then ``exit_code``).
    ``judged``: False with --no-report, where the counts alone decide. ``fail_on``: ``--fail-on``."""
    from netbench.reports.verdict import RunFacts, error_situation, exit_code, run_situation

    interrupted = outcome.status == "interrupted"
    stopped = error_situation(as_interrupted(KeyboardInterrupt())) if interrupted else None
    # a capability the options ask for, or sizes whose buffers no rank could allocate: the user's input
    bad_input = any(f.kind in ("capability", "memory") for f in outcome.faults)
    counted = getattr(findings, "row_counts", None)
    ok, bad = (0, 0) if stopped or bad_input else counted or _row_counts(rundir)
    facts = RunFacts(
        stopped=stopped,
        bad_input=bad_input,
        rows=ok + bad,
        counted_failure=bool(outcome.faults or outcome.down_hosts or outcome.status != "completed" or bad),
        judged=judged,
    )
    return exit_code(command, run_situation(facts, findings), fail_on)


def _row_counts(rundir: RunDir) -> tuple[int, int]:
    """(rows measured ok and right, rows failed or wrong) where no analysis read them (--no-report,
    a report that could not be made; then there is no verdict line either): only the columns the
    counts need, a part at a time, or line by line (an older run's results.jsonl, a tail)."""
    import pyarrow as pa

    from netbench.common.rows import row_problem
    from netbench.common.rundir import open_regular, read_jsonl, read_parquet
    from netbench.reports.rowtable import read_rows_frame

    ok = bad = 0
    for path in rundir.row_files():
        try:
            with open_regular(path) as fh:
                cols = read_parquet(fh, ["status", "wrong"]) if path.suffix == ".parquet" else None
        except (pa.ArrowException, OSError):
            cols = None
        if cols is not None:
            wrong = cols.column("wrong").fill_null(0).to_numpy() > 0
            failed = (cols.column("status").to_numpy(zero_copy_only=False) != "ok") | wrong
        elif path.suffix != ".parquet" and (frame := read_rows_frame(path)) is not None:
            failed = ((frame["status"] != "ok") | (frame["wrong"].fillna(0) > 0)).to_numpy()
        else:  # line by line: what the reader would keep (a part it cannot open: none)
            rows = read_jsonl(path, row_problem).records if path.suffix != ".parquet" else []
            failed = [r.get("status") != "ok" or (r.get("wrong") or 0) > 0 for r in rows]
        bad += int(sum(failed))
        ok += len(failed) - int(sum(failed))
    return ok, bad
