"""Issue 44, "values accepted that mean nothing": every value is checked by type and meaning where it
enters (options, a policy file, the launcher's environment, a kubeconfig, a topology file), and a long
simulation says what it is doing. Each case on the real command line: one ``netbench: error:`` line
naming what is wrong, exit 2, nothing measured; a value given twice measured once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rowfiles import rows_of
from synthetic import host_names, make_fleet, write_run_dir

from netbench.cli import cli


def _netbench(*argv: str, env: dict[str, str] | None = None, cwd: Path | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netbench", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def _one_error(r: subprocess.CompletedProcess[str] | object, code: int = 2) -> str:
    """The one error line of a command that refused its input (no traceback, nothing else)."""
    err = r.stderr  # type: ignore[attr-defined]
    status = r.returncode if isinstance(r, subprocess.CompletedProcess) else r.exit_code  # type: ignore[attr-defined]
    lines = err.strip().splitlines()
    assert status == code and len(lines) == 1, (status, err)
    assert "error:" in lines[0] and "Traceback" not in err and "internal error" not in err, err
    return lines[0]


# -- a value given twice is measured once -------------------------------------------------------------
def test_a_collective_given_twice_is_measured_once(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = _netbench("sweep", "--procs", "2", "-k", "all_reduce,allreduce,all_reduce", "-b", "1K", "-e", "1K",
                  "-n", "1", "-w", "0", "--no-report", "--out", str(out))
    assert r.returncode == 0, r.stderr
    rows = rows_of(out)
    # one size, out of place and in place: two rows, not six
    assert sorted((row["collective"], row["in_place"]) for row in rows) == [
        ("all_reduce", False), ("all_reduce", True)
    ]
    assert json.loads((out / "run.json").read_text())["options"]["collectives"] == ["all_reduce"]


def test_pair_sizes_and_patterns_given_twice_are_measured_once(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = CliRunner().invoke(cli, ["simulate", "--nodes", "4", "--leaves", "1", "--pattern", "pairwise",
                                 "--pattern", "pairwise", "--pair-sizes", "1M,1024K,1M", "--confirm-budget",
                                 "0", "--no-report", "--out", str(out)])
    assert r.exit_code == 0, r.output
    asked = json.loads((out / "run.json").read_text())["options"]["simulate"]
    assert asked["patterns"] == ["pairwise"] and asked["pair_sizes"] == [1 << 20]
    rows = rows_of(out)
    pairs = [(tuple(row["hosts"]), row["bytes"], row["collective"], row["in_place"]) for row in rows]
    assert pairs and len(pairs) == len(set(pairs))  # no pair measured twice at one size


def test_a_fault_given_twice_is_planted_once_and_two_values_for_one_part_are_refused(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    r = CliRunner().invoke(cli, ["simulate", "--nodes", "8", "--fault", "link:node0001,node0002=0.5",
                                 "--fault", "link:node0002,node0001=0.5", "--confirm-budget", "0",
                                 "--no-report", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert [f["subject"] for f in json.loads((out / "truth.json").read_text())["faults"]] == [
        "node0001|node0002"
    ]
    r = CliRunner().invoke(cli, ["simulate", "--nodes", "8", "--fault", "node:node0003=0.5", "--fault",
                                 "node:node0003=0.7", "--out", str(tmp_path / "two")])
    line = _one_error(r)
    assert "'node:node0003=0.5' and 'node:node0003=0.7' plant two values on one part" in line, line
    assert not (tmp_path / "two").exists()


# -- a policy's values: by type, then by meaning ------------------------------------------------------
@pytest.fixture
def healthy(tmp_path: Path) -> Path:
    return write_run_dir(make_fleet(8, 2, noise=0.03, seed=31), tmp_path / "healthy")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[thresholds]\nslow_pair_factor = true\n", "thresholds.slow_pair_factor = true is not a number"),
        ("[thresholds]\nslow_pair_factor = 1979-05-27\n",
         "thresholds.slow_pair_factor = 1979-05-27 is not a number"),
        ("[thresholds]\nmad_k = [1, 2]\n", "thresholds.mad_k = [1, 2] is not a number"),
        ("[thresholds]\nfwer = 07:32:00\n", "thresholds.fwer = 07:32:00 is not a number"),
        ('[thresholds]\nmin_partners = "3"\n', "thresholds.min_partners = '3' is not a whole number"),
        ("[thresholds]\nlarge_sizes_max = 2.5\n", "thresholds.large_sizes_max = 2.5 is not a whole number"),
        ("[thresholds]\nlarge_min_bytes = true\n", "thresholds.large_min_bytes = true is not a size"),
        ("[thresholds]\nsingle_sample = 1\n", "thresholds.single_sample = 1 is not a string"),
        ("[thresholds]\nslow_pair_factor = 0\n", "thresholds.slow_pair_factor must be in (0, 1]"),
        ("[expect]\nnvlinks_up = 1\n", "expect.nvlinks_up = 1 is not true or false"),
        ("[expect]\ngpus_per_node = true\n", "expect.gpus_per_node = true is not a whole number"),
        ('[[expect.busbw]]\ncollective = "all_reduce"\nbusbw_GBps = [1, 2]\n',
         "expect.busbw[0].busbw_GBps = [1, 2] is not a number"),
        ('[[expect.busbw]]\ncollective = "all_reduce"\nbusbw_GBps = false\n',
         "expect.busbw[0].busbw_GBps = false is not a number"),
        ("[versions]\nminimum = 5\n", "versions.minimum = 5 is not a table"),
        ('[[reference]]\nid = "x"\ncollective = "all_reduce"\nscope = "intra"\nlow_GBps = 1\nhigh_GBps = 2\n'
         'source = "s"\ngpu = [1]\n', "reference[0].gpu = [1] is not a list of strings"),
        ('[[reference]]\nid = "x"\ncollective = "all_reduce"\nscope = "intra"\nlow_GBps = 1\nhigh_GBps = 2\n'
         'source = "s"\ngpus = -8\n', "gpus must be >= 0"),
    ],
)
def test_a_policy_value_of_the_wrong_type_or_meaning_names_its_key_and_file(
    healthy: Path, tmp_path: Path, text: str, says: str
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(text)
    line = _one_error(CliRunner().invoke(cli, ["report", str(healthy), "--policy", str(policy), "--no-html"]))
    assert says in line and str(policy) in line, line


def test_a_policy_of_right_types_still_loads(healthy: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[thresholds]\nslow_pair_factor = 1\nlarge_min_bytes = "64M"\nmad_k = 4\n'
                      '[expect]\ngpus_per_node = 8\nnvlinks_up = true\n')
    r = CliRunner().invoke(cli, ["report", str(healthy), "--policy", str(policy), "--no-html"])
    assert r.exit_code == 0, r.output


# -- the launcher's environment, checked where the worker reads it ----------------------------------
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                 "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
                 "PMI_SIZE", "PMIX_RANK", "MPI_LOCALRANKID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                 "SLURM_JOB_ID", "SLURM_JOB_NODELIST")
TORCHRUN = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29531", "WORLD_SIZE": "2", "RANK": "0"}
SRUN = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "localhost"}


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (TORCHRUN | {"RANK": "abc"}, "RANK='abc' is not a whole number in [0, 2)"),
        (TORCHRUN | {"RANK": "2"}, "RANK='2' is not a whole number in [0, 2)"),
        (TORCHRUN | {"RANK": "-1"}, "RANK='-1'"),
        (TORCHRUN | {"WORLD_SIZE": "x"}, "WORLD_SIZE='x'"),
        (TORCHRUN | {"WORLD_SIZE": "0"}, "WORLD_SIZE='0'"),
        (TORCHRUN | {"WORLD_SIZE": "9" * 5000}, "WORLD_SIZE='99999"),
        (TORCHRUN | {"LOCAL_RANK": "1.5"}, "LOCAL_RANK='1.5'"),
        (TORCHRUN | {"MASTER_PORT": "99999"}, "MASTER_PORT='99999' is not a whole number in [1, 65536)"),
        (TORCHRUN | {"MASTER_PORT": "http"}, "MASTER_PORT='http'"),
        (SRUN | {"SLURM_PROCID": "abc"}, "SLURM_PROCID='abc'"),
        (SRUN | {"SLURM_NTASKS": ""}, "SLURM_NTASKS=''"),
        (SRUN | {"SLURM_PROCID": "4"}, "SLURM_PROCID='4' is not a whole number in [0, 2)"),
        (SRUN | {"SLURM_JOB_ID": "zz"}, "SLURM_JOB_ID='zz'"),
        (SRUN | {"SLURM_JOB_NODELIST": "node[1-"}, "SLURM_JOB_NODELIST"),
        ({"OMPI_COMM_WORLD_RANK": "q"}, "OMPI_COMM_WORLD_RANK='q'"),
        ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "2"}, "OMPI_COMM_WORLD_RANK='3'"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_launcher_variable_that_means_nothing_is_named(
    tmp_path: Path, given: dict[str, str], says: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS} | given
    r = _netbench("worker", "--out", str(tmp_path / "run"), env=env, timeout=120)
    line = _one_error(r)
    assert says in line, line
    assert not (tmp_path / "run").exists()


def test_an_mpi_launch_without_an_mpi_library_is_one_line_exit_3(tmp_path: Path) -> None:
    """PMI_RANK set (mpirun, a PMI launcher) on a host whose mpi4py cannot load its libmpi: the
    loader's words in one line, exit 3 (it could not run), not an ImportError's internal error. The
    host's missing library is played by an mpi4py on PYTHONPATH that fails as the real one does."""
    broken = tmp_path / "site" / "mpi4py"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        'raise ImportError("libmpi.so.40: cannot open shared object file: No such file or directory")\n')
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS} | {
        "PMI_RANK": "0", "PMI_SIZE": "1", "PYTHONPATH": str(broken.parent)}
    line = _one_error(_netbench("worker", "-b", "1K", "-e", "1K", "--out", str(tmp_path / "run"), env=env), 3)
    assert "MPI cannot be loaded (libmpi.so.40: cannot open shared object file" in line, line
    assert "pip install 'netbench[mpi]'" in line and not (tmp_path / "run").exists()


