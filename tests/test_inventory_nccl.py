"""The probe's NCCL sections (``nccl-debug``: an NCCL_DEBUG=INFO init log, ``nccl-topo``: its
NCCL_TOPO_DUMP_FILE) into ``NodeInventory.nccl``, from the real captures in the shared fixtures."""

from __future__ import annotations

from fixtures_path import read_fixture
from netbench.inventory.assemble import Section, build_inventory
from netbench.inventory.model import NcclView, NodeInventory

H200_LOG = read_fixture("h200-node/nccl-debug-init.txt")
H200_TOPO = read_fixture("h200-node/nccl-topo.xml")
IBM_H100_TOPO = read_fixture("public/nccl-topo-xml/ibm-cloud-docs-vpc__cn-h100-profile.md_nccl-topo-dump.xml")


def _inv(*sections: Section) -> NodeInventory:
    return build_inventory("n1", {s.name: s for s in (*sections, Section("end", 0, ""))})


def test_h200_vm_nccl_fell_back_to_sockets() -> None:
    # The VM has no HCA: NCCL tried IB, found no device, and sends over eth0 without GDR.
    inv = _inv(Section("nccl-debug", 0, H200_LOG), Section("nccl-topo", 0, H200_TOPO))
    assert inv.nccl == NcclView(version="2.28.9", network="Socket", net_devices=["eth0"],
                                nic_gdr={"eth0": False})
    assert "nccl" not in inv.missing and inv.status == "ok"


def test_h100_dump_names_the_gdr_nics() -> None:
    inv = _inv(Section("nccl-debug", 0, H200_LOG), Section("nccl-topo", 0, IBM_H100_TOPO))
    assert inv.nccl is not None and inv.nccl.nic_gdr == {f"mlx5_{i}": True for i in range(8)}


def test_failed_init_keeps_what_the_log_says_and_why() -> None:
    inv = _inv(Section("nccl-debug", 1, H200_LOG), Section("nccl-topo", 1, "NCCL wrote no topology dump"))
    assert inv.nccl is not None and inv.nccl.network == "Socket" and inv.nccl.nic_gdr == {}
    last = H200_LOG.strip().splitlines()[-1].strip()
    assert inv.missing["nccl"] == f"NCCL init failed (rc=1): {last}"[:200]


def test_no_gpu_or_skipped_is_a_reason_not_a_blank() -> None:
    inv = _inv(Section("nccl-debug", 127, "nvidia-smi not installed (no GPU for NCCL)"))
    assert inv.nccl is None and inv.missing["nccl"] == "nvidia-smi not installed (no GPU for NCCL)"
    inv = _inv(Section("nccl-debug", 3, "torch 2.13.0+cpu sees no CUDA device"))
    assert inv.nccl is None
    assert inv.missing["nccl"] == "nccl-debug failed (rc=3): torch 2.13.0+cpu sees no CUDA device"
    assert _inv().missing["nccl"] == "probe output has no nccl-debug section"


def test_a_bad_dump_costs_only_the_gdr_map() -> None:
    inv = _inv(Section("nccl-debug", 0, H200_LOG), Section("nccl-topo", 0, "<other/>"))
    assert inv.nccl is not None and inv.nccl.version == "2.28.9" and inv.nccl.nic_gdr == {}
    assert inv.missing["nccl:topo"].startswith("parse error in nccl-topo:")


def test_records_round_trip_and_older_records_load() -> None:
    inv = _inv(Section("nccl-debug", 0, H200_LOG), Section("nccl-topo", 0, H200_TOPO),
               Section("nvidia-smi-q-x", 0, read_fixture("h200-node/nvidia-smi-q-x.txt")))
    assert NodeInventory.from_dict(inv.to_dict()) == inv
    old = inv.to_dict()
    del old["nccl"]  # a record written before these fields existed
    for g in old["gpus"]:
        del g["fabric_state"], g["fabric_status"]
    back = NodeInventory.from_dict(old)
    assert back.nccl is None and back.gpus[0].name == "NVIDIA H200" and back.gpus[0].fabric_state is None
