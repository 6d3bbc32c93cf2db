"""A rank's resources stay bounded over a long sweep (issue 29): every finished group is released
(collectives/groups.py), so a rank that joins 1,000 groups holds what it held after 50, with its
groups made when their turn comes or ahead of it on lanes (collectives/ahead.py).

Real ranks (``netbench.agents.worker.run_rank`` in their own processes, tests/group_churn.py) over a real
TCPStore follow a synthetic plan of 1,000 groups of the same ranks; the test samples each rank's
open file descriptors, threads and RSS from /proc (and, on a GPU, the GPU's memory from nvidia-smi)
every 50 groups as the ranks report them done.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from group_churn import AGAIN, GO, group_id
from netbench.collectives.groups import IN_FLIGHT
from netbench.collectives.messages import PREFIX

HELPER = Path(__file__).with_name("group_churn.py")
GROUPS = 1000
EVERY = 50  # a sample every EVERY groups; "flat" is judged against the samples of the first 150
AHEAD = 3  # groups made ahead in the runs that make them so
# what may come and go while releases run (groups.IN_FLIGHT at once, each with its sockets and
# threads until its shutdown returns) and groups are made ahead (up to AHEAD more alive): a leak of
# one group's worth per group grows past this by the 100th group
SLACK_FDS = 6 * (IN_FLIGHT + 1 + AHEAD)
SLACK_THREADS = 4 * (IN_FLIGHT + 1 + AHEAD)
SLACK_RSS_MIB = 48


@dataclass
class Sample:
    done: int  # groups this rank had finished
    fds: int
    threads: int
    rss_mib: float
    gpu_mib: int | None


def proc_sample(pid: int, done: int, gpu: bool) -> Sample:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return Sample(
        done,
        len(os.listdir(f"/proc/{pid}/fd")),
        int(fields["Threads"]),
        int(fields["VmRSS"].split()[0]) / 1024,
        gpu_used_mib() if gpu else None,
    )


def gpu_used_mib() -> int:
    query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"]
    out = subprocess.run(query, capture_output=True, text=True, check=True, timeout=30).stdout
    return int(out.split()[0])


@dataclass
class Churned:
    samples: list[Sample]
    messages: list[dict]
    stderr: str
    rc: int


def churn(
    backend: str, world: int, env: dict[str, str], tmp: Path, ahead: int = 0, groups: int = GROUPS
) -> list[Churned]:
    """Run ``world`` ranks through ``groups`` groups (``ahead`` made ahead on lanes); each rank's
    samples, messages and exit."""
    import torch.distributed as dist

    errs = [(tmp / f"rank{r}.err").open("w+") for r in range(world)]
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=_dt.timedelta(seconds=300))
    procs = [subprocess.Popen([sys.executable, str(HELPER), backend, str(r), str(world), str(store.port),
                               str(groups), str(ahead)], stdout=subprocess.PIPE, stderr=errs[r], text=True,
                              env=env) for r in range(world)]
    out = [Churned([], [], "", 0) for _ in procs]

    def read(k: int) -> None:
        proc, got = procs[k], out[k]
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.startswith(PREFIX):
                continue
            msg = json.loads(line[len(PREFIX):])
            got.messages.append(msg)
            if msg["type"] == "group_done":
                done = sum(m["type"] == "group_done" for m in got.messages)
                if done % EVERY == 0 and done < groups:  # after its last group the rank may be gone
                    got.samples.append(proc_sample(proc.pid, done, backend == "nccl"))

    readers = [threading.Thread(target=read, args=(k,), daemon=True) for k in range(world)]
    for t in readers:
        t.start()
    store.set(AGAIN, "[]")
    store.set(GO, json.dumps([group_id(k) for k in range(groups)]))
    for k, (proc, t) in enumerate(zip(procs, readers, strict=True)):
        try:
            proc.wait(timeout=900)
        finally:
            proc.kill()
        t.join(timeout=30)
        errs[k].seek(0)
        out[k].stderr, out[k].rc = errs[k].read(), proc.returncode
    return out


def assert_ran_every_group(runs: list[Churned], ahead: int = 0, groups: int = GROUPS) -> None:
    for r in runs:
        assert r.rc == 0, r.stderr[-2000:]
        kinds = [m["type"] for m in r.messages]
        assert "group_error" not in kinds, [m for m in r.messages if m["type"] == "group_error"][:3]
        assert kinds.count("group_done") == groups
        assert "destroy_process_group" not in r.stderr  # torch's warning of a group never shut down
    rows = [m["row"] for m in runs[0].messages if m["type"] == "row"]
    assert len(rows) == groups
    assert all(r["setup_s"] > 0 for r in rows)
    assert all(0 <= r["setup_wait_s"] <= r["setup_s"] + 0.05 for r in rows)
    made = [r["group_made"] for r in rows]
    if not ahead:
        assert set(made) == {"fresh"}
        assert all(r["setup_wait_s"] == r["setup_s"] for r in rows)
        return
    # made ahead: all but the first few (a lane that had not started one when its turn came hands it
    # back), and the rank waited for less than their making took
    assert made.count("ahead") >= 0.9 * groups, made.count("ahead")
    early = [r for r in rows if r["group_made"] == "ahead"]
    print(f"made ahead: {len(early)} of {groups}; set-up {sum(r['setup_s'] for r in early):.2f} s, "
          f"waited for {sum(r['setup_wait_s'] for r in early):.2f} s")
    assert sum(r["setup_wait_s"] for r in early) < 0.5 * sum(r["setup_s"] for r in early)


def assert_flat(samples: list[Sample]) -> None:
    """Nothing grows with the groups: the later samples stay within the slack of the early ones."""
    early = [s for s in samples if s.done <= 150]
    late = [s for s in samples if s.done > 150]
    assert early and late and samples[-1].done == GROUPS - EVERY, [s.done for s in samples]
    assert max(s.fds for s in late) <= max(s.fds for s in early) + SLACK_FDS, samples
    assert max(s.threads for s in late) <= max(s.threads for s in early) + SLACK_THREADS, samples
    assert max(s.rss_mib for s in late) <= max(s.rss_mib for s in early) + SLACK_RSS_MIB, samples


@pytest.mark.parametrize("ahead", [0, AHEAD])
def test_a_thousand_gloo_groups_leave_fds_threads_and_rss_flat(tmp_path: Path, ahead: int) -> None:
    runs = churn("gloo", 2, {**os.environ, "CUDA_VISIBLE_DEVICES": ""}, tmp_path, ahead)
    assert_ran_every_group(runs, ahead)
    for r in runs:
        print("rank samples (groups done, fds, threads, RSS MiB): "
              + ", ".join(f"{s.done}: {s.fds}/{s.threads}/{s.rss_mib:.0f}" for s in r.samples))
        assert_flat(r.samples)


def test_a_one_rank_group_reports_a_row_per_group(tmp_path: Path) -> None:
    """The GPU test's shape (one rank, a 1-rank group each) on gloo: every group reports its row. The
    churn once measured an out-of-place all_reduce, which a 1-rank torch group leaves unmeasured
    (N/A), so on the GPU all 1,000 groups ran and no row came; only the GPU test had one rank."""
    runs = churn("gloo", 1, {**os.environ, "CUDA_VISIBLE_DEVICES": ""}, tmp_path, groups=20)
    assert_ran_every_group(runs, groups=20)


def _gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available() and shutil.which("nvidia-smi") is not None
    except ImportError:
        return False


@pytest.mark.skipif(not _gpu(), reason="needs a CUDA GPU and nvidia-smi (benchmarks/gpu/check.sh)")
@pytest.mark.parametrize("ahead", [0, 2])
def test_a_thousand_nccl_groups_on_one_gpu_keep_nccl_memory_within_2_gib(tmp_path: Path, ahead: int) -> None:
    """1-rank NCCL groups, as on the lent H200 (issue 29: ~390 MiB a communicator kept, out of
    memory at ~360). GPU memory is the whole GPU's (nvidia-smi), against what it used before the
    rank started: the CUDA context, the communicators alive, torch's few buffers; with groups made
    ahead, 400 MiB more for each (a communicator each, alive before its turn)."""
    base = gpu_used_mib()
    runs = churn("nccl", 1, {**os.environ, "NCCL_NVLS_ENABLE": "0", "CUDA_VISIBLE_DEVICES": "0"}, tmp_path,
                 ahead)
    assert_ran_every_group(runs, ahead)
    samples = runs[0].samples
    peak = max(s.gpu_mib or 0 for s in samples)
    print(f"GPU memory above base ({base} MiB) after N groups:",
          ", ".join(f"{s.done}: {(s.gpu_mib or 0) - base}" for s in samples))
    assert peak - base <= 2048 + 400 * ahead, samples
    assert_flat(samples)
