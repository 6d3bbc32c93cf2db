"""``netbench simulate``'s confirm step: the simulated sweep's suspects re-tested against known-good
partners within ``--confirm-budget`` of fabric time, as ``sweep --hosts`` does after its pairwise phase.

Nothing of it is re-implemented: ``netbench.run.pipeline.confirm`` runs the one re-test loop
(``netbench.confirm.retest_suspects``: the analysis of the run directory, suspects, partners, the
budget gate, verdicts into run.json's ``retests``), and its launch is the sweep's own follow-up launch
(``netbench.run.pipeline.RetestLaunch``: the plan builder, the real coordinator) with a
``launcher.SimLauncher`` for hosts, so the re-test phases run on the fabric the sweep measured (same
faults; a GPU that dropped out stays out). The budget runs on the fabric's clock
(``launcher.SimClock``): the launch costs the SSH fan-out and rank start-up of
``launcher.LaunchCosts``, each phase its simulated time, as ``simulate --preflight`` counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from netbench.confirm import Retested
from netbench.reports.pairrows import GrowingRows
from netbench.run.pipeline import RetestLaunch, confirm
from netbench.sim.launcher import MIN_TIMEOUT_S, SimHosts
from netbench.sim.options import SimOptions
from netbench.sim.rails import build_fabric
from netbench.sim.run import SimResult

RETEST_STREAM = 1
"""The re-test's noise draws from a stream of its own (seed, 1): not the sweep's draws again."""


def confirm_on_fabric(
    opts: SimOptions, swept: SimResult, budget_s: float, echo: Callable[[str], None] = lambda s: None
) -> tuple[Retested, float]:
    """Re-test the suspects of the sweep ``simulate(opts)`` returned (``swept``) within ``budget_s``
    seconds of fabric time; the verdicts (also in run.json's ``retests``, which the report reads) and
    the fabric time the re-tests took (start-up included)."""
    fab = build_fabric(opts.fabric, opts.faults)
    hosts = SimHosts(fab, opts, rng=np.random.default_rng([opts.seed, RETEST_STREAM]))
    sweep = swept.request.measure  # simulated ranks never hang, but their lines take this machine a while
    request = replace(swept.request, measure=replace(sweep, timeout_s=max(sweep.timeout_s, MIN_TIMEOUT_S)))
    slots = list(swept.slots)
    backend = swept.rundir.read_run()["backend"]  # the plan's, as the sweep ran it
    launch = RetestLaunch(request, slots, backend, swept.rundir, hosts.launcher, echo, clock=hosts.clock)
    # start-up as the sweep's launch of every host would have cost it: the estimate the budget weighs
    outcome = replace(swept.outcome, startup_s=hosts.costs.launch_s(len(slots)))
    done = confirm(launch, outcome, budget_s, None, GrowingRows(swept.rundir))
    return done, hosts.clock()
