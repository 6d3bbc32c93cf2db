"""``netbench preflight``: a yes/no before a large job, and the nodes to drain, within a time budget.

Stages, one function each; the budget covers all of them, inventory included:
  1. inventory + policy  every host probed over SSH; the rules that need no traffic (versions and
                         firmware against the policy and the fleet, GPU count, ports, PCIe) run at once.
                         Nodes that already fail are left out of the measurement (``fail_fast``:
                         stop here when anything fails).
  2. quick pass          a few perfect matchings of node pairs (circle-method rounds, at least
                         ``min_partners`` partners per node so the pair model can judge every node)
                         and the ring over all nodes, at 2-3 sizes. One launch of the ranks.
  3. suspects            the standard analysis of what was measured: nodes flagged slow
                         (``slow_node``) and links flagged slow (``slow_pair``).
  4. escalation          one more launch: each suspect node against a known-good partner per phase,
                         suspect links re-run, the remaining good nodes paired as controls (the phase's
                         own reference, measured under the same load). A phase starts only while the
                         elapsed time + the measured phase time fit the budget.
  5. report              the analysis of everything, each suspect's re-test verdict applied;
                         findings.json, report.html, and the exports the caller asks for.

Drain rule: a node is drained when a ``fail`` finding is about the node itself (subject a node, or a
version/firmware finding shared by fewer than half of the hosts: more than that is a fleet-wide fix,
not a drain). A node measured as slow fails only when the re-tests against known-good partners
confirm it (slow with most of them); unconfirmed it is a warning, cleared by the re-test it is info.
A slow link (the pair slow, both nodes fine elsewhere) and a slow switch never drain a node: they go
to the "check" list. Exit codes: 0 pass, 1 warnings, 2 failures, 3 could not run (bad input, nothing
reachable, budget too small for the quick pass), always with one error line.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from netbench.errors import NetbenchError

EXIT_COULD_NOT_RUN = 3
PAIR_SIZES = {"gloo": [1 << 20, 4 << 20], "nccl": [256 << 20, 1 << 30]}
REPORT_RESERVE_S = 3.0  # kept back from the budget for the final analysis and report.html
MIN_QUICK_PASS_S = 5.0  # less than this left after inventory: the quick pass cannot fit (start-up alone)
FIRST_PHASE_PRIOR_S = 1.0  # estimate for a launch's first phase, before anything was measured
Pair = tuple[str, str]


class PreflightError(NetbenchError):
    """Preflight could not run. Exit 3 for every such case: for preflight 2 means "nodes to drain",
    and a scheduler script must never read an empty drain list after a typo in the hosts file."""

    exit_code = EXIT_COULD_NOT_RUN


@dataclass
class PreflightOptions:
    """What ``netbench preflight`` can be asked; the CLI fills it, tests and benchmarks build it."""

    hosts_file: str
    policy: str | None = None
    """Policy TOML (minimum versions, thresholds, per-rule severities)."""
    baseline: str | None = None
    """A saved baseline's name or a run directory: regressions against it are findings too."""
    budget_s: float = 120.0
    """Wall time for everything after start, inventory and report included."""
    rounds: int | None = None
    """Perfect matchings in the quick pass; None: the policy's min_partners (3)."""
    confirm: int = 2
    """Escalation phases: known-good partners each suspect node is re-tested against."""
    pair_sizes: list[int] | None = None
    """Sizes of the pairs and the ring; None: 1M,4M (gloo) or 256M,1G (NCCL)."""
    collective: str = "all_reduce"
    iters: int = 10
    warmup: int = 2
    timeout_s: float = 15.0
    """A collective silent this long has failed (a hang costs this, not the budget)."""
    ring: bool = True
    backend: str | None = None
    procs_per_host: int = 1
    python: str | None = None
    ssh_config: str | None = None
    accept_new_host_keys: bool = False
    topology: str | None = None
    advertise: str | None = None
    concurrency: int = 64
    out: str | None = None
    fail_fast: bool = False
    """Stop after the inventory when it already fails (no traffic; the drain list may be incomplete)."""
    html: bool = True

    def __post_init__(self) -> None:
        if self.budget_s <= 0:
            raise PreflightError(f"--budget must be > 0, got {self.budget_s:g} s")
        for name in ("confirm", "warmup"):
            if getattr(self, name) < 0:
                raise PreflightError(f"--{name} must be >= 0")
        for name in ("iters", "procs_per_host", "concurrency"):
            if getattr(self, name) < 1:
                raise PreflightError(f"--{name.replace('_', '-')} must be >= 1")
        if self.rounds is not None and self.rounds < 1:
            raise PreflightError("--rounds must be >= 1")
        from collectives.ops import get_collective

        try:
            self.collective = get_collective(self.collective).name
        except ValueError as exc:
            raise PreflightError(f"--collective: {exc}") from None

    def modes(self) -> list[bool]:  # execute() asks every options object which in-place modes run
        return [False]


