"""Preflight's options and result records (see netbench.preflight; the budget is netbench.confirm's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbench.common.errors import NetbenchError
from netbench.reports.verdict import ERROR, exit_code
from netbench.run.options import ReportOptions, SiteOptions, flat

EXIT_COULD_NOT_RUN = exit_code("preflight", ERROR)  # the one table (docs/exit-status.md)
MIN_QUICK_PASS_S = 5.0  # less than this left after inventory: the quick pass cannot fit (start-up alone)


class PreflightError(NetbenchError):
    """Preflight could not run. Exit 3 for every such case: for preflight 2 means "nodes to drain",
    and a scheduler script must never read an empty drain list after a typo in the hosts file."""

    exit_code = EXIT_COULD_NOT_RUN


@dataclass
class PreflightOptions:
    """What ``netbench preflight`` can be asked: sweep's site and report records
    (``netbench.run.options``) and preflight's own few fields; the CLI fills it
    (``from_command_line``), tests and benchmarks build it."""

    site: SiteOptions = field(default_factory=lambda: SiteOptions(launcher=None))
    """Where: the hosts file (None inside a Slurm allocation: its nodes, over srun, no SSH), ssh, the
    --k8s-* options; ``launcher`` None: ssh with --hosts, else the Slurm allocation."""
    report: ReportOptions = field(default_factory=ReportOptions)
    """--out and the policy TOML (minimum versions, thresholds, per-rule severities), parsed once."""
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
    fail_fast: bool = False
    """Stop after the inventory when it already fails (no traffic; the drain list may be incomplete)."""
    html: bool = True

    def __post_init__(self) -> None:
        if self.budget_s <= 0:
            raise PreflightError(f"--budget must be > 0, got {self.budget_s:g} s")
        for name in ("confirm", "warmup"):
            if getattr(self, name) < 0:
                raise PreflightError(f"--{name} must be >= 0")
        for name, value in (("iters", self.iters), ("procs_per_host", self.site.procs_per_host),
                            ("concurrency", self.site.concurrency)):
            if value < 1:
                raise PreflightError(f"--{name.replace('_', '-')} must be >= 1")
        if self.rounds is not None and self.rounds < 1:
            raise PreflightError("--rounds must be >= 1")
        from netbench.collectives.ops import get_collective

        try:
            self.collective = get_collective(self.collective).name
        except ValueError as exc:
            raise PreflightError(f"--collective: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        """run.json's ``options``: preflight's command line by name, one flat dict as ever."""
        return {k: v for k, v in flat(self).items() if k not in NOT_PREFLIGHTS}


NOT_PREFLIGHTS = frozenset({"procs", "inventory", "inventory_timeout_s", "start_timeout_s", "report",
                            "fail_on", "quiet"})
"""Leaves of sweep's records that preflight has no option for (its budget bounds the inventory and
the start; --fail-on is the command's): left out of its run.json, which never had them."""


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

