"""Commands over an SSH connection: ``remote_command`` (argv shlex-quoted, run under ``setsid`` in
the wrapper that prints its process group and arms the stdin watchdog), ``SSHConnection.run`` (to
completion, output bounded) and ``start`` (a ``RemoteProcess`` read line by line), each on a raw
pty so that closing its channel also ends a login shell that never got to start it, and the kill of
a remote process group and its session. ``netbench.sites.ssh.transport`` re-exports every name here."""

from __future__ import annotations

import logging
import queue
import re
import secrets
import select
import shlex
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from netbench.sites.ssh.config import SSHError, SSHTarget

if TYPE_CHECKING:  # paramiko is imported lazily: `netbench --help` must stay instant
    import paramiko

log = logging.getLogger("netbench.sites.ssh.transport")

PGID_MARKER = "__NETBENCH_PGID__"
#: the most stdout (and stderr) one ``run`` keeps; the inventory probe writes a few hundred KB
MAX_OUTPUT_BYTES = 64 << 20
#: the longest line a RemoteProcess queues; a longer one is cut there (an agent's lines are short)
MAX_LINE_BYTES = 16 << 20
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# The remote wrapper, run by `sh -c`. Its arguments: W N S T argv. W says whether to arm the stdin
# watchdog; N is how many bytes of stdin the command gets; S how its stderr travels; the rest is argv.
# It prints the process-group id (this shell is the group leader after setsid), then runs argv.
# The id is also the session id: tools that make their own process group (GNU `timeout` does) stay
# in the session, so kills go to the group AND to the whole session (_KILL_SESSION; the watchdog,
# itself in the session, uses procps' pkill, which never signals itself).
# The session runs on a pseudo-terminal (``_exec``): a login profile that never returns (a `sleep` in
# ~/.bashrc) keeps argv from ever starting, and then nothing of ours runs to end it; closing the
# channel makes sshd close the pty, and the kernel hangs up the login shell and its foreground
# group. The pty's line discipline is raw (the pty-req's modes, and `stty` again here, for a profile
# that changed them), and nothing is sent before the id line: input never echoes, bytes pass as they
# are. A pty has one output stream and no end of input, so stdin is N bytes read by `head -c` (none:
# /dev/null), and stderr travels on stdout: S=t prefixes each stderr line with the tag T (a command
# streaming lines, RemoteProcess), S=c sends it after the command ends, behind a line with the tag
# (SSHConnection.run); S=- execs argv with the wrapper's own streams (remote_command alone).
# The watchdog (start() without stdin) waits for the end of the channel's stdin, i.e. for the SSH
# session to go away (a hung-up pty reads as the end), and then kills the group: a launcher that dies
# without calling terminate() still leaves nothing behind. It keeps a dup of stdin on fd 3 because a
# background job's own stdin is /dev/null in a non-interactive shell.
# W = 2 is the watchdog plus a secret: the first line of stdin is read by the shell's own `read`
# (no process, so no command line for `ps` to show) into NETBENCH_STORE_SECRET, which only the
# command's environment carries (readable by its owner alone).
_WRAPPER = (
    "stty raw -echo 2>/dev/null; "
    f'echo "{PGID_MARKER} $$"; w=$1; n=$2; s=$3; t=$4; shift 4; '
    'if [ "$w" = 2 ]; then IFS= read -r NETBENCH_STORE_SECRET || exit 1; '
    "export NETBENCH_STORE_SECRET; w=1; fi; "
    'if [ "$w" = 1 ]; then exec 3<&0; '
    '( while read -r _ <&3; do :; done; pkill -KILL -s $$; kill -s KILL -- -$$ ) >/dev/null 2>&1 & '
    "exec 3<&- </dev/null; fi; "
    'if [ "$s" = - ]; then exec "$@"; fi; '
    'nb_in() { if [ "$n" -gt 0 ]; then head -c "$n" | "$@"; else "$@" </dev/null; fi; }; '
    # the command's own stdout and stderr are pipes, as without a pty (on a terminal a tool may page,
    # prompt or colour): `cat` copies its stdout to the pty, its exit status comes back on fd 5
    "exec 4>&1; "
    # S=t: each stderr line tagged, a write each (awk reads a block at a time where the shell's own
    # `read` takes a byte a syscall: a chatty stderr, NCCL_DEBUG's, must not hold the ranks up)
    'if command -v awk >/dev/null 2>&1; then nb_tag() { awk -v t="$t" \'{ print t " " $0; fflush() }\'; }; '
    'else nb_tag() { while IFS= read -r l || [ -n "$l" ]; do printf "%s %s\\n" "$t" "$l"; done; }; fi; '
    'if [ "$s" = t ]; then r=$( { { { nb_in "$@" 4>&- 5>&- 6>&-; echo $? >&5; } 2>&6 | cat >&4; } 6>&1 | '
    'nb_tag >&4; } 5>&1 ); exit "${r:-1}"; fi; '
    # S=c: stderr gathered in $e (its status after a newline: a command substitution keeps no
    # trailing newline of its own), sent once the command has ended
    "nl='\n'; "
    'e=$( { r=$( { { nb_in "$@" 2>&3 3>&- 4>&- 5>&-; echo $? >&5; } | cat >&4; } 5>&1 ); '
    'printf "\\n%s" "$r"; } 3>&1 ); r=${e##*"$nl"}; e=${e%"$nl"*}; '
    'printf "\\n%s\\n%s" "$t" "$e"; exit "${r:-1}"'
)

