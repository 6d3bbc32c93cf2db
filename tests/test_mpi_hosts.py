"""``netbench sweep --launcher mpi --hosts``: a real mpirun (Open MPI's ssh launcher) over the namespaced
test hosts (tests/netns.py: their own sshd, the network's key and known_hosts through --ssh-config)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rowfiles import rows_of

from netbench.common.errors import UsageError
from netbench.sites.mpi.launcher import MpirunEvents, ssh_args

BIN = Path(sys.executable).parent
MPIRUN = str(BIN / "mpirun") if (BIN / "mpirun").exists() else shutil.which("mpirun")


def _open_mpi_missing() -> str | None:
    if MPIRUN is None:
        return "needs mpirun (pip install 'netbench[mpi]' brings Open MPI)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "needs mpi4py (pip install 'netbench[mpi]')"
    return None


SMALL = ["-b", "1K", "-e", "64K", "-f", "8", "-n", "3", "-w", "1", "--pair-sizes", "64K"]
needs_mpi = pytest.mark.skipif(_open_mpi_missing() is not None, reason=str(_open_mpi_missing()))
ENV = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}  # mpirun beside this python


def _findings(out: Path) -> set[tuple[str, str]]:
    found = json.loads((out / "findings.json").read_text())["findings"]
    return {(f["rule"], f["subject"]) for f in found
            if f["subject_kind"] == "node" and f["severity"] != "info"}


@needs_mpi
def test_mpirun_sweeps_three_test_hosts_on_two_leaves(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(["h0", "h1", "h2"], leaves={"a": ["h0", "h1"], "b": ["h2"]})
    out = tmp_path / "run"
    small = ["-b", "1K", "-e", "16K", "-f", "4", "-n", "3", "-w", "1", "--pair-sizes", "64K",
             "--timeout", "20"]
    r = subprocess.run([*net.netbench_argv(tmp_path), "--launcher", "mpi", "--out", str(out), *small],
                       capture_output=True, text=True, timeout=150, env=ENV)
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-2000:]  # 1: findings on tiny pairs
    run = json.loads((out / "run.json").read_text())
    assert run["launcher"] == "mpi" and run["status"] == "completed"
    assert run["topology"] == {"h0": "a", "h1": "a", "h2": "b"}  # the hosts file's switch= labels
    rows = rows_of(out)
    assert any(row["pattern"] == "ring" and row["hosts"] == ["h0", "h1", "h2"] and row["status"] == "ok"
               for row in rows)
    pairs = {frozenset(row["hosts"]) for row in rows if row["pattern"] == "pair" and row["status"] == "ok"}
    assert pairs == {frozenset(p) for p in (("h0", "h1"), ("h0", "h2"), ("h1", "h2"))}
    assert (out / "report.html").is_file()


@needs_mpi
def test_mpirun_across_test_hosts_finds_the_slow_node(netns_factory, tmp_path: Path) -> None:
    """The slow node, as the same measurement over SSH names it (tests/test_slurm_real.py runs that
    measurement both ways, same rates and fault, and compares: ``_both_ways``)."""
    hosts = ["h0", "h1", "h2", "h3", "h4"]  # five: a node needs 3 partners to be judged
    net = netns_factory(hosts)
    for h in hosts:  # every pair bound by the network, not by CPU time on a shared machine
        net.limit_host(h, "100mbit")
    net.limit_host("h3", "40mbit")  # 0.4x: far below the 0.9x threshold, twice as quick to measure as 0.2x
    measure = ["--pattern", "pairwise", "--pair-sizes", "1M", "-k", "all_reduce", "-n", "5", "-w", "1",
               "--timeout", "30"]
    mpi_out = tmp_path / "mpi"
    base = net.netbench_argv(tmp_path)
    r = subprocess.run([*base, "--launcher", "mpi", "--out", str(mpi_out), *measure], capture_output=True,
                       text=True, timeout=180, env=ENV)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]  # FAIL: a node to drain
    assert "hostname of the client socket cannot be retrieved" not in r.stdout + r.stderr
    run = json.loads((mpi_out / "run.json").read_text())
    assert run["launcher"] == "mpi" and run["status"] == "completed" and run["world_size"] == 5
    assert "prterun has exited" not in r.stdout + r.stderr  # the agents end as mpirun expects
    rows = rows_of(mpi_out)
    pairs = {frozenset(row["hosts"]) for row in rows if row["pattern"] == "pair" and row["status"] == "ok"}
    assert len(pairs) == 10 and set().union(*pairs) == set(hosts)  # every pair, on the test hosts
    assert _findings(mpi_out) == {("slow_node", "h3")}


@needs_mpi
def test_mpirun_names_the_host_whose_sshd_does_not_answer(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(["h0", "h1", "h2"])
    pid = net.host("h2").pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # accepts TCP, never sends its banner: ssh would wait forever
    try:
        start = time.monotonic()
        r = subprocess.run([*net.netbench_argv(tmp_path), "--launcher", "mpi", "--out", str(tmp_path / "run"),
                            "--timeout", "10", *SMALL], capture_output=True, text=True, timeout=120, env=ENV)
        took = time.monotonic() - start
    finally:
        os.kill(pid, signal.SIGCONT)
    text = r.stdout + r.stderr
    # h2 left out by the inventory: node_unreachable, a warning unless a policy says otherwise
    assert r.returncode == 1 and took < 90, text[-3000:]
    # the inventory over SSH finds h2 silent first; it is left out, h0 and h1 are measured under mpirun
    left_out = [line for line in text.splitlines() if line.startswith("# h2: ") and "(left out" in line]
    assert left_out, text[-3000:]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "completed" and run["launcher"] == "mpi" and run["hosts"] == ["h0", "h1"]
    rows = rows_of(tmp_path / "run")
    assert any(row["status"] == "ok" and row["hosts"] == ["h0", "h1"] for row in rows)


@needs_mpi
def test_mpirun_names_the_host_it_could_not_start_an_agent_on(netns_factory, tmp_path: Path) -> None:
    """No inventory (it would leave the host out first): mpirun's own words name the host's fault."""
    net = netns_factory(["h0", "h1", "h2"])
    pid = net.host("h2").pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        r = subprocess.run([*net.netbench_argv(tmp_path), "--launcher", "mpi", "--out", str(tmp_path / "run"),
                            "--timeout", "10", "--no-inventory", *SMALL], capture_output=True, text=True,
                           timeout=120,
                           env=ENV)
    finally:
        os.kill(pid, signal.SIGCONT)
    text = r.stdout + r.stderr
    assert r.returncode == 2, text[-3000:]
    said = [line for line in text.splitlines() if "host h2: agent ended before its ranks finished" in line]
    assert said and "mpirun lost or could not start its daemon on h2 (Connection timed out during banner" \
        in said[0], text[-3000:]


@needs_mpi
def test_mpirun_whose_agents_never_start_is_stopped_at_the_start_timeout(netns_factory,
                                                                         tmp_path: Path) -> None:
    """The hosts' python hangs (a stale network mount, say): mpirun would wait for ever."""
    net = netns_factory(["h0", "h1"])
    hang = tmp_path / "python-that-hangs"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    argv = [*net.netbench_argv(tmp_path), "--launcher", "mpi", "--python", str(hang), "--timeout", "5",
            "--start-timeout", "10", "--out", str(tmp_path / "run"), "--no-inventory"]
    start = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=ENV)
    took = time.monotonic() - start
    text = r.stdout + r.stderr
    assert r.returncode == 2 and 10 <= took < 40, text[-2000:]  # no host starts: nothing to wait longer for
    for h in ("h0", "h1"):
        assert f"host {h}: ranks [" in text and "did not start within 10 s" in text, text[-2000:]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "completed" and sorted(run["down_hosts"]) == ["h0", "h1"]
    deadline = time.monotonic() + 15  # mpirun's daemons take their ranks with them
    while time.monotonic() < deadline and any(
        "sleep" in Path(f"/proc/{p}/comm").read_text() for h in ("h0", "h1") for p in net.pids(h)
        if Path(f"/proc/{p}/comm").exists()
    ):
        time.sleep(0.5)
    left = [p for h in ("h0", "h1") for p in net.pids(h)
            if Path(f"/proc/{p}/comm").exists() and "sleep" in Path(f"/proc/{p}/comm").read_text()]
    assert left == []