# -- the clock ---------------------------------------------------------------------------------------
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

    def durations(self) -> list[float]:
        """Start-to-start times of the phases that ran; the last one up to ``ended`` when set."""
        times = [t for _, t in self.started] + ([self.ended] if self.ended is not None else [])
        return [b - a for a, b in pairwise(times)]

    def estimate(self) -> float:
        """The longest phase that has finished (start to the next start), else the prior."""
        measured = [b - a for a, b in pairwise(t for _, t in self.started)]
        return max(measured) if measured else self.prior_s

    def __call__(self, phase: Any) -> bool:
        if self.skipped or not self.budget.fits(self.estimate()):
            self.skipped.append(phase.name)
            return False
        self.started.append((phase.name, self.budget.clock()))
        return True


# -- results -----------------------------------------------------------------------------------------
@dataclass
class Retest:
    """A suspect's re-test verdict: confirmed, cleared, inconclusive or not_run (with the reason)."""

    subject: str  # a host, or "a|b" for a link
    kind: str  # node | link
    verdict: str = "not_run"
    ratios: dict[str, float] = field(default_factory=dict)  # partner -> busbw / the phase's reference
    reason: str = ""


@dataclass
class PreflightResult:
    exit_code: int
    verdict: str  # pass | warn | fail
    drain: list[str]
    check: list[str]
    findings: list[Any]
    rundir: Any
    hosts: list[str]
    info: dict[str, Any]  # budget, stage times, suspects, re-tests: run.json's and the JSON's "preflight"
    report_html: Path | None = None


@dataclass
class _Setup:
    """What both launches share: hosts, ranks per host, the sweep spec, how to reach the hosts."""

    opts: PreflightOptions
    entries: dict[str, Any]
    ssh_opts: Any
    rundir: Any
    backend: str
    device: str
    nprocs: dict[str, int]
    spec: Any
    echo: Callable[[str], None]


# -- stage 1: inputs and inventory -------------------------------------------------------------------
def load_inputs(opts: PreflightOptions) -> tuple[list[Any], Any, Path | None]:
    """Hosts file, policy and baseline, or PreflightError (exit 3) naming what is wrong."""
    from netbench.baselines import BaselineStore
    from netbench.errors import UsageError
    from netbench.hosts import parse_hosts_file
    from reports.policy import PolicyError, load_policy

    try:
        entries = parse_hosts_file(opts.hosts_file)
        policy = load_policy(opts.policy)
        baseline = BaselineStore().resolve(opts.baseline) if opts.baseline else None
    except (UsageError, PolicyError) as exc:
        raise PreflightError(str(exc)) from None
    dup = [h for h, n in Counter(e.name for e in entries).items() if n > 1]
    if dup:
        raise PreflightError(
            f"{opts.hosts_file}: host {dup[0]} appears twice (preflight measures whole nodes: "
            "no gpus= splits)"
        )
    # A node preflight could not reach cannot be vouched for: a failure unless the policy says otherwise.
    policy.severity.setdefault("node_unreachable", "fail")
    return entries, policy, baseline


def analyse(
    rundir: Any, policy: Any, topology: dict[str, str] | None, baseline: Path | None = None
) -> tuple[Any, list[Any]]:
    """The standard analysis of the run directory as it is now: (context, findings worst first)."""
    from reports.analysis import load_context, run_rules

    ctx = load_context(rundir.path, baseline, policy, topology or None)
    return ctx, run_rules(ctx)


def stage_inventory(
    entries: list[Any],
    opts: PreflightOptions,
    ssh_opts: Any,
    rundir: Any,
    budget: Budget,
    echo: Callable[[str], None],
) -> dict[str, Any]:
    """Probe every host (the probe's timeout bounded by the budget); unreachable hosts are records."""
    from inventory.collect import collect_inventory

    timeout = max(1.0, min(60.0, budget.left()))
    # The probe asks the hosts' python3 (or a python= label), not --python: importing torch costs 1-2 CPU
    # seconds a node, and the ranks record the torch/NCCL versions they really use in env.json anyway.
    nodes = collect_inventory(entries, ssh_opts, concurrency=opts.concurrency, probe_timeout=timeout)
    rundir.write_inventory(nodes)
    down = [n for n in nodes if not n.ok]
    for n in down[:20]:
        echo(f"# {n.host}: {n.status}: {n.error}")
    if len(down) == len(nodes):
        first = down[0]
        raise PreflightError(
            f"no host could be reached ({len(nodes)} tried; {first.host}: {first.status}: {first.error})"
        )
    return {n.host: n for n in nodes}


