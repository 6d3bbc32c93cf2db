"""Preflight's options and result records (see netbench.preflight; the budget is netbench.confirm's)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netbench.common.errors import NetbenchError
from netbench.reports.verdict import ERROR, exit_code

EXIT_COULD_NOT_RUN = exit_code("preflight", ERROR)  # the one table (docs/exit-status.md)
MIN_QUICK_PASS_S = 5.0  # less than this left after inventory: the quick pass cannot fit (start-up alone)


class PreflightError(NetbenchError):
    """Preflight could not run. Exit 3 for every such case: for preflight 2 means "nodes to drain",
    and a scheduler script must never read an empty drain list after a typo in the hosts file."""

    exit_code = EXIT_COULD_NOT_RUN


@dataclass
class PreflightOptions:
    """What ``netbench preflight`` can be asked; the CLI fills it, tests and benchmarks build it."""

    hosts_file: str | None
    """Hosts file; None inside a Slurm allocation: its nodes, over srun (no SSH)."""
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
    sequential: bool = True
    """After the escalation, keep testing every undecided node while the budget lasts
    (``preflight.sequential``); off, the budget is a bound only (a prolog in a hurry)."""
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
    launcher: str | None = None
    """ssh | slurm | k8s; None: ssh with --hosts, else the Slurm allocation."""
    kubeconfig: str | None = None
    k8s_context: str | None = None
    k8s_namespace: str = "default"
    k8s_nodes: str | None = None
    k8s_image: str | None = None
    k8s_resources: tuple[str, ...] = ()
    k8s_tolerations: tuple[str, ...] = ()
    k8s_keep: bool = False
    k8s_label: bool = False
    k8s_taint: bool = False
    """The --k8s-* options of ``--launcher k8s`` (``netbench.run.options.ClusterOptions``' own)."""

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
        from netbench.collectives.ops import get_collective

        try:
            self.collective = get_collective(self.collective).name
        except ValueError as exc:
            raise PreflightError(f"--collective: {exc}") from None


# -- results -----------------------------------------------------------------------------------------
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

