"""Every fixture file under h200-node/ and public/ is read by a parser into something non-empty, or is
listed in RETIRED with the reason its parser was removed.

The per-format tests check the values; this one makes sure no fixture is left without a parser (a
new fixture with no entry here fails the test). Host lists and Slurm topology files are parsed by
netbench.inventory.hosts / netbench.inventory.topology and tested there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures_path import fixture_files, fixtures_dir
from netbench.inventory.parsers import (
    ethtool,
    iblinkinfo,
    ibnetdiscover,
    ibstat,
    ibv_devinfo,
    lldp_json,
    lscpu,
    nccl_debug,
    nccl_topo_xml,
    numactl,
    nvidia_smi_xml,
    nvlink_status,
    ofed,
    os_release,
    proc_driver,
    sysfs_ib,
    topo_matrix,
    uname,
)

OWNED_ELSEWHERE = {"public/hostfile", "public/slurm-topology.conf"}

# Fixtures whose parser was removed because the inventory gets the same facts from a command it
# already runs (branch parsers: nine parsers were never called by the inventory). Each entry names
# why, so a fixture is never left without a parser silently; an entry whose fixture is gone fails
# test_retired_fixtures_exist, and every other fixture must still parse below.
RETIRED: dict[str, str] = {
    "h200-node/nvcc.txt": "nvcc is a compiler, not in the data path: the CUDA the ranks run is "
    "torch_cuda_build, the driver's is cuda_version",
    "h200-node/nvidia-smi-L.txt": "index, name and UUID are in nvidia-smi -q -x",
    "h200-node/nvidia-smi-q.txt": "the same facts as nvidia-smi -q -x, which the probe runs "
    "(the NVSwitch fabric state is read from the XML)",
    "h200-node/nvidia-smi-query.txt": "every column it read is in nvidia-smi -q -x",
    "h200-node/nvidia-smi-version.txt": "driver and CUDA versions are in nvidia-smi -q -x and "
    "/proc/driver/nvidia/version",
    "public/nvidia-smi-q-text": "the same facts as nvidia-smi -q -x, which the probe runs",
    "public/ibstatus": "a script over /sys/class/infiniband: ibstat and the sysfs section give the "
    "same port state, rate and link layer, plus firmware and GUIDs",
    "public/ibswitches-smpquery": "the fabric's switch list is not a node fact; the switch port each "
    "HCA is cabled to comes from iblinkinfo/ibnetdiscover",
}

H200: dict[str, Callable[[str], object]] = {
    "lscpu.txt": lambda t: lscpu.parse_lscpu(t).model,
    "nccl-debug-init.txt": lambda t: nccl_debug.parse_nccl_debug(t).version,
    "nccl-topo.xml": lambda t: nccl_topo_xml.parse_nccl_topo_xml(t).gpus,
    "numactl.txt": lambda t: numactl.parse_numactl(t).nodes,
    "nvidia-smi-q-x.txt": lambda t: nvidia_smi_xml.parse_nvidia_smi_xml(t).gpus,
    "nvidia-smi-topo-m.txt": lambda t: topo_matrix.parse_topo_matrix(t).relations,
    "nvidia-smi-topo-p2p-r.txt": topo_matrix.parse_topo_p2p,
    "os-release.txt": os_release.pretty_name,
    "proc-driver.txt": lambda t: proc_driver.parse_proc_driver(t).driver_version,
    "uname.txt": lambda t: uname.parse_uname(t).kernel,
}


def _public(path: Path, text: str) -> object:
    kind = path.relative_to(fixtures_dir() / "public").parts[0]
    if kind == "ibnetdiscover" and path.name.endswith("fabric.net.input"):
        return "ibsim input (not discovery output; see test_parsers_fabric)"
    if kind == "lldpctl-json":
        return (lldp_json.parse_lldp_keyvalue if path.suffix == ".txt" else lldp_json.parse_lldp_json)(text)
    if kind == "sysfs-infiniband":
        return (
            sysfs_ib.parse_sysfs_ib(f"{path.parent.name}/{path.name}: {text}")
            if path.parent.name != "1"
            else (sysfs_ib.parse_sysfs_ib(f"{path.parents[2].name}/ports/1/{path.name}: {text}"))
        )
    parsers: dict[str, Callable[[str], object]] = {
        "nvidia-smi-q-x": lambda t: nvidia_smi_xml.parse_nvidia_smi_xml(t).gpus,
        "nvidia-smi-nvlink-status": nvlink_status.parse_nvlink_status,
        "nvidia-smi-topo-m": lambda t: topo_matrix.parse_topo_matrix(t).relations,
        "nccl-topo-xml": lambda t: nccl_topo_xml.parse_nccl_topo_xml(t).gpus,
        "ibstat": ibstat.parse_ibstat,
        "ibv_devinfo": ibv_devinfo.parse_ibv_devinfo,
        "ethtool-i": lambda t: ethtool.parse_ethtool_i(t, "eth0").driver,
        "ibnetdiscover": ibnetdiscover.parse_ibnetdiscover,
        "iblinkinfo": iblinkinfo.parse_iblinkinfo,
        "ofed_info": ofed.parse_ofed_info,
    }
    return parsers[kind](text)


def _all_files() -> list[Path]:
    root = fixtures_dir()
    out = []
    for p in sorted([*fixture_files("h200-node"), *fixture_files("public")]):
        rel = p.relative_to(root).as_posix()
        if (
            p.name not in ("README.md", "SOURCES.md")
            and not any(rel.startswith(o + "/") for o in OWNED_ELSEWHERE)
            and not any(rel == r or rel.startswith(r + "/") for r in RETIRED)
        ):
            out.append(p)
    return out


@pytest.mark.parametrize("path", _all_files(), ids=lambda p: p.relative_to(fixtures_dir()).as_posix())
def test_every_fixture_parses_to_something(path: Path) -> None:
    text = path.read_bytes().decode("utf-8", errors="replace")
    rel = path.relative_to(fixtures_dir())
    if rel.parts[0] == "h200-node":
        assert rel.name in H200, f"no parser registered for {rel}"
        result = H200[rel.name](text)
    else:
        assert rel.parts[0] == "public", f"unknown fixture folder {rel}"
        result = _public(path, text)
    assert result, f"{rel} parsed to nothing"


@pytest.mark.parametrize("rel", sorted(RETIRED))
def test_retired_fixtures_exist(rel: str) -> None:
    # A stale entry (fixture renamed or removed) must not keep excusing a path that no longer exists.
    assert (fixtures_dir() / rel).exists(), f"RETIRED names {rel}, which is not among the fixtures"
