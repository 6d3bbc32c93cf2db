"""SSH to cluster hosts with paramiko, the way OpenSSH users expect it to behave.

* ``~/.ssh/config`` (or ``--ssh-config``) is honoured: HostName, User, Port, IdentityFile,
  IdentitiesOnly, UserKnownHostsFile, HostKeyAlias, StrictHostKeyChecking, ProxyJump (one or more
  hops, each through a ``direct-tcpip`` channel of the previous one) and ProxyCommand. Hosts-file
  labels ``user=`` / ``port=`` win over the config. ssh-agent keys are used when an agent is running.
* Host keys: known_hosts is honoured; an unknown key is refused unless the user opted in
  (``accept_new_host_keys`` or ``StrictHostKeyChecking accept-new``), in which case it is trusted on
  first use AND recorded in known_hosts; a CHANGED key is always refused. A key marked
  ``@revoked`` is refused; ``@cert-authority`` lines are skipped (host certificates are not
  verified, so a host trusted only through a CA is unknown); a line that cannot be parsed costs
  that line only.
* Remote output is bounded: :meth:`SSHConnection.run` keeps at most ``max_output`` bytes of stdout
  and of stderr (more kills the command: SSHError), a remote process's line at most MAX_LINE_BYTES.
* Every failure becomes :class:`SSHError` with a ``kind`` a report can group by.
* Remote commands are argv lists joined with ``shlex.quote``: nothing a caller passes is ever
  interpreted by the remote shell. Each command runs in its own process group (``setsid``) whose id
  is printed first, so a timeout or :meth:`RemoteProcess.terminate` kills the whole remote process
  tree through a second exec channel, not just the SSH channel.
* Key material, passphrases and stdin never reach logs or error messages (fingerprints only).
"""

from __future__ import annotations

import errno
import fcntl
import getpass
import logging
import os
import queue
import re
import select
import shlex
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.common.errors import NetbenchError

if TYPE_CHECKING:  # paramiko is imported lazily: `netbench --help` must stay instant
    import paramiko

log = logging.getLogger("netbench.common.ssh")

SSH_ERROR_KINDS = ("unreachable", "auth_failed", "host_key_refused", "host_key_changed", "timeout", "error")
PGID_MARKER = "__NETBENCH_PGID__"
MAX_JUMPS = 8
#: the most stdout (and stderr) one ``run`` keeps; the inventory probe writes a few hundred KB
MAX_OUTPUT_BYTES = 64 << 20
#: the longest line a RemoteProcess queues; a longer one is cut there (an agent's lines are short)
MAX_LINE_BYTES = 16 << 20
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")

# The remote wrapper, run by `sh -c`. $1 says whether to arm the stdin watchdog; the rest is argv.
# It prints the process-group id (this shell is the group leader after setsid), then execs argv.
# The id is also the session id: tools that make their own process group (GNU `timeout` does) stay
# in the session, so kills go to the group AND to the whole session (_KILL_SESSION; the watchdog,
# itself in the session, uses procps' pkill, which never signals itself).
# The watchdog (start() without stdin) waits for EOF on the channel's stdin, i.e. for the SSH
# session to go away, and then kills the group: a launcher that dies without calling terminate()
# still leaves nothing behind. It keeps a dup of stdin on fd 3 because a background job's own
# stdin is /dev/null in a non-interactive shell.
# $1 = 2 is the watchdog plus a secret: the first line of stdin is read by the shell's own `read`
# (no process, so no command line for `ps` to show) into NETBENCH_STORE_SECRET, which only the
# command's environment carries (readable by its owner alone).
_WRAPPER = (
    f'echo "{PGID_MARKER} $$"; w=$1; shift; '
    'if [ "$w" = 2 ]; then IFS= read -r NETBENCH_STORE_SECRET || exit 1; '
    "export NETBENCH_STORE_SECRET; w=1; fi; "
    'if [ "$w" = 1 ]; then exec 3<&0; '
    '( while read -r _ <&3; do :; done; pkill -KILL -s $$; kill -s KILL -- -$$ ) >/dev/null 2>&1 & '
    'exec 3<&- </dev/null; fi; exec "$@"'
)


# Signal a remote process group and every process of its session (the wrapper's setsid made them
# one number). Tools under `timeout` (the probe runs every tool so) are in a group of their own but
# in the session; the session's members are found in /proc rather than with procps' pkill, which
# minimal images lack: there `kill -- -PG` alone left a hung probe's tool running after its timeout.
# Field 4 after the command name's closing parenthesis in /proc/PID/stat is the session id.
_KILL_SESSION = (
    "kill -s {sig} -- -{pg} 2>/dev/null; "
    "for f in /proc/[0-9]*/stat; do "
    'read -r l 2>/dev/null < "$f" || continue; set -- ${{l##*) }}; '
    'if [ "$4" = {pg} ]; then p=${{f#/proc/}}; kill -s {sig} "${{p%/stat}}" 2>/dev/null; fi; '
    "done; exit 0"
)


