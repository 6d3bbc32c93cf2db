"""GPU topology parsers: ``nvidia-smi topo -m`` / ``-p2p``, NCCL topology XML, ``nvlink --status``."""

from __future__ import annotations

import pytest
from fixtures_path import read_fixture
from netbench.inventory.parsers.nccl_topo_xml import parse_nccl_topo_xml
from netbench.inventory.parsers.nvlink_status import gpu_uuids, parse_nvlink_status
from netbench.inventory.parsers.topo_matrix import nvlink_count, parse_topo_matrix, parse_topo_p2p, relation

TOPO = "public/nvidia-smi-topo-m/"


def test_h200_topo_ansi_and_spacer_cell() -> None:
    t = parse_topo_matrix(read_fixture("h200-node/nvidia-smi-topo-m.txt"))
    assert t.devices == ["GPU0"]
    assert t.relations == {"GPU0": {"GPU0": "X"}}
    assert t.cpu_affinity == {"GPU0": "0-15"} and t.numa_affinity == {"GPU0": "0"}
    assert t.gpu_numa_id == {} and t.nic_names == {}  # GPU NUMA ID N/A; no NIC


def test_h200_p2p() -> None:
    assert parse_topo_p2p(read_fixture("h200-node/nvidia-smi-topo-p2p-r.txt")) == {"GPU0": {"GPU0": "X"}}


def test_a100_tab_separated_nv12_ten_nics() -> None:
    t = parse_topo_matrix(
        read_fixture(TOPO + "oyanghd-gpu-compress-decompress__project_description_EN.md_gpu-topo.txt")
    )
    assert len(t.devices) == 18
    assert relation(t, "GPU0", "GPU1") == "NV12" and nvlink_count(relation(t, "GPU0", "GPU1")) == 12
    assert relation(t, "GPU0", "NIC0") == "PXB" and relation(t, "GPU0", "mlx5_2") == "SYS"
    assert relation(t, "NIC8", "NIC9") == "PIX"
    assert t.nic_names["NIC0"] == "mlx5_0" and t.nic_names["NIC9"] == "mlx5_9"
    assert t.cpu_affinity["GPU4"] == "112-127,240-255" and t.numa_affinity["GPU4"] == "7"
    assert "NIC0" not in t.cpu_affinity and t.gpu_numa_id == {}


def test_b300_ansi_header_gpu_numa_id_and_bond() -> None:
    t = parse_topo_matrix(read_fixture(TOPO + "sgl-project-sglang__issue-26039_B300-SXM6_topo.txt"))
    assert t.devices[:8] == [f"GPU{i}" for i in range(8)] and t.devices[-1] == "NIC8"
    assert relation(t, "GPU3", "GPU5") == "NV18"
    assert relation(t, "GPU0", "NIC0") == "PXB" and relation(t, "GPU4", "NIC8") == "NODE"
    assert t.nic_names["NIC0"] == "mlx5_10" and t.nic_names["NIC8"] == "mlx5_bond_0"
    assert t.numa_affinity["GPU7"] == "1" and t.cpu_affinity["GPU0"] == "0-63,128-191"
    assert t.gpu_numa_id == {}  # every GPU NUMA ID is N/A


def test_space_aligned_ada() -> None:
    t = parse_topo_matrix(read_fixture(TOPO + "luigifcruz-stelline__asus-esc8000a-e12.md_topo.txt"))
    assert t.devices == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2", "NIC3"]
    assert relation(t, "GPU0", "GPU1") == "NODE" and relation(t, "GPU0", "GPU2") == "SYS"
    assert relation(t, "NIC0", "NIC1") == "PIX" and relation(t, "NIC3", "NIC3") == "X"
    assert t.numa_affinity == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}
    assert t.cpu_affinity["GPU2"] == "32-63" and t.nic_names["NIC3"] == "mlx5_3"


