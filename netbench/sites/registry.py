"""The one place the site is chosen: ``--launcher`` (or its default) -> ``netbench.sites.SITES`` (or
another table of ``netbench.sites``: ``INVENTORY``)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from netbench.run.options import Options
from netbench.sites import SITES
from netbench.sites.base import Site, check


def default_launcher(hosts_file: str | None) -> str:
    """slurm when started by salloc/sbatch on several nodes without --hosts (the allocation is the
    hosts file), else ssh (this machine alone without a hosts file either). Inside an srun step
    netbench is a rank, never the launcher."""
    if hosts_file:
        return "ssh"
    from netbench.sites.slurm.scontrol import Allocation

    alloc = Allocation.from_env()
    return "slurm" if alloc is not None and not alloc.in_step and len(alloc.nodes) > 1 else "ssh"


def choose_site(opts: Options, sites: Mapping[str, str] = SITES) -> Site:
    """``--launcher`` (or its default)'s site in ``sites`` (sweep's, or the command's own table),
    with every option it cannot honour refused."""
    site: Site = importlib.import_module(sites[opts.site.launcher]).make(opts)
    check(site, opts)
    return site
