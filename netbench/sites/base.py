"""The ``Site`` protocol and the check of options against a site (``netbench.sites``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from netbench.common.errors import UsageError
from netbench.defaults import INVENTORY_TIMEOUT_S

if TYPE_CHECKING:
    from netbench.agents.launchers import Launcher
    from netbench.common.rundir import RunDir
    from netbench.inventory.hosts import HostEntry
    from netbench.inventory.model import NodeInventory
    from netbench.run.options import Options
    from netbench.run.planner import HostCaps

Echo = Callable[[str], None]

SITE_OPTIONS = (
    "hosts_file", "procs", "procs_per_host", "python", "ssh_config", "accept_new_host_keys",
    "advertise", "topology", "launcher",
    "kubeconfig", "k8s_context", "k8s_namespace", "k8s_nodes", "k8s_image", "k8s_resources",
    "k8s_tolerations", "k8s_keep", "k8s_label", "k8s_taint",
    "k8s_idle_only", "k8s_skip_tested_within", "k8s_metrics_configmap",
)
"""The options that say where and how to reach the hosts; every other option is the pipeline's."""

NEEDS_HOSTS = ("pair_batch", "pair_schedule", "uplink_pairs", "pair_sizes", "pair_collectives")
"""Options of the pairs, which one machine has none of (refused there rather than ignored)."""


@dataclass
class Switches:
    """A site's switches: host -> leaf and switch -> parent (``netbench.inventory.topology``), and the
    source text to keep beside the run when the site read it from a scheduler (its own words)."""

    uplinks: dict[str, str] = field(default_factory=dict)
    saved: dict[str, str] = field(default_factory=dict)
    """File name in the run directory -> text (``scontrol show topology``'s output)."""


class Site(Protocol):
    """Where the hosts are and how to reach them; nothing about what is measured."""

    name: str
    """``--launcher``'s value and run.json's ``launcher``."""
    uses: frozenset[str]
    """The SITE_OPTIONS this site honours; the others, given, are refused (``check``)."""
    one_machine: bool
    """The hosts are this machine's ranks alone (no pairs to measure, the world pattern)."""
    job_id: str | None
    """The scheduler's job the run is part of (run.json's ``scheduler_job``), or None."""

    def hosts(self) -> list[HostEntry]:
        """The hosts in order (the ring's order), validated."""
        ...

    def inventory(

        self, entries: list[HostEntry], echo: Echo, timeout_s: float = INVENTORY_TIMEOUT_S

    ) -> list[NodeInventory]:
        """One record per host (unreachable hosts included, with why), each probe within
        ``timeout_s``; [] where the site takes none."""
        ...

    def switches(self, entries: list[HostEntry], echo: Echo) -> Switches: ...

    def caps(self, entries: list[HostEntry], nodes: Mapping[str, NodeInventory]) -> list[HostCaps]:
        """What each host offers the run (GPUs, torch), for the backend's choice."""
        ...

    def launcher(self, hosts: list[str]) -> Launcher:
        """Starts an agent on each of ``hosts`` (the run's, or a re-test's few)."""
        ...

    def counters(self, phase: str, entries: list[HostEntry], rundir: RunDir) -> None:
        """Snapshot the hosts' port counters (``phase``: before | after) where the site can."""
        ...

    # Optional, where a site needs them (``check``, ``judged`` and ``finished`` look for them):
    #   why: dict[str, str]  -- the site's own reason for refusing a site option (``check``);
    #   judged(rundir, findings, drain) -- after the report: what the site does with the verdict
    #     (Kubernetes' --k8s-label / --k8s-taint), one line a node said through ``echo``;
    #   close() -- the end of the run, however it ends: whatever the site made is removed;
    #   close_now() -- the part of close() a second signal leaves time for (``finished``): short,
    #     bounded and idempotent, so whatever the site started does not outlive the process.


def judged(site: Site, rundir: RunDir, findings: list, drain: list[str] | None, echo: Echo) -> None:
    """The site's ``judged`` hook, where it has one (``drain``: preflight's drain list; None: the
    findings' own, ``reports.verdict.judge``)."""
    hook = getattr(site, "judged", None)
    if hook is not None:
        hook(rundir, findings, drain, echo)


@contextmanager
def finished(site: Site) -> Iterator[Site]:
    """``site`` for the block, then its ``close`` hook however the block ends (a signal too). Its
    ``close_now`` is what a second signal does before the process ends, from the block's start to
    the end of ``close`` (a signal in the middle of ``close`` does it too: the clean-up is never
    left half done)."""
    from netbench.common.interrupts import on_exit_now

    now = getattr(site, "close_now", None)
    if now is not None:
        on_exit_now(lambda stop: now(), key="site")
    try:
        yield site
    finally:
        close = getattr(site, "close", None)
        try:
            if close is not None:
                close()
        except KeyboardInterrupt:
            if now is not None:
                now()
            raise
        finally:
            on_exit_now(None, key="site")


def check(site: Site, opts: Options) -> None:
    """Refuse, by name, every site option given that ``site`` does not use, and the pairs' options
    on one machine: an option is honoured or refused, never dropped."""
    from netbench.run.options import PairOptions, SiteOptions, flat

    asked = flat(opts.site) | flat(opts.pairs)
    defaults = flat(SiteOptions()) | flat(PairOptions())
    given = [n for n in SITE_OPTIONS + NEEDS_HOSTS if n != "launcher" and asked[n] != defaults[n]]
    for name in given:
        if name in NEEDS_HOSTS and site.one_machine:
            raise UsageError(f"--{_flag(name)} is about pairs of hosts: --launcher {site.name} without "
                             "--hosts runs this machine's ranks alone (give --hosts)")
        if name in SITE_OPTIONS and name not in site.uses:
            alone = " without --hosts" if site.one_machine else ""
            why = getattr(site, "why", {}).get(name) or _WHY.get(name, "not used there")
            raise UsageError(f"--{_flag(name)} cannot be used with --launcher {site.name}{alone}: {why}")


def _flag(name: str) -> str:
    return {"hosts_file": "hosts", "procs": "procs"}.get(name, name.replace("_", "-"))


_WHY = {
    "hosts_file": "the hosts come from the allocation",
    "procs": "it is this machine's CPU rank count; across hosts give --procs-per-host",
    "procs_per_host": "it is the ranks of each host of --hosts; on this machine give --procs",
    "python": "the ranks run this python",
    "ssh_config": "nothing is reached over SSH there",
    "accept_new_host_keys": "nothing is reached over SSH there",
    "advertise": "the ranks reach this machine on 127.0.0.1",
    "topology": "one machine has no switches to place",
    **{k: "it is for --launcher k8s" for k in SITE_OPTIONS if k.startswith("k8s_") or k == "kubeconfig"},
}


def check_distinct(entries: list[HostEntry], nodes: list[NodeInventory]) -> None:
    """Refuse (UsageError, before any rank starts) two entries that the inventory found to be one
    machine (``inventory.model.same_machine``): measured as a pair, it is loopback judged as the
    network, and a ring with two ranks on it is not the ring the user asked for."""
    from netbench.common.text import terminal_safe
    from netbench.inventory.model import same_machine

    twins = same_machine(nodes)
    if twins is None:
        return
    first, second, why = twins
    where = {e.name: e.source for e in entries}

    def named(host: str) -> str:
        return f"{host} ({where[host]})" if where.get(host) else host

    raise UsageError(terminal_safe(
        f"{named(first.host)} and {named(second.host)} are one machine ({why}): list each machine once",
        keep_newlines=False,
    ))