def test_v100_nic_as_column_no_legend() -> None:
    t = parse_topo_matrix(
        read_fixture(TOPO + "Oneflow-Inc-DLPerf__dlperf_benchmark_test_report_v1.md_topo.txt")
    )
    assert t.devices[-1] == "mlx5_0" and t.nic_names == {"mlx5_0": "mlx5_0"}
    assert relation(t, "GPU0", "GPU1") == "NV1" and relation(t, "GPU0", "GPU3") == "NV2"
    assert relation(t, "GPU2", "mlx5_0") == "PIX" and relation(t, "mlx5_0", "GPU4") == "SYS"
    assert t.cpu_affinity["GPU7"] == "12-23,36-47" and t.numa_affinity == {}


def test_k40_soc_legend() -> None:
    t = parse_topo_matrix(read_fixture(TOPO + "tensorflow-tensorflow__contrib_gdr_README.md_topo.txt"))
    assert relation(t, "GPU0", "GPU2") == "SOC" and relation(t, "GPU2", "mlx4_0") == "PHB"
    assert t.cpu_affinity == {"GPU0": "0-5", "GPU1": "0-5", "GPU2": "6-11", "GPU3": "6-11"}


def test_topo_rejects_other_text() -> None:
    with pytest.raises(ValueError):
        parse_topo_matrix("nvidia-smi: command not found\n")


def test_nccl_topo_h200_dump() -> None:
    t = parse_nccl_topo_xml(read_fixture("h200-node/nccl-topo.xml"))
    (g,) = t.gpus
    assert (g.busid, g.dev, g.sm, g.numa, g.link_width) == ("0000:00:06.0", 0, 90, None, None)
    assert g.link_speed == "32.0 GT/s PCIe"
    (n,) = t.nics
    assert (n.name, n.speed_mbps, n.gdr) == ("eth0", 10000.0, False)


def test_nccl_topo_ibm_h100_dump() -> None:
    t = parse_nccl_topo_xml(
        read_fixture("public/nccl-topo-xml/ibm-cloud-docs-vpc__cn-h100-profile.md_nccl-topo-dump.xml")
    )
    assert len(t.gpus) == 8 and len(t.nics) == 8 and t.numa_nodes == [0, 1]
    g0 = next(g for g in t.gpus if g.dev == 0)
    assert g0.busid == "0000:a4:00.0" and g0.sm == 90 and g0.numa == 0
    assert g0.nvlinks == {"0000:f5:00.0": 5, "0000:f4:00.0": 5, "0000:f3:00.0": 4, "0000:f6:00.0": 4}
    n7 = next(n for n in t.nics if n.name == "mlx5_7")
    assert (n7.busid, n7.speed_mbps, n7.port, n7.gdr) == ("0000:a3:00.0", 200000.0, 1, True)


@pytest.mark.parametrize(
    ("name", "numa", "speed"),
    [
        ("Azure-azhpc-images__ndv5-topo.xml", [0, 1], "32.0 GT/s PCIe"),
        ("Azure-azhpc-images__ndv4-topo.xml", [0, 1, 2, 3], "16 GT/s"),
    ],
)
def test_nccl_topo_azure_inputs(name: str, numa: list[int], speed: str) -> None:
    t = parse_nccl_topo_xml(read_fixture(f"public/nccl-topo-xml/{name}"))
    assert len(t.gpus) == 8 and len(t.nics) == 8 and t.numa_nodes == numa
    assert all(g.link_width == 16 and g.link_speed == speed and g.dev is None for g in t.gpus)


def test_nvlink_status_a100() -> None:
    text = read_fixture("public/nvidia-smi-nvlink-status/leptonai-gpud__nvidia-smi.nvlink.status.a100")
    links = parse_nvlink_status(text)
    assert len(links) == 8 * 12
    assert {(lk.gpu, lk.link) for lk in links} == {(g, i) for g in range(8) for i in range(12)}
    assert all(lk.up and lk.speed_GBps == 25.0 for lk in links)
    assert gpu_uuids(text)[0] == "GPU-5269b708-678a-b1a8-60f0-c90406537486"


def test_nvlink_inactive_links() -> None:
    text = "GPU 0: NVIDIA H100 (UUID: GPU-x)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
    links = parse_nvlink_status(text)
    assert [(lk.link, lk.up, lk.speed_GBps) for lk in links] == [(0, True, 26.562), (1, False, None)]