class SSHError(NetbenchError):
    """An SSH failure with a ``kind`` from :data:`SSH_ERROR_KINDS` and a one-line message."""

    def __init__(self, kind: str, message: str, host: str | None = None):
        if kind not in SSH_ERROR_KINDS:
            raise ValueError(f"unknown SSH error kind {kind!r}")
        super().__init__(f"{host}: {message}" if host else message)
        self.kind = kind
        self.message = message
        self.host = host


@dataclass
class SSHOptions:
    """How to reach hosts. Defaults behave like ``ssh`` with ``StrictHostKeyChecking yes``."""

    ssh_config: str | Path | None = None
    """ssh_config to read; None: ``~/.ssh/config`` when it exists; ``"none"``: read no config."""
    accept_new_host_keys: bool = False
    """Trust unknown host keys on first use and record them in known_hosts (never changed ones)."""
    connect_timeout: float = 10.0
    """Seconds for TCP connect, SSH handshake and authentication, each."""
    identity_files: list[str] = field(default_factory=list)
    """Private keys tried first (like ``ssh -i``), before the config's and the agent's."""
    known_hosts: str | Path | None = None
    """known_hosts to check and record keys in; None: the config's UserKnownHostsFile or the default."""
    use_agent: bool = True
    """Use ssh-agent keys (SSH_AUTH_SOCK) unless the host's config says ``IdentitiesOnly yes``."""
    keepalive_s: int = 15
    """SSH keepalive interval, so a dead peer is noticed by long-running sessions."""
    default_user: str | None = None
    """User when neither a label nor the config names one; None: the local user."""

    def __post_init__(self) -> None:
        if self.connect_timeout <= 0:
            raise ValueError("connect_timeout must be > 0")


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to connect for one host, after ssh_config and labels were applied."""

    name: str  # the name in the hosts file (what reports show)
    hostname: str  # what to connect to (ssh_config HostName)
    port: int = 22
    user: str = "root"
    identity_files: tuple[str, ...] = ()
    identities_only: bool = False
    known_hosts_files: tuple[str, ...] = ()
    host_key_alias: str | None = None
    accept_new: bool = False  # StrictHostKeyChecking accept-new/no in the config
    jumps: tuple[SSHTarget, ...] = ()  # ProxyJump hops, first hop first
    proxy_command: str | None = None

    @property
    def key_name(self) -> str:
        """The name known_hosts stores this host's key under (OpenSSH's rules)."""
        host = self.host_key_alias or self.hostname
        return host if self.port == 22 else f"[{host}]:{self.port}"

    def endpoint(self) -> str:
        """Where this target's sshd is, as one string: two names with the same endpoint are one
        machine. The address when this machine resolves the name itself (no jump, no proxy
        command), else the name as the last hop resolves it, with the hops before it."""
        host = self.hostname
        if not self.jumps and not self.proxy_command:
            try:
                host = socket.getaddrinfo(host, self.port, type=socket.SOCK_STREAM)[0][4][0]
            except (OSError, UnicodeError):
                pass  # unresolvable: the connection fails and says so; the name stands for it
        via = "".join(f" via {j.endpoint()}" for j in reversed(self.jumps))
        via += " via a proxy command" if self.proxy_command else ""
        return (f"[{host}]" if ":" in host else host) + f":{self.port}{via}"


# -- ssh_config ----------------------------------------------------------------------------------
_CONFIG_CACHE: dict[tuple[str, float, int], Any] = {}
_CONFIG_LOCK = threading.Lock()


def _config_path(opts: SSHOptions) -> Path | None:
    if opts.ssh_config is not None:
        if str(opts.ssh_config).lower() == "none":
            return None
        path = Path(opts.ssh_config).expanduser()
        if not path.is_file():  # a FIFO or a device is refused too: paramiko would read it for ever
            why = "is not a regular file" if path.exists() else "not found"
            raise SSHError("error", f"ssh config {path} {why}")
        return path
    default = Path("~/.ssh/config").expanduser()
    return default if default.is_file() else None


def _load_config(opts: SSHOptions) -> paramiko.SSHConfig | None:
    """Parse the ssh_config once per (path, mtime, size): 1,000 hosts share one parse."""
    import paramiko

    path = _config_path(opts)
    if path is None:
        return None
    st = path.stat()
    key = (str(path), st.st_mtime, st.st_size)
    with _CONFIG_LOCK:
        cfg = _CONFIG_CACHE.get(key)
        if cfg is None:
            try:
                cfg = paramiko.SSHConfig.from_path(str(path))
            except Exception as exc:  # noqa: BLE001 - a bad config is the user's to fix
                raise SSHError("error", f"cannot read ssh config {path}: {exc}") from None
            _CONFIG_CACHE.clear()
            _CONFIG_CACHE[key] = cfg
    return cfg


def _lookup(cfg: paramiko.SSHConfig | None, host: str) -> dict[str, Any]:
    if cfg is None:
        return {"hostname": host}
    try:
        return dict(cfg.lookup(host))
    except Exception as exc:  # noqa: BLE001 - e.g. a Match exec that fails
        raise SSHError("error", f"ssh config lookup for {host} failed: {exc}", host) from None


def _split_jump(spec: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` (IPv6 in brackets) -> (user, host, port)."""
    user = None
    if "@" in spec:
        user, spec = spec.rsplit("@", 1)
    port = None
    if spec.startswith("["):
        host, _, rest = spec[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
    elif spec.count(":") == 1:
        host, p = spec.split(":")
        port = int(p)
    else:
        host = spec
    return user, host, port


def _validate_host(host: str, what: str) -> None:
    from netbench.common.hosts import validate_hostname

    why = validate_hostname(host)
    if why:
        raise SSHError("error", f"bad {what} {host!r}: {why}")


def resolve(entry: Any, opts: SSHOptions | None = None, _depth: int = 0) -> SSHTarget:
    """Apply ssh_config and labels to a hosts-file entry (a ``HostEntry`` or a plain host name).

    Labels ``user=`` and ``port=`` override the config; ProxyJump hops are resolved through the
    config too (their own ProxyJump, if any, comes first in the chain).
    """
    opts = opts or SSHOptions()
    name = entry if isinstance(entry, str) else entry.name
    labels: Mapping[str, str] = {} if isinstance(entry, str) else (getattr(entry, "labels", None) or {})
    _validate_host(name, "host name")
    cfg = _load_config(opts)
    conf = _lookup(cfg, name)
    hostname = str(conf.get("hostname") or name)
    _validate_host(hostname, "HostName")
    try:
        port = int(labels.get("port") or conf.get("port") or 22)
    except ValueError:
        raise SSHError("error", f"bad port {labels.get('port') or conf.get('port')!r}", name) from None
    if not 0 < port < 65536:
        raise SSHError("error", f"bad port {port}", name)
    user = labels.get("user") or conf.get("user") or opts.default_user or getpass.getuser()
    idents = [os.path.expanduser(p) for p in opts.identity_files]
    idents += [os.path.expanduser(p) for p in conf.get("identityfile", []) if p not in idents]
    if opts.known_hosts is not None:
        kh = (str(Path(opts.known_hosts).expanduser()),)
    elif conf.get("userknownhostsfile"):
        kh = tuple(os.path.expanduser(p) for p in str(conf["userknownhostsfile"]).split())
    else:
        kh = (os.path.expanduser("~/.ssh/known_hosts"),)
    strict = str(conf.get("stricthostkeychecking", "yes")).lower()
    jumps: list[SSHTarget] = []
    pj = str(conf.get("proxyjump") or "").strip()
    if pj and pj.lower() != "none":
        if _depth >= MAX_JUMPS:
            raise SSHError("error", f"ProxyJump chain longer than {MAX_JUMPS} hops (a loop?)", name)
        for spec in pj.split(","):
            try:
                juser, jhost, jport = _split_jump(spec.strip())
            except ValueError:
                raise SSHError("error", f"bad ProxyJump {spec!r}", name) from None
            hop = resolve(jhost, opts, _depth + 1)
            hop = _replace(hop, user=juser or hop.user, port=jport or hop.port)
            jumps.extend(hop.jumps)
            jumps.append(_replace(hop, jumps=()))
    if len(jumps) > MAX_JUMPS:
        raise SSHError("error", f"ProxyJump chain longer than {MAX_JUMPS} hops", name)
    pc = conf.get("proxycommand")
    return SSHTarget(
        name=name, hostname=hostname, port=port, user=str(user), identity_files=tuple(idents),
        identities_only=str(conf.get("identitiesonly", "no")).lower() == "yes",
        known_hosts_files=kh, host_key_alias=conf.get("hostkeyalias"),
        accept_new=strict in ("accept-new", "no", "off"), jumps=tuple(jumps),
        proxy_command=None if jumps or not pc or str(pc).lower() == "none" else str(pc),
    )


def _replace(t: SSHTarget, **kw: Any) -> SSHTarget:
    import dataclasses

    return dataclasses.replace(t, **kw)


# -- known_hosts -----------------------------------------------------------------------------------
_KH_CACHE: dict[str, tuple[tuple[float, int], Any]] = {}
_KH_LOCK = threading.Lock()


@dataclass(frozen=True)
class _KnownHosts:
    """One known_hosts file: the trusted keys and the ``@revoked`` ones (OpenSSH's markers)."""

    trusted: paramiko.HostKeys
    revoked: paramiko.HostKeys


def _parse_known_hosts(path: str) -> _KnownHosts:
    """Read known_hosts line by line, so one line paramiko cannot parse costs that line, not every
    host. ``@revoked`` keys are kept apart and refused (OpenSSH). ``@cert-authority`` lines are
    skipped: netbench does not verify host certificates, so a host trusted only through a CA is an
    unknown host (add its key, or pass --accept-new-host-keys)."""
    import paramiko

    trusted, revoked = paramiko.HostKeys(), paramiko.HostKeys()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            marker, _, rest = line.strip().partition(" ")
            target = trusted
            if marker == "@cert-authority":
                continue
            if marker == "@revoked":
                target, line = revoked, rest
            elif marker.startswith("@"):
                log.warning("%s:%d: unknown marker %s; line ignored", path, number, marker)
                continue
            try:
                entry = paramiko.hostkeys.HostKeyEntry.from_line(line, number)
            except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey, ValueError) as exc:
                log.warning("%s:%d: unreadable known_hosts line ignored: %s", path, number, exc)
                continue
            if entry is not None and entry.key is not None:
                for name in entry.hostnames:
                    target.add(name, entry.key.get_name(), entry.key)
    return _KnownHosts(trusted, revoked)


