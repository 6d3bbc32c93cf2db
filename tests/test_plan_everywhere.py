"""The same options give the ranks the same plan, whichever launcher starts them.

Every launcher writes plan.json (the plan exactly as the coordinator hands it to the ranks) and the
ranks' rows must match it. Two families, because a plan names its hosts and ranks:
- one machine, 3 gloo ranks: ``sweep`` (local), ``sweep --launcher mpi`` (mpirun + ``worker``),
  torchrun + ``worker``, and the Slurm environment (SLURM_PROCID...) + ``worker``;
- two hosts h0, h1 with 2 ranks each, ring + pairwise + intra, pair sizes and pair collectives of
  their own: ``sweep --hosts`` over SSH on real test hosts, ``sweep --hosts --launcher local``, and
  the Slurm environment + ``worker`` started inside the test hosts.
Only ``run_id`` may differ: phases, groups (patterns, ranks, hosts, rounds), sizes, collectives,
iterations, warm-up, in-place modes, dtype, check, timeouts must all be equal.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from netbench.collectives.planfile import read_plan
from rowfiles import rows_of

BIN = Path(sys.executable).parent
MEASURE = ["-k", "all_reduce,sendrecv", "-b", "1K", "-e", "4K", "-f", "4", "-n", "2", "-w", "0",
           "--in-place", "out", "--timeout", "30s", "--backend", "gloo", "--no-report"]
LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_", "PMI", "SLURM_", "MASTER_", "TORCHELASTIC")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_ENV)}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _plan(out: Path) -> dict[str, Any]:
    text = (out / "plan.json").read_text()
    assert json.loads(text)["schema"] == "netbench.plan/2"  # compact (issue 48)
    plan = json.loads(read_plan(text).to_json())  # as the group records the ranks were handed
    plan.pop("run_id")
    return plan


def _check_rows_follow_the_plan(out: Path, plan: dict[str, Any]) -> None:
    """Every point the plan asks for was measured by the ranks, ok and checked, and nothing else."""
    rows = rows_of(out)
    assert rows and all(r["status"] == "ok" and r["wrong"] == 0 for r in rows)
    want = {
        (g["id"], g["pattern"], c, size, mode, p["spec"]["iters"], p["spec"]["warmup"])
        for p in plan["phases"]
        for g in p["groups"]
        for c in p["spec"]["collectives"]
        for size in p["spec"]["sizes"]
        for mode in p["spec"]["in_place"]
    }
    got = {(r["group"], r["pattern"], r["collective"], r["bytes"], r["in_place"], r["iters"], r["warmup"])
           for r in rows}
    assert got == want


def _slurm_ranks(n_per_host: int, hosts: list[str], port: int, master: str) -> list[dict[str, str]]:
    """The environment srun gives each task (block distribution), one dict per global rank."""
    ntasks = n_per_host * len(hosts)
    return [
        {"SLURM_PROCID": str(r), "SLURM_NTASKS": str(ntasks), "SLURM_LOCALID": str(r % n_per_host),
         "SLURM_JOB_ID": "4242", "MASTER_ADDR": master, "MASTER_PORT": str(port)}
        for r in range(ntasks)
    ]


def _wait_all(procs: list[subprocess.Popen], timeout: float = 180) -> list[tuple[int, str]]:
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=timeout)
        out.append((p.returncode, stdout))
    return out


# -- one machine --------------------------------------------------------------------------------------
def test_one_machine_launchers_give_the_ranks_the_same_plan(tmp_path: Path) -> None:
    env = _clean_env()
    nb = [sys.executable, "-m", "netbench"]
    runs: dict[str, Path] = {name: tmp_path / name for name in ("local", "torchrun", "slurm", "mpi")}

    def run(argv: list[str], **kw: Any) -> None:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=kw.pop("env", env), **kw)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]

    run([*nb, "sweep", "-p", "3", *MEASURE, "--out", str(runs["local"])])
    run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "3", "--master-port",
         str(_free_port()), "-m", "netbench", "worker", *MEASURE, "--out", str(runs["torchrun"])])
    slurm = [
        subprocess.Popen([*nb, "worker", *MEASURE, "--out", str(runs["slurm"])], env={**env, **e},
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for e in _slurm_ranks(3, ["here"], _free_port(), "127.0.0.1")
    ]
    results = _wait_all(slurm)
    assert all(rc == 0 for rc, _ in results), results
    if (BIN / "mpirun").exists() or shutil.which("mpirun"):
        pytest.importorskip("mpi4py")
        run([*nb, "sweep", "--launcher", "mpi", "-p", "3", *MEASURE, "--out", str(runs["mpi"])],
            env={**env, "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    else:
        del runs["mpi"]

    plans = {name: _plan(out) for name, out in runs.items()}
    ref = plans["local"]
    assert ref["world_size"] == 3 and ref["op_timeout_s"] == 30.0
    assert [p["name"] for p in ref["phases"]] == ["world"]
    spec = ref["phases"][0]["spec"]
    assert spec["collectives"] == ["all_reduce", "sendrecv"] and spec["sizes"] == [1024, 4096]
    assert spec["in_place"] == [False] and (spec["iters"], spec["warmup"]) == (2, 0)
    for name, plan in plans.items():
        assert plan == ref, name
        _check_rows_follow_the_plan(runs[name], plan)
        assert json.loads((runs[name] / "run.json").read_text())["launcher"] == (
            "local" if name == "local" else name)


# -- two hosts ----------------------------------------------------------------------------------------
@pytest.mark.netns
def test_cluster_launchers_give_the_ranks_the_same_plan(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(["h0", "h1"])
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=s0 Nodes=h0\nSwitchName=s1 Nodes=h1\nSwitchName=spine Switches=s0,s1\n")
    opts = [*MEASURE, "--pattern", "ring", "--pattern", "pairwise", "--pattern", "intra",
            "--pair-sizes", "2K,8K", "--pair-collectives", "all_reduce", "--topology", str(topo)]
    ssh_argv = net.netbench_argv(tmp_path, hosts=["h0", "h1"])  # also writes tmp_path/hosts.txt
    runs = {name: tmp_path / name for name in ("ssh", "local", "slurm")}
    env = _clean_env()
    cfg = ssh_argv.index("--ssh-config")
    local_argv = ssh_argv[:cfg] + ssh_argv[cfg + 2:]  # nothing reached over SSH: refused there
    for name, argv in (("ssh", ssh_argv), ("local", [*local_argv, "--launcher", "local"])):
        res = subprocess.run([*argv, "--procs-per-host", "2", *opts, "--out", str(runs[name])],
                             capture_output=True, text=True, timeout=300, env=env)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]

    port, hosts = _free_port(), ["h0", "h0", "h1", "h1"]  # srun's block distribution: 2 tasks a node
    worker = [sys.executable, "-m", "netbench", "worker", *opts, "--out", str(runs["slurm"])]
    procs = [
        net.popen(host, worker, env={**env, **e}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for host, e in zip(hosts, _slurm_ranks(2, ["h0", "h1"], port, net.host("h0").addr), strict=True)
    ]
    results = _wait_all(procs, timeout=300)
    assert all(rc == 0 for rc, _ in results), results

    plans = {name: _plan(out) for name, out in runs.items()}
    ref = plans["ssh"]
    assert ref["world_size"] == 4 and ref["rank_hosts"] == hosts
    names = [p["name"] for p in ref["phases"]]
    assert names == ["ring", "pairwise round 1/1", "intra"]
    pair = ref["phases"][1]
    assert pair["spec"]["sizes"] == [2048, 8192] and pair["spec"]["collectives"] == ["all_reduce"]
    assert pair["groups"] == [{"id": "pair:h0|h1", "pattern": "pair", "ranks": [0, 1, 2, 3],
                               "hosts": ["h0", "h1"], "round": 1, "rail": None,
                               "load": 1, "hop_class": "spine"}]  # one pair through each uplink
    assert [g["ranks"] for g in ref["phases"][2]["groups"]] == [[0, 1], [2, 3]]
    for name, plan in plans.items():
        assert plan == ref, name
        _check_rows_follow_the_plan(runs[name], plan)
        run = json.loads((runs[name] / "run.json").read_text())
        # --topology honoured by every path: each host's leaf and each switch's parent (the uplinks)
        assert run["topology"] == {"h0": "s0", "h1": "s1", "s0": "spine", "s1": "spine"}, name
