"""Stopping a real sweep or preflight on real test hosts (network namespaces, a real sshd each):
SIGTERM at every stage, Ctrl-C (SIGINT) during the re-test launch, a second signal, SIGKILL, and a
run directory whose disk fills up (a small tmpfs as --out).

Each case checks what a user relies on afterwards: the exit status (128 + the signal, 3 for a full
disk), run.json's status and signal, every row written before the stop still there, no host marked
down or drained for netbench's own teardown, no rank left behind on a host, and what
``netbench report`` says of the directory (``run_incomplete`` for a run that stopped before its
plan ended). Every wait is for an event (a line of output, a row in the run's rows), never a sleep.

One network for the module: four hosts on one leaf, h3 capped so that the sweep has a suspect to
re-test (the re-test cases need a re-test launch to stop).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers_proc import cmdline
from rowfiles import rows_of

pytestmark = pytest.mark.netns

HOSTS = ["h0", "h1", "h2", "h3"]
CAPPED = "h3"
# pairs at 256K: at 64K a loaded CI machine spread healthy pairs 10x apart (latency, not bandwidth), and
# the capped host's pairs no longer stood out enough to be re-tested
QUICK = ["-k", "all_reduce", "-n", "2", "-w", "1", "-b", "1K", "-e", "64K", "--pair-sizes", "256K",
         "--timeout", "15"]
FAST = [*QUICK, "--no-inventory"]  # the cases that do not stop the inventory skip it (and its counters)
PREFLIGHT = ["--budget", "300s", "--pair-sizes", "64K,256K", "-n", "2", "-w", "1", "--timeout", "15"]


@pytest.fixture(scope="module")
def net():
    from netns import module_network

    with module_network(HOSTS) as net:
        net.limit_host(CAPPED, "20mbit")  # slow with every partner: a suspect node, re-tested
        yield net


class Run:
    """A netbench command started in its own session (a signal reaches it alone), its output in a file
    that the test reads while it runs."""

    def __init__(self, net, tmp: Path, args: list[str], command: str = "sweep", out: Path | None = None):
        self.out = out or tmp / "run"
        self.log = tmp / "output.txt"
        argv = [*net.netbench_argv(tmp, command=command), "--out", str(self.out), *args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ""}
        with self.log.open("w") as fh:
            self.proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, what: str, event: Callable[[], bool], limit: float = 240) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if event():
                return
            rc = self.proc.poll()
            assert rc is None, f"ended ({rc}) before {what}:\n{self.text()[-3000:]}"
            time.sleep(0.05)
        self.proc.kill()
        raise AssertionError(f"no {what} within {limit} s:\n{self.text()[-3000:]}")

    def wait_line(self, needle: str, limit: float = 240) -> None:
        self.wait_for(repr(needle), lambda: needle in self.text(), limit)

    def wait_row(self, pattern: str, limit: float = 240) -> None:
        self.wait_for(f"a {pattern} row", lambda: any(r.get("pattern") == pattern for r in rows(self.out)),
                      limit)

    def stop(self, sig: signal.Signals = signal.SIGTERM, limit: float = 120) -> tuple[int, list[dict]]:
        """Send ``sig``; the rows on disk at that moment, and the exit status."""
        before = rows(self.out)
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"running {limit} s after {sig.name}:\n{self.text()[-3000:]}") from None
        return rc, before

    def run_json(self) -> dict:
        return json.loads((self.out / "run.json").read_text())


def rows(out: Path) -> list[dict]:
    """The rows written so far (a line being written is not one yet)."""
    return rows_of(out)


def report(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netbench", "report", str(out), "--no-html"],
                          capture_output=True, text=True, timeout=180)


def no_rank_left(net) -> None:
    """No agent or rank of netbench on any host once netbench has ended (given a moment to go)."""
    deadline = time.monotonic() + 15
    while True:
        left = [(h, p) for h in HOSTS for p in net.pids(h)
                if "netbench.agents.worker" in " ".join(cmdline(p))]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, left


def assert_stopped(run: Run, rc: int, before: list[dict], sig: str | None, stage: str, code: int) -> dict:
    """The common checks of a run stopped by ``sig`` in ``stage``; run.json for more."""
    text = run.text()
    assert rc == code, text[-3000:]
    assert "Traceback" not in text and "internal error" not in text, text[-3000:]
    assert "was killed by signal" not in text, text[-3000:]  # netbench's own teardown is no host fault
    meta = run.run_json()
    assert meta["status"] == "interrupted", meta
    assert meta.get("signal") == sig and meta.get("stopped_in") == stage, meta
    assert not meta.get("down_hosts") and not meta.get("faults"), meta  # no healthy host marked down
    after = rows(run.out)
    assert after[: len(before)] == before  # every row written before the stop is kept, as it was
    if "rows" in meta:  # the counts agree: run.json's, the file's
        assert meta["rows"] <= len(after)
    return meta


def assert_report_incomplete(out: Path) -> subprocess.CompletedProcess:
    """``netbench report`` says the run ended early (a warning at least, never a PASS), and drains no
    host but the capped one (whose pairs, when measured, are slow with every partner)."""
    res = report(out)
    assert res.returncode in (1, 2), res.stdout[-3000:] + res.stderr[-2000:]
    assert "The run ended early" in res.stdout, res.stdout[-3000:]
    findings = json.loads((out / "findings.json").read_text())["findings"]
    assert "run_incomplete" in {f["rule"] for f in findings}
    drained = {h for f in findings if f["severity"] == "fail" for h in f.get("hosts") or []}
    assert drained <= {CAPPED}, findings
    return res


# -- sweep ---------------------------------------------------------------------------------------------

def test_sigterm_during_the_inventory(net, tmp_path: Path) -> None:
    run = Run(net, tmp_path, QUICK)
    run.wait_line("inventory first")
    rc, before = run.stop()
    meta = assert_stopped(run, rc, before, "SIGTERM", "inventory", 143)
    assert meta["command"] == "sweep" and "during the inventory" in meta["error"]
    assert_report_incomplete(run.out)  # a run directory, not "not a run directory"
    no_rank_left(net)


def test_sigterm_in_the_ring(net, tmp_path: Path) -> None:
    run = Run(net, tmp_path, [*FAST, "--confirm-budget", "0"])
    run.wait_row("ring")
    rc, before = run.stop()
    meta = assert_stopped(run, rc, before, "SIGTERM", "measuring", 143)
    text = run.text()
    assert "interrupted by SIGTERM" in text and "status interrupted" in text
    # the log's counts are run.json's: rows, measured, failed
    assert f"rows: {meta['rows']}, {meta['rows'] - meta['rows_failed']} measured, " \
           f"{meta['rows_failed']} failed" in text
    res = assert_report_incomplete(run.out)
    assert "SIGTERM" in res.stdout
    no_rank_left(net)


def test_sigterm_in_the_pairs_and_a_second_one_ends_at_once(net, tmp_path: Path) -> None:
    run = Run(net, tmp_path, [*FAST, "--confirm-budget", "0"])
    run.wait_row("pair")
    before = rows(run.out)
    run.proc.send_signal(signal.SIGTERM)
    run.wait_line("interrupted by SIGTERM")  # the first one taken: the teardown has begun
    run.proc.send_signal(signal.SIGTERM)
    rc = run.proc.wait(timeout=30)
    assert rc == 143
    meta = run.run_json()
    assert meta["status"] == "interrupted" and meta["signal"] == "SIGTERM", meta
    assert not meta.get("down_hosts") and not meta.get("faults"), meta
    assert rows(run.out)[: len(before)] == before
    assert_report_incomplete(run.out)
    no_rank_left(net)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopped_during_the_retest_launch(net, tmp_path: Path, sig: signal.Signals) -> None:
    run = Run(net, tmp_path, [*FAST, "--pattern", "pairwise", "--confirm-budget", "120"])
    run.wait_line("# re-testing ")  # printed as the re-test launch starts its ranks
    rc, before = run.stop(sig)
    meta = assert_stopped(run, rc, before, sig.name, "re-tests", 128 + sig)
    assert "re-tests were cut short" in meta["error"], meta
    text = run.text()
    assert "no known-good partner" not in text  # the stop is not a reason given to a suspect
    assert "Traceback" not in text
    assert_report_incomplete(run.out)
    no_rank_left(net)


def test_sigterm_in_the_report_keeps_a_completed_run(net, tmp_path: Path) -> None:
    run = Run(net, tmp_path, [*FAST, "--pattern", "pairwise", "--confirm-budget", "0"])
    run.wait_line("# pairwise: large-message busbw per pair")  # the report comes next
    rc, before = run.stop()
    assert rc == 143, run.text()[-3000:]
    meta = run.run_json()
    # every measurement is in: the status stays, the signal and where it came are said
    assert meta["status"] == "completed" and meta["signal"] == "SIGTERM" and meta["stopped_in"] == "report"
    assert not meta["down_hosts"] and not meta["faults"]
    assert rows(run.out) == before
    res = report(run.out)  # judged as any completed run: the capped host, never run_incomplete
    assert "The run ended early" not in res.stdout and res.returncode in (1, 2), res.stdout[-3000:]
    no_rank_left(net)


def test_sigkill_leaves_running_which_the_report_does_not_pass(net, tmp_path: Path) -> None:
    run = Run(net, tmp_path, [*FAST, "--confirm-budget", "0"])
    run.wait_row("ring")
    os.killpg(run.proc.pid, signal.SIGKILL)  # nothing can be recorded: run.json still says running
    run.proc.wait(timeout=30)
    assert run.run_json()["status"] == "running"
    res = assert_report_incomplete(run.out)
    assert "still says running" in res.stdout
    no_rank_left(net)


# -- disk full -----------------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path: Path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(mnt: Path) -> None:
    """Fill ``mnt`` to its last byte."""
    with open(mnt / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(bytes(64 << 10))
                fh.flush()
        except OSError:
            pass
        try:
            while True:  # the last partial chunk
                fh.write(b"\0")
                fh.flush()
        except OSError:
            pass


def test_disk_full_stops_the_run_cleanly(net, tmp_path: Path, small_disk: Path) -> None:
    out = small_disk / "run"
    run = Run(net, tmp_path, [*FAST, "-e", "1M", "--confirm-budget", "0"], out=out)
    run.wait_row("ring")
    fill(small_disk)
    rc = run.proc.wait(timeout=240)
    text = run.text()
    assert rc == 3, text[-3000:]
    assert "internal error" not in text and "Traceback" not in text, text[-3000:]
    assert "was killed by signal" not in text, text[-3000:]
    full = [x for x in text.splitlines() if x.startswith("netbench: error:")]
    assert len(full) == 1 and str(out / "results.parquet") in full[0] and "No space left" in full[0], full
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta.get("signal") is None, meta
    assert str(out / "results.parquet") in meta["error"], meta
    assert not meta["down_hosts"] and not meta["faults"], meta
    kept = rows(out)
    assert kept and meta["rows"] == len(kept), (meta["rows"], len(kept))  # what run.json counts is on disk
    assert not (out / ".netbench-reserve").exists()
    (small_disk / "filler").unlink()  # room again: the report of what was measured
    assert_report_incomplete(out)
    no_rank_left(net)


# -- preflight -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("stage, wait", [("inventory", "# netbench preflight:"), ("quick pass", "pair"),
                                         ("escalation", "# re-testing ")])
def test_preflight_sigterm(net, tmp_path: Path, stage: str, wait: str) -> None:
    pf = tmp_path / "pf.json"
    drain = tmp_path / "drain.txt"
    run = Run(net, tmp_path, [*PREFLIGHT, "--json", str(pf), "--drain-list", str(drain)], command="preflight")
    if wait == "pair":  # the quick pass: its pairs and its ring
        run.wait_row("pair")
    else:
        run.wait_line(wait)
    rc, before = run.stop()
    meta = assert_stopped(run, rc, before, "SIGTERM", stage, 143)
    assert meta["verdict"] == "interrupted"
    doc = json.loads(pf.read_text())
    assert doc["verdict"] == "interrupted" and doc["exit_code"] == 143, doc
    assert doc["interrupted"]["signal"] == "SIGTERM" and doc["interrupted"]["stage"] == stage
    assert doc["checks"]["passed"] == []  # no verdict on what was not measured
    assert doc["drain"] == [] and drain.read_text() == ""  # the inventory failed no node: none to drain
    assert "preflight INTERRUPTED" in run.text()
    assert_report_incomplete(run.out)
    no_rank_left(net)


def test_preflight_sigterm_after_its_last_re_test(net, tmp_path: Path) -> None:
    """SIGTERM once the escalation has said its last word ("# suspects: none"): it lands as the
    escalation ends, in the sequential tests after it, or in the report stage
    (tests/test_preflight_plan.py covers the run.json of each). Every way: exit 143, no verdict,
    every row kept, and the rows left to `netbench report`."""
    pf = tmp_path / "pf.json"
    run = Run(net, tmp_path, [*PREFLIGHT, "--json", str(pf)], command="preflight")
    run.wait_line("# suspects: none")
    rc, before = run.stop()
    assert rc == 143, run.text()[-3000:]
    meta = run.run_json()
    stage = meta["stopped_in"]
    assert stage in ("escalation", "sequential tests", "report"), meta
    assert meta["status"] == ("completed" if stage == "report" else "interrupted"), meta
    assert meta["signal"] == "SIGTERM" and not meta.get("down_hosts") and not meta.get("faults"), meta
    assert rows(run.out) == before
    doc = json.loads(pf.read_text())
    assert doc["verdict"] == "interrupted" and doc["exit_code"] == 143, doc
    res = report(run.out)  # the capped host is judged from the rows; never a plain pass
    assert res.returncode in (1, 2), res.stdout[-3000:]
    no_rank_left(net)