def _host_keys(path: str) -> _KnownHosts | None:
    """known_hosts parsed once per (mtime, size); re-read when another process appended to it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_mtime, st.st_size)
    with _KH_LOCK:
        hit = _KH_CACHE.get(path)
        if hit and hit[0] == stamp:
            return hit[1]
        try:
            known = _parse_known_hosts(path)
        except OSError as exc:
            log.warning("cannot read known_hosts %s: %s", path, exc)
            return None
        _KH_CACHE[path] = (stamp, known)
        return known


def _keys_for(target: SSHTarget, revoked: bool) -> list[paramiko.PKey]:
    keys: list[Any] = []
    for path in (*target.known_hosts_files, "/etc/ssh/ssh_known_hosts"):
        known = _host_keys(path)
        if known is None:
            continue
        entry = (known.revoked if revoked else known.trusted).lookup(target.key_name)
        if entry:
            keys.extend(entry.values())
    return keys


def known_keys(target: SSHTarget) -> list[paramiko.PKey]:
    """Keys recorded for the target in its known_hosts files and /etc/ssh/ssh_known_hosts."""
    return _keys_for(target, revoked=False)


def record_host_key(path: str, name: str, key: paramiko.PKey) -> None:
    """Append ``name type base64`` to known_hosts under an flock (many threads/processes at once)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{name} {key.get_name()} {key.get_base64()}\n".encode())
    finally:
        os.close(fd)


