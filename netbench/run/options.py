"""What a command can be asked, as one tree of typed records (torchtitan's config style: a docstring
per field, validation in ``__post_init__``), built once from the command line by ``from_command_line``
and read by every command (sweep, worker, inventory, preflight, simulate).

``Options`` is the sweep's whole request::

    Options
      measure  MeasureOptions   what every rank measures (nccl-tests' flags); the plan builder's
      site     SiteOptions      where the ranks run and how the hosts are reached
        k8s    K8sOptions       --launcher k8s's own
      pairs    PairOptions      which groups are measured and how pairs are scheduled
      retest   RetestOptions    re-testing the pairwise phase's suspects (--confirm-budget)
      report   ReportOptions    the report, its policy (parsed once, here), the run directory

A leaf's name is the click option's destination, so a command's keyword arguments fill the tree by
name and run.json's ``options`` stays the flat dict of those names (``to_json``). Preflight
(``netbench.preflight.options``) composes ``SiteOptions`` and ``ReportOptions`` with its own few
fields; a simulation's measurement is ``MeasureOptions`` and ``PairOptions`` (``netbench.sim.run``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from netbench.collectives.ops import DEFAULT_COLLECTIVES
from netbench.defaults import (
    CONFIRM_BUDGET_HOSTS,
    CONFIRM_BUDGET_S,
    INVENTORY_TIMEOUT_S,
    OP_TIMEOUT_S,
    START_TIMEOUT_S,
)

if TYPE_CHECKING:
    from netbench.reports.policy import Policy


@dataclass
class MeasureOptions:
    """What every rank measures, on one machine or many (the plan builder's ``PlanRequest.measure``)."""

    collectives: list[str] = field(default_factory=lambda: list(DEFAULT_COLLECTIVES))
    """-k: the collectives of the sweep."""
    min_bytes: int | None = None
    """-b: the smallest size; None: the backend's default."""
    max_bytes: int | None = None
    """-e: the largest size; None: the backend's default (capped by free GPU memory)."""
    factor: int = 2
    """-f: each size is the last times this."""
    iters: int = 20
    """-n: timed operations a size."""
    warmup: int = 5
    """-w: untimed operations a size before them."""
    dtype: str = "float"
    op: str = "sum"
    check: bool = True
    """-c: an untimed pass counting wrong elements."""
    in_place: str = "both"
    """both | out | in."""
    root: int = 0
    """-r: the root rank of broadcast and reduce."""
    backend: str | None = None
    """None: nccl when every host has GPUs, else gloo (``planner.choose_backend``)."""
    timeout_s: float = OP_TIMEOUT_S
    """-T: a collective (a group's operation) silent this long has failed."""
    cuda_graph: bool = False
    step_work: int = 0
    """Units of work before each timed operation (``harness.step_work``)."""
    per_iter: bool = False
    """Keep every rank's per-operation samples (per_iter.jsonl.gz)."""
    hot_buffers: bool = False
    """No rotation over buffer slots (``harness.Settings.hot_buffers``)."""
    engine: str = "auto"
    """auto | nccl | torch | both: the request (``planner.choose_engine`` decides the run's one)."""
    groups_ahead: int | None = None
    """Groups a rank makes ahead of their turn; None: ``planner.groups_ahead``."""

    def __post_init__(self) -> None:
        """The dtype, the op and the size range checked as they are given (the collectives are, by the
        command line): a mistyped --dtype is refused before anything starts, not after the hosts'
        inventory and a torch import (the plan builder checks them again for other plans' makers)."""
        from netbench.collectives.dtypes import get_dtype, get_op
        from netbench.common.errors import UsageError

        try:
            get_dtype(self.dtype)
            get_op(self.op)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if self.min_bytes is not None and self.max_bytes is not None and self.min_bytes > self.max_bytes:
            raise UsageError(f"min size {self.min_bytes} is larger than max size {self.max_bytes}")

    def modes(self) -> list[bool]:
        return {"both": [False, True], "out": [False], "in": [True]}[self.in_place]


@dataclass
class K8sOptions:
    """``--launcher k8s`` (``netbench.sites.k8s.site``): where the pods go and what they ask for."""

    kubeconfig: str | None = None
    """Else $KUBECONFIG, ~/.kube/config, or the pod's service account."""
    k8s_context: str | None = None
    k8s_namespace: str | None = None
    """None: the kubeconfig context's namespace, in a pod its own, else default."""
    k8s_nodes: str | None = None
    """Names or a label selector; None: every schedulable GPU node."""
    k8s_image: str | None = None
    """The image with netbench in it: needed (no image of ours is published)."""
    k8s_resources: tuple[str, ...] = ()
    """NAME=COUNT|all; nvidia.com/gpu=all unless given."""
    k8s_tolerations: tuple[str, ...] = ()
    """KEY[=VALUE][:EFFECT] or all."""
    k8s_keep: bool = False
    """Leave the pods (and their logs) for a look."""
    k8s_label: bool = False
    """Write netbench.io/verdict, run id and busbw class on the nodes."""
    k8s_taint: bool = False
    """NoSchedule taint on the nodes the findings would drain."""
    k8s_idle_only: bool = False
    """Only nodes no other pod requests a GPU of (``sites.k8s.selection``)."""
    k8s_skip_tested_within: float | None = None
    """Seconds: leave out nodes that passed within it (their netbench.io/last-run)."""
    k8s_metrics_configmap: str | None = None
    """The ConfigMap the run's Prometheus text and report reference go to (``sites.k8s.metrics``)."""


@dataclass
class SiteOptions:
    """Where the ranks run and how the hosts are reached: the site options (``sites.base.SITE_OPTIONS``,
    refused by a site that does not ``use`` them) and the start-up's bounds."""

    launcher: str | None = "ssh"
    """ssh | local | mpi | slurm | k8s (``netbench.sites``); None (preflight): ssh with a hosts file,
    else the Slurm allocation."""
    hosts_file: str | None = None
    procs: int | None = None
    """CPU ranks on this machine (gloo); None: ``default_procs``."""
    procs_per_host: int = 1
    """gloo ranks a host; NCCL: one rank a GPU."""
    python: str | None = None
    ssh_config: str | None = None
    accept_new_host_keys: bool = False
    advertise: str | None = None
    """The address hosts use to reach this machine's store."""
    topology: str | None = None
    """Slurm topology.conf: each host's leaf switch."""
    concurrency: int = 64
    """Hosts probed at once."""
    inventory: bool = True
    """Probe every host first."""
    inventory_timeout_s: float = INVENTORY_TIMEOUT_S
    """A host's probe, then it is left out as unreachable."""
    start_timeout_s: float = START_TIMEOUT_S
    """Every host's agent and ranks must have started within this."""
    k8s: K8sOptions = field(default_factory=K8sOptions)


@dataclass
class PairOptions:
    """Which groups are measured, and how the pairs of the pairwise phase are scheduled."""

    patterns: list[str] = field(default_factory=lambda: ["ring", "pairwise"])
    """ring | pairwise | rail | intra | world (one machine, ``netbench worker``)."""
    pair_batch: int | None = None
    """At most this many pairs at once; None: whole rounds."""
    pair_schedule: str = "auto"
    """auto | circle | topology (``planner.PAIR_SCHEDULES``)."""
    uplink_pairs: int | None = None
    """Topology schedule: most pairs of a round through one uplink."""
    pair_sizes: list[int] | None = None
    """None: ``defaults.PAIR_SIZES`` of the backend."""
    pair_collectives: list[str] | None = None
    """None: the measurement's collectives."""


@dataclass
class RetestOptions:
    """Re-testing the pairwise phase's suspects against known-good partners (``netbench.confirm``)."""

    confirm_budget_s: float | None = None
    """Seconds of re-tests; 0: none; None (auto): by the hosts, ``seconds``."""

    def __post_init__(self) -> None:
        from netbench.common.errors import UsageError

        budget = self.confirm_budget_s
        if budget is not None and not 0 <= budget < float("inf"):  # nan fails both bounds too
            raise UsageError(f"--confirm-budget must be a finite number of seconds >= 0, got {budget:g}")

    def seconds(self, hosts: int) -> float:
        """The budget on ``hosts`` hosts, the one place ``auto`` becomes seconds: ``CONFIRM_BUDGET_S`` up
        to ``CONFIRM_BUDGET_HOSTS`` hosts and that times the square root of how many times more beyond:
        120 s at 1,024 hosts, 240 at 4,096. A re-test launch's start-up and the fleet's worst pairs
        (re-run 3-5 times each, beside controls) both grow with the fleet: on simulated fabrics 60 s
        decided every planted fault at 256 nodes, and at 1,024 a node slow now and then or a link at
        0.7 was missed in one fabric of ten at 60 s and in none at 120 (benchmarks/README.md, "The
        misses at 1,024 nodes"). The square root is the law through those two; 4,096 is not measured."""
        if self.confirm_budget_s is not None:
            return self.confirm_budget_s
        return CONFIRM_BUDGET_S * max(1.0, hosts / CONFIRM_BUDGET_HOSTS) ** 0.5


@dataclass
class ReportOptions:
    """The run directory, the report and the policy that judges it."""

    out: str | None = None
    """The run directory; None: netbench-runs/<UTC time>-<id>."""
    report: bool = True
    """Write findings.json and report.html at the end."""
    fail_on: str = "fail"
    """Which verdict exits 2 (``reports.verdict.FAIL_ON``)."""
    quiet: bool = False
    """stdout is the verdict only (``pipeline.verdict_only``)."""
    policy: str | None = None
    """The policy TOML of the report and the re-tests; None: the built-in policy."""
    history: str | None = None
    """The fleet history's folder the run adds itself to (``netbench history``); ``off``: none
    (``--no-history``); None: ``$NETBENCH_HISTORY``, else the default (``history.hook.chosen_root``)."""
    rules: Policy | None = field(default=None, repr=False, compare=False)
    """``policy`` parsed, once, in ``__post_init__`` (None only until then; ``replace`` keeps it): the
    report, the re-tests and preflight's stages read this object, never the file again (a broken file
    is bad input before anything runs, not a report that failed at the end)."""

    def __post_init__(self) -> None:
        from netbench.common.errors import UsageError
        from netbench.reports import policy as policies
        from netbench.reports.verdict import FAIL_ON

        if self.fail_on not in FAIL_ON:
            raise UsageError(f"--fail-on must be one of {', '.join(FAIL_ON)}, got {self.fail_on!r}")
        if self.rules is not None:
            return
        try:
            self.rules = policies.load_policy(self.policy)
        except policies.PolicyError as exc:
            raise UsageError(str(exc)) from None


@dataclass
class Options:
    """``netbench sweep`` (and ``netbench worker``) as typed on the command line."""

    measure: MeasureOptions = field(default_factory=MeasureOptions)
    site: SiteOptions = field(default_factory=SiteOptions)
    pairs: PairOptions = field(default_factory=PairOptions)
    retest: RetestOptions = field(default_factory=RetestOptions)
    report: ReportOptions = field(default_factory=ReportOptions)

    def to_json(self) -> dict[str, Any]:
        """run.json's ``options``: every leaf by its name, one flat dict as ever (``flat``)."""
        return flat(self)


T = TypeVar("T")

#: the records a tree's branch field holds: a branch's name says its record, so the command line's
#: flat keyword arguments find their leaf without a table of field paths
BRANCHES: dict[str, type] = {
    "measure": MeasureOptions, "site": SiteOptions, "k8s": K8sOptions, "pairs": PairOptions,
    "retest": RetestOptions, "report": ReportOptions,
}


def _branch(f: Field[Any]) -> bool:
    """A branch: a record of the tree (``report`` is also ReportOptions' own leaf, a bool)."""
    return f.name in BRANCHES and f.default_factory is not MISSING


def from_command_line(record: type[T], given: Mapping[str, Any]) -> T:
    """The one way a command's options become the tree: each click destination fills the leaf of its
    name, the rest keep their declared defaults; a name no leaf has is a programming error."""
    left = dict(given)
    built = _fill(record, left)
    if left:
        raise TypeError(f"{record.__name__} has no option {', '.join(sorted(left))}")
    return built


def _fill(record: type[T], left: dict[str, Any], start: Callable[[], T] | None = None) -> T:
    """``record`` with the leaves ``left`` names taken out of it; ``start``: the record its parent
    declares as the branch's default (a simulation's measurement is NCCL's), else ``record``'s own."""
    args: dict[str, Any] = {}
    for f in fields(record):  # type: ignore[arg-type]
        if not f.init:
            continue
        if _branch(f):
            own = f.default_factory is BRANCHES[f.name]
            args[f.name] = _fill(BRANCHES[f.name], left, None if own else f.default_factory)  # type: ignore[arg-type]
        elif f.name in left:
            args[f.name] = left.pop(f.name)
    return record(**args) if start is None else replace(start(), **args)


def flat(record: Any) -> dict[str, Any]:
    """Every leaf of a tree by its name (the names are unique across the tree): run.json's options and
    ``sites.base.check``'s view of what was given. The parsed policy is not a leaf: its file is."""
    out: dict[str, Any] = {}
    for f in fields(record):
        if f.name == "rules":
            continue
        value = getattr(record, f.name)
        if _branch(f):
            out.update(flat(value))
        else:
            out[f.name] = value
    return out


def leaf_names(record: type) -> set[str]:
    """The leaves' names of a tree type (what a command's options may fill)."""
    names: set[str] = set()
    for f in fields(record):
        if f.name == "rules":
            continue
        names |= leaf_names(BRANCHES[f.name]) if _branch(f) else {f.name}
    return names


def default_procs() -> int:
    """A few CPU ranks: enough to exercise a real ring, few enough not to oversubscribe small machines."""
    return max(2, min(4, os.cpu_count() or 2))
