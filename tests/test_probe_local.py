"""probe.sh + assemble + local: run the real script with sh, on this machine and with fake node tools."""

from __future__ import annotations

import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fake_tools import (
    H200_PROFILE,
    fake_netdevs,
    h200_sysfs_ib,
    make_fake_tools,
    older_firmware_profile,
    probe_env,
)
from netbench.inventory.assemble import Section, build_inventory, split_sections
from netbench.inventory.local import probe_local, read_probe_script
from netbench.inventory.model import NodeInventory

EXPECTED_SECTIONS = {
    "lldp",
    "uname",
    "hostname",
    "os-release",
    "lscpu",
    "numactl",
    "nvidia-smi-q-x",
    "nvidia-smi-topo",
    "nvidia-smi-nvlink",
    "proc-driver",
    "ibstat",
    "ibv_devinfo",
    "sysfs-ib",
    "ofed",
    "nccl-system",
    "python",
    "nccl-debug",
    "end",
}


def _fake_probe(tmp_path: Path, profile: dict[str, str], **kw) -> NodeInventory:
    bin_dir = make_fake_tools(tmp_path / "bin", profile)
    env = probe_env(
        bin_dir, ib_sysfs=kw.pop("ib_sysfs", h200_sysfs_ib()), net_sysfs=fake_netdevs(tmp_path, ["ens1f0np0"])
    )
    env.update(kw.pop("env", {}))
    return probe_local(env=env, host="gpu-node01", **kw)


def test_probe_script_is_package_data_and_posix() -> None:
    script = read_probe_script()
    assert script.startswith("#!/bin/sh") and "@@netbench-section" in script
    code = "\n".join(ln for ln in script.splitlines() if not ln.lstrip().startswith("#"))
    for bashism in (r"\[\[", r"^\s*function\s", r"^\s*local\s", r"\$'\\", "<<<", "pipefail", r"\$\{!",
                    r"^\s*source\s", r"\becho -e\b", r"&>"):
        assert not re.search(bashism, code, re.M), bashism
    if shutil.which("dash"):
        subprocess.run(["dash", "-n"], input=script.encode(), check=True)


@pytest.mark.parametrize("shell", ["sh", "dash"])
def test_probe_prints_every_section(shell: str) -> None:
    if not shutil.which(shell):
        pytest.skip(f"{shell} not installed")
    out = subprocess.run(
        [shell, "-s", "--", sys.executable, "n0nce"],
        input=read_probe_script().encode(),
        capture_output=True,
        timeout=120,
        check=True,
    ).stdout.decode()
    sections = split_sections(out, nonce="n0nce")
    assert EXPECTED_SECTIONS <= set(sections)
    assert sections["uname"].rc == 0 and platform.release() in sections["uname"].text


def test_probe_local_on_this_machine() -> None:
    inv = probe_local(timeout=120)
    assert inv.status == "ok", inv.error
    assert inv.hostname == socket.gethostname()
    assert inv.kernel == platform.release()
    assert inv.python_version == platform.python_version()
    import torch

    assert inv.torch_version == torch.__version__
    assert inv.cpu_cores and inv.cpu_model
    assert inv.probe_seconds and inv.probe_seconds > 0
    if shutil.which("nvidia-smi") is None:
        assert inv.gpus == [] and inv.missing["gpus"] == "nvidia-smi not installed"
        assert inv.missing["driver_version"] == "nvidia-smi not installed"
    # Round trip through the run-directory form.
    assert NodeInventory.from_dict(inv.to_dict()) == inv


def _package(root: Path, version: str, body: str) -> Path:
    """An ``nccl`` package (``nccl.bindings.nccl``) with its distribution's metadata, as pip lays
    out nccl4py: what the probe's python finds on its path."""
    mod = root / "nccl" / "bindings"
    mod.mkdir(parents=True)
    (root / "nccl" / "__init__.py").write_text("")
    (mod / "__init__.py").write_text("")
    (mod / "nccl.py").write_text(body)
    meta = root / f"nccl4py-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: nccl4py\nVersion: {version}\n")
    return root


