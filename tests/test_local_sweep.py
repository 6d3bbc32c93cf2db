"""`netbench sweep` on this machine with real gloo ranks (separate processes, TCPStore rendezvous)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_proc import alive, rank_pids
from rowfiles import rows_of

from netbench import load_results
from netbench.common.rows import CONTRACT_FIELDS, ResultRow

ALL = "all_reduce,all_gather,reduce_scatter,broadcast,reduce,all_to_all,sendrecv"
CONTRACT = CONTRACT_FIELDS


def cpu_only() -> dict[str, str]:
    """These tests are about CPU ranks (gloo): on a GPU machine the sweep would take the GPUs instead."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def netbench(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "netbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**cpu_only(), **(env or {})},
    )


def rows(out: Path) -> list[dict]:
    return rows_of(out)


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_every_collective_checks_clean(tmp_path: Path, nprocs: int) -> None:
    out = tmp_path / "run"
    res = netbench(
        "sweep",
        "--procs",
        str(nprocs),
        "-k",
        ALL,
        "-b",
        "8",
        "-e",
        "64K",
        "-f",
        "32",
        "-n",
        "2",
        "-w",
        "1",
        "--out",
        str(out),
        "--no-report",
    )
    assert res.returncode == 0, res.stderr
    got = rows(out)
    assert {r["collective"] for r in got} == set(ALL.split(","))
    for r in got:
        assert all(k in r for k in CONTRACT)
        assert r["status"] == "ok" and r["wrong"] == 0, r
        assert r["ranks"] == nprocs and len(r["rank_time_us"]) == nprocs
        assert r["time_us_min"] <= r["time_us"] <= r["time_us_max"]
        ResultRow.from_dict(r)  # the contract loads back
    # both variants where the collective has them
    ar = [r for r in got if r["collective"] == "all_reduce"]
    assert {r["in_place"] for r in ar} == {False, True}
    assert "# Out of bounds values : 0 OK" in res.stdout
    # nccl-tests' closing line, one a collective: the mean busbw over every line of its table, both modes
    avgs = [ln.split() for ln in res.stdout.splitlines() if ln.startswith("# Avg bus bandwidth    : ")]
    assert [a[6] for a in avgs] == ALL.split(",")
    for a in avgs:
        mine = [r["busbw_GBps"] for r in got if r["collective"] == a[6]]
        assert float(a[5]) == pytest.approx(sum(mine) / len(mine), rel=1e-5)
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed" and run["world_size"] == nprocs
    env = json.loads((out / "env.json").read_text())
    assert any(h["torch"] for h in env["hosts"].values())


