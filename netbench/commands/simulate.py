"""``netbench simulate``: a sweep on a simulated fat tree, with planted faults, and its real report."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from netbench.commands._history import history_options
from netbench.commands._options import FAIL_ON
from netbench.commands._params import BUDGET, DURATION, PAIR_SIZE_LIST, SIZE, Count, Number
from netbench.defaults import (
    MAX_AHEAD,
    MAX_COUNT,
    SIM_MAX_NIC_GBPS,
    SIM_MAX_NODES,
    SIM_MAX_OVERSUBSCRIPTION,
    SIM_MAX_RAILS,
    SIM_NOISE_SHAPES,
)

if TYPE_CHECKING:
    from netbench.preflight import PreflightOptions
    from netbench.sim.fabric import Fault


@click.command(
    "simulate",
    short_help="Sweep a simulated fabric with planted faults; real plan, run directory and report.",
    epilog="""\b
Examples:
  netbench simulate --nodes 64 --leaves 4 --oversubscription 2 --fault node:node0042=0.8 --seed 1
  netbench simulate --nodes 16 --fault link:node0003,node0012=0.5 --fault uplink:leaf02=0.5
  netbench simulate --nodes 256 --leaves 8 --tiers 3 --pods 2 --fault intermittent:node0007=0.5@0.3
  netbench simulate --nodes 64 --physics multiplicative --noise 0.02 --out runs/sim1
  netbench simulate --nodes 256 --leaves 16 --noise-shape t3 --pair-sizes 1G --confirm-budget 0
  netbench simulate --preflight --nodes 1024 --leaves 32 --tiers 3 --pods 4 \\
      --fault node:node0100=0.5 --fault gpu:node0500 --budget 5m
