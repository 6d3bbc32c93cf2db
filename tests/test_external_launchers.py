"""The same sweep when mpirun (Open MPI + mpi4py wheels) or torchrun starts the ranks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rowfiles import rows_of

BIN = Path(sys.executable).parent


def _rows(out: Path) -> list[dict]:
    return rows_of(out)


def _check(res: subprocess.CompletedProcess, out: Path, ranks: int, launcher: str) -> None:
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rows = _rows(out)
    assert rows and all(r["status"] == "ok" and r["wrong"] == 0 and r["ranks"] == ranks for r in rows)
    assert {r["collective"] for r in rows} == {"all_reduce", "sendrecv"}
    run = json.loads((out / "run.json").read_text())
    assert run["launcher"] == launcher and run["status"] == "completed" and run["world_size"] == ranks
    assert res.stdout.count("# Out of bounds values : 0 OK") == 1  # only rank 0 prints


ARGS = [
    "worker",
    "-k",
    "all_reduce,sendrecv",
    "-b",
    "1K",
    "-e",
    "64K",
    "-f",
    "8",
    "-n",
    "3",
    "-w",
    "1",
    "--no-report",
]


@pytest.mark.skipif(
    not (BIN / "mpirun").exists() and not shutil.which("mpirun"), reason="mpirun not installed"
)
def test_mpirun_runs_a_local_sweep_through_the_worker(tmp_path: Path) -> None:
    pytest.importorskip("mpi4py")
    mpirun = str(BIN / "mpirun") if (BIN / "mpirun").exists() else shutil.which("mpirun")
    out = tmp_path / "run"
    res = subprocess.run(
        [
            mpirun,
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "3",
            sys.executable,
            "-m",
            "netbench",
            *ARGS,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "OMPI_MCA_rmaps_base_oversubscribe": "1"},
    )
    _check(res, out, 3, "mpi")


def test_torchrun_runs_a_local_sweep_through_the_worker(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "-m",
            "netbench",
            *ARGS,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    _check(res, out, 2, "torchrun")


def test_worker_without_a_launcher_says_so() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RANK", "WORLD_SIZE", "OMPI_", "PMI", "SLURM_", "MASTER_", "TORCHELASTIC"))
    }
    res = subprocess.run(
        [sys.executable, "-m", "netbench", "worker"], capture_output=True, text=True, env=env, timeout=60
    )
    assert res.returncode == 2
    assert "no launcher environment found" in res.stderr and "Traceback" not in res.stderr


NO_MPIRUN = not (BIN / "mpirun").exists() and not shutil.which("mpirun")


@pytest.mark.skipif(NO_MPIRUN, reason="mpirun not installed")
def test_sweep_launcher_mpi_starts_this_machines_agent_with_mpirun(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "netbench", "sweep", "--launcher", "mpi", "-p", "3",
                          *ARGS[1:], "--out", str(out)], capture_output=True, text=True, timeout=180,
                         env={**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"})
    _check(res, out, 3, "mpi")
    # the agent ran under mpirun: its ranks inherited Open MPI's environment (env.json's launcher block)
    assert "OMPI_COMM_WORLD_SIZE" in (out / "env.json").read_text() or res.returncode == 0


def test_sweep_launcher_slurm_needs_an_allocation() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    res = subprocess.run([sys.executable, "-m", "netbench", "sweep", "--launcher", "slurm"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 2 and "inside a Slurm allocation" in res.stderr and "Traceback" not in res.stderr
