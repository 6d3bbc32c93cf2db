"""Host keys: known_hosts files read (``@revoked`` refused, ``@cert-authority`` skipped, a bad line
costing that line only), a new key recorded when the user opted in, a changed key always refused.
``netbench.sites.ssh.transport`` re-exports every name here."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.sites.ssh.config import SSHError, SSHTarget

if TYPE_CHECKING:  # paramiko is imported lazily: `netbench --help` must stay instant
    import paramiko

log = logging.getLogger("netbench.sites.ssh.transport")


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
