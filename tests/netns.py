"""Real test hosts: network namespaces on Linux bridges, each running its own real ``sshd``.

Why: netbench's SSH inventory and launcher must be tested against real sshd processes on a real
(namespaced) network, not mocks. Each test host is

* a network namespace ``nbt-<id>-<name>`` with one veth (``eth0``) into a Linux bridge (a leaf
  "switch"); several leaves hang off a spine bridge through uplink veth pairs that can be rate
  limited with ``tc tbf``; the root namespace has an address on the spine (or the only leaf), so
  tests in the root namespace reach every host;
* its own UTS namespace (``hostname`` returns the host's name) and mount namespace (so one host can
  get a folder of fake node tools bound onto its ``PATH`` without the others seeing it);
* its own ``/usr/sbin/sshd -D`` with host keys in a temp folder, listening on the host's address,
  accepting a client key generated for this network (``PermitRootLogin yes``, ``UseDNS no``, no PAM).

Name resolution: ``ip netns exec`` bind-mounts ``/etc/netns/<ns>/hosts`` over ``/etc/hosts``; every
host gets one listing all hosts, so ``gethostname()`` resolves to the host's own address (gloo needs it).

Use :meth:`TestNetwork.create` (or the ``netns_factory`` pytest fixture) and always ``destroy()``;
networks left behind by a crashed run are removed by the next ``create`` (state files under
``/tmp/nbt-state``). Subnets 10.77.2.0/24 .. 10.77.9.0/24 are claimed with a lock file each, so
parallel runs do not collide.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
SUBNETS = [f"10.77.{i}" for i in range(2, 10)]
STATE_DIR = Path("/tmp/nbt-state")
ROOT_HOST_OCTET = 254
DEFAULT_TOOLS_MOUNT = "/usr/local/sbin"  # first entry of sshd's default PATH for root
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$")
CGROUP_CPU = Path("/sys/fs/cgroup/cpu")  # the cgroup v1 cpu controller: HostCgroup
_RATE_RE = re.compile(r"^\d+(\.\d+)?(bit|[kmgt]bit)$")

SCRATCH = ("/tmp", "/var/tmp", "/run/lock", "/dev/shm")
"""The folders a program writes scratch files to: ``TestNetwork.fill_disk`` fills them on one host."""
_FILL = r"""
set -e
keeps=$1 root=$2
shift 2
mkdir -p "$root"
i=0
IFS=:
for p in $keeps; do mkdir -p "$root/$i"; mount --bind "$p" "$root/$i"; i=$((i+1)); done
unset IFS
for d in "$@"; do mount -t tmpfs -o size=256k,nr_inodes=64 nbt-full "$d"; done
i=0
IFS=:
for p in $keeps; do mkdir -p "$p"; mount --bind "$root/$i" "$p"; i=$((i+1)); done
unset IFS
for d in "$@"; do
    dd if=/dev/zero of="$d/.nbt-fill" bs=4k 2>/dev/null || true
    i=0
    while touch "$d/.nbt-inode$i" 2>/dev/null; do i=$((i+1)); done