def check_host_key(target: SSHTarget, key: paramiko.PKey, accept_new: bool) -> None:
    """Raise SSHError unless ``key`` is the known key, or it is new and the user opted in (then record it)."""
    fp = f"{key.get_name()} {key.fingerprint}"
    if any(k == key for k in _keys_for(target, revoked=True)):
        raise SSHError(
            "host_key_refused", f"host key {fp} of {target.key_name} is marked @revoked in known_hosts; "
            "refusing to connect", target.name)
    known = known_keys(target)
    same_type = [k for k in known if k.get_name() == key.get_name()]
    if any(k == key for k in same_type):
        return
    if same_type:
        raise SSHError(
            "host_key_changed",
            f"host key CHANGED for {target.key_name} (now {fp}); refusing to connect. If the host was "
            f"re-installed, remove the old key: ssh-keygen -R '{target.key_name}'", target.name)
    if known:
        raise SSHError(
            "host_key_refused",
            f"{target.key_name} offered {fp} but known_hosts holds keys of another type for it; refusing",
            target.name)
    if not (accept_new or target.accept_new):
        raise SSHError(
            "host_key_refused",
            f"unknown host key for {target.key_name} ({fp}); add it to known_hosts or pass "
            "--accept-new-host-keys", target.name)
    record_host_key(target.known_hosts_files[0], target.key_name, key)
    log.info("%s: trusted new host key %s (recorded in %s)", target.name, fp, target.known_hosts_files[0])


# -- connecting ------------------------------------------------------------------------------------
def _silence_paramiko() -> None:
    """paramiko logs handshake failures (with tracebacks) at ERROR; we report them as SSHError."""
    plog = logging.getLogger("paramiko")
    if not plog.handlers:
        plog.addHandler(logging.NullHandler())
        plog.propagate = False