def drain_and_check(findings: list[Any], n_hosts: int) -> tuple[list[str], list[str]]:
    """The drain rule (module docstring): nodes to drain, and links/switches to check."""
    drain: dict[str, None] = {}
    check: dict[str, None] = {}
    for f in findings:
        if f.subject_kind == "pair" and f.severity in ("warn", "fail"):
            check.setdefault(f.subject, None)
        if f.severity != "fail":
            continue
        if f.subject_kind == "node" or (f.subject_kind == "component" and 0 < 2 * len(f.hosts) < n_hosts):
            for h in f.hosts or [f.subject]:
                drain.setdefault(h, None)
        elif f.subject_kind == "switch":
            check.setdefault(f.subject, None)
    return sorted(drain), sorted(check)


# -- stages 2 and 4: measuring -----------------------------------------------------------------------
def quick_rounds(hosts: list[str], partners: int) -> list[list[Pair]]:
    """The first circle-method rounds, until every host has ``partners`` partners (or all of them)."""
    from collectives.pairs import circle_rounds

    want = min(partners, len(hosts) - 1)
    have: Counter[str] = Counter()
    out: list[list[Pair]] = []
    for rnd in circle_rounds(hosts):
        if all(have[h] >= want for h in hosts):
            break
        out.append(rnd)
        for a, b in rnd:
            have[a] += 1
            have[b] += 1
    return out


def make_setup(
    opts: PreflightOptions,
    entries: dict[str, Any],
    nodes: dict[str, Any],
    live: list[str],
    ssh_opts: Any,
    rundir: Any,
    echo: Callable[[str], None],
) -> _Setup:
    """Backend (NCCL when every node has GPUs), ranks per host and the one sweep spec of every phase."""
    from collectives.plan import SweepSpec

    backend = opts.backend
    if backend is None:
        gpus = [len(nodes[h].gpus) for h in live if h in nodes]
        backend = "nccl" if gpus and len(gpus) == len(live) and min(gpus) > 0 else "gloo"
    nprocs = {}
    for h in live:
        e = entries[h]
        if backend == "nccl":
            nprocs[h] = (
                len(e.labels["gpus"].split(",")) if e.labels.get("gpus") else (len(nodes[h].gpus) or 1)
            )
        else:
            nprocs[h] = e.slots or opts.procs_per_host
    sizes = sorted(opts.pair_sizes or PAIR_SIZES[backend])
    try:
        spec = SweepSpec(
            collectives=[opts.collective], sizes=sizes, iters=opts.iters, warmup=opts.warmup, in_place=[False]
        )
        spec.validate_for(backend)
    except ValueError as exc:
        raise PreflightError(str(exc)) from None
    return _Setup(
        opts, entries, ssh_opts, rundir, backend, "cuda" if backend == "nccl" else "cpu", nprocs, spec, echo
    )


def measure(
    setup: _Setup, pair_phases: list[tuple[str, int, list[Pair]]], ring: list[str], gate: PhaseGate
) -> Any:
    """One launch of ranks on the hosts involved: the pair phases, then the ring (if any hosts)."""
    from collectives.plan import GroupSpec, Phase, WorkerPlan
    from netbench.cluster import pair_group_id
    from netbench.launch import HostSlot
    from netbench.launch.ssh import SSHLauncher
    from netbench.sweep import execute

    used = list(dict.fromkeys([h for _, _, pairs in pair_phases for p in pairs for h in p] + ring))
    slots, base = [], 0
    for h in used:
        slots.append(HostSlot(host=h, nprocs=setup.nprocs[h], rank_base=base, labels=setup.entries[h].labels))
        base += setup.nprocs[h]
    ranks = {s.host: s.ranks for s in slots}
    phases: list[Phase] = []
    for name, rnd, pairs in pair_phases:
        groups = [
            GroupSpec(
                id=pair_group_id(a, b), pattern="pair", hosts=[a, b], round=rnd, ranks=ranks[a] + ranks[b]
            )
            for a, b in pairs
        ]
        phases.append(Phase(index=len(phases), name=name, groups=groups, spec=setup.spec))
    if len(ring) >= 2:
        phases.append(
            Phase(
                index=len(phases),
                name="ring",
                spec=setup.spec,
                groups=[
                    GroupSpec(
                        id="ring", pattern="ring", hosts=ring, ranks=[r for h in ring for r in ranks[h]]
                    )
                ],
            )
        )
    plan = WorkerPlan(
        run_id=setup.rundir.run_id,
        backend=setup.backend,
        device=setup.device,
        world_size=base,
        phases=phases,
        op_timeout_s=setup.opts.timeout_s,
        rank_hosts=[s.host for s in slots for _ in s.ranks],
    )
    launcher = SSHLauncher(
        {h: setup.entries[h] for h in used},
        setup.ssh_opts,
        python=setup.opts.python,
        advertise=setup.opts.advertise,
    )
    outcome = execute(
        plan,
        slots,
        launcher,
        setup.rundir,
        setup.opts,
        setup.echo,
        None,
        fail_fast=False,
        launcher_name="ssh",
        print_table=lambda row: False,
        before_phase=gate,
    )
    gate.ended = gate.budget.clock()
    if outcome.status == "interrupted":
        raise KeyboardInterrupt
    return outcome


