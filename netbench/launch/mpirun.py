"""``netbench sweep --launcher mpi --hosts FILE``: Open MPI's ssh launcher starts the ranks on the hosts.

mpirun ssh-es to every host of the file (one daemon each), the daemons start ``netbench worker``
ranks, rank 0 coordinates into the run directory made here (status ``prepared``; rank 0 claims it,
as under ``--launcher slurm``), so the rows and the report are those of any other launcher.

What made mpirun hang, and what stops each:

* ssh waiting on a prompt (a password, an unknown host key) where nobody can answer: ssh runs with
  ``BatchMode=yes`` and ``ConnectTimeout``, and with the ``--ssh-config`` netbench's SSH path uses;
* tree spawn (daemons ssh-ing on to other hosts, which have no key to do it): ``plm_rsh_no_tree_spawn``,
  every daemon is started from this machine;
* a daemon calling back, or MPI's TCP traffic going, to an address that is not reachable (a docker or
  management interface): ``oob_tcp_if_include``/``btl_tcp_if_include`` keep both to the network this
  machine reaches the hosts on;
* anything else before rank 0 starts (a daemon that never reports back): a start-up deadline, after
  which mpirun's process group is killed and one line says so. Once rank 0 runs, the sweep's own
  ``--timeout`` bounds every wait.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import IO

from netbench.common.errors import UsageError
from netbench.common.hosts import HostEntry, parse_hosts_file, validate_hostname
from netbench.common.rundir import RunDir
from netbench.common.text import terminal_safe
from netbench.options import ClusterOptions

CONNECT_TIMEOUT_S = 10  # ssh's TCP connect and banner; a node that is off fails in this long
POLL_S = 0.2
TOPOLOGY_FILE = "topology.json"  # the hosts file's switch= labels, for rank 0

# what mpirun says when a daemon could not be started or was lost; names are validated before use
_REMOTE_HOST = re.compile(r"^\s*Remote host:\s+([A-Za-z0-9_.-]+)\s*$")
_SSH_ERROR = re.compile(
    r"(Permission denied \(|Host key verification failed|Connection (?:refused|timed out|closed)|"
    r"No route to host|Could not resolve hostname|Connection reset|Bad configuration option|"
    r"Can't open user config file)"
)


def startup_deadline_s(opts: ClusterOptions) -> float:
    """How long mpirun may take to bring rank 0 up: every host's daemon, python and torch import."""
    return max(30.0, 2 * opts.timeout_s)


def ssh_args(opts: ClusterOptions) -> list[str]:
    """Open MPI's ssh launcher connecting as netbench's SSH path does, and never asking anything."""
    ssh = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}"]
    if opts.ssh_config:
        path = os.path.abspath(opts.ssh_config)
        if re.search(r"\s", path):  # Open MPI splits plm_rsh_args on white space
            raise UsageError("--launcher mpi: the --ssh-config path must not contain white space")
        ssh = ["-F", path, *ssh]
    if opts.accept_new_host_keys:
        ssh += ["-o", "StrictHostKeyChecking=accept-new"]
    return ["--mca", "plm_rsh_agent", "ssh", "--mca", "plm_rsh_args", " ".join(ssh),
            "--mca", "plm_rsh_no_tree_spawn", "1"]


def network_args(here: str) -> list[str]:
    """Open MPI's daemons and its TCP traffic on the network of ``here`` (this machine's address
    towards the hosts) alone; nothing when that network cannot be read."""
    from netbench.collectives.envinfo import subnet_of

    net = subnet_of(here)
    if net is None:
        return []
    return ["--mca", "oob_tcp_if_include", net, "--mca", "btl_tcp_if_include", net]


def prefix_args(mpirun: str) -> list[str]:
    """``--prefix``: the daemons on the hosts run this Open MPI (the pip wheel's lives beside the
    python, which a remote login shell has not on its PATH)."""
    return ["--prefix", os.path.dirname(os.path.dirname(os.path.abspath(mpirun)))]


@dataclass
class MpirunEvents:
    """What mpirun's stderr said about daemons it could not start or lost."""

    hosts: list[str] = field(default_factory=list)
    ssh_error: str | None = None

    def read(self, line: str) -> None:
        text = line.strip()
        if (m := _REMOTE_HOST.match(text)) and validate_hostname(m.group(1)) is None:
            if m.group(1) not in self.hosts:
                self.hosts.append(m.group(1))
        elif self.ssh_error is None and _SSH_ERROR.search(text):
            self.ssh_error = terminal_safe(text[:160], keep_newlines=False)

    def describe(self, rc: int) -> str:
        where = f" on {', '.join(self.hosts)}" if self.hosts else ""
        why = f" ({self.ssh_error})" if self.ssh_error else ""
        if where or why:
            return f"mpirun lost or could not start its daemon{where}{why}"
        return f"mpirun exited {rc}"


