"""What a sweep can be asked, as typed records: the command line fills them, tests and benchmarks
build them directly, and the plan builder (``netbench.run.planner``) reads them.

``SweepOptions`` is the measurement every launcher runs (nccl-tests' flags); ``ClusterOptions`` adds
where and how to run across hosts; ``WorkerOptions`` is the same request as seen by a rank that
torchrun, srun or mpirun started. A local run records only ``SweepOptions`` in run.json, so the
file says what was measured, not which cluster flags were left at their defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields

from netbench.collectives.ops import DEFAULT_COLLECTIVES
from netbench.defaults import OP_TIMEOUT_S, START_TIMEOUT_S


@dataclass
class SweepOptions:
    """Everything a sweep on one machine can be asked."""

    collectives: list[str] = field(default_factory=lambda: list(DEFAULT_COLLECTIVES))
    min_bytes: int | None = None  # None: the backend's default
    max_bytes: int | None = None
    factor: int = 2
    iters: int = 20
    warmup: int = 5
    dtype: str = "float"
    op: str = "sum"
    check: bool = True
    in_place: str = "both"  # both | out | in
    root: int = 0
    procs: int | None = None  # CPU ranks on the local machine (gloo)
    backend: str | None = None  # None: nccl when every host has GPUs, else gloo (planner.choose_backend)
    timeout_s: float = OP_TIMEOUT_S
    cuda_graph: bool = False
    step_work: int = 0  # units of work before each timed operation (--step-work; harness.step_work)
    per_iter: bool = False  # keep every rank's per-operation samples (per_iter.jsonl.gz)
    hot_buffers: bool = False  # --hot-buffers: no rotation over buffer slots (harness.Settings.hot_buffers)
    engine: str = "auto"  # auto | nccl | torch | both: the request (netbench.run.planner.choose_engine)
    groups_ahead: int | None = None  # groups a rank makes ahead of their turn; None: planner.groups_ahead
    out: str | None = None
    report: bool = True
    fail_on: str = "fail"  # which verdict exits 2 (reports.verdict.FAIL_ON)

    def modes(self) -> list[bool]:
        return {"both": [False, True], "out": [False], "in": [True]}[self.in_place]


@dataclass
class ClusterOptions(SweepOptions):
    """``netbench sweep`` as typed on the command line: the measurement plus where it runs."""

    hosts_file: str | None = None
    ssh_config: str | None = None
    accept_new_host_keys: bool = False
    python: str | None = None
    procs_per_host: int = 1  # gloo ranks per host; NCCL: one rank per GPU
    patterns: list[str] = field(default_factory=lambda: ["ring", "pairwise"])
    pair_batch: int | None = None  # None: whole rounds at once
    pair_schedule: str = "auto"  # auto | circle | topology (planner.PAIR_SCHEDULES)
    uplink_pairs: int | None = None  # topology schedule: most pairs of a round through one uplink
    # re-testing the pairwise phase's suspects; 0: not at all; None (auto): by the hosts (confirm_budget)
    confirm_budget_s: float | None = None
    start_timeout_s: float = START_TIMEOUT_S
    quiet: bool = False  # --quiet: stdout is the verdict only (pipeline.verdict_only)
    pair_sizes: list[int] | None = None
    pair_collectives: list[str] | None = None
    topology: str | None = None
    policy: str | None = None  # policy TOML for the report and the re-tests
    inventory: bool = True
    inventory_timeout_s: float = 60.0  # --inventory-timeout: a host's probe, then it is left out
    concurrency: int = 64
    advertise: str | None = None  # address hosts use to reach this machine's store
    launcher: str = "ssh"  # ssh | local | mpi | slurm | k8s (netbench.sites)
    # --launcher k8s (netbench.sites.k8s.site): where the pods go and what they ask for
    kubeconfig: str | None = None  # else $KUBECONFIG, ~/.kube/config, or the pod's service account
    k8s_context: str | None = None
    k8s_namespace: str = "default"
    k8s_nodes: str | None = None  # names or a label selector; None: every schedulable GPU node
    k8s_image: str | None = None  # the image with netbench in it: needed (no image of ours is published)
    k8s_resources: tuple[str, ...] = ()  # NAME=COUNT|all; nvidia.com/gpu=all unless given
    k8s_tolerations: tuple[str, ...] = ()  # KEY[=VALUE][:EFFECT] or all
    k8s_keep: bool = False  # leave the pods (and their logs) for a look
    k8s_label: bool = False  # write netbench.io/verdict, run id and busbw class on the nodes
    k8s_taint: bool = False  # NoSchedule taint on the nodes the findings would drain

    def local(self) -> SweepOptions:
        """The measurement part alone (what a run on this machine records as its options)."""
        return SweepOptions(**{f.name: getattr(self, f.name) for f in fields(SweepOptions)})


@dataclass
class WorkerOptions(ClusterOptions):
    """One rank of a sweep started by torchrun, srun or mpirun; ``world`` unless asked otherwise."""

    patterns: list[str] = field(default_factory=lambda: ["world"])


def default_procs() -> int:
    """A few CPU ranks: enough to exercise a real ring, few enough not to oversubscribe small machines."""
    return max(2, min(4, os.cpu_count() or 2))