def test_corrupted_rank_is_counted(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = netbench(
        "sweep",
        "--procs",
        "3",
        "-k",
        "all_reduce,all_gather",
        "-b",
        "1K",
        "-e",
        "4K",
        "-n",
        "1",
        "-w",
        "0",
        "--out",
        str(out),
        "--no-report",
        env={"NETBENCH_INJECT": "corrupt:1"},
    )
    assert res.returncode == 2  # wrong results: a failure (docs/exit-status.md)
    got = rows(out)
    assert got and all(r["wrong"] == 1 for r in got)  # exactly the one element rank 1 damaged
    assert "FAILED" in res.stdout


def test_check_off_and_fail_on_never_reach_the_ranks_and_the_exit(tmp_path: Path) -> None:
    """nccl-tests' -c 0 turns the ranks' check off (corrupted results then go unseen: no wrong
    count at all, rather than 0); --fail-on never keeps a FAIL verdict out of the exit status."""
    quick = ["sweep", "-p", "2", "-k", "all_reduce", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0"]
    unchecked = netbench(*quick, "-c", "0", "--no-report", "--out", str(tmp_path / "a"),
                         env={"NETBENCH_INJECT": "corrupt:1"})
    assert unchecked.returncode == 0, unchecked.stderr
    assert rows(tmp_path / "a") and all(r["wrong"] is None for r in rows(tmp_path / "a"))
    judged = netbench(*quick, "--fail-on", "never", "--out", str(tmp_path / "b"),
                      env={"NETBENCH_INJECT": "corrupt:1"})
    assert judged.returncode == 0, judged.stderr
    assert "FAIL: " in judged.stdout and "wrong_results" in judged.stdout  # the verdict is still said
    assert all(r["wrong"] == 1 for r in rows(tmp_path / "b"))


def test_quiet_prints_the_verdict_only_and_keeps_every_row(tmp_path: Path) -> None:
    res = netbench("sweep", "-q", "-p", "2", "-k", "all_reduce", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0",
                   "--out", str(tmp_path / "q"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("PASS: ") and lines[-1] == f"report: {tmp_path / 'q' / 'report.html'}", lines
    assert not any(ln.startswith("#") or ln.split()[0].isdigit() for ln in lines)
    assert len(rows(tmp_path / "q")) == 6  # 1K, 2K, 4K x out-of-place and in-place: all in the run directory


def test_table_matches_nccl_tests_layout(tmp_path: Path) -> None:
    res = netbench(
        "sweep",
        "-p",
        "2",
        "-k",
        "all_reduce",
        "-b",
        "1K",
        "-e",
        "2K",
        "-n",
        "2",
        "-w",
        "0",
        "--out",
        str(tmp_path / "r"),
        "--no-report",
    )
    lines = [ln for ln in res.stdout.splitlines() if ln and not ln.startswith("#")]
    assert len(lines) == 2
    cols = lines[0].split()
    # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
    assert cols[:5] == ["1024", "256", "float", "sum", "-1"] and len(cols) == 13
    size, t, algbw = int(cols[0]), float(cols[5]), float(cols[6])
    assert algbw == pytest.approx(size / 1e9 / (t / 1e6), abs=0.011)
    assert "large-message busbw" in res.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["-k", "all_reduse"], "unknown collective 'all_reduse'; did you mean 'all_reduce'?"),
        (["-b", "12Q"], "bad size"),
        (["--dtype", "float7"], "unknown dtype"),
        (["-b", "1M", "-e", "1K"], "larger than"),
        (["--op", "xor"], "unknown reduction op"),
        (["--timeout", "0"], "not a usable limit"),
        (["--timeout", "0s"], "not a usable limit"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    res = netbench("sweep", *args, "--out", str(tmp_path / "r"), timeout=60)
    assert res.returncode == 2
    assert needle in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) <= 3


def test_an_existing_run_directory_is_refused_and_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "r"
    out.mkdir()
    (out / "results.jsonl").write_text('{"old": 1}\n')
    res = netbench("sweep", "-b", "1K", "-e", "1K", "--out", str(out), timeout=60)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        f"netbench: error: --out {out}: already holds a run (results.jsonl); give a new directory, "
        f"or put {{id}} in the path (e.g. --out {out}/{{id}}) for a fresh run inside it"
    ]
    assert (out / "results.jsonl").read_text() == '{"old": 1}\n' and not (out / "run.json").exists()


def _start(out: Path, timeout: str = "20s") -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "netbench",
            "sweep",
            "-p",
            "3",
            "-k",
            "all_reduce",
            "-b",
            "1K",
            "-e",
            "64M",
            "-f",
            "2",
            "-n",
            "20",
            "-w",
            "2",
            "--out",
            str(out),
            "--timeout",
            timeout,
            "--no-report",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=cpu_only(),
    )


def _wait_rows(out: Path, n: int, proc: subprocess.Popen, limit: float = 120) -> None:
    deadline = time.time() + limit
    while time.time() < deadline:
        if len(rows_of(out)) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError("no rows appeared")


def test_killed_rank_ends_run_names_rank_keeps_rows(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(out)
    _wait_rows(out, 4, proc)
    ranks = rank_pids(proc.pid)
    assert sorted(ranks) == [0, 1, 2]
    before = len(rows(out))
    os.kill(ranks[1], signal.SIGKILL)
    t0 = time.time()
    stdout, stderr = proc.communicate(timeout=60)
    assert time.time() - t0 < 20  # within --timeout
    assert proc.returncode == 2
    assert "rank 1" in stderr + stdout and "signal 9" in stderr + stdout
    after = rows(out)
    assert len(after) >= before and all(r["status"] == "ok" for r in after[:before])
    assert any(r["status"] != "ok" for r in after)  # the interrupted measurement is recorded as failed
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    time.sleep(0.5)
    assert not [p for p in ranks.values() if alive(p)]  # no stray ranks


def test_hung_rank_ends_run_within_timeout(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(out, timeout="6s")
    _wait_rows(out, 4, proc)
    ranks = rank_pids(proc.pid)
    os.kill(ranks[2], signal.SIGSTOP)
    t0 = time.time()
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        for p in ranks.values():
            if alive(p):
                os.kill(p, signal.SIGCONT)
    assert time.time() - t0 < 6 + 15  # timeout + grace + the agent's 3 s kill wait for a stopped rank, loaded
    assert proc.returncode == 2
    assert "[2]" in stderr or "rank 2" in stderr, stderr
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    time.sleep(0.5)
    assert not [p for p in ranks.values() if alive(p)]


def test_load_results_tolerates_truncated_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = netbench(
        "sweep", "-p", "2", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0", "--out", str(out), "--no-report"
    )
    assert res.returncode == 0
    rows_ok = rows_of(out)
    # the tail of the next part (results.parquet), its row cut short by a crash
    with (out / "results.parquet" / "_part-000002.jsonl").open("a") as fh:
        fh.write('{"run_id": "x", "collective": "all_red')
    with pytest.warns(UserWarning, match=r"1 line\(s\) left out \(line \d+: not JSON"):  # said, not silent
        df = load_results(out)
    assert len(df) == len(rows_ok)
    assert rows_ok and set(df["collective"]) == {"all_reduce", "all_gather"}
    assert df.groupby("collective")["busbw_GBps"].count().min() > 0