def test_the_worker_refuses_a_topology_that_is_no_file_at_once(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS} | TORCHRUN
    line = _one_error(_netbench("worker", "--topology", "/dev/zero", "--out", str(tmp_path / "r"), env=env))
    assert "/dev/zero is not a regular file" in line, line


# -- a kubeconfig that is not one ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "kubeconfig /dev/zero is not a regular file (a character device)"),
        ("", "the file is empty"),
        ("a: [b\n", "not YAML"),
        ("- 1\n- 2\n", "not a kubeconfig (no list of clusters)"),
        ("apiVersion: v1\nkind: Config\n", "not a kubeconfig (no list of clusters)"),
    ],
)
def test_a_kubeconfig_that_is_not_one_says_what_is_wrong(
    tmp_path: Path, content: str | None, says: str
) -> None:
    pytest.importorskip("kubernetes")
    path = "/dev/zero"
    if content is not None:
        (tmp_path / "kc").write_text(content)
        path = str(tmp_path / "kc")
    r = CliRunner().invoke(cli, ["sweep", "--launcher", "k8s", "--kubeconfig", path, "--k8s-image", "img",
                                 "--out", str(tmp_path / "run")])
    line = _one_error(r)
    assert says in line and "no such file" not in line, line
    assert not (tmp_path / "run").exists()