def plan_escalation(
    suspects: list[str],
    links: list[Pair],
    good: list[str],
    tested: set[frozenset],
    switches: dict[str, str],
    phases: int,
) -> list[list[Pair]]:
    """Perfect matchings for the re-tests: each suspect node with a known-good partner per phase (same
    switch first, a partner it has not met first), each suspect link re-run once (in the first phase
    where both its nodes are free), and the other good nodes paired among themselves as the phase's
    controls. At least as many phases as it takes to re-run every link."""
    out: list[list[Pair]] = []
    tested = set(tested)
    bad = set(suspects)
    pending = [p for p in links if not set(p) & bad]

    def pick(a: str, pool: list[str]) -> str:
        return min(
            pool,
            key=lambda g: (switches.get(g) != switches.get(a), frozenset((a, g)) in tested, pool.index(g)),
        )

    while len(out) < phases or pending:
        busy: set[str] = set()
        pairs: list[Pair] = []
        for a, b in list(pending):
            if not {a, b} & busy:
                pairs.append((a, b))
                busy |= {a, b}
                pending.remove((a, b))
        for s in suspects if len(out) < phases else []:
            free = [g for g in good if g not in busy]
            if free:
                g = pick(s, free)
                pairs.append((s, g))
                busy |= {s, g}
        rest = [g for g in good if g not in busy]
        while len(rest) >= 2:
            a = rest.pop(0)
            b = pick(a, rest)
            rest.remove(b)
            pairs.append((a, b))
        tested |= {frozenset(p) for p in pairs}
        out.append(pairs)
    return out


def judge(
    rows: list[dict[str, Any]],
    rounds: range,
    suspects: list[str],
    links: list[Pair],
    switches: dict[str, str],
    thresholds: Any,
    noise_sigma: float = 0.0,
) -> dict[str, Retest]:
    """Verdicts from one escalation's rows (pair rows whose round is in ``rounds``) at the largest size.

    Each re-test pair's busbw is divided by its phase's reference: the median of that phase's control
    pairs (good-good) of the same hop class, else of any class, else the quick pass's good pairs.
    "Slow" is both practical and beyond noise, as in the rules: a ratio at most the policy's factor
    (slow_node_factor for nodes, slow_pair_factor for links) and log(ratio) at most -mad_k times the
    pair model's noise sigma (log space) from the quick pass. A suspect node is confirmed when slow
    with most of its re-test partners, cleared when slow with none; a link when its re-run is slow.
    """
    import math

    def slow(ratio: float, factor: float) -> bool:
        return ratio <= factor and math.log(max(ratio, 1e-12)) <= -thresholds.mad_k * noise_sigma

    from reports.topology import hop_class

    bad = set(suspects)
    link_keys = {frozenset(p) for p in links}
    out = {s: Retest(s, "node") for s in suspects} | {
        "|".join(sorted(p)): Retest("|".join(sorted(p)), "link") for p in links
    }
    ok = [
        r
        for r in rows
        if r.get("pattern") == "pair"
        and r.get("status") == "ok"
        and (r.get("busbw_GBps") or 0) > 0
        and len(r.get("hosts") or []) == 2
    ]
    esc = [r for r in ok if r.get("round") in rounds]
    if not esc:
        for r in out.values():
            r.reason = "no re-test was measured"
        return out
    top = max(r["bytes"] for r in esc)

    def is_control(hosts: list[str]) -> bool:
        return not (set(hosts) & bad) and frozenset(hosts) not in link_keys

    refs: dict[Any, list[float]] = defaultdict(list)
    for r in ok:
        if r["bytes"] == top and is_control(r["hosts"]):
            rnd = (
                r["round"] if r["round"] in rounds else "quick" if (r["round"] or 0) < rounds.start else None
            )
            refs[(rnd, hop_class(*r["hosts"], switches))].append(r["busbw_GBps"])
            refs[(rnd, None)].append(r["busbw_GBps"])

    def ref(rnd: int, klass: str) -> float | None:
        for key in ((rnd, klass), (rnd, None), ("quick", klass), ("quick", None)):
            if refs.get(key):
                return statistics.median(refs[key])
        return None

    node_ratios: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    link_ratios: dict[str, list[float]] = defaultdict(list)
    for r in esc:
        a, b = r["hosts"]
        base = ref(r["round"], hop_class(a, b, switches)) if r["bytes"] == top else None
        if not base:
            continue
        ratio = r["busbw_GBps"] / base
        if frozenset((a, b)) in link_keys:
            link_ratios["|".join(sorted((a, b)))].append(ratio)
        elif (a in bad) != (b in bad):
            s, g = (a, b) if a in bad else (b, a)
            node_ratios[s][g].append(ratio)
    for s in suspects:
        per = {g: round(statistics.median(v), 3) for g, v in node_ratios.get(s, {}).items()}
        rt = out[s]
        rt.ratios = per
        n_slow = sum(slow(v, thresholds.slow_node_factor) for v in per.values())
        if not per:
            rt.reason = "no known-good partner was free in the phases that ran"
        elif 2 * n_slow > len(per):
            rt.verdict, rt.reason = "confirmed", f"slow with {n_slow} of {len(per)} known-good partner(s)"
        elif n_slow == 0:
            rt.verdict, rt.reason = "cleared", f"at full speed with all {len(per)} known-good partner(s)"
        else:
            rt.verdict, rt.reason = "inconclusive", f"slow with {n_slow} of {len(per)} known-good partners"
    for key, ratios in link_ratios.items():
        rt = out[key]
        med = statistics.median(ratios)
        rt.ratios = {f"run{i + 1}": round(v, 3) for i, v in enumerate(ratios)}
        if slow(med, thresholds.slow_pair_factor):
            rt.verdict, rt.reason = "confirmed", f"re-run at {med:.2f}x the controls"
        else:
            rt.verdict, rt.reason = "cleared", f"re-run at {med:.2f}x the controls"
    for rt in out.values():
        if rt.verdict == "not_run" and not rt.reason:
            rt.reason = "not re-tested"
    return out