done
"""
_FREE = r"""
keeps=$1 root=$2
shift 2
IFS=:
for p in $keeps; do umount "$p" 2>/dev/null; done
unset IFS
for d in "$@"; do umount "$d" 2>/dev/null; done
for k in "$root"/*; do umount "$k" 2>/dev/null; rmdir "$k" 2>/dev/null; done
rmdir "$root" 2>/dev/null
exit 0
"""
_SCRIPT = r"""
set -e
ip addr replace "$1/24" dev eth0
ip link set lo up
ip link set eth0 up
hostname "$2"
if [ -n "$5" ]; then mkdir -p "$6"; mount --bind "$5" "$6"; fi
if [ -n "$8" ] && [ -f /root/.bashrc ]; then mount --bind "$8" /root/.bashrc; fi
exec "$3" -D -f "$4" -E "$7"
"""


def netns_unavailable() -> str | None:
    """Why real test hosts cannot be built here (a skip reason), or None when they can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, bridges, sshd)"
    for tool in ("ip", "tc", "unshare", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return f"needs the {tool!r} command"
    if not os.access(SSHD, os.X_OK):
        return f"needs {SSHD} (Debian package openssh-server)"
    probe = f"nbt-probe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


# -- keys --------------------------------------------------------------------------------------
def generate_ed25519(path: Path, comment: str = "netbench-test") -> str:
    """Write an OpenSSH ed25519 private key (0600) and ``path.pub``; return the public line.

    Generated in-process (no ssh-keygen fork) because 32 hosts x 1 key must be instant.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    priv = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(priv)
    line = f"{pub.decode()} {comment}"
    Path(f"{path}.pub").write_text(line + "\n")
    return line


def _run(argv: Sequence[str], check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run(list(argv), capture_output=True, text=True, input=input)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- state files: clean up after crashed runs ----------------------------------------------------
def _remove_resources(netns: Sequence[str], links: Sequence[str], etc_dirs: Sequence[str]) -> None:
    """Kill every process in the namespaces, then delete namespaces, links and /etc/netns dirs."""
    for ns in netns:
        r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        for pid in r.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    # links first: deleting a veth end is synchronous, while a namespace's devices go away lazily
    batch = "".join(f"link del {ln}\n" for ln in links) + "".join(f"netns del {ns}\n" for ns in netns)
    if batch:
        subprocess.run(["ip", "-force", "-batch", "-"], input=batch, capture_output=True, text=True)
    for d in etc_dirs:
        shutil.rmtree(d, ignore_errors=True)


def cleanup_stale() -> int:
    """Remove networks whose creating process is gone; returns how many were removed."""
    removed = 0
    if not STATE_DIR.is_dir():
        return 0
    for state in STATE_DIR.glob("*.json"):
        try:
            data = json.loads(state.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if _pid_alive(int(data.get("pid", 0))):
            continue
        _remove_resources(data.get("netns", []), data.get("links", []), data.get("etc_dirs", []))
        shutil.rmtree(data.get("workdir", ""), ignore_errors=True) if data.get("workdir") else None
        state.unlink(missing_ok=True)
        removed += 1
    return removed


def _claim_subnet() -> tuple[str, int]:
    """Lock one free /24 of ours for the life of this process's network (flock dies with us)."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    used = _run(["ip", "-4", "-o", "addr", "show"]).stdout
    for subnet in SUBNETS:
        fd = os.open(STATE_DIR / f"subnet-{subnet}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if f" {subnet}." in used:  # taken by something we do not track: leave it alone
            os.close(fd)
            continue
        return subnet, fd
    raise RuntimeError(f"no free test subnet among {SUBNETS[0]}.0/24..{SUBNETS[-1]}.0/24")


# -- the network ---------------------------------------------------------------------------------
@dataclass
class NetHost:
    """One test host. ``addr`` is its IPv4 address; ``pid`` the pid of its sshd (None when stopped)."""

    name: str
    addr: str
    netns: str
    leaf: str
    veth: str  # root-namespace end of the host's veth pair (on the leaf bridge)
    dir: Path
    host_key: Path
    tools_dir: Path | None = None
    tools_mount: str = DEFAULT_TOOLS_MOUNT
    session_env: dict[str, str] = field(default_factory=dict)  # sshd SetEnv: every session sees it
    proc: subprocess.Popen | None = field(default=None, repr=False)
    pair_classes: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    @property
    def sshd_config(self) -> Path:
        return self.dir / "sshd_config"

    @property
    def sshd_log(self) -> Path:
        return self.dir / "sshd.log"

    def host_key_line(self, name: str | None = None) -> str:
        """A known_hosts line for this host, keyed by ``name`` (default: its address, as ssh does)."""
        ktype, blob = Path(f"{self.host_key}.pub").read_text().split()[:2]
        return f"{name or self.addr} {ktype} {blob}"


class TestNetwork:
    """N hosts on one or more leaf bridges. Build with :meth:`create`; always :meth:`destroy`."""

    __test__ = False  # not a pytest test class

    def __init__(self, net_id: str, subnet: str, lock_fd: int, workdir: Path):
        self.id = net_id
        self.subnet = subnet
        self.root_addr = f"{subnet}.{ROOT_HOST_OCTET}"
        self.workdir = workdir
        self.key_path = workdir / "id_ed25519"
        self.known_hosts = workdir / "known_hosts"
        self.hosts: dict[str, NetHost] = {}
        self.leaves: dict[str, list[str]] = {}
        self.bridges: dict[str, str] = {}  # leaf -> bridge device
        self.spine: str | None = None
        self.uplinks: dict[str, tuple[str, str]] = {}  # leaf -> (leaf end, spine end)
        self.rail_bridges: list[str] = []  # rail k's switch (add_rails)
        self.rail_veths: dict[tuple[str, int], tuple[str, str]] = {}  # (host, k) -> (root end, netdev)
        self._lock_fd = lock_fd
        self.fresh_rc = True
        self._destroyed = False
        self._state = STATE_DIR / f"{net_id}.json"

    # -- building --------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        hosts: Sequence[str] | int = 4,
        leaves: Mapping[str, Sequence[str]] | None = None,
        uplink_rate: str | None = None,
        tools: Mapping[str, str | Path] | None = None,
        start: bool = True,
        ready_timeout: float = 20.0,
        fresh_rc: bool = True,
    ) -> TestNetwork:
        """Build the network and start every host's sshd (in parallel) unless ``start=False``.

        ``hosts``: names (letters, digits, '-') or a count (``h0``, ``h1``...). ``leaves``: leaf name ->
        host names; hosts not listed join the first leaf; with no leaves there is one leaf ``leaf0``.
        ``uplink_rate`` (e.g. ``"100mbit"``) limits each leaf<->spine uplink both ways with ``tc tbf``.
        ``tools``: host -> folder of executables bound onto that host's PATH (``/usr/local/sbin``).
        ``fresh_rc``: give each host Debian's default ``/root/.bashrc`` (bound in its own mount
        namespace), like a freshly installed node: bash sources it for every SSH command, and this
        machine's own rc (pyenv init) costs ~200 ms per command. Run programs by absolute path.
        """
        reason = netns_unavailable()
        if reason:
            raise RuntimeError(f"cannot build test hosts: {reason}")
        names = [f"h{i}" for i in range(hosts)] if isinstance(hosts, int) else list(hosts)
        for n in names:
            if not _NAME_RE.match(n):
                raise ValueError(f"bad test host name {n!r}")
        if len(set(names)) != len(names) or not names or len(names) > 250:
            raise ValueError("test host names must be unique, 1..250 of them")
        if uplink_rate is not None:
            _check_rate(uplink_rate)
        cleanup_stale()
        subnet, fd = _claim_subnet()
        # the id names every namespace and link of the network: its first character is the subnet's
        # (held under flock for the network's life), so no two live networks share an id; with a
        # random id alone, two pytest-xdist workers once did, and one's failed create deleted the
        # other's hosts (destroy() removes by name)
        net_id = f"{int(subnet.rsplit('.', 1)[1]):x}{secrets.token_hex(2)[:3]}"
        workdir = Path(tempfile.mkdtemp(prefix=f"nbt-{net_id}-"))
        net = cls(net_id, subnet, fd, workdir)
        net.fresh_rc = fresh_rc
        atexit.register(net.destroy)
        try:
            net._build(names, leaves or {}, uplink_rate, dict(tools or {}))
            if start:
                net.start_all(timeout=ready_timeout)
        except BaseException:
            net.destroy()
            raise
        return net

    def _build(self, names: list[str], leaves: Mapping[str, Sequence[str]], uplink_rate: str | None,
               tools: dict[str, str | Path]) -> None:
        leaf_of: dict[str, str] = {}
        leaf_names = list(leaves) or ["leaf0"]
        for leaf, members in leaves.items():
            for m in members:
                if m not in names:
                    raise ValueError(f"leaf {leaf}: unknown host {m}")
                leaf_of[m] = leaf
        for n in names:
            leaf_of.setdefault(n, leaf_names[0])
        self.leaves = {leaf: [n for n in names if leaf_of[n] == leaf] for leaf in leaf_names}
        for i, leaf in enumerate(leaf_names):
            self.bridges[leaf] = f"nbt{self.id}l{i}"
        if len(leaf_names) > 1:
            self.spine = f"nbt{self.id}s"
            for i, leaf in enumerate(leaf_names):
                self.uplinks[leaf] = (f"nbt{self.id}u{i}a", f"nbt{self.id}u{i}b")
        for idx, n in enumerate(names):
            hdir = self.workdir / n
            hdir.mkdir()
            self.hosts[n] = NetHost(
                name=n, addr=f"{self.subnet}.{idx + 1}", netns=f"nbt-{self.id}-{n}", leaf=leaf_of[n],
                veth=f"nbt{self.id}h{idx}", dir=hdir, host_key=hdir / "ssh_host_ed25519_key",
                tools_dir=Path(tools[n]).resolve() if n in tools else None,
            )
        self._write_state()  # before creating anything, so a crash mid-way is still cleaned up

        # One `ip -batch` for everything in the root namespace: ~100x faster than one ip per step.
        cmds: list[str] = []
        for dev in list(self.bridges.values()) + ([self.spine] if self.spine else []):
            cmds += [f"link add {dev} type bridge", f"link set {dev} up"]
        top = self.spine or self.bridges[leaf_names[0]]
        cmds.append(f"addr add {self.root_addr}/24 dev {top}")
        for leaf, (a, b) in self.uplinks.items():
            cmds += [f"link add {a} type veth peer name {b}", f"link set {a} master {self.bridges[leaf]} up",
                     f"link set {b} master {self.spine} up"]
        for h in self.hosts.values():
            cmds.append(f"netns add {h.netns}")
        for h in self.hosts.values():
            cmds += [f"link add {h.veth} type veth peer name eth0 netns {h.netns}",
                     f"link set {h.veth} master {self.bridges[h.leaf]} up"]
        _run(["ip", "-batch", "-"], input="\n".join(cmds) + "\n")
        if uplink_rate:
            for a, b in self.uplinks.values():
                for dev in (a, b):
                    _run(["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", uplink_rate,
                          "burst", _burst(uplink_rate), "latency", "100ms"])

        # keys, configs, /etc/hosts
        generate_ed25519(self.key_path, comment=f"netbench-test-{self.id}")
        (self.workdir / "authorized_keys").write_text(Path(f"{self.key_path}.pub").read_text())
        hosts_lines = ["127.0.0.1 localhost", f"{self.root_addr} nbt-root"]
        hosts_lines += [f"{h.addr} {h.name}" for h in self.hosts.values()]
        for h in self.hosts.values():
            generate_ed25519(h.host_key, comment=f"root@{h.name}")
            h.sshd_config.write_text(self._sshd_config(h))
            etc = Path("/etc/netns") / h.netns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text("\n".join(hosts_lines) + "\n")
            (etc / "hostname").write_text(h.name + "\n")
        self.write_known_hosts(self.known_hosts)
        default_rc = Path("/usr/share/base-files/dot.bashrc")
        (self.workdir / "root.bashrc").write_text(
            default_rc.read_text() if default_rc.is_file() else "# ~/.bashrc of a fresh test host\n")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir

    def _sshd_config(self, h: NetHost) -> str:
        return "\n".join([
            f"ListenAddress {h.addr}",
            "Port 22",
            f"HostKey {h.host_key}",
            f"PidFile {h.dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.workdir / 'authorized_keys'}",
            "PermitRootLogin yes",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "UseDNS no",
            "StrictModes no",
            "PrintMotd no",
            "PrintLastLog no",
            "MaxStartups 256",
            "MaxSessions 256",
            "AllowTcpForwarding yes",
            "AcceptEnv NETBENCH_*",
            *([f"SetEnv {' '.join(f'{k}={v}' for k, v in h.session_env.items())}"] if h.session_env else []),
            "LogLevel INFO",
            "Subsystem sftp internal-sftp",
            "",
        ])

    def _write_state(self) -> None:
        links = list(self.bridges.values()) + ([self.spine] if self.spine else []) + self.rail_bridges
        links += [a for a, _ in self.uplinks.values()] + [h.veth for h in self.hosts.values()]
        data = {
            "pid": os.getpid(), "subnet": self.subnet, "workdir": str(self.workdir),
            "netns": [h.netns for h in self.hosts.values()], "links": links,
            "etc_dirs": [f"/etc/netns/{h.netns}" for h in self.hosts.values()],
        }
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self._state.write_text(json.dumps(data))

    # -- sshd ------------------------------------------------------------------------------
    def _spawn(self, h: NetHost) -> None:
        argv = ["ip", "netns", "exec", h.netns, "unshare", "--uts", "--mount", "--propagation", "private",
                "sh", "-c", _SCRIPT, "sh", h.addr, h.name, SSHD, str(h.sshd_config),
                str(h.tools_dir or ""), h.tools_mount, str(h.sshd_log),
                str(self.workdir / "root.bashrc") if self.fresh_rc else ""]
        # ip, unshare and sh all exec: the Popen pid *is* the sshd listener.
        h.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, start_new_session=True)

    def _wait_ready(self, hosts: Sequence[NetHost], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = list(hosts)
        while pending:
            still = []
            for h in pending:
                if h.proc is not None and h.proc.poll() is not None:
                    err = h.proc.stderr.read().decode(errors="replace") if h.proc.stderr else ""
                    log = h.sshd_log.read_text(errors="replace") if h.sshd_log.exists() else ""
                    raise RuntimeError(f"sshd of test host {h.name} exited: {err.strip()} {log.strip()}")
                if not _banner(h.addr):
                    still.append(h)
            pending = still
            if pending:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sshd not ready within {timeout}s on {[h.name for h in pending]}")
                time.sleep(0.01)

    def start_all(self, timeout: float = 20.0) -> None:
        """Start every stopped sshd at once, then wait until each one answers with its banner."""
        todo = [h for h in self.hosts.values() if h.pid is None]
        for h in todo:
            self._spawn(h)
        self._wait_ready(todo, timeout)

    def start_sshd(self, name: str, timeout: float = 10.0) -> None:
        h = self.host(name)
        if h.pid is None:
            self._spawn(h)
            self._wait_ready([h], timeout)

    def stop_sshd(self, name: str) -> None:
        """Stop the host's sshd listener: new connections are refused (sessions already open go on)."""
        h = self.host(name)
        if h.proc is not None and h.proc.poll() is None:
            h.proc.terminate()
            try:
                h.proc.wait(5)
            except subprocess.TimeoutExpired:
                h.proc.kill()
                h.proc.wait(5)
        if h.proc is not None and h.proc.stderr:
            h.proc.stderr.close()
        h.proc = None

    def kill_host(self, name: str, cut_link: bool = False) -> list[int]:
        """SIGKILL every process in the host's namespace (sshd, sessions, workers); return their pids.

        ``cut_link=True`` also takes the host's link down, so peers see silence (timeouts) instead
        of closed connections, like a node that lost power. :meth:`restore_link` undoes that.
        """
        h = self.host(name)
        pids = [int(p) for p in _run(["ip", "netns", "pids", h.netns]).stdout.split()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if h.proc is not None:
            h.proc.wait(5)
            if h.proc.stderr:
                h.proc.stderr.close()
            h.proc = None
        if cut_link:
            _run(["ip", "link", "set", h.veth, "down"])
        return pids

    def fill_disk(self, name: str) -> None:
        """Leave ``name`` no byte and no inode to write in ``SCRATCH`` (a full tmpfs over each, in the
        host's own mount namespace: no other host sees it), as a node whose disk filled up.
        What the host needs that lives under a scratch folder (this network's folder with sshd's
        keys, config and log; the project and its virtual environment, under /tmp in a CI clone) is
        bound back in, so SSH and netbench still work. ``free_disk`` gives the room back."""
        self._disk(name, _FILL, SCRATCH)

    def free_disk(self, name: str) -> None:
        self._disk(name, _FREE, tuple(reversed(SCRATCH)))

    def _disk(self, name: str, script: str, scratch: Sequence[str]) -> None:
        h = self.host(name)
        wanted = sorted({str(p) for p in (self.workdir, Path(__file__).resolve().parents[1],
                                          Path(sys.prefix).resolve())})
        keep = [p for p in wanted if any(p == d or p.startswith(d + "/") for d in SCRATCH)]
        keep = [p for p in keep if not any(p.startswith(q + "/") for q in keep)]  # the outermost
        _run(["nsenter", "--target", str(h.pid), "--mount", "sh", "-c", script, "sh", ":".join(keep),
              f"/run/nbt-keep-{h.netns}", *scratch])

    def restore_link(self, name: str) -> None:
        _run(["ip", "link", "set", self.host(name).veth, "up"])

    def pids(self, name: str) -> list[int]:
        """Every process running in the host's network namespace."""
        return [int(p) for p in _run(["ip", "netns", "pids", self.host(name).netns]).stdout.split()]

    def regenerate_host_key(self, name: str) -> str:
        """Give the host a NEW host key and restart its sshd (a re-imaged node); return the new line."""
        h = self.host(name)
        self.stop_sshd(name)
        h.host_key.unlink()
        generate_ed25519(h.host_key, comment=f"root@{h.name}")
        self.start_sshd(name)
        return h.host_key_line()

    def set_session_env(self, name: str, env: Mapping[str, str]) -> None:
        """Environment for every later SSH session on this host (sshd's SetEnv; sshd is restarted
        to read it). Pointing ``NETBENCH_IB_SYSFS`` at a copied tree gives the host InfiniBand ports
        whose counters a test can change, without a bind mount over /sys."""
        h = self.host(name)
        for k, v in env.items():
            if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", k) or re.search(r"[\s\"'\\]", v):
                raise ValueError(f"unsupported session variable {k}={v!r}")
        h.session_env = dict(env)
        h.sshd_config.write_text(self._sshd_config(h))
        self.stop_sshd(name)
        self.start_sshd(name)

    def install_tools(self, name: str, tools_dir: str | Path, mount: str = DEFAULT_TOOLS_MOUNT) -> None:
        """Bind ``tools_dir`` onto ``mount`` (on root's default PATH) for this host only.

        The bind lives in the host's own mount namespace (made by ``unshare --mount`` when its sshd
        started), so every later SSH session on that host sees the tools and no other host does.
        """
        h = self.host(name)
        h.tools_dir, h.tools_mount = Path(tools_dir).resolve(), mount
        if h.pid is not None:
            _run(["nsenter", "--target", str(h.pid), "--mount", "sh", "-c",
                  'mkdir -p "$2" && mount --bind "$1" "$2"', "sh", str(h.tools_dir), mount])

    # -- running things on a host -------------------------------------------------------------
    def _enter(self, name: str) -> list[str]:
        h = self.host(name)
        if h.pid is not None:  # its own net + uts + mount namespaces, like an SSH session
            return ["nsenter", "--target", str(h.pid), "--net", "--uts", "--mount"]
        return ["ip", "netns", "exec", h.netns]

    def run(self, name: str, argv: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
        """Run a command on the host (its namespaces, no SSH); kwargs go to subprocess.run."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self._enter(name) + list(argv), **kwargs)

    def popen(self, name: str, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start a long-running command on the host (its namespaces, no SSH)."""
        return subprocess.Popen(self._enter(name) + list(argv), **kwargs)

    # -- client side files ---------------------------------------------------------------------
    def host(self, name: str) -> NetHost:
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(f"no test host {name!r} in network {self.id}") from None

    @property
    def names(self) -> list[str]:
        return list(self.hosts)

    def leaf_of(self, name: str) -> str:
        return self.host(name).leaf

    def write_known_hosts(self, path: str | Path, hosts: Sequence[str] | None = None) -> Path:
        """known_hosts with the keys of ``hosts`` (default all), keyed by address as OpenSSH does."""
        path = Path(path)
        names = self.names if hosts is None else list(hosts)
        path.write_text("".join(self.host(n).host_key_line() + "\n" for n in names))
        return path

    def write_ssh_config(self, path: str | Path, hosts: Sequence[str] | None = None,
                         known_hosts: str | Path | None = None, user: str = "root",
                         extra: Mapping[str, Sequence[str]] | None = None) -> Path:
        """An ssh_config: ``Host <name>`` -> HostName <addr>, User, IdentityFile, UserKnownHostsFile.

        ``extra``: host -> more option lines for that host (e.g. ``["ProxyJump h1"]``).
        """
        path = Path(path)
        kh = Path(known_hosts) if known_hosts is not None else self.known_hosts
        blocks = []
        for n in (self.names if hosts is None else hosts):
            h = self.host(n)
            lines = [f"Host {n}", f"    HostName {h.addr}", f"    User {user}", "    Port 22",
                     f"    IdentityFile {self.key_path}", "    IdentitiesOnly yes",
                     f"    UserKnownHostsFile {kh}", "    StrictHostKeyChecking yes"]
            lines += [f"    {x}" for x in (extra or {}).get(n, [])]
            blocks.append("\n".join(lines))
        path.write_text("\n\n".join(blocks) + "\n")
        return path

    def netbench_argv(self, tmp: str | Path, command: str = "sweep", hosts: Sequence[str] | None = None,
                      labels: Mapping[str, Mapping[str, str]] | None = None,
                      switch_labels: bool = True) -> list[str]:
        """``python -m netbench <command> --hosts ... --ssh-config ... --python ...`` for these hosts
        (``switch_labels``: as ``hosts_file``'s).

        The hosts share this machine's filesystem, so the remote python is this one (with netbench).
        """
        tmp = Path(tmp)
        cfg = self.write_ssh_config(tmp / "ssh_config", hosts=hosts)
        hosts_path = self.hosts_file(tmp / "hosts.txt", hosts=hosts, labels=labels,
                                     switch_labels=switch_labels)
        return [sys.executable, "-m", "netbench", command, "--hosts", str(hosts_path),
                "--ssh-config", str(cfg), "--python", sys.executable]

    def hosts_file(self, path: str | Path, hosts: Sequence[str] | None = None,
                   labels: Mapping[str, Mapping[str, str]] | None = None, switch_labels: bool = True) -> Path:
        """A netbench hosts file, one host a line; ``labels``: host -> {key: value}.

        With several leaves, ``switch=<leaf>`` is added for each host unless ``switch_labels=False``.
        """
        path = Path(path)
        lines = []
        for n in (self.names if hosts is None else hosts):
            lab: dict[str, str] = {}
            if switch_labels and len(self.leaves) > 1:
                lab["switch"] = self.host(n).leaf
            lab.update((labels or {}).get(n, {}))
            lines.append(" ".join([n] + [f"{k}={v}" for k, v in lab.items()]))
        path.write_text("\n".join(lines) + "\n")
        return path

    # -- rails: a second network of one NIC per rank -------------------------------------------------
    def add_rails(self, netdevs: Sequence[str]) -> dict[tuple[str, int], str]:
        """Give every host one more NIC per rail, named ``netdevs[k]`` in the host, on rail switch k
        (a bridge of its own) with its own subnet, as a rail-optimised node's GPU k has NIC k on rail
        switch k. Returns (host, k) -> the NIC's address. The rails carry only the traffic sent to
        those addresses; ``eth0`` stays the management network."""
        addrs: dict[tuple[str, int], str] = {}
        third = self.subnet.rsplit(".", 1)[1]  # claimed with the subnet, so parallel networks differ
        cmds: list[str] = []
        for k, dev in enumerate(netdevs):
            if not re.fullmatch(r"[a-z][a-z0-9]{1,14}", dev) or dev == "eth0":
                raise ValueError(f"bad rail netdev name {dev!r}")
            bridge = f"nbt{self.id}r{k}"
            self.rail_bridges.append(bridge)
            cmds += [f"link add {bridge} type bridge", f"link set {bridge} up"]
            for idx, h in enumerate(self.hosts.values()):
                root_end = f"nbt{self.id}h{idx}r{k}"
                self.rail_veths[(h.name, k)] = (root_end, dev)
                addrs[(h.name, k)] = f"10.{78 + k}.{third}.{idx + 1}"
                cmds += [f"link add {root_end} type veth peer name {dev} netns {h.netns}",
                         f"link set {root_end} master {bridge} up"]
        self._write_state()
        _run(["ip", "-batch", "-"], input="\n".join(cmds) + "\n")
        for (name, k), addr in addrs.items():
            dev = netdevs[k]
            _check(self.run(name, ["ip", "addr", "replace", f"{addr}/24", "dev", dev]))
            _check(self.run(name, ["ip", "link", "set", dev, "up"]))
        return addrs

    def limit_rail(self, name: str, rail: int, rate: str) -> None:
        """Cap one host's rail NIC, both directions (tbf on its two veth ends): a NIC that trained at
        a lower rate, or a bad cable."""
        _check_rate(rate)
        root_end, dev = self.rail_veths[(name, rail)]
        tbf = ["root", "tbf", "rate", rate, "burst", _burst(rate), "latency", "100ms"]
        _check(self.run(name, ["tc", "qdisc", "replace", "dev", dev, *tbf]))
        _run(["tc", "qdisc", "replace", "dev", root_end, *tbf])

    # -- rate limits (tc; netem is not available) ---------------------------------------------
    def _ensure_htb(self, h: NetHost) -> None:
        """htb on the host's eth0: 1:1 = everything the host sends, 1:10 default, 1:2x per peer."""
        r = self.run(h.name, ["tc", "qdisc", "show", "dev", "eth0"])
        if "htb 1:" in r.stdout:
            return
        for argv in (["qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10"],
                     ["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb",
                      "rate", "100gbit", "quantum", "60000"],
                     ["class", "add", "dev", "eth0", "parent", "1:1", "classid", "1:10", "htb",
                      "rate", "100gbit", "quantum", "60000"]):
            _check(self.run(h.name, ["tc", *argv]))

    def limit_host(self, name: str, rate: str) -> None:
        """Limit ALL of one host's traffic, both directions, to ``rate`` (e.g. ``"200mbit"``)."""
        _check_rate(rate)
        h = self.host(name)
        self._ensure_htb(h)
        for cls_id in ("1:1", "1:10"):
            _check(self.run(name, ["tc", "class", "change", "dev", "eth0", "classid", cls_id, "htb",
                                   "rate", rate, "ceil", rate, "quantum", "60000"]))
        _run(["tc", "qdisc", "replace", "dev", h.veth, "root", "tbf", "rate", rate, "burst", _burst(rate),
              "latency", "100ms"])

    def limit_pair(self, a: str, b: str, rate: str) -> None:
        """Limit only the traffic between hosts ``a`` and ``b`` (both directions) to ``rate``.

        htb + a u32 filter on each host's egress matching the peer's address; other peers unaffected.
        """
        _check_rate(rate)
        for src, dst in ((a, b), (b, a)):
            h, peer = self.host(src), self.host(dst)
            self._ensure_htb(h)
            if dst in h.pair_classes:
                cid = f"1:{h.pair_classes[dst]:x}"
                _check(self.run(src, ["tc", "class", "change", "dev", "eth0", "classid", cid, "htb",
                                      "rate", rate, "ceil", rate, "quantum", "60000"]))
                continue
            minor = 0x20 + len(h.pair_classes)
            h.pair_classes[dst] = minor
            cid = f"1:{minor:x}"
            _check(self.run(src, ["tc", "class", "add", "dev", "eth0", "parent", "1:1", "classid", cid,
                                  "htb", "rate", rate, "ceil", rate, "quantum", "60000"]))
            _check(self.run(src, ["tc", "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip",
                                  "prio", "1", "u32", "match", "ip", "dst", f"{peer.addr}/32",
                                  "flowid", cid]))

    def clear_limits(self, name: str | None = None) -> None:
        """Remove host and pair limits from one host (default: every host). Uplink limits stay."""
        for n in ([name] if name else self.names):
            h = self.host(n)
            self.run(n, ["tc", "qdisc", "del", "dev", "eth0", "root"])
            subprocess.run(["tc", "qdisc", "del", "dev", h.veth, "root"], capture_output=True)
            h.pair_classes.clear()

    # -- teardown --------------------------------------------------------------------------------
    def destroy(self) -> None:
        """Kill every host process, delete namespaces, links, temp files; idempotent."""
        if self._destroyed:
            return
        self._destroyed = True
        for h in self.hosts.values():
            if h.proc is not None and h.proc.poll() is None:
                h.proc.kill()
        links = list(self.bridges.values()) + ([self.spine] if self.spine else []) + self.rail_bridges
        links += [a for a, _ in self.uplinks.values()] + [h.veth for h in self.hosts.values()]
        _remove_resources([h.netns for h in self.hosts.values()], links,
                          [f"/etc/netns/{h.netns}" for h in self.hosts.values()])
        for h in self.hosts.values():
            if h.proc is not None:
                try:
                    h.proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
                if h.proc.stderr:
                    h.proc.stderr.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        self._state.unlink(missing_ok=True)
        try:
            os.close(self._lock_fd)
        except OSError:
            pass
        atexit.unregister(self.destroy)

    def __enter__(self) -> TestNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()


def _banner(addr: str, port: int = 22) -> bool:
    """True when an SSH server answers with its version banner."""
    try:
        with socket.create_connection((addr, port), timeout=0.5) as s:
            s.settimeout(1.0)
            return s.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def _check(r: subprocess.CompletedProcess) -> None:
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, r.args))} failed: {r.stderr.strip()}")


def _check_rate(rate: str) -> None:
    if not _RATE_RE.match(rate):
        raise ValueError(f"bad rate {rate!r}: use tc units like 100mbit, 1gbit")


def _burst(rate: str) -> str:
    """tbf bucket: 4 ms worth of the rate, at least 64 KiB (veths hand tbf GSO super-packets)."""
    m = re.match(r"^(\d+(?:\.\d+)?)([kmgt]?)bit$", rate)
    assert m
    bits = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    return str(max(int(bits / 8 * 0.004), 65536 + 1514))


# -- pytest fixtures -------------------------------------------------------------------------------
try:
    import pytest
except ImportError:  # pragma: no cover - the library half works without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def netns_factory() -> Iterator[Callable[..., TestNetwork]]:
        """``make(hosts=4, leaves=..., uplink_rate=..., tools=...) -> TestNetwork``, destroyed after the test.

        Skips the test with the reason when real test hosts cannot be built here.
        """
        reason = netns_unavailable()
        if reason:
            pytest.skip(reason)
        made: list[TestNetwork] = []
        lock = threading.Lock()

        def make(*args, **kwargs) -> TestNetwork:
            net = TestNetwork.create(*args, **kwargs)
            with lock:
                made.append(net)
            return net

        yield make
        for net in made:
            net.destroy()

    @contextmanager
    def module_network(*args, **kwargs) -> Iterator[TestNetwork]:
        """A network shared by a test module (a ``scope="module"`` fixture yields from it; the
        arguments are ``TestNetwork.create``'s), destroyed after it. Skips the module with the
        reason when real test hosts cannot be built here."""
        reason = netns_unavailable()
        if reason:
            pytest.skip(reason)
        net = TestNetwork.create(*args, **kwargs)
        try:
            yield net
        finally:
            net.destroy()

    @pytest.fixture
    def netns4(netns_factory) -> TestNetwork:
        """Four hosts h0..h3 on one leaf, sshd running."""
        return netns_factory(4)


class HostCgroup:
    """A cgroup holding a host's processes; ``quota_us`` of CPU per ``period_us``, or None: no cap,
    only the host's own share of the machine (a cgroup competes as one entity). Its weight is 8x a
    process's (``cpu.shares``): the other tests' processes beside it (pytest -n 3) would otherwise
    take CPU from one host at one moment and from another at the next, a straggler of the machine's
    making (a healthy host named under load)."""

    def __init__(self, net, host: str, quota_us: int | None = 1000, period_us: int = 10000):
        self.path = CGROUP_CPU / f"nbt-host-{os.getpid()}-{host}"
        self.path.mkdir(exist_ok=True)  # one a failed test left behind is taken over
        (self.path / "cpu.shares").write_text("8192")
        (self.path / "cpu.cfs_period_us").write_text(str(period_us))
        (self.path / "cpu.cfs_quota_us").write_text(str(-1 if quota_us is None else quota_us))  # -1: no cap
        for pid in net.pids(host):
            try:
                (self.path / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:  # ended since it was listed (a session of the test before)
                pass

    def remove(self) -> None:
        for pid in (self.path / "cgroup.procs").read_text().split():
            try:
                (CGROUP_CPU / "cgroup.procs").write_text(pid)
            except OSError:  # gone already
                pass
        self.path.rmdir()


@contextmanager
def hosts_in_cgroups(net, hosts: list[str], slow: str | None = None) -> Iterator[None]:
    """Every host in a cgroup of its own, ``slow`` capped at 10% of a core, the others uncapped.

    On a 2-core machine four ranks doing the step work (and the other tests' processes) want more
    CPU than there is. Left to compete task by task, one host's processes were scheduled late run
    after run and named, rightly, a persistent straggler in a "healthy" run. A cgroup each gives the
    hosts equal shares of the machine, so the healthy hosts are equal in fact, not only in name."""
    groups = []
    try:
        for h in hosts:
            groups.append(HostCgroup(net, h, quota_us=1000 if h == slow else None))
        yield
    finally:
        for g in groups:
            g.remove()
