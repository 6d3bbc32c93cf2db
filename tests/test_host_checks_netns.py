"""Hosts that cannot take part, on real test hosts (network namespaces + sshd), each during a real
sweep: a host whose ranks' python has no torch is left out before launch with that cause; one
machine listed under two names is refused before any rank starts; a hung inventory probe is killed
on its host, not only disconnected; another sweep on the same hosts is named, and the report warns
that the fabric was shared. Each asserts the exit status, run.json's status, that no healthy host
is marked down or drained, and the rows kept."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from netbench.inventory.model import GPU, NodeInventory, leave_out_unusable, same_machine
from netns import TestNetwork
from rowfiles import rows_of

pytestmark = pytest.mark.netns

QUICK = ["--pattern", "pairwise", "--pair-sizes", "64K", "-k", "all_reduce", "-n", "2", "-w", "1",
         "--timeout", "10", "--confirm-budget", "0"]
NO_TORCH = "/usr/bin/python3"  # this machine's system python: no torch (the test hosts share it)


def rows(out: Path) -> list[dict]:
    return rows_of(out)


def findings(out: Path) -> list[dict]:
    return json.loads((out / "findings.json").read_text())["findings"]


def drained(out: Path) -> set[str]:
    """Hosts a fail finding names: what the verdict would drain."""
    return {h for f in findings(out) if f["severity"] == "fail" for h in f.get("hosts") or []}


def test_a_host_without_torch_is_left_out_with_its_cause(netns_factory, tmp_path: Path) -> None:
    """h2's ranks would run a python with no torch (its ``python=`` label): the inventory says so in
    one line, no rank of h2 starts, the other pairs run, and the verdict names h2 with the cause as
    "could not test" (issue 47: its own set-up, never drained)."""
    if subprocess.run([NO_TORCH, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip(f"{NO_TORCH} imports torch here")
    net = netns_factory(["h0", "h1", "h2"])
    argv = net.netbench_argv(tmp_path, labels={"h2": {"python": NO_TORCH}})
    out = tmp_path / "run"
    res = subprocess.run([*argv, "--out", str(out), *QUICK], capture_output=True, text=True, timeout=300)
    said = res.stdout + res.stderr
    # issue 47: its own set-up is "could not test", a warning (1) that never drains it
    assert res.returncode == 1, said[-3000:]
    assert ("# h2: cannot_run: torch is not importable by its python: ModuleNotFoundError: No module "
            "named 'torch' (left out of the sweep)") in said
    assert "exited with code" not in said and "Traceback" not in said
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed"
    assert run["left_out"] == {"h2": "cannot_run: torch is not importable by its python: "
                                     "ModuleNotFoundError: No module named 'torch'"}
    assert run["down_hosts"] == [] and run["faults"] == []  # h2's rank never started
    kept = rows(out)
    assert kept and all(r["status"] == "ok" and set(r["hosts"]) == {"h0", "h1"} for r in kept)
    (named,) = [f for f in findings(out) if f["rule"] == "host_cannot_run"]
    assert named["subject"] == "h2" and "No module named 'torch'" in named["title"]
    assert named["title"].startswith(f"Could not test h2: its {NO_TORCH} has no torch") and \
        named["title"].endswith("pass --python or python= in the hosts file"), named["title"]
    assert "Could not test h2" in said  # the headline names it
    assert not [f for f in findings(out) if f["rule"] in ("node_unreachable", "host_failing")]
    assert drained(out) == set()

    # preflight leaves it out the same way: never on its drain list (stdout), a warning (1)
    (tmp_path / "pf").mkdir()
    pf_out = tmp_path / "pf-run"
    pf_argv = net.netbench_argv(tmp_path / "pf", "preflight", labels={"h2": {"python": NO_TORCH}})
    pf = subprocess.run([*pf_argv, "--out", str(pf_out), "--pair-sizes", "64K", "-n", "2", "-w", "1",
                         "--timeout", "10", "--budget", "150s", "--no-sequential"],
                        capture_output=True, text=True, timeout=300)
    said = pf.stdout + pf.stderr
    assert pf.returncode == 1, said[-3000:]
    assert pf.stdout.split() == []
    assert "# h2: cannot_run: torch is not importable by its python: ModuleNotFoundError" in said
    assert "exited with code" not in said and "Traceback" not in said
    run = json.loads((pf_out / "run.json").read_text())
    assert run["status"] == "completed" and list(run["left_out"]) == ["h2"] and not run.get("down_hosts")
    assert rows(pf_out) and all("h2" not in r["hosts"] for r in rows(pf_out))


def _alias_config(net: TestNetwork, tmp: Path, alias: str, of: str) -> Path:
    """ssh_config for every host plus ``alias`` as a second name of ``of`` (its address)."""
    cfg = net.write_ssh_config(tmp / "ssh_config")
    h = net.host(of)
    cfg.write_text(cfg.read_text() + f"\nHost {alias}\n    HostName {h.addr}\n    User root\n"
                   f"    IdentityFile {net.key_path}\n    IdentitiesOnly yes\n"
                   f"    UserKnownHostsFile {net.known_hosts}\n    StrictHostKeyChecking yes\n")
    return cfg


def test_one_machine_listed_twice_is_refused(netns_factory, tmp_path: Path) -> None:
    """The hosts file lists h0 by name and by its address: refused, naming both entries, before
    any rank starts; sweep exits 2 (bad input), preflight 3 (its "could not run": 2 means drain)."""
    net = netns_factory(["h0", "h1", "h2"])
    addr = net.host("h0").addr
    cfg = _alias_config(net, tmp_path, addr, "h0")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"h0\nh1\nh2\n{addr}\n")
    base = ["--hosts", str(hosts), "--ssh-config", str(cfg), "--python", sys.executable]
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "netbench", "sweep", *base, "--out", str(out), *QUICK],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, (res.stdout + res.stderr)[-3000:]
    line = (f"h0 ({hosts}:1) and {addr} ({hosts}:4) are one machine (same address {addr}:22): "
            "list each machine once")
    assert res.stderr.strip().splitlines()[-1] == f"netbench: error: {line}"
    assert "Traceback" not in res.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and run["error"] == line
    assert rows(out) == [] and "down_hosts" not in run  # no rank started, no host marked down

    pf_out = tmp_path / "pf"
    res = subprocess.run([sys.executable, "-m", "netbench", "preflight", *base, "--out", str(pf_out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 3, (res.stdout + res.stderr)[-3000:]
    assert line in res.stderr.strip().splitlines()[-1] and "Traceback" not in res.stderr
    assert res.stdout == ""  # no drain list
    run = json.loads((pf_out / "run.json").read_text())
    assert run["status"] == "failed" and run["error"] == line
    assert rows(pf_out) == []


def test_same_machine_by_hostname_and_machine_id() -> None:
    """Two records of one machine reached at two addresses (two NICs): hostname and machine-id say
    it; either alone does not (cloned images share a machine-id, clones keep a hostname)."""
    mid = "0123456789abcdef0123456789abcdef"
    a = NodeInventory("n1", hostname="n1", machine_id=mid, address="10.0.0.1:22")
    b = NodeInventory("n1-ib", hostname="n1", machine_id=mid, address="10.1.0.1:22")
    c = NodeInventory("n2", hostname="n2", machine_id=mid, address="10.0.0.2:22")
    d = NodeInventory("n3", hostname="n1", machine_id="f" * 32, address="10.0.0.3:22")
    assert same_machine([a, c, d, b]) == (a, b, f"same hostname and machine-id n1 {mid}")
    assert same_machine([a, c, d]) is None


def test_gpus_its_torch_cannot_use_leave_a_host_out_of_a_gpu_run() -> None:
    """A host whose torch sees none of the GPUs nvidia-smi shows is left out when the others run on
    their GPUs, not when no host's torch can (the backend's choice names them all) or with gloo."""
    gpus = [GPU(index=0), GPU(index=1)]

    def node(host: str, cuda: bool) -> NodeInventory:
        return NodeInventory(host, gpus=list(gpus), torch_version="2.13.0", torch_cuda_build="13.0",
                             torch_cuda_available=cuda, torch_gpus=2 if cuda else 0, ranks_python=True)

    fleet = [node("g0", True), node("g1", True), node("g2", False)]
    assert leave_out_unusable(fleet, "gloo") == []
    assert [n.host for n in leave_out_unusable(fleet, None)] == ["g2"]
    assert fleet[2].status == "cannot_run"
    assert fleet[2].error == "nvidia-smi shows 2 GPU(s) but torch 2.13.0 sees none"
    none_can = [node("g0", False), node("g1", False)]
    assert leave_out_unusable(none_can, None) == [] and all(n.ok for n in none_can)


def _left_on(net: TestNetwork, host: str, needle: str) -> list[str]:
    """Command lines of the processes in ``host``'s network namespace that contain ``needle``."""
    pids = subprocess.run(["ip", "netns", "pids", net.host(host).netns], capture_output=True,
                          text=True).stdout.split()
    found = []
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmd:
            found.append(f"{pid}: {cmd}")
    return found


