"""netbench.common.interrupts in a real process: a signal stops as Ctrl-C does, a second one ends the
process at once after its last words, and a signal after the command line ended still exits 128 + n."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = r'''
import os, signal, sys, time
from netbench.common.interrupts import Interrupted, handling, on_exit_now
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