def apply_retests(findings: list[Any], retests: dict[str, Retest], default_reason: str) -> list[Any]:
    """Measured slowness drains only when confirmed: slow_node/slow_pair findings get the re-test's
    verdict as evidence; unconfirmed nodes fall from fail to warn, cleared suspects to info."""
    from reports.findings import SEVERITY_RANK, Finding

    seen = set()
    for f in findings:
        if f.rule not in ("slow_node", "slow_pair"):
            continue
        rt = retests.get(f.subject) or Retest(
            f.subject, "node" if f.rule == "slow_node" else "link", reason=default_reason
        )
        seen.add(f.subject)
        f.evidence["retest"] = asdict(rt)
        if rt.verdict == "cleared":
            f.severity = "info"
            f.title = f"Not confirmed on re-test ({rt.reason}): {f.title}"
            f.action = (
                "Nothing to do unless it recurs: the re-test against known-good partners was at full speed."
            )
        elif rt.verdict != "confirmed" and f.rule == "slow_node" and f.severity == "fail":
            f.severity = "warn"
            f.title = f"Unconfirmed ({rt.reason}): {f.title}"
            f.action = (
                f"Not drained: re-test {f.subject} against known-good partners (a longer --budget does)."
            )
    confirmed = {rt.subject for rt in retests.values() if rt.kind == "node" and rt.verdict == "confirmed"}
    for f in findings:  # a switch is "slow" because its nodes are: it fails only with a confirmed one
        if f.rule == "slow_switch" and f.severity == "fail" and not set(f.hosts) & confirmed:
            f.severity = "warn"
            f.title = f"Unconfirmed (no node of it confirmed on re-test): {f.title}"
    for rt in retests.values():
        if rt.kind == "node" and rt.verdict == "confirmed" and rt.subject not in seen:
            findings.append(
                Finding(
                    rule="slow_node",
                    severity="fail",
                    subject_kind="node",
                    subject=rt.subject,
                    title=f"Node {rt.subject} is slow against known-good partners on re-test ({rt.reason})",
                    evidence={"retest": asdict(rt)},
                    hosts=[rt.subject],
                    action=f"Drain {rt.subject}; check its NICs, PCIe links and GPU clocks, then re-test it.",
                )
            )
    findings.sort(key=lambda f: -SEVERITY_RANK[f.severity])
    return findings


# -- the procedure -----------------------------------------------------------------------------------
def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def unusable_hosts(outcome: Any, rows: list[dict[str, Any]]) -> set[str]:
    """Hosts not to re-test nor to re-test against: their ranks exited or never started, or one of
    their pairs failed. A hung ring marks every host down in its launch but names no one, so a
    hang alone does not count (the ring's failure stays a finding of its own)."""
    dead = {f.host for f in outcome.faults if f.kind in ("exit", "start") and f.host}
    flaky = {
        h
        for r in rows
        if r.get("pattern") == "pair" and r.get("status") != "ok"
        for h in r.get("hosts") or []
    }
    return dead | flaky


def find_suspects(findings: list[Any], exclude: set[str], done: set[str]) -> tuple[list[str], list[Pair]]:
    """Nodes flagged slow and links flagged slow that were not re-tested yet (``done``: subjects)."""
    nodes = sorted({f.subject for f in findings if f.rule == "slow_node"} - exclude - done)
    links = sorted(
        {
            tuple(sorted(f.hosts))
            for f in findings
            if f.rule == "slow_pair"
            and len(f.hosts) == 2
            and not set(f.hosts) & (exclude | set(nodes))
            and "|".join(sorted(f.hosts)) not in done
        }
    )
    return nodes, links  # type: ignore[return-value]


