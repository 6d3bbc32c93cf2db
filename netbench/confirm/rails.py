"""Rail by rail: which NIC of a node confirmed slow is the slow one, on a rail-optimised fabric.

NCCL splits a pair's data evenly over its channels and NICs and the channels run in lock-step, so a
pair runs at R times its slowest rail's rate: one NIC at 0.7 makes its node slow at 0.7 with every
partner, and the pair re-tests that confirm the node cannot say which of its R NICs it is. A rail
group can: rank k of one node with rank k of another (``--pattern rail``) drives GPU k's traffic
through the NIC beside GPU k alone (NCCL picks the NIC nearest the GPU; a gloo rank binds the rail's
netdev), the NIC, its cable and its rail switch, nothing else. So after the pair re-tests, each node
they confirmed slow whose rails the inventory names (``inventory.rails.rail_ports``: GPU-NIC affinity
from ``nvidia-smi topo -m``, the rail switch from LLDP or fabric discovery) is re-tested once more, in
one launch of rail groups: against ``RAIL_PARTNERS`` known-good partners of its own leaf, one a
phase, every rail at once, beside the other good nodes' rail groups as the phase's controls.

Each rail is judged against the same rail's controls of its phase and hop class (``judge_rails``):
a rail at most ``slow_node_factor`` of them with every partner, while another rail of the node is
not, is confirmed: that NIC is named (the finding: ``reports.rules.slow_rail``). Every rail slow is
the node (its PCIe, CPU or GPUs), not one NIC: no NIC is named. Only the first rank of each NIC is
judged (with 8 GPUs and 4 NICs, GPUs 0, 2, 4 and 6): its group and its neighbour's share that NIC,
as the controls' do. The verdicts are ``Retest``s of kind ``nic``, subject ``host/railK`` (K the
GPU's index, ``RailPort.rail``), in run.json's ``retests`` with the others.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.confirm.budget import Budget, Measure, PhaseGate
from netbench.confirm.records import Pair
from netbench.confirm.schedule import plan_escalation
from netbench.inventory.model import NodeInventory
from netbench.inventory.rails import RailPort, rail_ports
from netbench.inventory.topology import hop_class
from netbench.reports.analyses import Retest

if TYPE_CHECKING:
    from netbench.common.rundir import RunDir
    from netbench.reports.context import AnalysisContext
    from netbench.reports.pairrows import MetPairs
    from netbench.reports.policy import Thresholds

RAIL_PARTNERS = 3
"""Known-good partners a node is re-tested against rail by rail, one a phase: a NIC is named when
its rail is slow with each of them. A healthy rail reads at 0.9 of its controls or below (the median
of its three sizes) in about 0.2% of phases under 5% Gaussian noise, so in three of three about 1e-8."""
RAIL_POOL = 32
"""Known-good nodes a rail re-test launch takes at least, partners and controls together: those of
the re-tested nodes' leaves first (a partner of its own leaf, controls of the same hop class beside
it), then the fleet's best. Not the whole fleet, as a pair re-test takes: a rail group carries one
NIC's share, and each of a pair's R groups is a group to make and measure (at 512 nodes x 8 rails,
2,048 groups a phase, where 16 pairs of one leaf give 128)."""
RAIL_RUNS_MIN = 2
"""Partners at least, where the budget ended the phases early: one slow group is not a slow NIC."""
RAIL_KIND = "nic"


def nic_label(port: RailPort) -> str:
    """``NIC mlx5_2/1 (GPU 4's rail)``: the part to replace first, then the rail it serves."""
    return f"NIC {port.nic} (GPU {port.rail}'s rail)"


def rail_subject(host: str, rail: int) -> str:
    """A rail's re-test key: ``node0200/rail4`` (rail = the GPU's index, ``RailPort.rail``)."""
    return f"{host}/rail{rail}"


@dataclass(frozen=True)
class RailSetup:
    """What a caller that can launch rail groups hands the re-test loop (``RetestSetup.rails``)."""

    measure: Measure
    """One launch of the phases' pairs as rail groups (``run.launch.Launch(..., rails=True)``)."""
    rundir: RunDir
    """Where the launch's rows land: the rail rows are read from the row files it adds."""


def node_rails(inventory: list[dict[str, Any]], hosts: set[str]) -> dict[str, dict[int, RailPort]]:
    """Of ``hosts``, those whose inventory names two NICs or more beside their GPUs (rail-optimised):
    host -> {GPU index: its rail's port}, the first GPU of each NIC only."""
    out: dict[str, dict[int, RailPort]] = {}
    for d in inventory:
        if d.get("host") not in hosts:
            continue
        try:
            inv = NodeInventory.from_dict(d)
        except (TypeError, ValueError, KeyError, AttributeError):  # untrusted: no rails known
            continue
        first: dict[str, RailPort] = {}
        for port in rail_ports(inv, len(inv.gpus)):
            if port.nic is not None:
                first.setdefault(port.nic, port)
        if len(first) >= 2:
            out[inv.host] = {p.rail: p for p in first.values()}
    return out


_COLUMNS = ("pattern", "hosts", "rail", "round", "collective", "bytes", "busbw_GBps", "status")


def read_rail_rows(files: list[Path]) -> list[dict[str, Any]]:
    """The rail rows of ``files`` (Parquet parts or JSON-lines tails) that fit the row contract; a
    part that cannot be read is left out (its rows judge nothing)."""
    from netbench.common.jsonread import read_jsonl
    from netbench.common.rows import row_problem
    from netbench.common.rundir import read_part

    out: list[dict[str, Any]] = []
    for p in files:
        got = read_part(p, row_problem) if p.suffix == ".parquet" else read_jsonl(p, row_problem)
        out += [{k: r.get(k) for k in _COLUMNS} for r in got.records if r.get("pattern") == "rail"]
    return out


def _levels(
    rows: list[dict[str, Any]], rounds: range, large: int
) -> dict[tuple[int, int], dict[Pair, float]]:
    """(round, rail) -> {(a, b): the group's level}: the median busbw of its points at the ``large``
    largest sizes of the collective most measured (all_reduce first), each group once."""
    ok = [r for r in rows if r["status"] == "ok" and isinstance(r["busbw_GBps"], int | float)
          and isinstance(r["rail"], int) and isinstance(r["round"], int) and r["round"] in rounds
          and isinstance(r["hosts"], list) and len(r["hosts"]) == 2]
    if not ok:
        return {}
    counts: dict[str, int] = defaultdict(int)
    for r in ok:
        counts[str(r["collective"])] += 1
    coll = "all_reduce" if "all_reduce" in counts else max(counts, key=lambda c: counts[c])
    ok = [r for r in ok if r["collective"] == coll]
    sizes = set(sorted({int(r["bytes"]) for r in ok})[-large:])
    points: dict[tuple[int, int], dict[Pair, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in ok:
        if int(r["bytes"]) in sizes:
            a, b = sorted(r["hosts"])
            points[(r["round"], r["rail"])][(a, b)].append(float(r["busbw_GBps"]))
    return {key: {p: statistics.median(v) for p, v in by.items()} for key, by in points.items()}


def judge_rails(
    rows: list[dict[str, Any]],
    rounds: range,
    nodes: Mapping[str, Mapping[int, RailPort]],
    switches: Mapping[str, str],
    thresholds: Thresholds,
) -> dict[str, Retest]:
    """Each named rail of ``nodes`` judged from the rail rows of ``rounds``: its group with its
    partner against the median of the same rail's control groups of that round (both ends not
    re-tested here) of the same hop class; confirmed when slow (``slow_node_factor`` or below) with
    every partner, at least ``RAIL_RUNS_MIN``, while another rail of the node is not."""
    levels = _levels(rows, rounds, thresholds.large_sizes_max)
    factor = thresholds.slow_node_factor
    retested = set(nodes)
    out: dict[str, Retest] = {}
    for host, ports in nodes.items():
        ratios: dict[int, dict[str, float]] = {k: {} for k in ports}
        for (_, rail), by_pair in levels.items():
            if rail not in ports:
                continue
            for (a, b), level in by_pair.items():
                if host not in (a, b):
                    continue
                klass = hop_class(a, b, switches)
                controls = [v for (x, y), v in by_pair.items()
                            if not {x, y} & retested and hop_class(x, y, switches) == klass]
                if controls and statistics.median(controls) > 0:
                    ratios[rail][b if a == host else a] = level / statistics.median(controls)
        slow = {k for k, rs in ratios.items()
                if len(rs) >= RAIL_RUNS_MIN and all(r <= factor for r in rs.values())}
        fine = {k for k, rs in ratios.items() if rs and not any(r <= factor for r in rs.values())}
        for k, rs in ratios.items():
            out[rail_subject(host, k)] = _verdict(host, ports[k], rs, k in slow, bool(fine), factor)
    return out


def _verdict(host: str, port: RailPort, ratios: dict[str, float], slow: bool, others_fine: bool,
             factor: float) -> Retest:
    """One rail's verdict from its ratios to the controls, one a partner."""
    n, k = len(ratios), sum(r <= factor for r in ratios.values())
    shown = {p: round(r, 4) for p, r in ratios.items()}
    said = f"slow with {k} of {n} known-good partner(s)"
    if not n:
        return Retest(rail_subject(host, port.rail), RAIL_KIND, "not_run", reason="not measured")
    if slow and others_fine:
        return Retest(rail_subject(host, port.rail), RAIL_KIND, "confirmed", shown,
                      f"{said}, at {statistics.median(ratios.values()):.2f}x its rail's controls; "
                      "the node's other rails are not", slow_runs=(k, n))
    if slow:
        return Retest(rail_subject(host, port.rail), RAIL_KIND, "cleared", shown,
                      f"{said}, as every rail of {host} is: the node, not one NIC", slow_runs=(k, n))
    verdict = "cleared" if k == 0 else "inconclusive"
    more = "" if k == 0 or n >= RAIL_RUNS_MIN else f"; re-run {n} time(s) only"
    return Retest(rail_subject(host, port.rail), RAIL_KIND, verdict, shown, said + more, slow_runs=(k, n))


@dataclass(frozen=True)
class RailRun:
    """What the rail re-test launch needs of the loop around it (``launch.retest_suspects``)."""

    setup: RailSetup
    ctx: AnalysisContext
    nodes: dict[str, dict[int, RailPort]]
    good: list[str]
    tested: MetPairs
    first_round: int
    phase_s: float
    startup_s: float
    budget: Budget
    echo: Callable[[str], None]


def rail_pool(good: list[str], nodes: Mapping[str, object], switches: Mapping[str, str]) -> list[str]:
    """The known-good nodes of a rail re-test (``RAIL_POOL``): ``good`` (best first) on the leaves of
    ``nodes``, then the others, at least ``RAIL_POOL`` in all where there are that many."""
    leaves = {switches.get(h) for h in nodes} - {None}
    near = [g for g in good if switches.get(g) in leaves]
    return near + [g for g in good if g not in near][: max(0, RAIL_POOL - len(near))]


def rail_launch(run: RailRun) -> tuple[dict[str, Retest], dict[str, Any]]:
    """One launch re-testing ``run.nodes`` rail by rail (``RAIL_PARTNERS`` phases, as far as the
    budget goes); the verdicts and what ran (``info``, as a pair re-test launch's)."""
    ctx, budget = run.ctx, run.budget
    plan = [p for p in plan_escalation(sorted(run.nodes), [], rail_pool(run.good, run.nodes, ctx.switches),
                                       run.tested, ctx.switches, RAIL_PARTNERS) if p]
    info: dict[str, Any] = {"rails_of": sorted(run.nodes), "phases_planned": len(plan), "phases_run": 0,
                            "skipped": None}
    if not plan or not any(set(p) & set(run.nodes) for ph in plan for p in ph):
        info["skipped"] = "no known-good partner to re-test the rails against"
    # a rail group carries one GPU's share of a pair: a phase takes about as long as a pair phase
    # times the GPUs (those up to the last NIC's first GPU, a GPU short where two share each NIC)
    prior = run.phase_s * (1 + max(k for ps in run.nodes.values() for k in ps))
    if not info["skipped"] and not budget.fits(run.startup_s + prior):
        info["skipped"] = (f"budget: a rail re-test needs ~{run.startup_s + prior:.0f} s (start-up + one "
                           f"phase), {max(budget.left(), 0):.0f} s left")
    if info["skipped"]:  # the node stays confirmed; which of its NICs it is, is not known
        run.echo(f"# rail re-test of {', '.join(sorted(run.nodes))} not run: {info['skipped']}")
        return {}, info
    run.echo(f"# re-testing {', '.join(sorted(run.nodes))} rail by rail against known-good partners: up to "
             f"{len(plan)} phase(s), {max(budget.left(), 0):.0f} s left")
    before = set(run.setup.rundir.row_files())
    rounds = range(run.first_round, run.first_round + len(plan))
    gate = PhaseGate(budget, prior_s=prior, startup_s=run.startup_s)
    t0 = budget.elapsed()
    outcome = run.setup.measure(
        [(f"rail re-test {k + 1}/{len(plan)}", rounds[k], p) for k, p in enumerate(plan)], gate)
    info.update(phases_run=len(gate.started), phase_s=[round(d, 3) for d in gate.durations()],
                startup_s=outcome.startup_s, launch_s=round(budget.elapsed() - t0, 3),
                rounds=[rounds.start, rounds.stop - 1], skipped="budget" if gate.skipped else None)
    rows = read_rail_rows([p for p in run.setup.rundir.row_files() if p not in before])
    retests = judge_rails(rows, rounds, run.nodes, ctx.switches, ctx.policy.thresholds)
    for rt in retests.values():
        if rt.verdict == "confirmed":
            host = rt.subject.split("/", 1)[0]
            port = run.nodes[host][int(rt.subject.rsplit("rail", 1)[1])]
            where = f", rail switch {port.switch}" if port.switch else ""
            run.echo(f"# rail re-test {host} {nic_label(port)}{where}: confirmed ({rt.reason})")
    for host in sorted(run.nodes):
        mine = [rt for rt in retests.values() if rt.subject.startswith(f"{host}/")]
        if not any(rt.verdict == "confirmed" for rt in mine):
            every = bool(mine) and all(rt.verdict == "cleared" and rt.slow_runs and rt.slow_runs[0]
                                       for rt in mine)
            said = ("every rail is slow: the node, not one NIC" if every
                    else "no one rail slow with every partner")
            run.echo(f"# rail re-test {host}: no NIC named ({said})")
    return retests, info