# -- a topology file that places no host, or none of the run's ------------------------------------------
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "the topology file is empty: it places no host"),
        ("# only a comment\n", "the topology file is empty: it places no host"),
        ("[switches]\n", "the topology file is empty: it places no host"),
        ("{}", "the topology file is empty: it places no host"),
        ("SwitchName=spine Switches=leaf1\n", "lists 1 switch(es) but places no host"),
        ('{"switches": {"leafx": ["other1", "other2"]}}', "--topology places none of the run's 8 host(s)"),
    ],
)
def test_a_topology_placing_none_of_the_runs_hosts_does_not_replace_its_own(
    healthy: Path, tmp_path: Path, text: str, says: str
) -> None:
    topo = tmp_path / "topo.conf"
    topo.write_text(text)
    r = CliRunner().invoke(cli, ["report", str(healthy), "--topology", str(topo), "--no-html"])
    assert says in _one_error(r)
    assert not (healthy / "findings.json").exists()  # no verdict on a fabric it does not describe


def test_a_topology_placing_some_of_the_runs_hosts_is_taken(healthy: Path, tmp_path: Path) -> None:
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps({"switches": {"leafA": host_names(8)[:4]}}))
    r = CliRunner().invoke(cli, ["report", str(healthy), "--topology", str(topo), "--no-html"])
    assert r.exit_code == 0, r.output


