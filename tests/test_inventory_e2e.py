"""`netbench inventory --hosts` against real sshd test hosts, through the real CLI (a subprocess).

Each GPU host gets a folder of fake node tools (nvidia-smi, ibstat, ... printing real captured
output) bound onto its own PATH, so the probe, SSH, parsing and the table run for real.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_tools import H200_PROFILE, make_fake_tools, older_firmware_profile
from netns import TestNetwork

from netbench.common.rundir import read_jsonl

pytestmark = pytest.mark.netns
PY_NO_TORCH = "/usr/bin/python3"  # the probe asks this python for versions: quick, no torch import
GPU_PROFILE = {k: v for k, v in H200_PROFILE.items() if k != "hostname"}  # keep each host's own name


def inventory(net: TestNetwork, tmp: Path, hosts: list[str] | None = None, *extra: str,
              known_hosts: Path | None = None, timeout: float = 90) -> tuple[int, str, str, list[dict]]:
    cfg = net.write_ssh_config(tmp / "ssh_config", known_hosts=known_hosts)
    hosts_file = net.hosts_file(tmp / "hosts.txt", hosts=hosts)
    out = tmp / f"run-{time.monotonic_ns()}"
    argv = [sys.executable, "-m", "netbench", "inventory", "--hosts", str(hosts_file), "--ssh-config",
            str(cfg), "--python", PY_NO_TORCH, "--out", str(out), *extra]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr, read_jsonl(out / "inventory.jsonl").records


@pytest.fixture
def fleet(netns_factory, tmp_path: Path) -> TestNetwork:
    """h0..h3: GPU nodes with fake tools (h2's NICs on older firmware); h4: a node whose sshd is down."""
    good = make_fake_tools(tmp_path / "tools-good", GPU_PROFILE)
    old = older_firmware_profile(tmp_path / "old")
    old.pop("hostname", None)
    old_tools = make_fake_tools(tmp_path / "tools-old", old)
    tools = {"h0": good, "h1": good, "h2": old_tools, "h3": good}
    net = netns_factory(5, tools=tools)
    net.stop_sshd("h4")
    return net


def by_host(records: list[dict]) -> dict[str, dict]:
    return {r["host"]: r for r in records}


def test_fleet_inventory_marks_old_firmware_and_reports_failures(fleet: TestNetwork, tmp_path: Path) -> None:
    kh = fleet.write_known_hosts(tmp_path / "known_hosts", hosts=["h0", "h2", "h3", "h4"])  # h1 unknown
    rc, out, err, recs = inventory(fleet, tmp_path, None, known_hosts=kh)
    assert rc == 1, err
    recs_by = by_host(recs)
    assert [r["host"] for r in recs] == ["h0", "h1", "h2", "h3", "h4"]
    assert recs_by["h4"]["status"] == "unreachable" and "refused" in recs_by["h4"]["error"]
    assert recs_by["h1"]["status"] == "host_key_refused"
    for h in ("h0", "h2", "h3"):
        r = recs_by[h]
        assert r["status"] in ("ok", "partial") and r["hostname"] == h
        assert [g["name"] for g in r["gpus"]] == ["NVIDIA H200"] and r["driver_version"] == "580.159.04"
    fw = {h: {n["firmware"] for n in recs_by[h]["nics"] if n["hca_type"] == "MT4129"}
          for h in ("h0", "h2", "h3")}
    assert fw == {"h0": {"28.41.1000"}, "h2": {"28.35.1012"}, "h3": {"28.41.1000"}}

    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln[:2] in ("h0", "h1", "h2", "h3", "h4")}
    fw_cell = next(c for c in lines["h2"].split() if "28.35.1012" in c)
    assert fw_cell.endswith("*") and "*" not in lines["h0"] and "*" not in lines["h3"]
    assert "unreachable" in lines["h4"] and "host_key_refused" in lines["h1"]
    assert "differs from the majority" in out and "\x1b[" not in out  # no colour when not a tty
    run = json.loads((next(tmp_path.glob("run-*")) / "run.json").read_text())
    assert run["status"] == "failed" and sorted(run["failed_hosts"]) == ["h1", "h4"]