def stage_escalation(
    setup: _Setup,
    ctx: Any,
    live: list[str],
    exclude: set[str],
    suspects: list[str],
    links: list[Pair],
    tested: set[frozenset],
    first_round: int,
    phase_s: float,
    startup_s: float,
    budget: Budget,
    thresholds: Any,
) -> tuple[dict[str, Retest], dict[str, Any]]:
    """One launch re-testing the suspects against known-good partners, phase by phase within the budget."""
    m = ctx.pair_model
    effect = {h: float(m.node_effect[i]) for i, h in enumerate(m.hosts)} if m is not None else {}
    good = sorted(
        (h for h in live if h not in suspects and h not in exclude), key=lambda h: -effect.get(h, 0.0)
    )
    plan = [
        p
        for p in plan_escalation(
            suspects, links, good, tested, ctx.switches, setup.opts.confirm if suspects else 0
        )
        if p
    ]
    info: dict[str, Any] = {
        "suspects": suspects + ["|".join(p) for p in links],
        "phases_planned": len(plan),
        "phases_run": 0,
        "skipped": None,
    }
    if not plan or not any(
        set(p) & (set(suspects) | {h for lk in links for h in lk}) for ph in plan for p in ph
    ):
        info["skipped"] = "no known-good partner to re-test against"
        return {}, info
    if not budget.fits(startup_s + phase_s):
        info["skipped"] = (
            f"budget: re-testing needs ~{startup_s + phase_s:.0f} s (start-up + one phase), "
            f"{max(budget.left(), 0):.0f} s left"
        )
        return {}, info
    gate = PhaseGate(budget, prior_s=phase_s)
    setup.echo(
        f"# escalation: up to {len(plan)} phase(s) re-testing {', '.join(info['suspects'])} "
        "against known-good partners"
    )
    rounds = range(first_round, first_round + len(plan))
    t0 = budget.elapsed()
    outcome = measure(
        setup, [(f"re-test {k + 1}/{len(plan)}", rounds[k], p) for k, p in enumerate(plan)], [], gate
    )
    info.update(
        phases_run=len(gate.started),
        phase_s=[round(d, 3) for d in gate.durations()],
        startup_s=outcome.startup_s,
        launch_s=round(budget.elapsed() - t0, 3),
        rounds=[rounds.start, rounds.stop - 1],
        skipped="budget" if gate.skipped else None,
    )
    retests = judge(
        setup.rundir.read_rows(),
        rounds,
        suspects,
        links,
        ctx.switches,
        thresholds,
        m.sigma if m is not None else 0.0,
    )
    for rt in retests.values():
        setup.echo(f"# re-test {rt.subject}: {rt.verdict} ({rt.reason})")
    return retests, info


