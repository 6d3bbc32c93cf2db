"""The run's stages, written once, and the policy a command fills them with.

  open -> inventory and switches -> plan -> counters before -> the first launch -> re-tests
       -> counters after -> report -> status -> history

``run_stages`` runs them in this order for every command that measures; a ``StagePolicy`` says what
each one does for the command: ``netbench sweep`` (``pipeline.SweepStages``) opens its run directory
after the inventory and the plan (bad input leaves no run behind), launches its whole plan and
re-tests its suspects within ``--confirm-budget``; ``netbench preflight``
(``preflight.stages.PreflightStages``) opens it first (its inventory is inside its budget), launches
its quick pass, then its escalations and sequential rounds, and ends with its drain list. Both
launch through one ``launch.Launch``; a stop (a signal, a full disk) at any stage is the policy's
to record (``stopped``), with run.json's last words on a second signal the run's ``mark``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from netbench.common.interrupts import DiskFull, Interrupted, as_interrupted, on_exit_now, stopped
from netbench.defaults import START_TIMEOUT_S
from netbench.history.hook import HistoryStage
from netbench.run.launch import Launch

if TYPE_CHECKING:
    from netbench.agents.coordinator import Outcome
    from netbench.agents.launchers import HostSlot
    from netbench.collectives.plan import WorkerPlan
    from netbench.common.rundir import RunDir
    from netbench.inventory.hosts import HostEntry
    from netbench.run.planner import PlanRequest
    from netbench.run.progress import Progress
    from netbench.sites.base import Site

R = TypeVar("R")


class Mark(Protocol):
    """Where a run is (``common.interrupts.StageMark``), and what a second signal writes there."""

    name: str

    def enter(self, name: str) -> None: ...

    def last_words(self, stop: Interrupted) -> None: ...


@dataclass
class Opened:
    """A run once its directory is made: where its hosts are, which stage it is in."""

    site: Site
    rundir: RunDir
    mark: Mark
    echo: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    """The hosts' time (a simulated fabric's own): every launch's phase and start-up times."""
    progress: Progress | None = None
    counted: list[HostEntry] = field(default_factory=list)
    """Hosts whose port counters are read before the first launch and after the re-tests."""
    history: HistoryStage = field(default_factory=lambda: HistoryStage(None))
    """``--history`` / ``--no-history`` (``ReportOptions.history``): the report's history section, and
    where the run adds itself."""


@dataclass(frozen=True)
class Planned:
    """What the stages before the first launch decided, for it and the re-tests."""

    backend: str
    slots: list[HostSlot]
    """The run's hosts in order (the ring's), with their ranks."""
    request: PlanRequest
    plan: WorkerPlan | None = None
    """The first launch's whole plan (sweep's); None: each launch plans its phases from ``request``."""
    engine_note: str | None = None
    """Said once at the start when ``--engine auto`` gave torch for some host (planner.choose_engine)."""
    options: dict[str, Any] = field(default_factory=dict)
    """The options as asked, run.json's."""
    start_timeout_s: float = START_TIMEOUT_S


class StagePolicy(Protocol[R]):
    """What each stage does for one command; ``R``: what the command's run gives (an exit status,
    preflight's result)."""

    def open(self, site: Site, echo: Callable[[str], None]) -> Opened:
        """The hosts, and the run directory made (before or after what ``inventory`` records)."""
        ...

    def inventory(self, run: Opened) -> None:
        """The hosts' inventory and switches, recorded in the run directory."""
        ...

    def plan(self, run: Opened) -> Planned | None:
        """Backend, engine, slots, what the first launch measures; None: nothing to measure."""
        ...

    def measure(self, run: Opened, planned: Planned, launch: Launch) -> Outcome:
        """The first launch (``launch``, recording itself as the run's)."""
        ...

    def confirm(self, run: Opened, planned: Planned, launch: Launch, outcome: Outcome) -> Any:
        """The re-tests after it, launched through ``launch`` too; what the report weighs."""
        ...

    def report(self, run: Opened, outcome: Outcome | None, confirmed: Any) -> R:
        """The report, the verdict and the status (``outcome`` None: nothing was measured)."""
        ...

    def stopped(self, run: Opened, stop: Interrupted) -> R:
        """A stop at any stage after ``open``: recorded in run.json, said, raised or answered."""
        ...


def run_stages(policy: StagePolicy[R], site: Site, echo: Callable[[str], None]) -> R:
    """The run of one command that measures, every stage in its order (module docstring)."""
    run = policy.open(site, echo)
    run.rundir.hold_reserve()  # run.json's last words on a full disk
    on_exit_now(run.mark.last_words)
    try:
        return _stages(policy, run)
    except KeyboardInterrupt as exc:
        return policy.stopped(run, as_interrupted(exc))
    finally:
        on_exit_now(None)
        run.rundir.release_reserve()


def _stages(policy: StagePolicy[R], run: Opened) -> R:
    policy.inventory(run)
    planned = policy.plan(run)
    if planned is None:
        return policy.report(run, None, None)
    launch = Launch(
        planned.request, planned.slots, planned.backend, run.rundir, run.site.launcher, run.echo,
        run.progress, clock=run.clock, start_timeout_s=planned.start_timeout_s, follow_up=False,
        options=planned.options,
    )
    if run.counted:
        run.site.counters("before", run.counted, run.rundir)
    try:
        outcome = policy.measure(run, planned, launch)
        confirmed = policy.confirm(run, planned, launch, outcome)
    finally:  # an interrupted run keeps what its links did until then (a full disk has no room)
        if run.counted and not isinstance(stopped(), DiskFull):
            run.site.counters("after", run.counted, run.rundir)
    judged = policy.report(run, outcome, confirmed)
    run.history.add(run.rundir.path)  # after the verdict, which it never changes (a warning at worst)
    return judged
