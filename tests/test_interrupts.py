"""netbench.common.interrupts in a real process: a signal stops as Ctrl-C does, a second one ends the
process at once after its last words, and a signal after the command line ended still exits 128 + n."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = r'''
import os, signal, sys, time
from netbench.common.interrupts import Interrupted, as_interrupted, checkpoint, handling, on_exit_now


class Late:
    """Deleted in the interpreter's module teardown, where CPython's default handlers are back."""

    def __del__(self):
        print("teardown", flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)


class Dropper:
    """A signal that lands in a ``__del__``: what its handler raises is printed and dropped."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100000):
            pass


late = Late() if sys.argv[1] in ("exits", "unstopped") else None
if sys.argv[1] == "dropped":
    with handling(restore=False):
        try:
            Dropper()
            print("went on", flush=True)
            checkpoint()
            print("not reached", flush=True)
        except Interrupted as exc:
            stop = as_interrupted(exc)  # taken: checkpoint raises it no more
            print("stopped", stop.signal, stop.exit_code, flush=True)
            checkpoint()
            sys.exit(stop.exit_code)
with handling(restore=False):
    on_exit_now(lambda stop: print("last words", stop.signal, flush=True))
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    except Interrupted as stop:
        print("stopped", stop.signal, stop.exit_code, flush=True)
        if sys.argv[1] == "twice":
            os.kill(os.getpid(), signal.SIGHUP)  # during the teardown: ends at once
            time.sleep(5)
            print("not reached", flush=True)
        if sys.argv[1] == "exits":
            sys.exit(stop.exit_code)
print("ended", flush=True)
if sys.argv[1] == "after":
    os.kill(os.getpid(), signal.SIGHUP)
    time.sleep(5)
'''


def run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, timeout=30)


def test_a_signal_stops_as_ctrl_c_with_its_name_and_status() -> None:
    res = run("once")
    assert res.returncode == 0 and res.stdout.split("\n")[:2] == ["stopped SIGTERM 143", "ended"], res


def test_a_second_signal_ends_at_once_after_its_last_words() -> None:
    res = run("twice")
    assert res.returncode == 143, res  # the first signal's status
    assert res.stdout.splitlines() == ["stopped SIGTERM 143", "last words SIGTERM"], res


def test_a_signal_after_the_command_ended_still_exits_by_it() -> None:
    res = run("after")
    assert res.returncode == 129 and "Traceback" not in res.stderr, res


def test_the_interpreter_teardown_has_the_default_handlers_back() -> None:
    """Why a stopped command line ends before the teardown (next test): a signal there kills."""
    res = run("unstopped")
    assert res.returncode == -15 and res.stdout.splitlines()[-1] == "teardown", res


def test_a_stopped_command_line_ends_before_the_interpreter_teardown() -> None:
    """A command stopped by a signal leaves by ``sys.exit(143)``: the process ends there with 143 (a
    second signal meanwhile cannot kill it), never reaching the module teardown."""
    res = run("exits")
    assert res.returncode == 143, res
    assert res.stdout.splitlines() == ["stopped SIGTERM 143"], res



def test_a_stop_dropped_where_the_signal_landed_is_raised_at_the_next_checkpoint() -> None:
    res = run("dropped")
    assert res.returncode == 143, res
    assert res.stdout.splitlines() == ["went on", "stopped SIGTERM 143"], res
    assert "Exception ignored" in res.stderr  # where Python dropped it