def run_preflight(
    opts: PreflightOptions,
    echo: Callable[[str], None] = _stderr,
    clock: Callable[[], float] = time.monotonic,
    max_escalations: int = 3,
) -> PreflightResult:
    """Inventory, quick pass, suspects, escalation, report: see the module docstring.

    Escalation repeats (at most ``max_escalations`` launches) while the analysis of everything
    measured names suspects not re-tested yet and the budget allows."""
    from netbench import __version__
    from netbench.cluster import host_switches
    from netbench.rundir import RunDir, utc_now
    from netbench.ssh import SSHOptions
    from reports.export.json_out import verdict
    from reports.findings import worst

    budget = Budget(opts.budget_s, clock=clock)
    stages: dict[str, float] = {}
    info: dict[str, Any] = {"budget_s": opts.budget_s, "stages_s": stages, "escalations": [], "retests": {}}

    def mark(name: str, since: float) -> float:
        now = budget.elapsed()
        stages[name] = round(stages.get(name, 0.0) + now - since, 3)
        return now

    entries, policy, baseline = load_inputs(opts)
    by_name = {e.name: e for e in entries}
    ssh_opts = SSHOptions(ssh_config=opts.ssh_config, accept_new_host_keys=opts.accept_new_host_keys)
    try:
        rundir = RunDir.create(opts.out)
    except OSError as exc:
        raise PreflightError(f"cannot create the run directory: {exc}") from None
    started = utc_now()
    topology = host_switches(entries, opts.topology, echo)
    rundir.write_run(
        command="preflight",
        status="running",
        started=started,
        netbench_version=__version__,
        launcher="ssh",
        hosts=list(by_name),
        hosts_file=str(opts.hosts_file),
        topology=topology,
        host_labels={e.name: e.labels for e in entries},
        budget_s=opts.budget_s,
    )
    echo(
        f"# netbench preflight: {len(entries)} host(s) from {opts.hosts_file}, budget {opts.budget_s:g} s; "
        f"run directory {rundir.path}"
    )

    # 1. inventory and policy
    nodes = stage_inventory(entries, opts, ssh_opts, rundir, budget, echo)
    _, inv_findings = analyse(rundir, policy, topology)
    failing, _ = drain_and_check(inv_findings, len(entries))
    live = [h for h in by_name if nodes[h].ok and h not in failing]
    t = mark("inventory", 0.0)
    echo(
        f"# inventory: {sum(n.ok for n in nodes.values())} of {len(nodes)} reachable in {t:.1f} s; "
        + (f"failing before any traffic: {', '.join(failing)}" if failing else "no node fails it")
    )
    stop = opts.fail_fast and worst(inv_findings) == "fail"
    if stop:
        echo("# --fail-fast: the inventory already fails; nothing measured")
    elif len(live) < 2:
        echo(f"# {len(live)} node(s) left to measure: inventory checks only")

    retests: dict[str, Retest] = {}
    default_reason = "not a suspect after the quick pass"
    if not stop and len(live) >= 2:
        # 2. quick pass
        if budget.left() < MIN_QUICK_PASS_S:
            raise PreflightError(
                f"budget {opts.budget_s:g} s is too small: the inventory took {t:.1f} s and the quick pass "
                f"needs at least {MIN_QUICK_PASS_S + budget.reserve_s:g} s more; run directory {rundir.path}"
            )
        setup = make_setup(opts, by_name, nodes, live, ssh_opts, rundir, echo)
        rounds = quick_rounds(live, opts.rounds or policy.thresholds.min_partners)
        gate = PhaseGate(budget)
        echo(
            f"# quick pass: {len(rounds)} round(s) of pairs{' + the ring' if opts.ring else ''} over "
            f"{len(live)} node(s), {setup.backend}, {opts.collective} at "
            + ", ".join(_size(s) for s in setup.spec.sizes)
        )
        quick = measure(
            setup,
            [(f"pairs {i + 1}/{len(rounds)}", i + 1, rnd) for i, rnd in enumerate(rounds)],
            live if opts.ring else [],
            gate,
        )
        t = mark("quick_pass", t)
        startup_s = quick.startup_s or 0.0
        phase_s = max(gate.durations()[: len(rounds)] or [gate.estimate()])
        info.update(
            startup_s=startup_s, quick_phase_s=[round(d, 3) for d in gate.durations()], rounds=len(rounds)
        )
        if gate.skipped:
            rundir.write_run(status="budget", ended=utc_now())
            raise PreflightError(
                f"budget {opts.budget_s:g} s is too small for the quick pass: {len(gate.skipped)} of its "
                f"phases did not fit (start-up {startup_s:.1f} s, {gate.estimate():.1f} s a phase); what was "
                f"measured is in {rundir.path}"
            )

        # 3. suspects, 4. escalation (again while new suspects appear and the budget allows)
        exclude = unusable_hosts(quick, rundir.read_rows())
        tested = {frozenset(p) for rnd in rounds for p in rnd}
        next_round = len(rounds) + 1
        for _ in range(max_escalations):
            ctx, found = analyse(rundir, policy, topology)
            suspects, links = find_suspects(found, exclude, set(retests))
            t = mark("analysis", t)
            echo(f"# suspects: {', '.join(suspects + ['|'.join(p) for p in links]) or 'none'}")
            if not suspects and not links:
                break
            new, esc = stage_escalation(
                setup,
                ctx,
                live,
                exclude,
                suspects,
                links,
                tested,
                next_round,
                phase_s,
                startup_s,
                budget,
                policy.thresholds,
            )
            info["escalations"].append(esc)
            t = mark("escalation", t)
            if not new:
                default_reason = f"not re-tested: {esc['skipped']}"
                echo(f"# escalation stopped: {esc['skipped']}")
                break
            retests.update(new)
            tested |= {frozenset(p) for p in _pairs_in(rundir.read_rows(), esc["rounds"])}
            next_round = esc["rounds"][1] + 1
            if esc["skipped"]:
                default_reason = "not re-tested: the budget ran out"
                break
        else:
            default_reason = f"not re-tested: {max_escalations} escalations already ran"
        info["retests"] = {k: asdict(v) for k, v in retests.items()}

    # 5. report
    ctx, findings = analyse(rundir, policy, topology, baseline)
    findings = apply_retests(findings, retests, default_reason)
    drain, check = drain_and_check(findings, len(entries))
    html = _write_report(rundir, ctx, findings, opts.html)
    mark("report", t)
    info.update(elapsed_s=round(budget.elapsed(), 3), drain=drain, check=check)
    v, code = verdict(findings)
    rundir.write_run(
        status="completed",
        started=started,
        ended=utc_now(),
        finished=utc_now(),
        seconds=info["elapsed_s"],
        rows=len(rundir.read_rows()),
        preflight=info,
        options=asdict(opts),
        verdict=v,
    )
    return PreflightResult(
        exit_code=code,
        verdict=v,
        drain=drain,
        check=check,
        findings=findings,
        rundir=rundir,
        hosts=list(by_name),
        info=info,
        report_html=html,
    )


