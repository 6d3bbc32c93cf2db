"""The process an agent forks its host's ranks from (``Zygote``), and a forked rank as the agent
sees it (``Forked``: what it uses of a Popen). ``netbench.agents.worker`` makes one per agent, handing it
what a forked rank runs."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable


def set_name(name: str) -> None:
    """This process's name as ps -o comm, top and pgrep show it (Linux, 15 characters): the forked
    ranks share the agent's command line, so this is what tells them apart."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME


class Zygote:
    """The process an agent forks its ranks from, so that a rank does not import torch again.

    Importing torch costs seconds of CPU (3.6 s on the test VM), and a GPU node's 8 ranks importing
    it at once from a shared file system pay that eight times over. The agent imports it once, then
    forks this process before it starts any thread or opens any file of its own (the run marker's
    lock must not be inherited), and each rank is a fork of this one, as a DataLoader worker is a
    fork of its trainer: torch imported, CUDA never initialised (the agent touches no GPU), one
    thread. A rank restarted after a stall is back in milliseconds too.

    The agent asks over a socket pair: a JSON line of the rank's arguments with its stdin and stdout
    pipes attached (SCM_RIGHTS). The zygote answers each start with the rank's pid and each exit
    with its status as Popen would give it (negative: the signal). It ends when the agent's end of
    the socket closes; the ranks it started keep running until their agent kills them, as before.

    ``run_rank``: what a forked rank runs, given the arguments of its start (the ``rank`` command's,
    as ``netbench.agents.worker`` parses them); passed in so that this module imports nothing of the
    worker."""

    def __init__(self, run_rank: Callable[[list[str]], None]) -> None:
        self.run_rank = run_rank
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.sock.close()
            self._serve(theirs)  # never returns
        theirs.close()
        self.lock = threading.Lock()  # one start at a time: the next "started" answers it
        self.started: list[int] = []
        self.answered = threading.Condition(self.lock)
        self.ranks: dict[int, Forked] = {}
        self.early: dict[int, int] = {}  # exits read before their start was taken: pid -> status

    # -- the agent's side ----------------------------------------------------------------------
    def start(self, argv: list[str]) -> Forked:
        """Fork a rank with ``argv`` (the ``rank`` command's arguments); its stdin and stdout are
        pipes to this process, as Popen's PIPE would make them."""
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        try:
            with self.lock:
                socket.send_fds(self.sock, [(json.dumps(argv) + "\n").encode()], [stdin_r, stdout_w])
                while not self.started:
                    if not self.answered.wait(30):
                        raise OSError("the rank zygote did not answer")
                pid = self.started.pop(0)
                if pid == 0:
                    raise OSError("the rank zygote is gone")
                if pid < 0:  # its fork failed
                    raise OSError(-pid, os.strerror(-pid))
                rank = self.ranks[pid] = Forked(pid, os.fdopen(stdin_w, "wb"), os.fdopen(stdout_r, "rb"))
                if pid in self.early:  # it ended before this thread took its pid
                    self.ranks.pop(pid).ended(self.early.pop(pid))
        except BaseException:
            for fd in (stdin_w, stdout_r):
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise
        finally:
            os.close(stdin_r)
            os.close(stdout_w)
        return rank

    def listen(self) -> None:
        """The zygote's answers (a thread of the agent): the pids of started ranks, the statuses of
        ended ones. Its end means the zygote is gone: every rank it still ran is taken for ended
        (killed, so none is left to run on alone)."""
        buf = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                msg = json.loads(line)
                with self.lock:
                    if "started" in msg:
                        self.started.append(int(msg["started"]))
                        self.answered.notify_all()
                    elif int(msg["exit"]) in self.ranks:
                        self.ranks.pop(int(msg["exit"])).ended(int(msg["rc"]))
                    else:
                        self.early[int(msg["exit"])] = int(msg["rc"])
        with self.lock:
            gone, self.ranks = list(self.ranks.values()), {}
            self.started.append(0)
            self.answered.notify_all()
        for rank in gone:
            rank.kill()
            rank.ended(-signal.SIGKILL)

    # -- the zygote's side ---------------------------------------------------------------------
    def _serve(self, sock: socket.socket) -> None:
        code = 0
        try:
            set_name("nb-zygote")
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal: the agent decides
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)  # the agent's stdin and stdout are the coordinator's pipes: its end of
            os.dup2(null, 1)  # them must close when the agent ends, not when this process does
            os.close(null)
            children: set[int] = set()
            while True:
                ready, _, _ = select.select([sock], [], [], 0.1)
                if ready:
                    msg, fds, _, _ = socket.recv_fds(sock, 65536, 2)
                    if not msg:
                        break
                    pid = self._fork_rank(sock, json.loads(msg), fds, self.run_rank)
                    if pid > 0:
                        children.add(pid)
                    sock.sendall((json.dumps({"started": pid}) + "\n").encode())
                for pid in list(children):
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        children.discard(pid)
                        rc = os.waitstatus_to_exitcode(status)
                        sock.sendall((json.dumps({"exit": pid, "rc": rc}) + "\n").encode())
        except BaseException:  # noqa: BLE001 - the agent finds the zygote gone and ends its ranks
            code = 1
        os._exit(code)

    @staticmethod
    def _fork_rank(
        sock: socket.socket, argv: list[str], fds: list[int], run_rank: Callable[[list[str]], None]
    ) -> int:
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            return -exc.errno
        if pid:
            for fd in fds:
                os.close(fd)
            return pid
        code = 1
        try:  # the rank: this process's stdin and stdout are its pipes from now on
            sock.close()
            os.dup2(fds[0], 0)
            os.dup2(fds[1], 1)
            for fd in fds:
                os.close(fd)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own, for its life
            sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
            run_rank(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - as an uncaught exception ends a python process
            import traceback

            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            os._exit(code)


class Forked:
    """A rank the zygote forked, with what the agent uses of a Popen: its pid, its pipes, its exit
    status (``ended``, from the zygote), and the signals the agent sends it."""

    def __init__(self, pid: int, stdin: object, stdout: object) -> None:
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self.returncode: int | None = None
        self._done = threading.Event()

    def ended(self, rc: int) -> None:
        self.returncode = rc
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("netbench.agents.worker rank", timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # once reaped, its pid may be another process's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