def _open_socket(t: SSHTarget, via: paramiko.Transport | None, timeout: float) -> Any:
    import paramiko

    if via is not None:
        try:
            return via.open_channel("direct-tcpip", (t.hostname, t.port), ("127.0.0.1", 0), timeout=timeout)
        except paramiko.ChannelException as exc:
            raise SSHError("unreachable", f"jump host could not reach {t.hostname}:{t.port}: {exc.text}",
                           t.name) from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise SSHError("unreachable", f"jump host channel to {t.hostname}:{t.port} failed: {exc}",
                           t.name) from None
    if t.proxy_command:
        try:
            return paramiko.ProxyCommand(t.proxy_command)
        except Exception as exc:  # noqa: BLE001
            raise SSHError("unreachable", f"ProxyCommand failed: {exc}", t.name) from None
    try:
        sock = socket.create_connection((t.hostname, t.port), timeout=timeout)
    except TimeoutError:
        raise SSHError("unreachable", f"no answer from {t.hostname}:{t.port} within {timeout:g} s",
                       t.name) from None
    except socket.gaierror as exc:
        raise SSHError("unreachable", f"cannot resolve {t.hostname}: {exc.strerror}", t.name) from None
    except ConnectionRefusedError:
        raise SSHError("unreachable", f"connection refused by {t.hostname}:{t.port} (no sshd?)",
                       t.name) from None
    except OSError as exc:
        why = errno.errorcode.get(exc.errno or 0, "") if exc.errno else ""
        reason = exc.strerror or why or exc
        raise SSHError("unreachable", f"cannot connect to {t.hostname}:{t.port}: {reason}", t.name) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _prefer_known_types(transport: paramiko.Transport, known: Sequence[paramiko.PKey]) -> None:
    """Ask for a host key type we already know, so a host with several keys is not seen as new."""
    if not known:
        return
    opts = transport.get_security_options()
    want: list[str] = []
    for k in known:
        name = k.get_name()
        want += ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] if name == "ssh-rsa" else [name]
    avail = list(opts.key_types)
    opts.key_types = [x for x in want if x in avail] + [x for x in avail if x not in want]


def _load_keys(t: SSHTarget) -> tuple[list[tuple[str, paramiko.PKey]], list[str]]:
    """Private keys to offer, labelled by file name; notes say which ones could not be used and why."""
    import paramiko

    files = list(t.identity_files)
    if not files:
        files = [os.path.expanduser(p) for p in _DEFAULT_IDENTITIES if os.path.exists(os.path.expanduser(p))]
    keys: list[tuple[str, Any]] = []
    notes: list[str] = []
    for path in files:
        try:
            keys.append((os.path.basename(path), paramiko.PKey.from_path(path)))
        except FileNotFoundError:
            if t.identity_files:
                notes.append(f"{path}: no such file")
        except paramiko.PasswordRequiredException:
            notes.append(f"{path}: encrypted (load it into ssh-agent)")
        except Exception as exc:  # noqa: BLE001 - never echo key contents, only the type of failure
            notes.append(f"{path}: unusable ({type(exc).__name__})")
    return keys, notes


def _authenticate(transport: paramiko.Transport, t: SSHTarget, opts: SSHOptions) -> None:
    import paramiko

    keys, notes = _load_keys(t)
    agent = None
    if opts.use_agent and not t.identities_only and os.environ.get("SSH_AUTH_SOCK"):
        try:
            agent = paramiko.Agent()
            keys += [(f"agent key {k.fingerprint}", k) for k in agent.get_keys()]
        except Exception as exc:  # noqa: BLE001
            notes.append(f"ssh-agent unusable ({type(exc).__name__})")
    try:
        if not keys:
            extra = f" ({'; '.join(notes)})" if notes else ""
            raise SSHError("auth_failed", f"no key to offer as {t.user}: no IdentityFile, no default key in "
                           f"~/.ssh, no ssh-agent{extra}", t.name)
        tried = []
        for label, key in keys:
            try:
                transport.auth_publickey(t.user, key)
            except paramiko.BadAuthenticationType as exc:
                raise SSHError("auth_failed", f"server does not accept public keys (allows: "
                               f"{', '.join(exc.allowed_types)})", t.name) from None
            except paramiko.AuthenticationException:
                tried.append(label)
                continue
            except (paramiko.SSHException, EOFError, OSError) as exc:
                if not transport.is_active():
                    raise SSHError("auth_failed", f"connection closed during authentication: {exc}",
                                   t.name) from None
                tried.append(label)
                continue
            if transport.is_authenticated():
                return
        extra = f"; {'; '.join(notes)}" if notes else ""
        raise SSHError("auth_failed", f"permission denied for {t.user}@{t.hostname} "
                       f"(tried {', '.join(tried)}{extra})", t.name)
    finally:
        if agent is not None:
            agent.close()