def test_probe_reports_nccl4py(tmp_path: Path) -> None:
    """The real probe, the real assembler: nccl4py importable, installed but broken, and absent."""
    from netbench.run.planner import HostCaps

    ok = _package(tmp_path / "ok", "0.6.0", "def get_version():\n    return 22809\n")
    fails = "raise ImportError('libnccl.so.2: cannot open shared object')\n"
    broken = _package(tmp_path / "broken", "0.6.0", fails)
    good = probe_local(env={"PYTHONPATH": str(ok)}, timeout=120)
    assert (good.nccl4py, good.nccl4py_version) == (True, "0.6.0") and "nccl4py" not in good.missing
    bad = probe_local(env={"PYTHONPATH": str(broken)}, timeout=120)
    assert (bad.nccl4py, bad.nccl4py_version) == (False, "0.6.0")
    assert bad.missing["nccl4py"] == (
        "nccl4py 0.6.0 is installed but does not import: ImportError: libnccl.so.2: cannot open shared object"
    )
    # the planner reads the record as is, and after the run directory's round trip
    caps = [HostCaps.of(n.host, NodeInventory.from_dict(n.to_dict())) for n in (good, bad)]
    assert [c.nccl4py for c in caps] == [True, False] and "libnccl.so.2" in (caps[1].nccl4py_error or "")
    try:
        import nccl.bindings.nccl  # noqa: F401
    except ImportError:
        none = probe_local(timeout=120)
        assert none.nccl4py is False and none.nccl4py_version is None
        assert none.missing["nccl4py"] == "does not import: ModuleNotFoundError: No module named 'nccl'"


def test_fake_h200_node(tmp_path: Path) -> None:
    inv = _fake_probe(tmp_path, H200_PROFILE)
    assert inv.status == "ok", inv.error
    assert inv.hostname == "gpu-node01"
    (gpu,) = inv.gpus
    assert (gpu.name, gpu.uuid, gpu.vbios) == (
        "NVIDIA H200",
        "GPU-6305c069-977a-3612-ce00-a70a76997522",
        "96.00.A5.00.1A",
    )
    assert (gpu.memory_total_mib, gpu.numa_node) == (143771, 0)  # NUMA node from topo -m
    assert (inv.driver_version, inv.cuda_version) == ("580.159.04", "13.0")
    assert inv.topo is not None and inv.topo.cpu_affinity == {"GPU0": "0-15"}
    assert "nvlinks" in inv.missing and "rc=2" in inv.missing["nvlinks"]
    nics = {n.name: n for n in inv.nics}
    # ibstat (9 CAs) merged with sysfs (adds the PSID) and ibv_devinfo (mlx5_0's board id already set).
    assert set(nics) >= {"mlx5_0", "mlx5_1", "mlx5_bond_0"}
    assert (nics["mlx5_0"].firmware, nics["mlx5_0"].rate_gbps, nics["mlx5_0"].board_id) == (
        "28.41.1000",
        400.0,
        "MT_0000000838",
    )
    assert (nics["mlx5_bond_0"].firmware, nics["mlx5_bond_0"].hca_type) == ("32.38.3056", "MT41692")
    eth = nics["ens1f0np0"]  # an Ethernet port known only from ethtool -i
    assert (eth.driver, eth.driver_version, eth.firmware, eth.board_id) == (
        "mlx5_core",
        "23.10-1.1.9",
        "28.39.3560",
        "MT_0000000838",
    )
    neighbors = {(n.local_port, n.switch, n.switch_port, n.source) for n in inv.neighbors}
    assert ("ens1f0np0", "leaf01", "swp1", "lldp") in neighbors
    assert ("mlx5_0", "leaf01", "1", "iblinkinfo") in neighbors
    assert inv.switch() == "leaf01"
    assert inv.ofed_version == "MLNX_OFED_LINUX-23.07-0.5.1.2"
    # nvidia-smi is faked but this machine's torch has no GPU: the NCCL init says so, not a blank.
    if inv.torch_cuda_available is False:
        assert inv.nccl is None and "sees no CUDA device" in inv.missing["nccl"]
    assert inv.missing["numa_nodes"] if inv.numa_nodes is None else inv.numa_nodes >= 1