def _pairs_in(rows: list[dict[str, Any]], rounds: list[int]) -> set[Pair]:
    return {
        tuple(r["hosts"])
        for r in rows
        if r.get("pattern") == "pair" and rounds[0] <= (r.get("round") or 0) <= rounds[1]
    }


def _size(n: int) -> str:
    from collectives.sizes import format_size

    return format_size(n)


def _atomic_write(path: str | Path, text: str) -> None:
    """Write then rename: a reader (node_exporter, a CI step) never sees half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _write_report(rundir: Any, ctx: Any, findings: list[Any], html: bool) -> Path | None:
    """findings.json always; report.html unless disabled (as ``reports.report.write_report`` does,
    with preflight's re-test verdicts applied to the findings)."""
    import json

    from reports.html import findings_doc, render_html

    _atomic_write(
        rundir.path / "findings.json", json.dumps(findings_doc(findings, ctx), indent=2, default=str) + "\n"
    )
    if not html:
        return None
    path = rundir.path / "report.html"
    _atomic_write(path, render_html(ctx, findings))
    return path


# -- outputs -----------------------------------------------------------------------------------------
def _checks() -> list[str]:
    from reports.rules import RULE_IDS

    return [r for r in RULE_IDS if r not in ("analysis_error", "findings_truncated")]


def json_report(result: PreflightResult) -> dict[str, Any]:
    """``netbench.report/1`` (docs/output-json.md) with preflight's drain rule and a ``check`` list
    of links/switches, plus a ``preflight`` block (budget, stage times, suspects, re-tests)."""
    from reports.export.json_out import to_report

    doc = to_report(result.findings, result.rundir.read_run(), checks=_checks(), hosts=result.hosts)
    doc.update(drain=result.drain, check=result.check, preflight=result.info)
    return doc


def write_outputs(
    result: PreflightResult,
    *,
    json_path: str | None = None,
    junit_path: str | None = None,
    junit_warn_as_failure: bool = False,
    prometheus_path: str | None = None,
    csv_path: str | None = None,
    drain_list: str | None = None,
) -> None:
    """The files a caller asked for, each written atomically."""
    from reports.export import csv as csv_out
    from reports.export import json_out, junit, prometheus

    run = result.rundir.read_run()
    if drain_list:
        _atomic_write(drain_list, "".join(h + "\n" for h in result.drain))
    if json_path:
        _atomic_write(json_path, json_out.dumps(json_report(result)))
    if junit_path:
        _atomic_write(
            junit_path, junit.to_junit(result.findings, _checks(), run, warn_as_failure=junit_warn_as_failure)
        )
    if prometheus_path:
        _atomic_write(
            prometheus_path, prometheus.to_prometheus(result.rundir.read_rows(), result.findings, run)
        )
    if csv_path:
        _atomic_write(csv_path, csv_out.rows_to_csv(result.rundir.read_rows()))


def write_error_outputs(
    message: str,
    *,
    json_path: str | None = None,
    junit_path: str | None = None,
    drain_list: str | None = None,
) -> None:
    """Could not run: the JSON says ``verdict: error`` (exit 3), JUnit one failing case, the drain
    list is emptied (a stale one must not be acted on). Prometheus/CSV are left alone: a stale
    textfile is what the staleness alert is for."""
    from reports.export import json_out, junit
    from reports.findings import Finding

    if drain_list:
        _atomic_write(drain_list, "")
    if json_path:
        _atomic_write(json_path, json_out.dumps(json_out.to_report([], {}, could_run=False, error=message)))
    if junit_path:
        f = Finding(
            rule="preflight",
            severity="fail",
            subject_kind="run",
            subject="preflight",
            title=f"netbench preflight could not run: {message}",
        )
        _atomic_write(junit_path, junit.to_junit([f], [], {}))


def format_summary(result: PreflightResult) -> str:
    """The verdict block for stderr (stdout carries only the drain list)."""
    from reports.summary import format_summary as summary

    lines = [summary(result.findings, "text", result.rundir.read_run(), 10)]
    if result.check:
        lines.append(
            "check (links/switches, not drained): " + ", ".join(c.replace("|", " - ") for c in result.check)
        )
    lines.append(
        f"preflight {result.verdict.upper()} in {result.info['elapsed_s']:.1f} s of a "
        f"{result.info['budget_s']:g} s budget; drain {len(result.drain)} node(s); run directory "
        f"{result.rundir.path}"
    )
    if result.report_html:
        lines.append(f"report: {result.report_html}")
    return "\n".join(lines)
