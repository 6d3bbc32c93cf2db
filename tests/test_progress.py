"""A run's progress on stderr in every phase (issue 47, point 5): ``sweep --hosts`` printed nothing
between the ring table and the verdict, its pairwise phase being the longest. Not on a terminal
(a pipe, a log), plain lines: each round k of n with the pairs done and an ETA from the rounds
measured, the phase's end, the re-tests' rounds the same; on a terminal one status line rewritten
in place."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import termios
from pathlib import Path

import pytest


@pytest.mark.netns
def test_pairwise_and_retest_rounds_are_said_on_stderr_when_not_a_terminal(netns4, tmp_path: Path) -> None:
    netns4.limit_host("h3", "20mbit")  # a slow node: its pairs are re-tested after the pairwise phase
    argv = [*netns4.netbench_argv(tmp_path), "--out", str(tmp_path / "run"), "--pattern", "pairwise",
            "--pair-sizes", "256K,1M", "-k", "all_reduce", "-n", "3", "-w", "1", "--timeout", "20",
            "--confirm-budget", "60"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=400)
    assert res.returncode == 2, res.stdout[-3000:] + res.stderr[-3000:]  # FAIL: h3 drained
    said = [ln for ln in res.stderr.splitlines() if ln.startswith("netbench: ")]
    # four hosts: three rounds of two pairs; the first and the last round always said
    assert said[0] == "netbench: pairwise round 1 of 3: 0 of 6 pairs done, eta after this round", said
    last = [ln for ln in said if ln.startswith("netbench: pairwise round 3 of 3: ")]
    assert len(last) == 1 and re.fullmatch(r"netbench: pairwise round 3 of 3: 4 of 6 pairs done, eta \d+ s",
                                           last[0]), said
    done = said.index(next(ln for ln in said if ln.startswith("netbench: pairwise rounds done: ")))
    assert re.fullmatch(r"netbench: pairwise rounds done: 6 pairs in 3 round\(s\), \d+ s", said[done])
    # then the re-tests' launch, its rounds counted the same way
    retest = said[done + 1:]
    first = r"netbench: re-test 1 of \d+: 0 of \d+ pairs done, eta after this round"
    assert re.fullmatch(first, retest[0]), said
    assert re.fullmatch(r"netbench: re-tests done: \d+ pairs in \d+ round\(s\), \d+ s", retest[-1]), said
    assert not any("pairs done" in ln for ln in res.stdout.splitlines())  # stdout keeps the results


def test_a_terminal_gets_a_status_line_rewritten_in_place(tmp_path: Path) -> None:
    """A terminal (a narrow one, as a tmux pane): the status line names the phase and is rewritten
    with ``\\r`` within one row, and it reaches the terminal when drawn, before the table's lines
    that follow it: while ranks run, fd 2 is a pipe copied a line at a time, where a line that never
    ends waited unseen (the bar "never showed"). No plain progress line is printed."""
    master, slave = pty.openpty()
    termios.tcsetwinsize(slave, (24, 60))
    argv = [sys.executable, "-m", "netbench", "sweep", "-k", "all_reduce", "-b", "1K", "-e", "64K", "-n", "2",
            "-w", "1", "--no-report", "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(argv, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    os.close(slave)
    got = b""
    while True:  # read the terminal until the process closes it (EIO on Linux)
        ready, _, _ = select.select([master], [], [], 120)
        assert ready, got[-2000:]
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    text = got.decode()
    assert proc.wait(timeout=60) == 0, text[-2000:]
    assert "\rworld (phase 1 of 1)" in text, text[-2000:]
    assert text.index("\rworld (phase 1 of 1)") < text.index("# all_reduce  pattern=world"), text[:2000]
    bars = re.findall(r"\r(\[[#-]{20}\] \d+/\d+ [^\r\n]*)", text)
    assert bars and all(b.startswith(("[", "world")) for b in bars), text[-2000:]
    assert all(len(b) <= 59 for b in bars)  # one row of the terminal: never wrapped
    assert "# Avg bus bandwidth" in text and "netbench: " not in text


@pytest.mark.netns
def test_quiet_keeps_stderr_free_of_rounds(netns4, tmp_path: Path) -> None:
    """``--quiet`` (a cron job's mail): the verdict alone on stdout, no round lines on stderr."""
    argv = [*netns4.netbench_argv(tmp_path), "--out", str(tmp_path / "run"), "--pattern", "pairwise",
            "--pair-sizes", "64K", "-k", "all_reduce", "-n", "2", "-w", "1", "--confirm-budget", "0",
            "--quiet"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    # a verdict (these shared-CPU hosts' rates vary, so which one is not this test's business)
    assert res.returncode in (0, 1, 2) and res.stdout.startswith(("PASS", "WARN", "FAIL")), res.stdout[-3000:]
    assert res.stderr == ""
    assert len(json.loads((tmp_path / "run" / "plan.json").read_text())["phases"]) == 3  # three rounds ran


def test_a_terminal_hung_up_under_the_status_line_never_fails_its_launch() -> None:
    """The terminal hung up (its master closed) while a status line sat in the launch's own handle
    on it: writing it and closing that handle meet EIO, and neither may end the run (it was exit 1,
    run.json left ``running``, where SIGHUP's 129 and ``interrupted`` are due)."""
    from netbench.run.progress import PhaseCount, Progress

    master, slave = os.openpty()
    with os.fdopen(slave, "w") as stream:
        progress = Progress(enabled=True, stream=stream, own_terminal=True)
        progress.begin([PhaseCount("pairwise round 1 of 2", 2), PhaseCount("pairwise round 2 of 2", 2)])
        progress.phase(0)
        os.close(master)  # hung up: every later write to the slave is EIO
        progress.update(1, 4, "a row")
        progress.phase(1)
        progress.end(completed=False)  # the buffered line is refused on close: no error
        assert not progress.enabled  # the status line stopped; the run goes on to its end