def test_new_keys_recorded_on_opt_in_changed_key_refused(fleet: TestNetwork, tmp_path: Path) -> None:
    kh = fleet.write_known_hosts(tmp_path / "known_hosts", hosts=["h0"])
    accept = "--accept-new-host-keys"
    rc, _, err, recs = inventory(fleet, tmp_path, ["h0", "h1", "h3"], accept, known_hosts=kh)
    assert rc == 0, err
    assert all(r["status"] in ("ok", "partial") for r in recs)
    lines = kh.read_text().splitlines()
    for h in ("h1", "h3"):
        assert fleet.host(h).host_key_line() in lines

    fleet.regenerate_host_key("h3")
    rc, out, err, recs = inventory(fleet, tmp_path, ["h0", "h3"], "--accept-new-host-keys", "--json",
                                   known_hosts=kh)
    assert rc == 1
    h3 = by_host(recs)["h3"]
    assert h3["status"] == "host_key_refused" and "CHANGED" in h3["error"]
    assert by_host(json.loads(out))["h3"]["status"] == "host_key_refused"  # --json prints the records
    assert fleet.host("h3").host_key_line() not in kh.read_text()


def test_hanging_probe_is_cut_by_the_timeout(netns_factory, tmp_path: Path) -> None:
    hang = make_fake_tools(tmp_path / "hang", {**GPU_PROFILE, "nvidia-smi -q -x": "@sleep:300"})
    net = netns_factory(2, tools={"h1": hang})
    t0 = time.monotonic()
    rc, _, err, recs = inventory(net, tmp_path, None, "--timeout", "3")
    assert rc == 1 and time.monotonic() - t0 < 30, err
    assert by_host(recs)["h1"]["status"] == "timeout" and by_host(recs)["h0"]["status"] in ("ok", "partial")
    time.sleep(0.3)
    leftovers = [p for p in net.pids("h1") if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep")]
    assert leftovers == []


def test_python_label_and_topology(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(2)
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"h0 python={sys.executable}\nh1\n")
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=leafA Nodes=h0\nSwitchName=leafB Nodes=h[1-1]\n"
                    "SwitchName=spine Switches=leaf[A]\n")
    cfg = net.write_ssh_config(tmp_path / "cfg")
    argv = [sys.executable, "-m", "netbench", "inventory", "--hosts", str(hosts), "--ssh-config", str(cfg),
            "--python", PY_NO_TORCH, "--topology", str(topo), "--json", "--out", str(tmp_path / "run")]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    recs = by_host(json.loads(r.stdout))
    assert recs["h0"]["torch_version"] and recs["h1"]["torch_version"] is None  # venv python has torch
    assert recs["h1"]["python_version"] == subprocess.run(
        [PY_NO_TORCH, "-c", "import platform; print(platform.python_version())"],
        capture_output=True, text=True).stdout.strip()
    assert [n["switch"] for n in recs["h1"]["neighbors"] if n["source"] == "topology"] == ["leafB"]
    assert "bad Switches list" in r.stderr  # leaf[A] is not a hostlist: a warning, not a crash


def test_ctrl_c_stops_quickly_and_kills_remote_probes(netns_factory, tmp_path: Path) -> None:
    hang = make_fake_tools(tmp_path / "hang", {**GPU_PROFILE, "nvidia-smi -q -x": "@sleep:300"})
    net = netns_factory(3, tools={"h0": hang, "h1": hang, "h2": hang})
    cfg = net.write_ssh_config(tmp_path / "ssh_config")
    argv = [sys.executable, "-m", "netbench", "inventory", "--hosts", str(net.hosts_file(tmp_path / "h.txt")),
            "--ssh-config", str(cfg), "--python", PY_NO_TORCH, "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def sleepers() -> list[int]:
        out = []
        for p in (p for h in net.names for p in net.pids(h)):
            try:
                if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep"):
                    out.append(p)
            except OSError:
                pass
        return out

    deadline = time.monotonic() + 30
    while len(sleepers()) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(sleepers()) == 3
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err and time.monotonic() - t0 < 5
    time.sleep(0.3)
    assert sleepers() == []