def test_a_sweep_topology_naming_none_of_its_hosts_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hosts").write_text("node0001\nnode0002\n")
    (tmp_path / "topo.json").write_text('{"switches": {"leafx": ["other1", "other2"]}}')
    r = _netbench("sweep", "--launcher", "local", "--hosts", "hosts", "--topology", "topo.json",
                  "--out", "run", cwd=tmp_path)
    assert "topo.json places none of the run's 2 host(s) (node0001, node0002)" in _one_error(r)
    assert not (tmp_path / "run").exists()


# -- a simulation says what it is doing -------------------------------------------------------------------
def test_simulate_says_each_stage_on_stderr(tmp_path: Path) -> None:
    r = _netbench("simulate", "--nodes", "16", "--out", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr
    said = [line.split("]: ", 1)[1] for line in r.stderr.splitlines() if line.startswith("# simulate [")]
    assert said[0] == "building the fabric (16 nodes, 2 leaves, 2 tiers)", said
    assert said[1] == "planning the sweep (ring, pairwise)", said
    phases = [s for s in said if s.startswith("measuring phase ")]
    assert phases[0] == "measuring phase 1/16 (ring)" and phases[-1].startswith("measuring phase 16/16 ")
    rows = r.stdout.split("# simulated 16 nodes: ", 1)[1].split(" rows", 1)[0]
    assert said[-2:] == [f"analysing {rows} rows for suspects to re-test",
                         "analysing the run: findings.json and report.html"], said
    assert "# simulate [" not in r.stdout  # stdout keeps the results


# -- a limit shorter than anything netbench does -------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["sweep", "-T", "1ms"], "'1ms' is not a usable limit: give 1 s or more"),
        (["sweep", "--timeout", "0.5"], "'0.5' is not a usable limit"),
        (["sweep", "--confirm-budget", "0.2"], "give 0 (off), or 1 s or more"),
        (["preflight", "--budget", "999ms"], "'999ms' is not a usable limit"),
        (["inventory", "--timeout", "0.01s"], "'0.01s' is not a usable limit"),
        (["simulate", "--budget", "0.5s", "--preflight"], "'0.5s' is not a usable limit"),
    ],
)
def test_a_limit_under_a_second_is_refused(tmp_path: Path, argv: list[str], says: str) -> None:
    r = _netbench(*argv, "--out", str(tmp_path / "run"))
    line = _one_error(r, code=3 if argv[0] == "preflight" else 2)
    assert says in line, line
    assert not (tmp_path / "run").exists()
