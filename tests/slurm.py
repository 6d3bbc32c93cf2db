"""A real Slurm cluster on the namespaced test hosts of ``netns.py``.

Why: netbench's Slurm path (``--launcher slurm``, the allocation's hosts, ``scontrol show topology``,
the inventory as a job step, ``--drain``) must meet a real slurmctld and real slurmd daemons, not
faked ``SLURM_*`` variables. The cluster reuses a :class:`netns.TestNetwork`:

* one of its hosts is the controller: ``munged`` and ``slurmctld`` run there; ``salloc``/``srun``/
  ``sinfo`` are run there too (:meth:`SlurmCluster.run`), as on a login node;
* every other host runs ``slurmd`` under its own hostname, inside its own namespaces (started with
  ``nsenter`` into the host's sshd, so steps see the host's name and ``/etc/hosts``);
* ``topology.conf`` (``TopologyPlugin=topology/tree``) is generated from the network's leaves: one
  switch per leaf with its compute hosts, and a ``spine`` above them when there are several leaves.

Everything lives in one temp folder (``SLURM_CONF`` points there, munge's socket and key too), so
nothing under /etc is touched and parallel clusters on other subnets do not meet. What was needed to
make Slurm 22.05 (Debian ``slurm-wlm``) run inside the namespaces, and why:

* ``SlurmctldHost=<name>(<addr>)``: the controller's own name resolves to nothing useful for slurmd
  otherwise, and ``NodeAddr`` for each node for the same reason;
* ``MpiDefault=none``, ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``: no pmix, no
  cgroup tracking of steps (the namespaces have no systemd delegation);
* slurmd still reads the cgroup v1 hierarchies at start, and ``ip netns exec`` gave the host a fresh
  /sys: the controllers are mounted again inside the host's mount namespace (a tmpfs on
  /sys/fs/cgroup, each controller, and ``name=systemd``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from netns import TestNetwork, netns_unavailable

SLURM_TOOLS = ("slurmctld", "slurmd", "munged", "srun", "salloc", "sbatch", "scontrol", "sinfo", "squeue")
CGROUP_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids")

_CGROUP_SCRIPT = r"""
set -e
mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup
for c in "$@"; do
  mkdir -p "/sys/fs/cgroup/$c"; mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" || true
