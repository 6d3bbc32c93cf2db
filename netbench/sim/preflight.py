"""``netbench simulate --preflight``: the real preflight on a simulated fabric, scored against the truth.

Nothing of preflight is re-implemented: ``netbench.preflight.run_preflight`` runs its stages (the
inventory's rules, the quick pass, suspects, the escalation against known-good partners within the
budget, the report and the drain rule) with a ``Site`` whose hosts are the fabric's: the inventory
records a healthy node would give, and a ``SimLauncher`` for each launch. The hosts file and the
Slurm topology.conf it reads are real files written from the fabric (kept in the run directory),
and its budget runs on the fabric's clock (``launcher.SimClock``): the inventory and each launch cost
what ``launcher.LaunchCosts`` measured on the test network, each phase its simulated time. The
analysis between the stages takes this machine's time, not the fabric's: it is reported apart.

The score compares the drain list with the faults that should drain a node (a capped node, an
intermittent one, a GPU that dropped out); slow links and uplinks belong on the "check" list, so a
node drained for one of them is a false positive.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from netbench.common.rundir import TRUTH_JSON
from netbench.preflight import PreflightOptions, PreflightResult, run_preflight
from netbench.sim.fabric import Fabric
from netbench.sim.launcher import MIN_TIMEOUT_S, LaunchCosts, SimClock, SimHosts
from netbench.sim.options import SimOptions
from netbench.sim.rails import RailFabric, build_fabric
from netbench.sim.run import OBSERVABLE, TRUTH_SCHEMA
from netbench.sites.sim.site import SimSite

DRAINED_BY = ("node", "intermittent", "gpu", "nic")  # fault kinds whose node belongs on the drain list


@dataclass(frozen=True)
class DrainScore:
    """The drain list against the planted node faults."""

    planted: list[str]
    drained: list[str]
    unobservable: list[str]
    """Planted nodes whose fault slowed no pair measurement below 90% of healthy (and did not fail)."""

    @property
    def true_positives(self) -> list[str]:
        return sorted(set(self.drained) & set(self.planted))

    @property
    def precision(self) -> float:
        return len(self.true_positives) / len(self.drained) if self.drained else 1.0

    @property
    def recall(self) -> float:
        return len(self.true_positives) / len(self.planted) if self.planted else 1.0

    def text(self) -> str:
        missed = sorted(set(self.planted) - set(self.drained))
        extra = sorted(set(self.drained) - set(self.planted))
        out = (
            f"truth: drained {len(self.true_positives)} of {len(self.planted)} planted node fault(s); "
            f"precision {self.precision:.2f}, recall {self.recall:.2f}"
        )
        if missed:
            out += f"; missed {', '.join(missed)}"
            hidden = sorted(set(missed) & set(self.unobservable))
            if hidden:
                out += f" ({', '.join(hidden)} never measured below {OBSERVABLE:.0%} of healthy)"
        if extra:
            out += f"; drained without a planted fault: {', '.join(extra)}"
        return out


@dataclass(frozen=True)
class SimPreflight:
    result: PreflightResult
    fabric_s: float
    """The fabric's clock at the end: inventory, launches and phases as simulated."""
    analysis_s: float
    """This machine's time for everything else (the coordinator, the analyses, the report)."""
    score: DrainScore
    truth: dict[str, Any]


def write_inputs(fab: Fabric | RailFabric, where: Path) -> tuple[Path, Path]:
    """The hosts file and the Slurm topology.conf of the fabric (what an operator would hand preflight)."""
    hosts = where / "hosts.txt"
    hosts.write_text("".join(f"{h}\n" for h in fab.hosts))
    below: dict[str, list[str]] = {}
    for name, parent in fab.uplinks().items():
        below.setdefault(parent, []).append(name)
    lines = []
    for sw in sorted(below):
        kind = "Nodes" if below[sw][0] in fab.leaf else "Switches"
        lines.append(f"SwitchName={sw} {kind}={','.join(below[sw])}\n")
    topo = where / "topology.conf"
    topo.write_text("".join(lines))
    return hosts, topo


def simulate_preflight(
    sim: SimOptions,
    preflight: PreflightOptions,
    echo: Callable[[str], None] = lambda s: None,
    costs: LaunchCosts | None = None,
) -> SimPreflight:
    """Run preflight (its options: budget, rounds, confirm, sizes ...) on the fabric ``sim`` describes;
    the hosts file, topology and run directory of ``preflight`` are replaced by the fabric's."""
    fab = build_fabric(sim.fabric, sim.faults)
    hosts = SimHosts(fab, sim, SimClock(), costs or LaunchCosts(), np.random.default_rng(sim.seed))
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="netbench-sim-") as tmp:
        hosts_file, topology = write_inputs(fab, Path(tmp))
        opts = replace(
            preflight, site=replace(preflight.site, hosts_file=str(hosts_file), topology=str(topology)),
            report=replace(preflight.report, out=sim.out), timeout_s=max(preflight.timeout_s, MIN_TIMEOUT_S),
        )
        result = run_preflight(opts, echo, clock=hosts.clock, site=SimSite(hosts, (hosts_file, topology)))
        for f in (hosts_file, topology):  # the inputs stay with the run, as a real run's would be at hand
            shutil.copy(f, result.rundir.path / f.name)
    analysis_s = time.monotonic() - t0
    truth = _truth(sim, hosts)
    planted = sorted({_node(f.subject) for f in fab.faults if f.kind in DRAINED_BY})
    hidden = [_node(f["subject"]) for f in truth["faults"] if f["kind"] in DRAINED_BY and not f["observable"]]
    score = DrainScore(planted, list(result.drain), hidden)
    result.rundir.write_json(TRUTH_JSON, truth | {"score": asdict(score) | {
        "precision": score.precision, "recall": score.recall}})
    result.rundir.write_run(
        hosts_file=str(result.rundir.path / hosts_file.name),
        simulate={"fabric_s": round(hosts.clock(), 3), "seed": sim.seed, "faults": [
            f"{f.kind}:{f.subject}" + ("" if f.kind == "gpu" else f"={f.factor}") for f in fab.faults]},
    )
    return SimPreflight(result, hosts.clock(), analysis_s, score, truth)


def _node(subject: str) -> str:
    """The node a node fault is on (``nic:X/2`` is on X)."""
    return subject.partition("/")[0]


def _truth(sim: SimOptions, hosts: SimHosts) -> dict[str, Any]:
    faults = []
    for k, f in enumerate(hosts.fabric.faults):
        effect = hosts.worst.get(k, 1.0)
        faults.append(
            asdict(f)
            | {
                "drain": f.kind in DRAINED_BY,
                "worst_ratio_to_healthy": round(effect, 4),
                # some pair measurement with it ran below 90% of healthy (a slow ring names no node);
                # a lost GPU shows as failed groups, not as a slower rate
                "observable": f.kind == "gpu" or effect <= OBSERVABLE,
                "slow_phases": hosts.slow_phases.get(f.subject, 0) if f.kind == "intermittent" else None,
            }
        )
    return {
        "schema": TRUTH_SCHEMA,
        "command": "preflight",
        "seed": sim.seed,
        "noise": sim.noise,
        "fabric": asdict(sim.fabric),
        "faults": faults,
    }