def _handshake(t: SSHTarget, sock: Any, opts: SSHOptions) -> paramiko.Transport:
    import paramiko

    transport = paramiko.Transport(sock)
    transport.banner_timeout = transport.handshake_timeout = transport.auth_timeout = opts.connect_timeout
    _prefer_known_types(transport, known_keys(t))
    try:
        transport.start_client(timeout=opts.connect_timeout)
    except paramiko.SSHException as exc:
        transport.close()
        msg = str(exc)
        kind = "timeout" if "timeout" in msg.lower() or "banner" in msg.lower() else "error"
        if "Error reading SSH protocol banner" in msg and "timed out" not in msg.lower():
            kind = "unreachable" if isinstance(exc.__cause__, (ConnectionError, EOFError)) else kind
        raise SSHError(kind, f"SSH handshake with {t.hostname}:{t.port} failed: {msg}", t.name) from None
    except (OSError, EOFError) as exc:
        transport.close()
        raise SSHError("unreachable", f"connection to {t.hostname}:{t.port} dropped during handshake: "
                       f"{exc or type(exc).__name__}", t.name) from None
    try:
        check_host_key(t, transport.get_remote_server_key(), opts.accept_new_host_keys)
        _authenticate(transport, t, opts)
    except BaseException:
        transport.close()
        raise
    if opts.keepalive_s:
        transport.set_keepalive(int(opts.keepalive_s))
    return transport


def connect(target: SSHTarget, opts: SSHOptions | None = None) -> SSHConnection:
    """Open an authenticated SSH connection (through every ProxyJump hop); raise SSHError on failure."""
    opts = opts or SSHOptions()
    _silence_paramiko()
    chain: list[Any] = []
    try:
        for i, hop in enumerate((*target.jumps, target)):
            via = chain[-1] if chain else None
            try:
                sock = _open_socket(hop, via, opts.connect_timeout)
                chain.append(_handshake(hop, sock, opts))
            except SSHError as exc:
                if i < len(target.jumps):  # say which hop failed, keep the kind
                    msg = f"via jump host {hop.name}: {exc.message}"
                    raise SSHError(exc.kind, msg, target.name) from None
                raise
    except BaseException:
        for tr in reversed(chain):
            tr.close()
        raise
    return SSHConnection(target, chain)


def connect_entry(entry: Any, opts: SSHOptions | None = None) -> SSHConnection:
    """``connect(resolve(entry, opts), opts)``."""
    opts = opts or SSHOptions()
    return connect(resolve(entry, opts), opts)


# -- running commands ------------------------------------------------------------------------------
def remote_command(
    argv: Sequence[str], env: Mapping[str, str] | None = None, watchdog: bool = False, secret: bool = False
) -> str:
    """The command line sent to the remote login shell: every argument is shlex-quoted.

    ``setsid -w`` puts the command in a new process group (so it can be killed as a tree) and
    still reports its exit status; hosts without setsid fall back to the group sshd gave the session.
    """
    if not argv:
        raise ValueError("empty argv")
    parts: list[str] = []
    if env:
        bad = [k for k in env if not _ENV_NAME.match(k)]
        if bad:
            raise ValueError(f"bad environment variable name(s): {bad}")
        parts = ["env"] + [f"{k}={v}" for k, v in env.items()]
    mode = "2" if secret else "1" if watchdog else "0"
    inner = shlex.join([*parts, "sh", "-c", _WRAPPER, "netbench", mode, *map(str, argv)])
    return f"if command -v setsid >/dev/null 2>&1; then exec setsid -w {inner}; else exec {inner}; fi"


