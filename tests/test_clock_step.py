"""A host's wall clock stepped back mid-run (an NTP step, ``date -s``) is not a fault: every duration
is taken on a monotonic clock, every row is kept, no host is faulted, and the step is said about the
host (``clock_stepped``, warn: exit 1, the only finding). The clock is stepped for real, for the
netbench process tree alone: libfaketime (Debian's ``faketime``, installed by .ci/run) reads the
offset from a file on every call, and leaves the monotonic clock alone, as a real step does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rowfiles import rows_of

FAKETIME = next((p for p in (Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"),
                             Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1")) if p.exists()),
                None)

pytestmark = pytest.mark.skipif(FAKETIME is None, reason="needs libfaketime (apt-get install faketime)")


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    """A 2-rank local sweep whose clock goes back two hours once its first row is printed: the one
    world group is made before the step and ends after it, so its duration spans the step."""
    tmp = tmp_path_factory.mktemp("clock")
    offset = tmp / "offset"
    offset.write_text("+0\n")
    env = {**os.environ, "LD_PRELOAD": str(FAKETIME), "FAKETIME_TIMESTAMP_FILE": str(offset),
           "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1", "PYTHONUNBUFFERED": "1"}
    out = tmp / "run"
    proc = subprocess.Popen([sys.executable, "-m", "netbench", "sweep", "-k", "all_reduce", "-b", "1K",
                             "-e", "1M", "-n", "100", "-w", "1", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    errors: list[str] = []
    assert proc.stdout is not None and proc.stderr is not None
    drain = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)  # a full pipe stalls it
    drain.start()
    for line in proc.stdout:
        lines.append(line)
        if line.strip()[:1].isdigit():  # the first row of the table: step the clock now
            offset.write_text("-2h\n")
            break
    lines.extend(proc.stdout)
    proc.wait(timeout=300)
    drain.join(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(lines), "".join(errors)), out


def test_a_clock_stepped_back_faults_no_host_and_keeps_every_row(stepped) -> None:
    done, out = stepped
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]  # WARN: the step, said
    assert "invalid message" not in done.stderr, done.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed" and run["down_hosts"] == [] and run["faults"] == [], run
    assert all(p["seconds"] >= 0 for p in run["phases"]), run["phases"]
    rows = rows_of(out)
    assert rows and all(r["status"] == "ok" for r in rows)
    stamps = [r["ts"] for r in rows]
    assert max(a - b for a, b in zip(stamps, stamps[1:], strict=False)) > 3600, "the step came mid-run"


def test_the_step_is_said_about_its_host(stepped) -> None:
    done, out = stepped
    findings = json.loads((out / "findings.json").read_text())["findings"]
    stepped_ = [f for f in findings if f["rule"] == "clock_stepped"]
    assert [(f["severity"], f["subject"]) for f in stepped_] == [("warn", run_host(out))], findings
    assert "2.0 h" in stepped_[0]["title"]
    assert not [f for f in findings if f["severity"] == "fail"], findings


def run_host(out: Path) -> str:
    return json.loads((out / "run.json").read_text())["hosts"][0]
