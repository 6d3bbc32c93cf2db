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
  tree through a second exec channel, not just the SSH channel. Each channel has a pty (raw: stdin
  and stdout pass byte for byte; stderr is carried on stdout and split off again): a login profile
  that never returns (``sleep`` in ~/.bashrc) keeps the command from starting, and closing the
  channel then hangs its login shell up, where a channel without a pty left it running.
* Key material, passphrases and stdin never reach logs or error messages (fingerprints only).

This module connects (sockets, ProxyJump hops, handshake, authentication) and re-exports the
parts, each its own module: ``sshconfig`` (options, targets, ``SSHError``), ``sshkeys`` (host keys)
and ``sshexec`` (commands and remote processes over a connection).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from netbench.sites.ssh.config import MAX_JUMPS as MAX_JUMPS
from netbench.sites.ssh.config import SSH_ERROR_KINDS as SSH_ERROR_KINDS
from netbench.sites.ssh.config import SSHError, SSHOptions, SSHTarget, resolve
from netbench.sites.ssh.keys import check_host_key, known_keys
from netbench.sites.ssh.keys import record_host_key as record_host_key
from netbench.sites.ssh.remote import MAX_LINE_BYTES as MAX_LINE_BYTES
from netbench.sites.ssh.remote import MAX_OUTPUT_BYTES as MAX_OUTPUT_BYTES
from netbench.sites.ssh.remote import PGID_MARKER as PGID_MARKER
from netbench.sites.ssh.remote import RemoteProcess as RemoteProcess
from netbench.sites.ssh.remote import SSHConnection
from netbench.sites.ssh.remote import remote_command as remote_command

if TYPE_CHECKING:  # paramiko is imported lazily: `netbench --help` must stay instant
    import paramiko

_DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")


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
