"""A reader that goes away never stops a command (issues 44 and 45): ``netbench report RUN | head -1``
exits with the verdict's status, ``netbench sweep ... | head -1`` measures every row and ends
``completed``, and a terminal closed under a sweep (SIGHUP, then EIO on every write) ends as SIGHUP
does: rows kept, run.json ``interrupted``, 129. Real processes, real pipes, a real pseudo-terminal."""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from rowfiles import rows_of
from synthetic import make_fleet, write_run_dir

QUICK = ["sweep", "-p", "2", "-k", "all_reduce", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0"]
ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def closed_pipe_run(*args: str) -> subprocess.CompletedProcess:
    """``netbench ARGS`` whose stdout is a pipe nobody reads any more (its read end closed before the
    command starts): every write to it fails with EPIPE, as after ``| head -1`` has read its line."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "netbench", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=240, env=ENV)
    finally:
        os.close(write)


def run_json(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


def rows(out: Path) -> list[dict]:
    return rows_of(out)


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose verdict is FAIL (a node at half speed): its report exits 2."""
    fleet = make_fleet(8, 2, gpus_per_node=2, noise=0.01, seed=5, slow_nodes={"gpu003": 0.5})
    return write_run_dir(fleet, tmp_path_factory.mktemp("fail") / "run")


def test_report_into_a_closed_pipe_exits_with_its_verdict(failing: Path) -> None:
    res = closed_pipe_run("report", str(failing), "--no-html")
    assert res.returncode == 2 and res.stderr == "", res.stderr  # FAIL: 2, as with a reader; no word on it
    assert json.loads((failing / "findings.json").read_text())["findings"]


def test_a_sweep_whose_reader_left_measures_every_row(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = closed_pipe_run(*QUICK, "--out", str(out))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert run_json(out)["status"] == "completed" and run_json(out).get("error") is None
    assert len(rows(out)) == 6 and all(r["status"] == "ok" for r in rows(out))  # 3 sizes x in/out of place
    assert (out / "findings.json").is_file()


def test_a_sweep_piped_to_head_goes_on_after_head_is_gone(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = subprocess.run(f"{sys.executable} -m netbench {' '.join(QUICK)} --out {out} | head -1; "
                         "exit ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", capture_output=True,
                         text=True, timeout=240, env=ENV)
    assert res.returncode == 0 and res.stdout.startswith("# netbench ") and res.stdout.count("\n") == 1, res
    assert run_json(out)["status"] == "completed" and len(rows(out)) == 6


def test_a_terminal_closed_under_a_sweep_ends_it_as_sighup(tmp_path: Path) -> None:
    """The sweep's controlling terminal is a pseudo-terminal; closing its master after a few rows
    sends SIGHUP and makes every later write EIO (also the closing lines of the stop itself)."""
    out = tmp_path / "run"
    master, slave = os.openpty()

    def own_terminal() -> None:  # a session leader whose controlling terminal is the pty
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [sys.executable, "-m", "netbench", "sweep", "-p", "2", "-k", "all_reduce", "-b", "1K", "-e", "16M",
         "-n", "20", "-w", "1", "--out", str(out)],
        stdin=slave, stdout=slave, stderr=slave, start_new_session=True, preexec_fn=own_terminal, env=ENV)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 180
    try:
        while seen.count(b" float ") < 4 and time.monotonic() < deadline:  # 4 sizes printed: measuring
            if select.select([master], [], [], 1)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
    finally:
        os.close(master)  # the terminal is gone
    assert proc.wait(timeout=120) == 129, seen[-2000:]
    run = run_json(out)
    assert run["status"] == "interrupted" and run["signal"] == "SIGHUP", run
    assert len(rows(out)) >= 8  # the rows printed before, and what came after them, are kept
