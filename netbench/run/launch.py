"""One launch of a run's ranks: the one caller of ``run.execute.execute``.

Every launch of every command that measures is a ``Launch``: sweep's launch of its whole plan
(``run``), and the launches of chosen phases on some of the run's hosts (``__call__``): sweep's
re-tests of its suspects (``netbench.confirm``'s ``Measure``; ``netbench simulate`` on its fabric),
preflight's quick pass, its escalations and its sequential rounds. They differ only in the fields
here: which hosts and ranks, the request every plan is built from, whether a launch records itself
as the run's (``follow_up``), and the clock the budget reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from netbench.agents.launchers import HostSlot, Launcher
from netbench.defaults import START_TIMEOUT_S
from netbench.run.execute import RunSettings, execute
from netbench.run.planner import PairRound, PlanRequest, build_plan

if TYPE_CHECKING:
    from netbench.agents.coordinator import Outcome
    from netbench.collectives.plan import Phase, WorkerPlan
    from netbench.common.rundir import RunDir
    from netbench.run.progress import Progress

PhaseList = list[tuple[str, int, list[tuple[str, str]]]]
"""(phase name, the rows' round, its pairs) of one launch (``netbench.confirm.PhaseList``)."""


def _no_table(row: dict[str, Any]) -> bool:
    return False


@dataclass(frozen=True)
class Launch:
    """How a run launches ranks, once or again: its hosts (``slots``, in the ring's order), the
    request each launch's plan is built from, where it records, and how it reaches the hosts."""

    request: PlanRequest
    slots: list[HostSlot]
    backend: str
    rundir: RunDir
    make_launcher: Callable[[list[str]], Launcher]
    echo: Callable[[str], None]
    progress: Progress | None = None
    clock: Callable[[], float] = time.monotonic
    """The hosts' time, which the budget and the phase times are read from (a fabric's own)."""
    start_timeout_s: float = START_TIMEOUT_S
    """How long a launch's agents may take to start (``--start-timeout``)."""
    follow_up: bool = True
    """A later launch of a run that recorded itself already (sweep's re-tests: ``RunSettings.follow_up``).
    False: each launch records itself as the run's (run.json's hosts and options, plan.json, the
    closing summary), as sweep's first launch and every launch of preflight do."""
    options: dict[str, Any] = field(default_factory=dict)
    """The options as asked, which a launch that records itself writes to run.json."""
    store: Any = None
    """The rendezvous store when a user's torchrun, srun or mpirun started the ranks (``netbench worker``)."""

    def run(
        self,
        plan: WorkerPlan,
        slots: list[HostSlot],
        *,
        before_phase: Callable[[Phase], bool] | None = None,
        fail_fast: bool = False,
        print_table: Callable[[dict[str, Any]], bool] | None = _no_table,
        launcher_name: str | None = None,
    ) -> Outcome:
        """Launch ``plan`` on ``slots``: the one call of ``run.execute.execute`` in netbench/.
        ``print_table``: which rows go to nccl-tests' table (None: all of them)."""
        launcher = self.make_launcher([s.host for s in slots])
        settings = RunSettings(
            launcher_name=launcher_name or launcher.name,
            options=self.options,
            fail_fast=fail_fast,
            print_table=print_table,
            before_phase=before_phase,
            follow_up=self.follow_up,
            clock=self.clock,
            start_timeout_s=self.start_timeout_s,
            store=self.store,
        )
        return execute(plan, slots, launcher, self.rundir, settings, self.echo, self.progress)

    def __call__(
        self, phases: PhaseList, gate: Callable[[Phase], bool], ring: Sequence[str] = (), rails: bool = False
    ) -> Outcome:
        """One launch of the pair ``phases`` (then the ring over ``ring``, two hosts or more) on the
        hosts they involve, numbered afresh in the run's order, each phase started only when ``gate``
        lets it (``netbench.confirm.Measure``). ``rails``: each pair as its rail groups instead (rank k
        of both hosts: GPU k's NIC alone, ``--pattern rail``), a rail-by-rail re-test."""
        involved = {h for _, _, pairs in phases for p in pairs for h in p} | set(ring)
        mine, base = [], 0
        for s in self.slots:  # the launch numbers its own ranks
            if s.host in involved:
                mine.append(HostSlot(host=s.host, nprocs=s.nprocs, rank_base=base, labels=s.labels))
                base += s.nprocs
        req = replace(
            self.request,
            patterns=["rail" if rails else "pairwise"] * bool(phases) + ["ring"] * (len(ring) >= 2),
            pair_rounds=[PairRound(*ph) for ph in phases],
        )
        return self.run(build_plan(req, self.rundir.run_id, mine, self.backend), mine, before_phase=gate)
