"""One pipeline, every site (``netbench.sites``, ``netbench.run.pipeline``).

First the options against the sites, from the click definitions, so that an option added later is
honoured on every site or refused there by name, never dropped. Then one scenario through the sites
on real test hosts (a real Slurm cluster's nodes, reached over SSH, by mpirun and inside an allocation):
a capped node and a node whose results come back wrong give the same findings, the same exit status
and the same run.json fields on each. On this machine's loopback no link can be capped, so the
one-machine sites (``local --hosts``, mpirun here) play the wrong results alone, and agree too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from netbench.common.errors import UsageError
from netbench.run.options import MeasureOptions, Options, from_command_line, leaf_names
from netbench.sites.base import NEEDS_HOSTS, SITE_OPTIONS, check

BIN = Path(sys.executable).parent
MPIRUN = str(BIN / "mpirun") if (BIN / "mpirun").exists() else shutil.which("mpirun")
ENV = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
PIPELINE = Path(__file__).resolve().parents[1] / "netbench" / "run" / "pipeline.py"

# a value other than the default for every site option (the hosts file is the site's own choice)
GIVEN = {"procs": 3, "procs_per_host": 2, "python": "/opt/py/bin/python", "ssh_config": "cfg",
         "accept_new_host_keys": True, "advertise": "10.0.0.1", "topology": "topology.conf",
         "kubeconfig": "kubeconfig", "k8s_context": "prod", "k8s_namespace": "nb", "k8s_nodes": "pool=gpu",
         "k8s_image": "registry/netbench:1", "k8s_resources": ("rdma/ib=1",), "k8s_tolerations": ("all",),
         "k8s_keep": True, "k8s_label": True, "k8s_taint": True}


def _sweep_params() -> dict[str, str]:
    from netbench.commands.sweep import command

    return {p.name: p.opts[0] for p in command.params if p.name not in ("patterns", "help")}


def test_every_sweep_option_reaches_the_pipeline_or_is_a_site_option() -> None:
    """Each click option is a field of the options record the pipeline gets; a site option is in
    the sites' table; every other one is the measurement (the plan builder reads MeasureOptions) or is
    read by the pipeline itself."""
    record = leaf_names(Options)
    measurement = leaf_names(MeasureOptions)
    source = PIPELINE.read_text()
    for name, flag in _sweep_params().items():
        assert name in record, f"{flag} is not a leaf of the Options tree: the pipeline never sees it"
        if name in SITE_OPTIONS or name in measurement or name in NEEDS_HOSTS:
            continue
        read = {"policy": "rules"}.get(name, name)  # the policy file is read parsed (ReportOptions.rules)
        said = f"{flag}: not read by netbench/run/pipeline.py"
        assert re.search(rf"\bopts(\.\w+)*\.{read}\b", source), said


def _options(launcher: str, hosts_file: str | None, **given: object) -> Options:
    """The tree as the command line builds it, with ``given`` leaves."""
    return from_command_line(Options, {"launcher": launcher, "hosts_file": hosts_file, **given})


def _site(launcher: str, hosts: bool, tmp_path: Path, monkeypatch) -> object:
    from netbench.sites.local import site as local
    from netbench.sites.mpi import site as mpi
    from netbench.sites.slurm import site as slurm
    from netbench.sites.ssh import site as ssh

    hosts_file = tmp_path / "hosts.txt"
    hosts_file.write_text("h0\nh1\n")
    opts = _options(launcher, str(hosts_file) if hosts else None)
    if launcher == "slurm":
        monkeypatch.setenv("SLURM_JOB_ID", "7")
        monkeypatch.setenv("SLURM_JOB_NODELIST", "h[0-1]")
        monkeypatch.delenv("SLURM_STEP_ID", raising=False)
        return slurm.SlurmSite(opts)
    if launcher == "mpi":
        return mpi.MpiSite(opts) if hosts else mpi.MpiHereSite(opts)
    if launcher == "k8s":  # the options alone: the cluster is first asked for its nodes (tests/test_k8s.py)
        from netbench.sites.k8s import site as k8s

        # needed: no image of ours is published
        return k8s.make(_options(launcher, None, k8s_image=GIVEN["k8s_image"]))
    return {"ssh": ssh, "local": local}[launcher].make(opts)


SITES = [("ssh", True), ("ssh", False), ("local", True), ("mpi", True), ("mpi", False), ("slurm", False),
         ("k8s", False)]


@pytest.mark.parametrize(("launcher", "hosts"), SITES)
def test_every_site_option_is_honoured_or_refused_by_name(launcher: str, hosts: bool, tmp_path: Path,
                                                           monkeypatch) -> None:
    site = _site(launcher, hosts, tmp_path, monkeypatch)
    hosts_file = str(tmp_path / "hosts.txt") if hosts else None
    check(site, _options(launcher, hosts_file))  # the defaults: nothing to refuse
    for name, value in GIVEN.items():
        opts = _options(launcher, hosts_file, **{name: value})
        if name in site.uses:
            check(site, opts)
            continue
        with pytest.raises(UsageError) as err:
            check(site, opts)
        said = str(err.value)
        assert f"--launcher {site.name}" in said and "--" + name.replace("_", "-") in said, said
    for name in NEEDS_HOSTS:  # the pairs' options: only where there are pairs
        value = {"pair_schedule": "circle", "pair_sizes": [1 << 20], "pair_collectives": ["all_reduce"]}
        opts = _options(launcher, hosts_file, **{name: value.get(name, 2)})
        if site.one_machine:
            with pytest.raises(UsageError, match="--hosts"):
                check(site, opts)
        else:
            check(site, opts)


@pytest.mark.parametrize("argv", [
    ["--launcher", "local", "--ssh-config", "cfg"],
    ["--pair-sizes", "1M"],
    ["--procs-per-host", "2"],
])
def test_a_refused_option_is_one_line_and_exit_2_before_anything_runs(tmp_path: Path,
                                                                      argv: list[str]) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("a\nb\n")
    (tmp_path / "cfg").write_text("")  # a file: one that is missing is refused as the options are read
    with_hosts = ["--hosts", str(hosts)] if "--ssh-config" in argv else []
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "netbench", "sweep", *with_hosts, *argv, "--out", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "--launcher local" in lines[0], r.stderr
    assert not out.exists()


# -- one scenario, every site -----------------------------------------------------------------------
HOSTS = ["h0", "h1", "h2", "h3", "h4"]  # five: a node needs 3 partners to be judged
MEASURE = ["--pattern", "pairwise", "--pair-sizes", "1M", "-k", "all_reduce", "-n", "5", "-w", "1",
           "--timeout", "30"]
WRONG = {"NETBENCH_INJECT": "corrupt:@h1"}  # every rank of h1, in every launch
RUN_FIELDS = {"schema", "run_id", "command", "status", "launcher", "backend", "device", "hosts", "world_size",
              "topology", "options", "started", "ended", "rows", "down_hosts", "phases", "faults", "retests",
              "confirm"}


def _found(out: Path) -> set[tuple[str, str]]:
    found = json.loads((out / "findings.json").read_text())["findings"]
    return {(f["rule"], f["subject"]) for f in found if f["severity"] != "info"}


def _run_json(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


@pytest.mark.skipif(MPIRUN is None, reason="needs mpirun (pip install 'netbench[mpi]' brings Open MPI)")
def test_one_scenario_gives_the_same_verdict_over_ssh_mpirun_and_slurm(slurm_pool, tmp_path: Path) -> None:
    cluster = slurm_pool.get(hosts=["ctl", *HOSTS], leaves={"sw0": ["ctl", *HOSTS]})
    for h in HOSTS:  # every pair bound by the network, not by CPU time on a shared 2-core machine
        cluster.net.limit_host(h, "100mbit")
    cluster.net.limit_host("h3", "40mbit")  # 0.4x: far below the slow-node threshold
    topology = tmp_path / "topology.conf"  # the switches Slurm has, as a file for the other two
    topology.write_text(cluster.topology_conf())
    outs, codes = {}, {}
    for site in ("ssh", "mpi"):
        outs[site] = tmp_path / site
        (tmp_path / f"{site}-cfg").mkdir()
        argv = [*cluster.net.netbench_argv(tmp_path / f"{site}-cfg", hosts=HOSTS), "--launcher", site,
                "--out", str(outs[site]), "--topology", str(topology), *MEASURE]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**ENV, **WRONG})
        codes[site] = r.returncode
        assert (outs[site] / "findings.json").is_file(), r.stdout[-2000:] + r.stderr[-2000:]
    outs["slurm"] = tmp_path / "slurm"
    r = cluster.run(["salloc", f"-N{len(HOSTS)}", sys.executable, "-m", "netbench", "sweep", "--out",
                     str(outs["slurm"]), *MEASURE], timeout=300, env=WRONG)
    codes["slurm"] = r.returncode
    assert (outs["slurm"] / "findings.json").is_file(), r.stdout[-2000:] + r.stderr[-2000:]

    found = {site: _found(out) for site, out in outs.items()}
    # h1 wrong with every partner: a failing host (the errors rule names the host, not each pair)
    assert found["ssh"] == {("slow_node", "h3"), ("host_failing", "h1")}, found["ssh"]
    assert found["mpi"] == found["ssh"] and found["slurm"] == found["ssh"], found
    assert codes == {"ssh": 2, "mpi": 2, "slurm": 2}  # failures: a node to drain, wrong results
    runs = {site: _run_json(out) for site, out in outs.items()}
    for site, run in runs.items():
        assert RUN_FIELDS <= set(run), (site, sorted(RUN_FIELDS - set(run)))
        assert run["launcher"] == site and run["status"] == "completed" and run["hosts"] == HOSTS
        assert run["confirm"]["launches"], site  # the suspects re-tested on every site
        suspects = [launch["suspects"] for launch in run["confirm"]["launches"]]
        assert suspects == [launch["suspects"] for launch in runs["ssh"]["confirm"]["launches"]], site
    assert len({json.dumps(run["topology"], sort_keys=True) for run in runs.values()}) == 1


def test_one_machine_sites_give_the_same_verdict_on_wrong_results(tmp_path: Path) -> None:
    """``local --hosts`` (hosts as process groups here) and, where Open MPI is installed, mpirun on
    this machine: a host's wrong results are the same failure, with the same exit status."""
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("h0\nh1\nh2\n")
    outs, codes = {}, {}
    for site, argv in [("local", ["--hosts", str(hosts)]), ("mpi", ["-p", "2"])]:
        if site == "mpi" and MPIRUN is None:
            continue
        outs[site] = tmp_path / site
        extra = MEASURE if site == "local" else MEASURE[4:]  # one machine alone: no pairs
        r = subprocess.run([sys.executable, "-m", "netbench", "sweep", "--launcher", site, *argv, *extra,
                            "--out", str(outs[site])], capture_output=True, text=True, timeout=300,
                           env={**ENV, "NETBENCH_INJECT": "corrupt:1"})
        codes[site] = r.returncode
        assert (outs[site] / "findings.json").is_file(), r.stdout[-2000:] + r.stderr[-2000:]
    for site, out in outs.items():
        rules = {rule for rule, _ in _found(out)}
        # a host wrong with every partner is named as a failing host, a lone group as wrong results
        assert rules & {"wrong_results", "host_failing"}, (site, _found(out))
        assert codes[site] == 2, codes
        run = _run_json(out)
        assert run["launcher"] == site and run["status"] == "completed" and run["command"] == "sweep"


def test_the_simulator_judges_with_the_same_analysis_and_exit_status(tmp_path: Path) -> None:
    """The simulator is the analysis' site: its fabric's rows go through the same report, re-test
    step and exit status, and its run.json has the fields every site writes. The same fault as the
    scenario above (a node at 0.4x on one leaf of five) gives the same finding and status."""
    out = tmp_path / "sim"
    r = subprocess.run([sys.executable, "-m", "netbench", "simulate", "--nodes", "5", "--leaves", "1",
                        "--fault", "node:node0003=0.4", "--seed", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]  # as over SSH, mpirun and Slurm
    assert _found(out) == {("slow_node", "node0003")}
    run = _run_json(out)
    assert RUN_FIELDS <= set(run), sorted(RUN_FIELDS - set(run))
    assert run["command"] == "simulate" and run["status"] == "completed" and run["confirm"]["launches"]