done
mkdir -p /sys/fs/cgroup/systemd
mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd || true
"""


def slurm_unavailable() -> str | None:
    """Why a Slurm cluster cannot be built here (a skip reason), or None when it can."""
    reason = netns_unavailable()
    if reason:
        return reason
    for tool in SLURM_TOOLS:
        if shutil.which(tool) is None and not os.access(f"/usr/sbin/{tool}", os.X_OK):
            return f"needs {tool} (Debian packages slurm-wlm and munge)"
    if not Path("/proc/cgroups").is_file():
        return "needs cgroup v1 controllers (/proc/cgroups) for slurmd"
    return None


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class SlurmCluster:
    """slurmctld on ``controller``, slurmd on each of ``nodes``; build with :meth:`start`, :meth:`stop`."""

    net: TestNetwork
    controller: str
    nodes: list[str]
    dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment of a Slurm client command (salloc, srun, sinfo ...) of this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    # -- building ------------------------------------------------------------------------------
    @classmethod
    def start(cls, net: TestNetwork, controller: str, nodes: Sequence[str] | None = None,
              extra_conf: Sequence[str] = (), timeout: float = 30.0) -> SlurmCluster:
        nodes = [n for n in (nodes or net.names) if n != controller]
        if controller not in net.hosts or not nodes:
            raise ValueError("a controller of the network and at least one other host are needed")
        sdir = net.workdir / "slurm"
        sdir.mkdir(mode=0o700)
        cluster = cls(net, controller, list(nodes), sdir)
        try:
            cluster._write_files(extra_conf)
            cluster._start_munge()
            cluster._start_daemons()
            cluster.wait_idle(timeout)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def topology_conf(self) -> str:
        """topology/tree lines from the network's leaves (compute hosts only)."""
        lines, leaves = [], []
        for leaf, members in self.net.leaves.items():
            hosts = [m for m in members if m in self.nodes]
            if hosts:
                leaves.append(leaf)
                lines.append(f"SwitchName={leaf} Nodes={','.join(hosts)}")
        if len(leaves) > 1:
            lines.append(f"SwitchName=spine Switches={','.join(leaves)}")
        return "\n".join(lines) + "\n"

    def _write_files(self, extra_conf: Sequence[str]) -> None:
        d, ctl = self.dir, self.net.host(self.controller)
        for sub in ("state", "spool", "log", "munge"):
            (d / sub).mkdir(mode=0o700)
        key = d / "munge" / "munge.key"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(1024))
        cpus = os.cpu_count() or 1
        node_lines = [f"NodeName={n} NodeAddr={self.net.host(n).addr} CPUs={cpus} State=UNKNOWN"
                      for n in self.nodes]
        conf = [
            "ClusterName=nbt",
            f"SlurmctldHost={ctl.name}({ctl.addr})",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "MpiDefault=none",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/linear",
            "SchedulerType=sched/builtin",
            "TopologyPlugin=topology/tree",
            "SwitchType=switch/none",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "SlurmdTimeout=10",
            "MessageTimeout=5",
            "KillWait=2",
            "MinJobAge=5",
            "InactiveLimit=0",
            "OverTimeLimit=0",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool'}/%n",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'spool'}/slurmd-%n.pid",
            f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'log'}/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            *extra_conf,
            *node_lines,
            f"PartitionName=test Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(conf) + "\n")
        (d / "topology.conf").write_text(self.topology_conf())
        (d / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")
        for n in self.nodes:
            (d / "spool" / n).mkdir(mode=0o755)

    @property
    def munge_socket(self) -> Path:
        return self.dir / "munge" / "munge.socket"

    def _start_munge(self) -> None:
        m = self.dir / "munge"
        # a Unix socket by path: every namespace of the network shares this filesystem, so one
        # munged serves the controller and every node.
        argv = [_tool("munged"), "-F", "--force", f"--socket={self.munge_socket}",
                f"--key-file={m / 'munge.key'}", f"--pid-file={m / 'munged.pid'}",
                f"--log-file={m / 'munged.log'}", f"--seed-file={m / 'munged.seed'}", "--num-threads=4"]
        self.procs["munged"] = self.net.popen(self.controller, argv, stdin=subprocess.DEVNULL,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                              start_new_session=True)
        _wait(lambda: self.munge_socket.exists(), 10, "munged", self.procs["munged"])

    def _start_daemons(self) -> None:
        self.procs["slurmctld"] = self.net.popen(
            self.controller, ["env", f"SLURM_CONF={self.conf}", _tool("slurmctld"), "-D", "-i"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        for n in self.nodes:
            self._mount_cgroups(n)
            self.start_slurmd(n)

    def _mount_cgroups(self, node: str) -> None:
        present = set(Path("/proc/cgroups").read_text().split())
        ctls = [c for c in CGROUP_CONTROLLERS if c in present]
        r = self.net.run(node, ["sh", "-c", _CGROUP_SCRIPT, "sh", *ctls])
        if r.returncode != 0:
            raise RuntimeError(f"cgroup mounts on {node} failed: {r.stderr.strip()}")

    def start_slurmd(self, node: str) -> None:
        self.procs[f"slurmd-{node}"] = self.net.popen(
            node, ["env", f"SLURM_CONF={self.conf}", _tool("slurmd"), "-D", "-N", node],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)

    def kill_slurmd(self, node: str) -> None:
        """SIGKILL the node's slurmd (its running steps go on until Slurm notices)."""
        p = self.procs.pop(f"slurmd-{node}")
        p.kill()
        p.wait(5)

    # -- using it --------------------------------------------------------------------------------
    def run(self, argv: Sequence[str], timeout: float = 60, env: Mapping[str, str] | None = None,
            **kwargs) -> subprocess.CompletedProcess:
        """Run a command on the controller (the login node) with this cluster's SLURM_CONF."""
        full = ["env", f"SLURM_CONF={self.conf}", *(f"{k}={v}" for k, v in (env or {}).items()), *argv]
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return self.net.run(self.controller, full, timeout=timeout, **kwargs)

    def node_states(self) -> dict[str, str]:
        """node -> its state as sinfo prints it (idle, alloc, down*, drain ...)."""
        r = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=15)
        out = {}
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = parts[1]
        return out

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Until every node is idle (slurmd registered, no job)."""
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}): {self.log_tail(name)}")
            states = self.node_states()
            if states and all(states.get(n) == "idle" for n in self.nodes):
                return
            time.sleep(0.3)
        raise RuntimeError(f"slurm nodes not idle within {timeout}s: {states}; {self.log_tail('slurmctld')}")

    def log_tail(self, daemon: str, lines: int = 8) -> str:
        name = "slurmctld.log" if daemon == "slurmctld" else f"{daemon}.log"
        p = self.dir / "log" / name
        if daemon == "munged":
            p = self.dir / "munge" / "munged.log"
        text = p.read_text(errors="replace") if p.exists() else ""
        proc = self.procs.get(daemon)
        if proc is not None and proc.poll() is not None and proc.stderr:
            text += proc.stderr.read().decode(errors="replace")
        return " | ".join(text.strip().splitlines()[-lines:])

    def stop(self) -> None:
        """Stop every daemon (slurmd first, so no node is left waiting on the controller)."""
        for name in sorted(self.procs, key=lambda k: (k == "munged", k == "slurmctld")):
            p = self.procs[name]
            if p.poll() is None:
                p.kill()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
            if p.stderr:
                p.stderr.close()
        self.procs.clear()


def _wait(ready, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"{what} exited ({proc.returncode}): {err.strip()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready within {timeout}s")
        time.sleep(0.05)


# -- pytest fixtures -------------------------------------------------------------------------------
DEFAULT_HOSTS = ("ctl", "h0", "h1", "h2")
DEFAULT_LEAVES = {"sw0": ["ctl", "h0", "h1"], "sw1": ["h2"]}

try:
    import pytest
except ImportError:  # pragma: no cover - the library half works without pytest
    pytest = None  # type: ignore[assignment]


def _start_or_skip(net: TestNetwork, extra_conf: Sequence[str]) -> SlurmCluster:
    """The cluster on ``net`` (its first host the controller), or the test skipped with the reason."""
    try:
        return SlurmCluster.start(net, net.names[0], extra_conf=extra_conf)
    except RuntimeError as exc:  # e.g. no cgroup v1 controllers in this container
        pytest.skip(f"Slurm could not be started here: {exc}")


class SlurmPool:
    """A module's tests share one cluster while they ask for the same shape (hosts, leaves, uplink
    rate, extra slurm.conf lines). Why: building one costs seconds of the 2 CI cores, and most tests
    only run jobs on it. Each :meth:`get` hands it over as a fresh one would be: no host or pair
    limit left (the uplink rate is part of the shape) and every node idle (a node left down or
    drained fails the test that asks, naming the states). A test that breaks it (kills a host or
    a slurmd) uses :meth:`take`: that cluster is stopped when the test ends and never handed out again.
    One cluster at most is kept, so a module holds one test subnet and one set of daemons."""

    def __init__(self) -> None:
        self._kept: tuple[tuple, SlurmCluster] | None = None

    def get(self, extra_conf: Sequence[str] = (), hosts: Sequence[str] = DEFAULT_HOSTS,
            leaves: Mapping[str, Sequence[str]] | None = None,
            uplink_rate: str | None = None) -> SlurmCluster:
        leaves = leaves or DEFAULT_LEAVES
        shape = (tuple(extra_conf), tuple(hosts), tuple((k, tuple(v)) for k, v in leaves.items()),
                 uplink_rate)
        if self._kept is not None and self._kept[0] == shape:
            cluster = self._kept[1]
            cluster.net.clear_limits()
            cluster.wait_idle(60)  # a job of the last test may still be completing
            return cluster
        self.close()
        net = TestNetwork.create(list(hosts), leaves=leaves, uplink_rate=uplink_rate)
        try:
            cluster = _start_or_skip(net, extra_conf)
        except BaseException:
            net.destroy()
            raise
        self._kept = (shape, cluster)
        return cluster

    @contextmanager
    def take(self, extra_conf: Sequence[str] = (), hosts: Sequence[str] = DEFAULT_HOSTS,
             leaves: Mapping[str, Sequence[str]] | None = None,
             uplink_rate: str | None = None) -> Iterator[SlurmCluster]:
        """The cluster :meth:`get` would give, for a test that may break it: stopped at the end."""
        cluster = self.get(extra_conf, hosts, leaves, uplink_rate)
        self._kept = None
        try:
            yield cluster
        finally:
            cluster.stop()
            cluster.net.destroy()

    def close(self) -> None:
        if self._kept is not None:
            cluster = self._kept[1]
            self._kept = None
            cluster.stop()
            cluster.net.destroy()


if pytest is not None:

    @pytest.fixture
    def slurm_factory(netns_factory):
        """``make(extra_conf=(), hosts=..., leaves=..., uplink_rate=None) -> SlurmCluster`` on a fresh test
        network (``uplink_rate``: each leaf's uplink to the spine capped, as in netns.py) whose
        first host ``ctl`` is the controller (login node); stopped after the test. Default: compute
        hosts h0, h1 on leaf sw0 (with ctl) and h2 on sw1, so pairs have two hop classes.
        Skips the test with the reason when Slurm is not installed or its daemons cannot start here
        (``-rs`` prints it). Tests that only run jobs share one cluster through ``slurm_pool``."""
        reason = slurm_unavailable()
        if reason:
            pytest.skip(reason)
        made: list[SlurmCluster] = []

        def make(extra_conf: Sequence[str] = (), hosts: Sequence[str] = DEFAULT_HOSTS,
                 leaves: Mapping[str, Sequence[str]] | None = None,
                 uplink_rate: str | None = None) -> SlurmCluster:
            net = netns_factory(list(hosts), leaves=leaves or DEFAULT_LEAVES, uplink_rate=uplink_rate)
            cluster = _start_or_skip(net, extra_conf)
            made.append(cluster)
            return cluster

        yield make
        for c in made:
            c.stop()

    @pytest.fixture(scope="module")
    def slurm_pool() -> Iterator[SlurmPool]:
        """A :class:`SlurmPool` for the module's tests (same defaults and skips as ``slurm_factory``)."""
        reason = slurm_unavailable()
        if reason:
            pytest.skip(reason)
        pool = SlurmPool()
        try:
            yield pool
        finally:
            pool.close()