\b
Faults (repeat --fault): node:NAME=F caps a node's NICs at F x their rate; link:A,B=F slows the
path between two hosts; uplink:SWITCH=F slows a switch's uplink; intermittent:NAME=F@P slows a
node in a share P of the pairwise rounds (default 1/3); gpu:NAME makes a GPU of NAME fall off the
bus during the run (the rank on it fails at its first collective). Hosts are node0001.., leaves
leaf01.., two tiers under "spine", three under pod01.. and "core".
\b
--rails R: rail-optimised, each node has R NICs of --nic-gbps / R, NIC k on rail k's own switches
(r2-leaf01 ...); a pair uses every rail at once, at R x its slowest rail's rate (NCCL's channels
run in lock-step), and rails share nothing. Extra faults there: nic:NAME/K=F (NIC K of a node,
mlx5_K-1 in the inventory), uplink:rK-leafNN=F (one rail switch's uplink). --pattern rail measures
each rail alone: GPU k's group runs on the rail of GPU k's NIC (the GPUs split evenly over the NICs
in order). A node the re-tests confirm slow is re-tested rail by rail, and a slow NIC is named.
\b
--preflight runs `netbench preflight` itself on the fabric instead of a sweep: its inventory rules,
quick pass, re-tests of suspects against known-good partners within --budget, drain rule and report,
through a simulated launcher. Its budget runs on the fabric's clock: phases take their simulated
time, the inventory and each launch the SSH fan-out and rank start-up measured on the test network
(benchmarks/README.md, "Preflight"). stdout: the nodes to drain, one per line; stderr: preflight's
progress and verdict, then the truth score (drain list against the planted node faults) and the
fabric time. Exit status as preflight's: 0 pass, 1 warnings, 2 nodes to drain, 3 could not run.
\b
The plan is the one `netbench sweep --hosts --topology` builds (ring, then every pair in rounds leaf
against leaf; --pair-schedule circle for the circle method), and so is the confirm step after it:
the analysis's suspects re-tested against known-good partners within --confirm-budget seconds of
fabric time (one more launch through a simulated launcher: start-up and phases as simulated), the
verdicts in run.json's `retests` and the report saying confirmed or cleared. The run directory holds
the same files (run.json with the topology, plan.json, results.jsonl) plus truth.json, what was
planted. Exit status as `netbench sweep` (docs/exit-status.md): 0 clean, 1 warnings, 2 failures
(bad input also exits 2 with one error line).
""",
)
@click.option("--nodes", type=Count(2, SIM_MAX_NODES), default=16, show_default=True,
              help="Hosts of the fabric, node0001...")
@click.option("--leaves", type=Count(1, SIM_MAX_NODES), default=2, show_default=True,
              help="Leaf switches; the nodes are spread evenly over them.")
@click.option("--tiers", type=click.Choice(["2", "3"]), default="2", show_default=True,
              help="2: leaves under one spine; 3: leaves in --pods pods under a core.")
@click.option("--pods", type=Count(1, SIM_MAX_NODES), default=2, show_default=True, help="3 tiers: pods.")
@click.option("--oversubscription", type=Number(1, SIM_MAX_OVERSUBSCRIPTION),
              default=1.0, show_default=True, help="Leaf uplinks.")
@click.option("--core-oversubscription", type=Number(1, SIM_MAX_OVERSUBSCRIPTION),
              default=1.0, show_default=True, help="Pod uplinks.")
@click.option("--nic-gbps", type=Number(0, SIM_MAX_NIC_GBPS, min_open=True),
              default=180.0, show_default=True, help="Busbw of a healthy pair.")
@click.option("--rails", type=Count(1, SIM_MAX_RAILS), default=1, show_default=True,
              help="NICs a node, NIC k on rail k's switches (rail-optimised; see below).")
@click.option("--physics", type=click.Choice(["bottleneck", "multiplicative"]), default="bottleneck",
              show_default=True,
              help="How faults combine: bottleneck (a pair runs at its narrowest part) or multiplicative "
              "(every slow part on the path slows it further).")
@click.option("--fault", "faults", multiple=True, help="A planted fault (see below); repeatable.")
@click.option("--noise", type=Number(0, 0.5, max_open=True),
              default=0.05, show_default=True, help="CV of each measured time.")
@click.option("--noise-shape", type=click.Choice(SIM_NOISE_SHAPES), default="normal", show_default=True,
              help="The noise's law: normal (1 + CV z on each time), lognormal, skewed (long side slow), "
              "t3/t4/t5 (Student-t), congestion (normal, 1% of measurements 1.1-1.5x longer).")
@click.option("--seed", type=Count(0, 2**32 - 1), default=0, show_default=True,
              help="The noise's seed: the same seed, the same fabric and measurements.")
@click.option("--pattern", "patterns", multiple=True, type=click.Choice(["ring", "pairwise", "rail"]),
              help="Repeatable, as sweep --hosts: ring, pairwise (default both), rail (rank k of each pair "
              "with rank k, every rail at once; each group on its GPU's rail of --rails).")
@click.option("--pair-sizes", type=PAIR_SIZE_LIST, help="Pair sizes (default 64M,256M,1G).")
@click.option("--pair-batch", type=Count(1, MAX_COUNT), help="At most this many pairs at once.")
@click.option("--pair-schedule", type=click.Choice(["auto", "circle", "topology"]), default="auto",
              show_default=True, help="As sweep --hosts: auto is leaf against leaf (the topology is known).")
@click.option("--groups-ahead", type=Count(0, MAX_AHEAD),
              help="Groups each rank makes ahead of their turn (default as sweep: 7 for NCCL across nodes).")
@click.option("-e", "--max-bytes", type=SIZE, default="1G", show_default=True, help="Largest ring size.")
@click.option(
    "--confirm-budget", "confirm_budget_s", type=BUDGET, default="auto",
    show_default=True,
    help="As sweep --hosts: fabric time (90, 2m) for re-testing the pairwise phase's suspects against "
    "known-good partners; the report says confirmed or cleared. auto: 60 s up to 256 nodes, growing with "
    "the square root of the node count beyond (120 s at 1,024). 0: off.",
)
@click.option("--out", type=click.Path(file_okay=False), help="Run directory.")
@click.option("--report/--no-report", default=True, show_default=True,
              help="Write findings.json and report.html (--no-report: the run directory only).")
@FAIL_ON
@click.option("--preflight", "preflight", is_flag=True, help="Run preflight on the fabric (see below).")
@click.option("--budget", "budget_s", type=DURATION, default="120s", show_default=True,
              help="--preflight: its budget, in fabric time.")
@click.option("--rounds", type=Count(1, MAX_COUNT), help="--preflight: pair matchings in the quick pass.")
@click.option("--confirm", type=Count(0, MAX_COUNT), default=2, show_default=True,
              help="--preflight: known-good partners each suspect is re-tested against.")
@history_options
def command(
    nodes: int, leaves: int, tiers: str, pods: int, rails: int, oversubscription: float,
    core_oversubscription: float,
    nic_gbps: float, physics: str, faults: tuple[str, ...], noise: float, noise_shape: str, seed: int,
    patterns: tuple[str, ...], pair_sizes: list[int] | None, pair_batch: int | None, pair_schedule: str,
    groups_ahead: int | None, max_bytes: int, confirm_budget_s: float | None, out: str | None, report: bool,
    fail_on: str,
    preflight: bool, budget_s: float, rounds: int | None, confirm: int, history: str | None,
) -> None:
    """Measure a simulated fat tree as `sweep --hosts` would, then report on it."""
    from click.core import ParameterSource

    from netbench.common.errors import UsageError
    from netbench.preflight import PreflightOptions
    from netbench.run.execute import exit_status, finish_report
    from netbench.run.options import ReportOptions, RetestOptions, from_command_line
    from netbench.sim.fabric import FabricSpec
    from netbench.sim.options import SimOptions
    from netbench.sim.run import simulate

    opts = from_command_line(SimOptions, dict(  # the tree sweep's options are, with the fabric's own
        fabric=FabricSpec(nodes=nodes, leaves=leaves, tiers=int(tiers), pods=pods,
                          oversubscription=oversubscription, core_oversubscription=core_oversubscription,
                          nic_GBps=nic_gbps, physics=physics, rails=rails),
        faults=_planted(faults),
        noise=noise, noise_shape=noise_shape, seed=seed,
        patterns=list(dict.fromkeys(patterns or ("ring", "pairwise"))),  # a pattern given twice: once
        pair_sizes=pair_sizes, pair_batch=pair_batch, pair_schedule=pair_schedule, out=out,
        max_bytes=max_bytes, groups_ahead=groups_ahead,
    ))
    if preflight:
        given = click.get_current_context().get_parameter_source("confirm_budget_s")
        if pair_batch is not None or not report or patterns or given != ParameterSource.DEFAULT:
            raise UsageError(
                "--pair-batch, --pattern, --no-report and --confirm-budget are for the sweep, not --preflight"
            )
        pf = PreflightOptions(budget_s=budget_s, rounds=rounds, confirm=confirm, pair_sizes=pair_sizes,
                              report=ReportOptions(history=history))
        _preflight(opts, pf, fail_on)
    from netbench.sim.progress import Progress

    progress = Progress(lambda line: click.echo(line, err=True))  # stdout keeps the results
    res = simulate(opts, progress=progress)
    click.echo(f"# simulated {nodes} nodes: {res.rows} rows, fabric time {res.fabric_s:.1f} s")
    retest_s = RetestOptions(confirm_budget_s).seconds(nodes)
    if retest_s > 0:
        from netbench.sim.confirm import confirm_on_fabric

        progress.stage(f"analysing {res.rows} rows for suspects to re-test")
        _, spent = confirm_on_fabric(opts, res, retest_s, click.echo)
        click.echo(f"# confirm: {spent:.1f} s of fabric time (the re-test launch, start-up included)")
    click.echo(f"# run directory: {res.rundir.path} (truth.json: what was planted)")
    if report:
        progress.stage("analysing the run: findings.json and report.html")
    from netbench.history.hook import HistoryStage

    stage = HistoryStage(history)  # the report's history section, then the run added: a warning at worst
    findings = finish_report(res.rundir, click.echo, history=stage) if report else None
    stage.add(res.rundir.path)
    raise SystemExit(exit_status(res.outcome, res.rundir, findings, judged=report, fail_on=fail_on))


def _planted(texts: tuple[str, ...]) -> tuple[Fault, ...]:
    """The --fault values, each planted once: a fault given twice is one (truth.json would count it
    twice, and multiplicative physics would slow its part twice); two values for one part are one
    line, since which one the user meant is not ours to guess."""
    from netbench.common.errors import UsageError
    from netbench.sim.fabric import Fault

    planted: dict[tuple[str, str], tuple[Fault, str]] = {}
    for text in texts:
        fault = Fault.parse(text)
        seen, said = planted.setdefault((fault.kind, fault.subject), (fault, text))
        if seen != fault:
            raise UsageError(f"--fault {said!r} and {text!r} plant two values on one part: give one")
    return tuple(fault for fault, _ in planted.values())


def _preflight(opts: object, pf: PreflightOptions, fail_on: str) -> None:
    """Preflight on the fabric: its usual output, the drain list on stdout, the score; exits."""
    from netbench.preflight import format_summary
    from netbench.sim.preflight import simulate_preflight

    res = simulate_preflight(opts, pf, echo=lambda s: click.echo(s, err=True))  # type: ignore[arg-type]
    click.echo(format_summary(res.result, sys.stderr), err=True)
    click.echo(f"# {res.score.text()}", err=True)
    click.echo(
        f"# fabric time {res.fabric_s:.1f} s (inventory, launches and phases as simulated); this machine "
        f"{res.analysis_s:.1f} s; truth.json in {res.result.rundir.path}",
        err=True,
    )
    for host in res.result.drain:
        click.echo(host)
    from netbench.preflight.outputs import situation
    from netbench.reports.verdict import exit_code

    raise SystemExit(exit_code("preflight", situation(res.result), fail_on))