def test_a_hung_probe_is_killed_on_its_host(netns_factory, tmp_path: Path) -> None:
    """h2's lscpu hangs (a fake on its PATH; the probe's own per-tool limit raised past the
    inventory's, --inventory-timeout 30) and h2 has no working pkill (a minimal image): the
    inventory times h2 out and leaves it out, the others are measured, and no process of the probe
    is left on h2 afterwards, the tool that ``timeout`` ran in a process group of its own included."""
    from fake_tools import make_fake_tools

    tools = make_fake_tools(tmp_path / "tools", {"lscpu": "@sleep:587", "pkill": "@text:#rc=1"})
    net = netns_factory(["h0", "h1", "h2"], tools={"h2": tools})
    net.set_session_env("h2", {"NETBENCH_PROBE_TIMEOUT": "900"})
    out = tmp_path / "run"
    argv = [*net.netbench_argv(tmp_path), "--out", str(out), *QUICK, "--inventory-timeout", "30"]
    sweep = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _left_on(net, "h2", "sleep 587") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _left_on(net, "h2", "sleep 587"), "the probe never hung on h2"
        stdout, stderr = sweep.communicate(timeout=400)
    finally:
        sweep.kill()
    said = stdout + stderr
    assert "# h2: timeout: " in said and "(left out of the sweep)" in said, said[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed" and run["down_hosts"] == [] and list(run["left_out"]) == ["h2"]
    kept = rows(out)
    assert kept and all(r["status"] == "ok" and set(r["hosts"]) == {"h0", "h1"} for r in kept)
    assert sweep.returncode == 1, said[-3000:]  # an unreachable host: a warning, nothing drained
    assert drained(out) == set()
    deadline = time.monotonic() + 10
    while (left := _left_on(net, "h2", "sleep 587")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == []


def _markers(net: TestNetwork, host: str) -> list[Path]:
    """``host``'s run markers (netbench/agents/marker.py: named by hostname and network namespace)."""
    netns = net.run(host, ["stat", "-L", "-c", "%i", "/proc/self/ns/net"]).stdout.strip()
    name = f"netbench-run.{host}.{netns}.*.lock"
    return [p for folder in ("/run/lock", "/tmp") for p in Path(folder).glob(name)]


def _held(path: Path) -> bool:
    """Some process holds the marker's lock (the run is live), as inventory/probe.sh tells it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _marker(net: TestNetwork, host: str) -> dict | None:
    """The content of a run marker that ``host``'s agent holds, once it names its run."""
    for path in _markers(net, host):
            try:
                data = json.loads(path.read_text() or "null")
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("run_id"):
                return data
    return None


def test_another_run_on_the_same_hosts_is_named(netns_factory, tmp_path: Path) -> None:
    """A long sweep runs on h0..h2; a second sweep started on the same hosts while it runs says so
    at its start (one line naming the hosts and the other run's id) and its report warns that the
    fabric was shared. Neither run marks a host down; no marker is left behind."""
    net = netns_factory(["h0", "h1", "h2"])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first_out, second_out = tmp_path / "first", tmp_path / "second"
    long = ["--pattern", "pairwise", "--pair-sizes", "4M,8M,16M", "-k", "all_reduce", "-n", "300", "-w", "1",
            "--timeout", "60", "--confirm-budget", "0", "--no-report"]
    first = subprocess.Popen([*net.netbench_argv(tmp_path / "a"), "--out", str(first_out), *long],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240  # the agents start in ~90 s on 2 busy cores
        while not all(_marker(net, h) for h in net.names) and time.monotonic() < deadline:
            assert first.poll() is None, first.communicate()[1][-3000:]
            time.sleep(0.2)
        held = {h: _marker(net, h) for h in net.names}
        assert all(held.values()), "the first run's agents hold no markers"
        first_id = json.loads((first_out / "run.json").read_text())["run_id"]
        assert {m["run_id"] for m in held.values()} == {first_id}
        second = subprocess.run([*net.netbench_argv(tmp_path / "b"), "--out", str(second_out), *QUICK],
                                capture_output=True, text=True, timeout=300)
    finally:  # the first run has done its part: Ctrl-C ends it rather than its long pairs
        first.send_signal(signal.SIGINT)
        out1, err1 = first.communicate(timeout=300)
    said = second.stdout + second.stderr
    assert (f"# another netbench run is on 3 of these host(s) (h0, h1, h2): run {first_id} from ") in said
    shared = [f for f in findings(second_out) if f["rule"] == "fabric_shared"]
    assert len(shared) == 1 and shared[0]["evidence"]["run_id"] == first_id
    assert shared[0]["severity"] == "warn" and shared[0]["hosts"] == ["h0", "h1", "h2"]
    assert second.returncode in (1, 2), said[-3000:]  # at least the warning; never a pass
    run2 = json.loads((second_out / "run.json").read_text())
    assert run2["status"] == "completed" and run2["down_hosts"] == [] and rows(second_out)
    assert first.returncode == 130, (out1 + err1)[-3000:]
    run1 = json.loads((first_out / "run.json").read_text())
    assert run1["status"] == "interrupted" and run1["down_hosts"] == []
    # released when the agents ended: the file is removed, or (an agent KILLed at the teardown's end
    # on a busy machine) left unlocked, which every reader takes for stale (netbench/agents/marker.py)
    assert not [p for h in net.names for p in _markers(net, h) if _held(p)]