# RFC 4254 section 8 terminal modes of the pty-req (opcode, value): a raw line discipline, as
# cfmakeraw makes it: no echo, no line editing, no signal characters, no flow control, no CR/NL
# translation either way, 8 bits.
_RAW_MODES = ((53, 0), (54, 0), (55, 0), (56, 0), (51, 0), (50, 0), (62, 0), (38, 0), (39, 0), (36, 0),
              (35, 0), (37, 0), (34, 0), (70, 0), (72, 0), (91, 1))


# Signal a remote process group and every process of its session (the wrapper's setsid made them
# one number). Tools under `timeout` (the probe runs every tool so) are in a group of their own but
# in the session; the session's members are found in /proc rather than with procps' pkill, which
# minimal images lack: there `kill -- -PG` alone left a hung probe's tool running after its timeout.
# Field 4 after the command name's closing parenthesis in /proc/PID/stat is the session id.
# It runs on a pty too (``_exec``), and ignores the hang-up once it runs: the group's end ends the
# run() it kills, whose caller may close the connection before the loop has reached every member.
_KILL_SESSION = (
    "trap '' HUP; kill -s {sig} -- -{pg} 2>/dev/null; "
    "for f in /proc/[0-9]*/stat; do "
    'read -r l 2>/dev/null < "$f" || continue; set -- ${{l##*) }}; '
    'if [ "$4" = {pg} ]; then p=${{f#/proc/}}; kill -s {sig} "${{p%/stat}}" 2>/dev/null; fi; '
    "done; exit 0"
)