def this_machine_towards(opts: ClusterOptions, hosts_file: str) -> str:
    """The address the hosts reach this machine at (``--advertise``, else the route to the first)."""
    from netbench.common.ssh import SSHOptions
    from netbench.launch.ssh import SSHLauncher

    entries = parse_hosts_file(hosts_file)
    ssh_opts = SSHOptions(ssh_config=opts.ssh_config, accept_new_host_keys=opts.accept_new_host_keys)
    try:
        return SSHLauncher({e.name: e for e in entries}, ssh_opts, advertise=opts.advertise).store_host()[0]
    except OSError as exc:
        raise UsageError(f"--launcher mpi: cannot find the route to {entries[0].name}: "
                         f"{exc.strerror or exc}") from None


def copy_stdout(stream: IO[bytes], on_line: Callable[[str], None]) -> threading.Thread:
    """Copy mpirun's stdout (rank 0's table, mpirun's messages) to ours line by line, in a thread."""

    def pump() -> None:
        for raw in stream:
            line = raw.decode("utf-8", errors="replace")
            on_line(line)
            sys.stdout.write(line)
            sys.stdout.flush()

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    return t


def label_switches(rundir: RunDir, entries: list[HostEntry], echo: Callable[[str], None]) -> str | None:
    """The hosts file's ``switch=`` labels as a topology file in the run directory, for the ranks:
    rank 0 reads switches from a file (``--topology``), it never sees the hosts file."""
    from netbench.cluster import host_switches

    leaves: dict[str, list[str]] = {}
    for host, leaf in host_switches(entries, None, echo).items():
        leaves.setdefault(leaf, []).append(host)
    if not leaves:
        return None
    path = rundir.path / TOPOLOGY_FILE
    path.write_text(json.dumps({"switches": leaves}, indent=1) + "\n")
    return str(path)


def _stop(proc: subprocess.Popen) -> None:
    """End mpirun and every ssh it started (its own process group)."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run_mpirun(opts: ClusterOptions, patterns: list[str], echo: Callable[[str], None]) -> int:
    """The sweep over the hosts file's hosts, ranks started by mpirun; its exit status."""
    from netbench.allocation import after_step
    from netbench.launch.srun import copy_stderr
    from netbench.launch.wrap import find_mpirun, mpi_hostfile, mpirun_argv

    assert opts.hosts_file is not None
    entries = parse_hosts_file(opts.hosts_file)
    find_mpirun()  # bad input ends here, before a run directory is made
    ssh = ssh_args(opts)
    here = this_machine_towards(opts, opts.hosts_file)
    rundir = RunDir.create(opts.out)
    topology = opts.topology or label_switches(rundir, entries, echo)
    rundir.write_run(status="prepared", launcher="mpi", hosts=[e.name for e in entries],
                     host_labels={e.name: e.labels for e in entries}, hosts_file=str(opts.hosts_file))
    events = MpirunEvents()
    deadline_s = startup_deadline_s(opts)
    with mpi_hostfile(opts.hosts_file, opts.procs_per_host) as hostfile:  # removed after mpirun
        argv = mpirun_argv(replace(opts, topology=topology), patterns, None, hostfile,
                           prepared=str(rundir.path))
        argv[1:1] = [*prefix_args(argv[0]), *ssh, *network_args(here)]
        echo(f"# mpirun over {len(entries)} host(s) from {opts.hosts_file} (ssh, network of {here}); "
             f"run directory {rundir.path}")
        # start_new_session: mpirun's own process group holds every ssh it starts (_stop ends them all)
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        assert proc.stdout is not None and proc.stderr is not None
        # mpirun prints its own failures (which daemon) on stdout, ssh's on stderr: both are read
        pumps = [copy_stdout(proc.stdout, events.read), copy_stderr(proc.stderr, events.read)]
        started, timed_out = time.monotonic(), False
        try:
            while proc.poll() is None:
                if time.monotonic() - started > deadline_s and rundir.read_run().get("status") == "prepared":
                    timed_out = True
                    _stop(proc)
                    break
                time.sleep(POLL_S)
        except KeyboardInterrupt:  # mpirun has its own session: hand it the Ctrl-C, then end it
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                _stop(proc)
        rc = proc.wait()  # then, like any early end: the run marked, a report on what was measured
        for pump in pumps:
            pump.join(5)
    if timed_out:
        why = f"mpirun did not start rank 0 within {deadline_s:g} s"
        if events.hosts or events.ssh_error:
            why += f"; {events.describe(rc)}"
        rundir.write_run(status="failed", error=why)
        echo(terminal_safe(f"# {why}: stopped it; run directory {rundir.path}", keep_newlines=False))
        return 1
    return after_step(rundir, rc, events, topology, opts.report, echo)