def test_ssh_args_never_prompt_and_refuse_a_path_open_mpi_would_split(tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    args = ssh_args(str(cfg), accept_new_host_keys=False)
    rsh = args[args.index("plm_rsh_args") + 1].split()
    assert rsh[:2] == ["-F", str(cfg)] and "BatchMode=yes" in rsh and "ConnectTimeout=10" in rsh
    assert "StrictHostKeyChecking=accept-new" in ssh_args(None, accept_new_host_keys=True)[-1]
    with pytest.raises(UsageError, match="white space"):
        ssh_args(str(tmp_path / "my ssh config"), accept_new_host_keys=False)


def test_mpirun_events_name_only_valid_hosts() -> None:
    ev = MpirunEvents()
    for line in ["  Remote host:   gpu-07\n", "  Remote host:   $(reboot)\n",
                 "Permission denied (publickey).\n"]:
        ev.read(line)
    assert ev.hosts == ["gpu-07"]
    said = "mpirun lost or could not start its daemon on gpu-07 (Permission denied (publickey).)"
    assert ev.describe() == said
    assert MpirunEvents().describe() is None


@needs_mpi
@pytest.mark.parametrize(("host", "cfg", "said"), [
    ("nosuch-host-zz", None, "no host could be reached or run a rank (1 tried; nosuch-host-zz: "),
    ("localhost", "my ssh config", "--launcher mpi: the --ssh-config path must not contain white space"),
])
def test_bad_input_for_mpirun_is_one_line(tmp_path: Path, host: str, cfg: str | None,
                                                                said: str) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(host + "\n")
    if cfg:  # a file: a missing one is refused as the options are read, before mpirun's own check
        (tmp_path / cfg).write_text("")
    argv = [sys.executable, "-m", "netbench", "sweep", "--launcher", "mpi", "--hosts", str(hosts),
            "--out", str(tmp_path / "run")] + (["--ssh-config", str(tmp_path / cfg)] if cfg else [])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=ENV)
    lines = r.stderr.strip().splitlines()
    # issue 47: no host reached is "nothing measured" (3), a bad option 2
    assert r.returncode == (2 if cfg else 3), r.stderr
    assert len(lines) == 1 and lines[0].startswith(f"netbench: error: {said}"), r.stderr
    if cfg:  # refused before anything ran
        assert not (tmp_path / "run").exists()
    else:  # the inventory ran: what it found stays, with why nothing was measured (as over SSH)
        run = json.loads((tmp_path / "run" / "run.json").read_text())
        assert run["status"] == "failed" and run["error"].startswith("no host could be reached")
        assert (tmp_path / "run" / "inventory.jsonl").is_file()