class SSHConnection:
    """One authenticated SSH connection to a host; many commands can run over it (one channel each)."""

    def __init__(self, target: SSHTarget, chain: list[paramiko.Transport]):
        self.target = target
        self._chain = chain
        self.transport = chain[-1]
        self._inflight: dict[int, int] = {}  # channel id -> remote process group of a run() in progress

    @property
    def is_active(self) -> bool:
        return self.transport.is_active()

    def _open(self, timeout: float | None = None) -> paramiko.Channel:
        import paramiko

        try:
            return self.transport.open_session(timeout=timeout or 30)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise SSHError("error", f"cannot open a session channel: {exc}", self.target.name) from None

    def run(
        self, argv: Sequence[str], stdin: bytes | None = None, timeout: float = 60.0,
        env: Mapping[str, str] | None = None, max_output: int = MAX_OUTPUT_BYTES,
    ) -> tuple[int, bytes, bytes]:
        """Run argv to completion; return (exit status, stdout, stderr). Exit status -1: killed by a signal.

        On timeout the remote process group is killed and SSHError(kind="timeout") is raised; so it is
        when stdout or stderr grows past ``max_output`` bytes (a host must not fill our memory).
        """
        chan = self._open(timeout)
        chan.setblocking(False)
        try:
            chan.exec_command(remote_command(argv, env))
        except Exception as exc:  # noqa: BLE001
            chan.close()
            raise SSHError("error", f"exec failed: {exc}", self.target.name) from None
        out, err = bytearray(), bytearray()
        data = stdin or b""
        sent = 0
        if not data:
            chan.shutdown_write()
        deadline = time.monotonic() + timeout
        pgid: int | None = None
        try:
            while True:
                sending = sent < len(data)
                if sending and chan.send_ready():
                    try:
                        sent += chan.send(data[sent : sent + 32768])
                    except OSError:  # remote closed its stdin early: keep reading its output
                        sent = len(data)
                    if sent >= len(data):
                        chan.shutdown_write()
                _drain(chan, out, err)
                if pgid is None:
                    pgid = _take_marker(out)
                    if pgid:
                        self._inflight[chan.get_id()] = pgid
                if len(out) > max_output or len(err) > max_output:
                    self._kill_group(pgid if pgid and pgid > 0 else None, chan, grace=1.0)
                    raise SSHError("error", f"{shlex.join(map(str, argv))[:80]} wrote more than "
                                   f"{max_output} bytes of output; killed", self.target.name)
                if chan.exit_status_ready() and _eof(chan):
                    _drain(chan, out, err)
                    break
                if chan.closed:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    self._kill_group(pgid if pgid and pgid > 0 else None, chan, grace=1.0)
                    raise SSHError("timeout", f"{shlex.join(map(str, argv))[:80]} did not finish within "
                                   f"{timeout:g} s; killed", self.target.name)
                select.select([chan], [], [], min(left, 0.01 if sending else 0.2))
            if pgid is None:
                _take_marker(out)
            rc = chan.recv_exit_status() if chan.exit_status_ready() else -1
            if rc == -1 and not self.transport.is_active():
                raise SSHError("error", "connection lost before the command finished", self.target.name)
            return rc, bytes(out), bytes(err)
        finally:
            self._inflight.pop(chan.get_id(), None)
            chan.close()

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
              stdin: bytes | None = None, secret: str | None = None) -> RemoteProcess:
        """Start a long-running command (e.g. a worker streaming JSON lines); see :class:`RemoteProcess`.

        Without ``stdin`` the command's stdin is /dev/null and a watchdog kills its process group when
        the SSH session ends, so a launcher that dies abruptly leaves nothing behind. ``secret`` (one
        line) travels inside the encrypted channel and reaches the command as NETBENCH_STORE_SECRET
        in its environment, never on a command line.
        """
        if secret is not None and ("\n" in secret or stdin is not None):
            raise ValueError("a secret is one line, and excludes stdin")
        chan = self._open()
        try:
            chan.exec_command(remote_command(argv, env, watchdog=stdin is None, secret=secret is not None))
            if secret is not None:
                chan.sendall((secret + "\n").encode())
            if stdin:
                chan.sendall(stdin)
                chan.shutdown_write()
        except Exception as exc:  # noqa: BLE001
            chan.close()
            raise SSHError("error", f"exec failed: {exc}", self.target.name) from None
        return RemoteProcess(self, chan, list(map(str, argv)))

    def _kill_group(self, pgid: int | None, chan: paramiko.Channel | None, grace: float = 5.0) -> None:
        """TERM the remote process group through a second channel, KILL it after ``grace`` seconds."""
        if pgid is None or pgid <= 1 or not self.transport.is_active():
            return
        self._signal(pgid, "TERM")
        end = time.monotonic() + grace
        while chan is not None and time.monotonic() < end:
            if chan.exit_status_ready() or chan.closed:
                break
            time.sleep(0.02)
        self._signal(pgid, "KILL")  # also reaps children that ignored TERM or outlived the leader

    def _signal(self, pgid: int, sig: str) -> None:
        import paramiko

        try:
            chan = self.transport.open_session(timeout=10)
            pg = int(pgid)
            chan.exec_command(shlex.join(["sh", "-c", _KILL_SESSION.format(sig=sig, pg=pg)]))
            end = time.monotonic() + 10
            while not chan.exit_status_ready() and time.monotonic() < end:
                time.sleep(0.005)
            chan.close()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            log.debug("%s: kill -%s -%s failed: %s", self.target.name, sig, pgid, exc)

    def abort(self) -> None:
        """KILL the remote process group of every run() in progress, then close (for Ctrl-C)."""
        for pgid in list(self._inflight.values()):
            self._signal(pgid, "KILL")
        self.close()

    def close(self) -> None:
        for tr in reversed(self._chain):
            tr.close()

    def __enter__(self) -> SSHConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drain(chan: paramiko.Channel, out: bytearray, err: bytearray) -> None:
    while chan.recv_ready():
        out += chan.recv(65536)
    while chan.recv_stderr_ready():
        err += chan.recv_stderr(65536)


