"""The re-tests' clock: the ``Budget`` (what measurement may still use, the report's reserve kept
back), the ``PhaseGate`` that starts a launch's phase only while its estimate fits the budget, and
``Measure``, the caller's one launch of re-test phases under that gate."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

from netbench.confirm.records import PhaseList

if TYPE_CHECKING:
    from netbench.agents.coordinator import Outcome
    from netbench.collectives.plan import Phase

REPORT_RESERVE_S = 3.0  # kept back from the budget for the final analysis and report.html
FIRST_PHASE_PRIOR_S = 1.0  # estimate for a launch's first phase, before anything was measured
CANDIDATE_NEAR_BUDGET = 0.5
"""The share of what the budget has left after the suspects and the worst candidates that the near
ones may take (``PhaseGate.near_from``): the rest stays for a later launch (the ends of a link
confirmed slow)."""


@dataclass
class Budget:
    """The time budget. ``left()`` is what measurement may still use (the report's reserve kept back)."""

    total_s: float
    reserve_s: float = REPORT_RESERVE_S
    clock: Callable[[], float] = time.monotonic
    t0: float | None = None

    def __post_init__(self) -> None:
        if self.t0 is None:
            self.t0 = self.clock()
        self.reserve_s = min(self.reserve_s, self.total_s / 4)

    def elapsed(self) -> float:
        return self.clock() - (self.t0 or 0.0)

    def left(self) -> float:
        return self.total_s - self.reserve_s - self.elapsed()

    def fits(self, seconds: float) -> bool:
        return seconds <= self.left()


@dataclass
class PhaseGate:
    """The coordinator's ``before_phase``: a phase starts only if its estimated time fits the budget.

    The estimate is the longest phase measured so far in this launch (``prior_s`` before the first).
    Phase start times are recorded here, which is also how phase times are measured. Once a phase
    is refused, every later one is too: a budget never comes back."""

    budget: Budget
    prior_s: float = FIRST_PHASE_PRIOR_S
    started: list[tuple[str, float]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    ended: float | None = None
    near_from: int | None = None
    """The first phase that re-runs near candidates only (``Candidates.near``): from it on a phase
    starts only while ``CANDIDATE_NEAR_BUDGET`` of what the budget had left then is not spent, so
    that a later launch (the ends of a link confirmed slow, a node slow in its links' re-runs)
    still fits. At 1,024 nodes half of what was left (14 s) held less than a launch's start-up and a
    phase: it was kept, and the loop stopped there anyway, the budget "run out"."""
    keep_s: float = 0.0
    startup_s: float = 0.0
    """A launch's start-up: a reserve (``keep_s``) that cannot hold it and a phase is not kept."""
    kept: bool = False
    """The phases stopped to keep ``keep_s`` for a later launch, not because the budget ran out."""

    def durations(self) -> list[float]:
        """Start-to-start times of the phases that ran; the last one up to ``ended`` when set."""
        times = [t for _, t in self.started] + ([self.ended] if self.ended is not None else [])
        return [b - a for a, b in pairwise(times)]

    def estimate(self) -> float:
        """The longest phase that has finished (start to the next start), else the prior."""
        measured = [b - a for a, b in pairwise(t for _, t in self.started)]
        return max(measured) if measured else self.prior_s

    def __call__(self, phase: Phase) -> bool:
        if len(self.started) == self.near_from and not self.skipped:
            keep = (1 - CANDIDATE_NEAR_BUDGET) * self.budget.left()
            # a reserve too small for a launch (its start-up and a phase) buys nothing: spend it here
            self.keep_s = keep if keep >= self.startup_s + self.estimate() else 0.0
        if self.skipped or not self.budget.fits(self.estimate() + self.keep_s):
            if not self.skipped:
                self.kept = self.budget.fits(self.estimate())
            self.skipped.append(phase.name)
            return False
        self.started.append((phase.name, self.budget.clock()))
        return True


Measure = Callable[[PhaseList, PhaseGate], "Outcome"]
"""One launch of ranks for the re-test phases, each phase started only if the ``PhaseGate`` lets it;
returns the launch's ``coordinator.Outcome`` (its ``startup_s`` is recorded)."""
