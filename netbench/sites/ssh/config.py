"""Where an SSH connection goes: ``SSHOptions`` (the user's choices), ``SSHTarget`` (one host as
``~/.ssh/config`` and the hosts file resolve it: HostName, User, Port, keys, known_hosts files,
ProxyJump hops, ProxyCommand) and ``SSHError``, the one failure every SSH step raises.
``netbench.sites.ssh.transport`` re-exports every name here."""

from __future__ import annotations

import getpass
import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.common.errors import NetbenchError

if TYPE_CHECKING:  # paramiko is imported lazily: `netbench --help` must stay instant
    import paramiko

SSH_ERROR_KINDS = ("unreachable", "auth_failed", "host_key_refused", "host_key_changed", "timeout", "error")
MAX_JUMPS = 8


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
    from netbench.inventory.hosts import validate_hostname

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
