"""``--launcher mpi``: Open MPI's mpirun starts each host's agent (``netbench.sites.mpi.launcher``). With
--hosts, over its ssh launcher with the SSH settings netbench's own SSH path uses, so the inventory and
port counters are read over SSH as on the ``ssh`` site; without, on this machine (the ``here`` site's
inventory and ranks)."""

from __future__ import annotations

from dataclasses import dataclass

from netbench.agents.launchers import Launcher
from netbench.common.errors import UsageError
from netbench.run.options import Options
from netbench.sites.base import Site
from netbench.sites.local.here import HereSite
from netbench.sites.ssh.site import SshSite


@dataclass
class MpiSite(SshSite):
    name: str = "mpi"

    def launcher(self, hosts: list[str]) -> Launcher:
        from netbench.sites.mpi.launcher import MpirunLauncher, ssh_args

        entries = {e.name: e for e in self.entries if e.name in hosts}
        ssh = ssh_args(self.opts.site.ssh_config, self.opts.site.accept_new_host_keys)
        return MpirunLauncher(entries, self.opts.site.python, here=self.towards(), ssh=ssh)

    def ranks_default_python(self) -> str:
        import sys

        return sys.executable  # launch/mpirun.py: the hosts run this machine's python path

    def towards(self) -> str:
        """This machine's address towards the hosts (``--advertise``, else the route to the first)."""
        from netbench.sites.ssh.launcher import SSHLauncher

        try:
            hosts = {e.name: e for e in self.entries}
            return SSHLauncher(hosts, self.ssh, advertise=self.opts.site.advertise).store_host()[0]
        except OSError as exc:
            raise UsageError(f"--launcher mpi: cannot find the route to {self.entries[0].name}: "
                             f"{exc.strerror or exc}") from None


@dataclass
class MpiHereSite(HereSite):
    name: str = "mpi"

    def launcher(self, hosts: list[str]) -> Launcher:
        from netbench.sites.mpi.launcher import MpirunLauncher

        return MpirunLauncher({}, None, here="127.0.0.1")


def make(opts: Options) -> Site:
    from netbench.sites.mpi.launcher import find_mpirun, ssh_args

    find_mpirun()  # bad input ends here, before anything runs
    if opts.site.hosts_file:
        # a path Open MPI would split: refused now
        ssh_args(opts.site.ssh_config, opts.site.accept_new_host_keys)
        return MpiSite(opts)
    return MpiHereSite(opts)