def test_fake_node_with_older_firmware(tmp_path: Path) -> None:
    inv = _fake_probe(tmp_path, older_firmware_profile(tmp_path, "28.35.1012"))
    cx7 = [n for n in inv.nics if n.hca_type == "MT4129"]
    assert len(cx7) == 8 and {n.firmware for n in cx7} == {"28.35.1012"}  # ibstat wins over sysfs
    from netbench.inventory.versions import compare_versions

    assert compare_versions(cx7[0].firmware, "28.41.1000") < 0


def test_ibstat_panic_keeps_partial_nics(tmp_path: Path) -> None:
    profile = {
        **H200_PROFILE,
        "ibstat": "public/ibstat/leptonai-gpud__ibstat.39.0.a100.failed.ibpanic.exit-255.0#rc=255",
    }
    inv = _fake_probe(tmp_path, profile, ib_sysfs=tmp_path / "none")
    ib = [n for n in inv.nics if n.name.startswith("mlx5_")]
    assert [n.name for n in ib] == [f"mlx5_{i}" for i in range(8)]
    assert {n.firmware for n in ib} == {"20.41.1000"}
    assert "mlx5_8" in inv.missing["nics:ibstat"]


def test_tool_timeout_is_recorded(tmp_path: Path) -> None:
    profile = {**H200_PROFILE, "nvidia-smi -q -x": "@sleep:5"}
    inv = _fake_probe(tmp_path, profile, env={"NETBENCH_PROBE_TIMEOUT": "1"})
    assert inv.missing["gpus"] == "nvidia-smi-q-x timed out" and inv.gpus == []
    assert inv.topo is not None  # the other nvidia-smi calls still ran


def test_parse_error_costs_one_field() -> None:
    sections = split_sections(
        "@@netbench-section uname rc=0@@\nLinux n1 6.8.0 #1 SMP x86_64 GNU/Linux\n"
        "@@netbench-section nvidia-smi-q-x rc=0@@\n<nvidia_smi_log><gpu>\n"
        "@@netbench-section lldp rc=0@@\n{not json\n"
        "@@netbench-section end rc=0@@\n"
    )
    inv = build_inventory("n1", sections, labels={"switch": "leaf07"})
    assert inv.kernel == "6.8.0" and inv.hostname == "n1"
    assert inv.missing["gpus"].startswith("parse error in nvidia-smi-q-x:")
    assert inv.missing["neighbors"].startswith("parse error in lldp:")
    assert inv.status == "partial" and inv.switch() == "leaf07"
    assert inv.missing["ofed_version"] == "probe output has no ofed section"


def test_truncated_output_is_partial() -> None:
    inv = build_inventory("n1", {"uname": Section("uname", 0, "Linux n1 6.8.0 x86_64")})
    assert inv.status == "partial" and "end" in (inv.error or "")


def test_forged_headers_are_ignored() -> None:
    forged = (
        "@@netbench-section lldp rc=0 nonce=abc@@\n"
        "@@netbench-section ofed rc=0@@\nMLNX_OFED_LINUX-99.0:\n"
        "@@netbench-section ofed rc=127 nonce=abc@@\nofed_info not installed\n"
        "@@netbench-section end rc=0 nonce=abc@@\n"
    )
    s = split_sections(forged, nonce="abc")
    assert s["ofed"].rc == 127 and "MLNX_OFED_LINUX-99.0" in s["lldp"].text
    # Without a nonce the later (real) section of a name wins over one forged earlier.
    plain = forged.replace(" nonce=abc", "")
    assert split_sections(plain)["ofed"].rc == 127