# -- running commands ------------------------------------------------------------------------------
def remote_command(
    argv: Sequence[str], env: Mapping[str, str] | None = None, watchdog: bool = False, secret: bool = False,
    stdin_bytes: int = 0, stderr: str = "-", tag: str = "-",
) -> str:
    """The command line sent to the remote login shell: every argument is shlex-quoted.

    ``setsid -w`` puts the command in a new process group (so it can be killed as a tree) and
    still reports its exit status; hosts without setsid fall back to the group sshd gave the session.
    ``stdin_bytes``, ``stderr`` (``t``, ``c`` or ``-``) and ``tag``: how stdin and stderr travel
    (the wrapper's comment above).
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
    inner = shlex.join([*parts, "sh", "-c", _WRAPPER, "netbench", mode, str(int(stdin_bytes)), stderr, tag,
                        *map(str, argv)])
    # with stderr on stdout, the wrapper's streams carry the command's alone (setsid's own "child did
    # not exit normally" after a kill is no line of the command's)
    quiet = " 2>/dev/null" if stderr != "-" else ""
    return (f"if command -v setsid >/dev/null 2>&1; then exec setsid -w {inner}{quiet}; "
            f"else exec {inner}{quiet}; fi")


def _raw_pty(chan: paramiko.Channel) -> None:
    """Ask for a pty with a raw line discipline: the request paramiko's ``get_pty`` sends, with the
    terminal modes (``_RAW_MODES``) it has no way to pass; raises paramiko.SSHException when refused
    (paramiko then closes the channel)."""
    import struct

    from paramiko.common import cMSG_CHANNEL_REQUEST
    from paramiko.message import Message

    m = Message()
    m.add_byte(cMSG_CHANNEL_REQUEST)
    m.add_int(chan.remote_chanid)
    m.add_string("pty-req")
    m.add_boolean(True)
    m.add_string("dumb")
    for _ in range(4):  # columns, rows, width and height in pixels
        m.add_int(0)
    m.add_string(b"".join(struct.pack(">BI", op, v) for op, v in _RAW_MODES) + b"\0")
    chan._event_pending()
    chan.transport._send_user_message(m)
    chan._wait_for_event()


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

    def _exec(self, command: str, timeout: float | None = None) -> paramiko.Channel:
        """A channel running ``command`` on a raw pty (``_WRAPPER`` says why), or without one where the
        server refuses a pty (``PermitTTY no``): the command runs the same, only a login profile that
        never returns is then left to itself."""
        chan = self._open(timeout)
        try:
            _raw_pty(chan)
        except Exception:  # noqa: BLE001 - refused, or a paramiko whose internals moved: no pty, as before
            chan.close()  # a refused pty-req closes the channel: the command goes on a fresh one
            log.debug("%s: no pty: a profile that never returns outlives its channel", self.target.name)
            chan = self._open(timeout)
        try:
            chan.exec_command(command)
        except Exception as exc:  # noqa: BLE001
            chan.close()
            raise SSHError("error", f"exec failed: {exc}", self.target.name) from None
        return chan

    def run(
        self, argv: Sequence[str], stdin: bytes | None = None, timeout: float = 60.0,
        env: Mapping[str, str] | None = None, max_output: int = MAX_OUTPUT_BYTES,
    ) -> tuple[int, bytes, bytes]:
        """Run argv to completion; return (exit status, stdout, stderr). Exit status 128 + N: killed by
        signal N (-1: no status came back).

        On timeout the remote process group is killed and SSHError(kind="timeout") is raised; so it is
        when stdout and stderr grow past ``max_output`` bytes (a host must not fill our memory).
        Closing the channel ends a login shell that never got to start argv (the pty's hang-up).
        """
        data = stdin or b""
        tag = f"__NETBENCH_STDERR_{secrets.token_hex(8)}__"
        chan = self._exec(remote_command(argv, env, stdin_bytes=len(data), stderr="c", tag=tag), timeout)
        chan.setblocking(False)
        out, err = bytearray(), bytearray()
        sent = 0
        deadline = time.monotonic() + timeout
        pgid: int | None = None
        try:
            while True:
                sending = pgid is not None and sent < len(data)  # nothing before the id line: it echoes
                if sending and chan.send_ready():
                    try:
                        sent += chan.send(data[sent : sent + 32768])
                    except OSError:  # remote closed its stdin early: keep reading its output
                        sent = len(data)
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
                    # no id line: the login shell never ran the wrapper (closing the channel ends it)
                    what = (f"did not finish within {timeout:g} s" if pgid is not None else
                            f"did not start within {timeout:g} s (a login profile that waits?)")
                    raise SSHError("timeout", f"{shlex.join(map(str, argv))[:80]} {what}; killed",
                                   self.target.name)
                select.select([chan], [], [], min(left, 0.01 if sending else 0.2))
            if pgid is None:
                _take_marker(out)
            rc = chan.recv_exit_status() if chan.exit_status_ready() else -1
            if rc == -1 and not self.transport.is_active():
                raise SSHError("error", "connection lost before the command finished", self.target.name)
            return (rc, *_split_stderr(bytes(out), bytes(err), tag.encode()))
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
        data = (secret + "\n").encode() if secret is not None else stdin or b""
        tag = f"__NETBENCH_STDERR_{secrets.token_hex(8)}__"
        command = remote_command(argv, env, watchdog=stdin is None, secret=secret is not None,
                                 stdin_bytes=len(stdin or b""), stderr="t", tag=tag)
        return RemoteProcess(self, self._exec(command), list(map(str, argv)), tag, data)

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
            pg = int(pgid)  # on a pty too: a profile that never returns must not keep this one either
            chan = self._exec(shlex.join(["sh", "-c", _KILL_SESSION.format(sig=sig, pg=pg)]), 10)
            end = time.monotonic() + 10
            while not chan.exit_status_ready() and time.monotonic() < end:
                time.sleep(0.005)
            chan.close()
        except (paramiko.SSHException, OSError, EOFError, SSHError) as exc:
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


_MARKER_LINE = re.compile(re.escape(PGID_MARKER).encode() + rb" (\d+)\r?\n")
#: output a login profile may print before the wrapper's id line; past it the id is given up
_JUNK_BYTES = 1 << 20


def _take_marker(out: bytearray) -> int | None:
    """Remove the wrapper's ``__NETBENCH_PGID__ N`` line, and what a login profile printed before it,
    from ``out``; return N (None: not there yet; 0: given up)."""
    m = _MARKER_LINE.search(out)
    if m is None:
        return None if len(out) < _JUNK_BYTES else 0
    pgid = int(m.group(1))  # before the cut: a match reads the bytearray it was found in
    del out[: m.end()]
    return pgid


def _split_stderr(out: bytes, err: bytes, tag: bytes) -> tuple[bytes, bytes]:
    """(stdout, stderr) of a run(): the wrapper sends stderr after the command, behind a tag line."""
    at = out.rfind(b"\n" + tag + b"\n")
    if at < 0:
        return out, err
    return out[:at], out[at + len(tag) + 2 :] + err


class RemoteProcess:
    """A command running on a remote host, read line by line.

    ``readline(timeout)`` returns the next stdout line (without newline), ``None`` at end of output,
    and raises ``TimeoutError`` when no complete line arrived in time. ``stderr`` is kept (the last
    256 KiB) for error messages. ``terminate()`` kills the remote process group: TERM, then KILL.
    """

    STDERR_KEEP = 256 * 1024

    def __init__(self, conn: SSHConnection, chan: paramiko.Channel, argv: list[str], tag: str = "",
                 stdin: bytes = b""):
        """``tag``: what starts the lines the wrapper made of stderr; ``stdin``: sent once the wrapper's
        id line came (before it, a login profile may still own the pty)."""
        self.conn = conn
        self.argv = argv
        self.pgid: int | None = None
        self._chan = chan
        self._tag = tag.encode() + b" " if tag else None
        self._stdin = stdin
        self._started = False  # the wrapper's id line came: lines before it are a login profile's
        self._junk = 0
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

    def _keep_stderr(self, data: bytes) -> None:
        self._stderr += data
        if len(self._stderr) > self.STDERR_KEEP:
            del self._stderr[: len(self._stderr) - self.STDERR_KEEP]

    def _begin(self, raw: bytes) -> None:
        """A line before the wrapper's id line: a login profile's (kept as stderr), or the id line."""
        at = raw.find(PGID_MARKER.encode() + b" ")
        if at < 0 and self._junk + len(raw) < _JUNK_BYTES:
            self._junk += len(raw) + 1
            self._keep_stderr(raw + b"\n")
            return
        self._started = True
        if at >= 0:
            try:
                self.pgid = int(raw[at:].split()[1])
            except (IndexError, ValueError):
                pass
        if self._stdin:
            try:
                self._chan.sendall(self._stdin)
            except OSError as exc:
                log.debug("%s: stdin not sent: %s", self.host, exc)
        self._pgid_event.set()

    def _line(self, raw: bytes) -> None:
        if not self._started:
            self._begin(raw)
        elif self._tag is not None and raw.startswith(self._tag):
            self._keep_stderr(raw[len(self._tag) :] + b"\n")
        else:
            self._lines.put(raw.decode("utf-8", errors="replace").rstrip("\r"))

    def _read(self) -> None:
        chan, buf = self._chan, bytearray()
        try:
            while True:
                select.select([chan], [], [], 0.5)
                got = False
                while chan.recv_ready():
                    buf += chan.recv(65536)
                    got = True
                while chan.recv_stderr_ready():
                    self._keep_stderr(chan.recv_stderr(65536))
                if got:
                    *lines, rest = bytes(buf).split(b"\n")
                    if len(rest) > MAX_LINE_BYTES:  # no newline for 16 MiB: cut, do not buffer forever
                        lines.append(rest[:MAX_LINE_BYTES])
                        rest = b""
                    buf = bytearray(rest)
                    for raw in lines:
                        self._line(raw)
                if _eof(chan) or chan.closed or not self.conn.transport.is_active():
                    break
        except (OSError, EOFError) as exc:
            log.debug("%s: reader stopped: %s", self.host, exc)
        finally:
            if buf:
                self._line(bytes(buf))
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
        """Close the channel (the watchdog then kills whatever is left of the remote group; a login
        shell that never started the command is hung up with its pty)."""
        self._chan.close()
        self._reader.join(2.0)