def _eof(chan: paramiko.Channel) -> bool:
    return bool(chan.eof_received) and not chan.recv_ready() and not chan.recv_stderr_ready()


def _take_marker(out: bytearray) -> int | None:
    """Remove the wrapper's ``__NETBENCH_PGID__ N`` first line from ``out``; return N (0: absent)."""
    nl = out.find(b"\n")
    if nl < 0:
        return None if len(out) < 64 else 0
    head = bytes(out[:nl]).decode(errors="replace")
    if head.startswith(PGID_MARKER + " "):
        del out[: nl + 1]
        try:
            return int(head.split()[1])
        except (IndexError, ValueError):
            return 0
    return 0


class RemoteProcess:
    """A command running on a remote host, read line by line.

    ``readline(timeout)`` returns the next stdout line (without newline), ``None`` at end of output,
    and raises ``TimeoutError`` when no complete line arrived in time. ``stderr`` is kept (the last
    256 KiB) for error messages. ``terminate()`` kills the remote process group: TERM, then KILL.
    """

    STDERR_KEEP = 256 * 1024

    def __init__(self, conn: SSHConnection, chan: paramiko.Channel, argv: list[str]):
        self.conn = conn
        self.argv = argv
        self.pgid: int | None = None
        self._chan = chan
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr = bytearray()
        self._pgid_event = threading.Event()
        self._done = threading.Event()
        self._terminated = False
        self._eof = False
        self._reader = threading.Thread(target=self._read, name=f"ssh-{conn.target.name}", daemon=True)
        self._reader.start()

    @property
    def host(self) -> str:
        return self.conn.target.name

    def _read(self) -> None:
        chan, buf, first = self._chan, bytearray(), True
        try:
            while True:
                select.select([chan], [], [], 0.5)
                got = False
                while chan.recv_ready():
                    buf += chan.recv(65536)
                    got = True
                while chan.recv_stderr_ready():
                    self._stderr += chan.recv_stderr(65536)
                    if len(self._stderr) > self.STDERR_KEEP:
                        del self._stderr[: len(self._stderr) - self.STDERR_KEEP]
                if got:
                    *lines, rest = bytes(buf).split(b"\n")
                    if len(rest) > MAX_LINE_BYTES:  # no newline for 16 MiB: cut, do not buffer forever
                        lines.append(rest[:MAX_LINE_BYTES])
                        rest = b""
                    buf = bytearray(rest)
                    for raw in lines:
                        line = raw.decode("utf-8", errors="replace").rstrip("\r")
                        if first:
                            first = False
                            if line.startswith(PGID_MARKER + " "):
                                try:
                                    self.pgid = int(line.split()[1])
                                except (IndexError, ValueError):
                                    pass
                                self._pgid_event.set()
                                continue
                            self._pgid_event.set()
                        self._lines.put(line)
                if _eof(chan) or chan.closed or not self.conn.transport.is_active():
                    break
        except (OSError, EOFError) as exc:
            log.debug("%s: reader stopped: %s", self.host, exc)
        finally:
            if buf:
                self._lines.put(bytes(buf).decode("utf-8", errors="replace"))
            self._pgid_event.set()
            self._lines.put(None)
            self._done.set()

    def readline(self, timeout: float | None = None) -> str | None:
        """Next stdout line; None once the output has ended; TimeoutError if none within ``timeout``."""
        if self._eof:
            return None
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.host}: no output line within {timeout} s") from None
        if line is None:
            self._eof = True
        return line

    def __iter__(self) -> Iterator[str]:
        while (line := self.readline()) is not None:
            yield line

    @property
    def returncode(self) -> int | None:
        """Exit status once the remote command ended (-1: killed by a signal or connection lost)."""
        chan = self._chan
        if chan.exit_status_ready():
            return chan.recv_exit_status()
        if chan.closed or not self.conn.transport.is_active():
            return -1
        return None

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the command to end; its exit status, or None if still running after ``timeout``."""
        end = None if timeout is None else time.monotonic() + timeout
        while (rc := self.returncode) is None:
            if end is not None and time.monotonic() >= end:
                return None
            self._chan.status_event.wait(0.1)
        return rc

    @property
    def stderr(self) -> str:
        return bytes(self._stderr).decode("utf-8", errors="replace")

    def terminate(self, grace: float = 5.0) -> int | None:
        """Kill the remote process tree: TERM to its process group, KILL after ``grace`` s; close."""
        self._terminated = True
        self._pgid_event.wait(min(grace, 5.0))
        if self.returncode is None or self.pgid:
            self.conn._kill_group(self.pgid, self._chan, grace)
        rc = self.wait(2.0)
        self.close()
        return rc

    def close(self) -> None:
        """Close the channel (the watchdog then kills whatever is left of the remote group)."""
        self._chan.close()
        self._reader.join(2.0)
