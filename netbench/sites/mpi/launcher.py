"""The mpirun launcher: Open MPI starts each host's agent (``netbench.agents.worker agent``), one one-process
job per host, over its ssh launcher (``--hosts``) or on this machine.

The agent is the one every launcher starts; it starts the host's ranks itself and the coordinator
reads its lines on mpirun's stdout, so the run, its re-tests, its faults and its report are those of
every other site. The store's secret is the first line of mpirun's stdin, which Open MPI forwards to
its one process (never a command line). Open MPI 5 does not forward stdin's end, so the agent is
stopped by ending mpirun's process group, which takes the remote daemon and the agent with it.

What made mpirun hang, and what stops each:

* ssh waiting on a prompt (a password, an unknown host key) where nobody can answer: ssh runs with
  ``BatchMode=yes`` and ``ConnectTimeout``, and with the ``--ssh-config`` netbench's SSH path uses;
* a daemon calling back, or MPI's TCP traffic going, to an address that is not reachable (a docker or
  management interface): ``oob_tcp_if_include``/``btl_tcp_if_include`` keep both to the network this
  machine reaches the hosts on;
* anything else before the agent starts (a daemon that never reports back, a python that hangs):
  the coordinator's ``--start-timeout``, after which mpirun's process group is ended.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from netbench.agents.launchers import HostSlot, agent_argv, forwarded_env
from netbench.collectives.messages import PREFIX
from netbench.common.errors import UsageError
from netbench.common.text import terminal_safe
from netbench.inventory.hosts import HostEntry, validate_hostname
from netbench.sites.local.launcher import LocalAgent

CONNECT_TIMEOUT_S = 10  # ssh's TCP connect and banner; a node that is off fails in this long

# what mpirun says when a daemon could not be started or was lost; names are validated before use
_REMOTE_HOST = re.compile(r"^\s*Remote host:\s+([A-Za-z0-9_.-]+)\s*$")
_SSH_ERROR = re.compile(
    r"(Permission denied \(|Host key verification failed|Connection (?:refused|timed out|closed)|"
    r"No route to host|Could not resolve hostname|Connection reset|Bad configuration option|"
    r"Can't open user config file)"
)


def find_mpirun() -> str:
    """mpirun on PATH, else beside this python (the pip wheel's); a UsageError without one."""
    mpirun = shutil.which("mpirun") or os.path.join(os.path.dirname(sys.executable), "mpirun")
    if not os.path.exists(mpirun):
        raise UsageError("--launcher mpi needs mpirun on PATH (pip install 'netbench[mpi]' brings Open MPI)")
    return mpirun


def ssh_args(ssh_config: str | None, accept_new_host_keys: bool) -> list[str]:
    """Open MPI's ssh launcher connecting as netbench's SSH path does, and never asking anything."""
    ssh = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}"]
    if ssh_config:
        path = os.path.abspath(ssh_config)
        if re.search(r"\s", path):  # Open MPI splits plm_rsh_args on white space
            raise UsageError("--launcher mpi: the --ssh-config path must not contain white space")
        ssh = ["-F", path, *ssh]
    if accept_new_host_keys:
        ssh += ["-o", "StrictHostKeyChecking=accept-new"]
    return ["--mca", "plm_rsh_agent", "ssh", "--mca", "plm_rsh_args", " ".join(ssh)]


def network_args(here: str) -> list[str]:
    """Open MPI's daemons and its TCP traffic on the network of ``here`` (this machine's address
    towards the hosts) alone; nothing when that network cannot be read."""
    from netbench.collectives.envinfo import subnet_of

    net = subnet_of(here)
    if net is None:
        return []
    return ["--mca", "oob_tcp_if_include", net, "--mca", "btl_tcp_if_include", net]


@dataclass
class MpirunEvents:
    """What mpirun's output said about a daemon it could not start or lost."""

    hosts: list[str] = field(default_factory=list)
    ssh_error: str | None = None

    def read(self, line: str) -> None:
        text = line.strip()
        if (m := _REMOTE_HOST.match(text)) and validate_hostname(m.group(1)) is None:
            if m.group(1) not in self.hosts:
                self.hosts.append(m.group(1))
        elif self.ssh_error is None and _SSH_ERROR.search(text):
            self.ssh_error = terminal_safe(text[:160], keep_newlines=False)

    def describe(self) -> str | None:
        where = f" on {', '.join(self.hosts)}" if self.hosts else ""
        why = f" ({self.ssh_error})" if self.ssh_error else ""
        return f"mpirun lost or could not start its daemon{where}{why}" if where or why else None


class MpirunAgent(LocalAgent):
    """mpirun and its one process: stdout carries the agent's lines and mpirun's own complaints
    (which daemon failed), stderr ssh's; both are read for the reason an agent never came."""

    def __init__(self, host: str, proc: subprocess.Popen):
        super().__init__(host, proc)
        self.events = MpirunEvents()
        assert proc.stderr is not None
        from netbench.sites.slurm.launcher import copy_stderr

        self.stderr_pump = copy_stderr(proc.stderr, self.events.read)

    def lines(self) -> Iterator[str]:
        for line in super().lines():
            if not line.startswith(PREFIX):  # not protocol: mpirun speaking
                self.events.read(line)
            yield line

    def end_reason(self) -> str | None:
        self.stderr_pump.join(2.0)  # its last lines may trail the closed stdout
        return self.events.describe()


class MpirunLauncher:
    """``mpirun -np 1 --host H:1 ... python -m netbench.agents.worker agent`` per host."""

    name = "mpi"

    def __init__(self, entries: dict[str, HostEntry], python: str | None, here: str,
                 ssh: list[str] | None = None):
        self.entries = entries
        self.python = python
        self.here = here  # this machine's address towards the hosts (127.0.0.1 for this machine)
        self.ssh = ssh  # None: this machine alone
        self.mpirun = find_mpirun()

    def store_host(self) -> tuple[str, str]:
        return self.here, self.here

    def argv(self, slot: HostSlot, store_addr: str, store_port: int) -> list[str]:
        argv = [self.mpirun, "-np", "1"]
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        if self.ssh is not None:  # the daemon on the host runs this Open MPI (the pip wheel's, beside python)
            argv += ["--host", f"{slot.host}:1", "--prefix",
                     os.path.dirname(os.path.dirname(os.path.abspath(self.mpirun))),
                     *self.ssh, *network_args(self.here)]
            for name in forwarded_env():  # as over SSH: the user's NCCL_*/GLOO_* reach the host
                argv += ["-x", name]
        entry = self.entries.get(slot.host)
        python = (entry.labels.get("python") if entry else None) or self.python or sys.executable
        return argv + [*agent_argv(python, slot, store_addr, store_port), "--watch-stdin"]

    def start(self, slot: HostSlot, store_addr: str, store_port: int, secret: str) -> MpirunAgent:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if slot.labels.get("gpus") and self.ssh is None:  # a "host" that is a subset of this machine's GPUs
            env["CUDA_VISIBLE_DEVICES"] = slot.labels["gpus"]
        # start_new_session: mpirun's own process group holds every ssh it starts (terminate ends them)
        proc = subprocess.Popen(self.argv(slot, store_addr, store_port), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                start_new_session=True)
        assert proc.stdin is not None
        proc.stdin.write((secret + "\n").encode())  # forwarded to the agent: its first line
        proc.stdin.flush()
        return MpirunAgent(slot.host, proc)
