"""The nvidia-smi parser (``-q -x``, what the probe runs) and /proc/driver/nvidia/version against the
captured fixtures (H200 node + public)."""

from __future__ import annotations

import pytest
from fixtures_path import read_fixture
from netbench.inventory.parsers._common import safe_xml
from netbench.inventory.parsers.nvidia_smi_xml import parse_nvidia_smi_xml
from netbench.inventory.parsers.proc_driver import parse_proc_driver

H200_UUID = "GPU-6305c069-977a-3612-ce00-a70a76997522"


def _check_h200(report) -> None:
    (g,) = report.gpus
    assert report.driver_version == "580.159.04"
    assert (g.index, g.name, g.uuid, g.serial) == (0, "NVIDIA H200", H200_UUID, "1653724060748")
    assert (g.pci_bus_id, g.vbios) == ("00000000:00:06.0", "96.00.A5.00.1A")
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) == (5, 5, 16, 16)
    assert g.memory_total_mib == 143771


def test_h200_xml() -> None:
    r = parse_nvidia_smi_xml(read_fixture("h200-node/nvidia-smi-q-x.txt"))
    _check_h200(r)
    assert r.cuda_version == "13.0"


def test_h200_proc_driver() -> None:
    p = parse_proc_driver(read_fixture("h200-node/proc-driver.txt"))
    assert (p.driver_version, p.open_kernel_module, p.gcc) == ("580.159.04", True, "15.3.0")


# file, driver, cuda, [(name, serial, bus id, vbios, gen cur/max, width cur/max, MiB)] per GPU
XML_CASES = [
    (
        "influxdata-telegraf__a100-sxm4-v12.xml",
        "535.54.03",
        "12.2",
        [
            (
                "NVIDIA A100-SXM4-80GB",
                "1650522003820",
                "00000000:01:00.0",
                "92.00.36.00.02",
                4,
                4,
                16,
                16,
                81920,
            )
        ],
    ),
    (
        "influxdata-telegraf__tesla-t4.xml",
        "515.105.01",
        "11.7",
        [("Tesla T4", None, "00000000:00:1e.0", "90.04.84.00.06", 3, 3, 8, 16, 15360)],
    ),
    (
        "influxdata-telegraf__gtx-1660-ti.xml",
        "418.43",
        "10.1",
        [("Graphics Device", None, "00000000:43:00.0", "90.16.25.00.4C", 1, 3, 16, 16, 5912)],
    ),
    (
        "influxdata-telegraf__quadro-p400.xml",
        "418.43",
        "10.1",
        [("Quadro P400", "0424418054852", "00000000:43:00.0", "86.07.3B.00.4A", 1, 3, 16, 16, 1998)],
    ),
    (
        "influxdata-telegraf__rtx-3080-v13.xml",
        "595.58.03",
        "13.2",
        [("NVIDIA GeForce RTX 3080", None, "00000000:0c:00.0", "94.02.71.40.72", 4, 4, 16, 16, 10240)],
    ),
    (
        "influxdata-telegraf__dual_a5000-v13.xml",
        "590.44.01",
        "13.1",
        [
            ("NVIDIA RTX A5000", "0123456789012", "00000000:81:00.0", "94.02.6D.00.0D", 1, 4, 16, 16, 24564),
            ("NVIDIA RTX A5000", "1234567890123", "00000000:c1:00.0", "94.02.6D.00.0D", 1, 4, 16, 16, 24564),
        ],
    ),
    (
        "influxdata-telegraf__pro-6000-maxq-blackwell-v13.xml",
        "590.44.01",
        "13.1",
        [
            (
                "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
                "0123456789012",
                "00000000:61:00.0",
                "98.02.6A.00.03",
                1,
                4,
                16,
                16,
                97887,
            )
        ],
    ),
    (
        "netdata-go.d.plugin__a100-sxm4-mig.xml",
        "510.47.03",
        "11.6",
        [
            (
                "NVIDIA A100-SXM4-40GB",
                "1324321002473",
                "00000000:00:04.0",
                "92.00.45.00.03",
                4,
                4,
                16,
                16,
                40960,
            )
        ],
    ),
    (
        "netdata-go.d.plugin__tesla-p100.xml",
        "510.47.03",
        "11.6",
        [
            (
                "Tesla P100-PCIE-16GB",
                "0324217145110",
                "00000000:00:04.0",
                "86.00.52.00.02",
                3,
                3,
                16,
                16,
                16384,
            )
        ],
    ),
    (
        "netdata-go.d.plugin__rtx-4090-driver-535.xml",
        "535.86.05",
        "12.2",
        [("NVIDIA GeForce RTX 4090", None, "00000000:84:00.0", "95.02.18.80.5F", 1, 3, 16, 16, 24564)],
    ),
]


@pytest.mark.parametrize(("name", "driver", "cuda", "gpus"), XML_CASES, ids=[c[0] for c in XML_CASES])
def test_public_xml(name: str, driver: str, cuda: str, gpus: list[tuple]) -> None:
    r = parse_nvidia_smi_xml(read_fixture(f"public/nvidia-smi-q-x/{name}"))
    assert (r.driver_version, r.cuda_version) == (driver, cuda)
    got = [
        (
            g.name,
            g.serial,
            g.pci_bus_id,
            g.vbios,
            g.pcie_gen_current,
            g.pcie_gen_max,
            g.pcie_width_current,
            g.pcie_width_max,
            g.memory_total_mib,
        )
        for g in r.gpus
    ]
    assert got == gpus
    assert [g.index for g in r.gpus] == list(range(len(gpus)))
    assert all(g.uuid and g.uuid.startswith("GPU-") for g in r.gpus)


def test_xml_doctype_is_not_fetched_and_entities_refused() -> None:
    # A DTD naming a URL is stripped, never fetched; an entity declaration is refused outright.
    root = safe_xml('<?xml version="1.0" ?>\n<!DOCTYPE x SYSTEM "http://192.0.2.1/x.dtd">\n<x>1</x>')
    assert root.tag == "x" and root.text == "1"
    bomb = '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;">]><l>&b;</l>'
    with pytest.raises(ValueError):
        safe_xml(bomb)
    with pytest.raises(ValueError):
        parse_nvidia_smi_xml("<other/>")


def test_serials_that_mean_nothing_become_none() -> None:
    xml = read_fixture("h200-node/nvidia-smi-q-x.txt")
    for fake in ("N/A", "REDACTED", "0000000000000", "[Not Supported]"):
        r = parse_nvidia_smi_xml(xml.replace("<serial>1653724060748</serial>", f"<serial>{fake}</serial>"))
        assert r.gpus[0].serial is None


def test_fabric_state_from_xml() -> None:
    # Every captured <fabric> says N/A (no NVSwitch on these GPUs): no fabric, not a failed one.
    for rel in ("h200-node/nvidia-smi-q-x.txt",
                "public/nvidia-smi-q-x/influxdata-telegraf__a100-sxm4-v12.xml",
                "public/nvidia-smi-q-x/influxdata-telegraf__pro-6000-maxq-blackwell-v13.xml"):
        text = read_fixture(rel)
        assert safe_xml(text).find("gpu/fabric/state") is not None, rel  # the element the parser reads
        assert {(g.fabric_state, g.fabric_status) for g in parse_nvidia_smi_xml(text).gpus} == {(None, None)}
    # An HGX H100's values as nvidia-smi -q printed them (public/nvidia-smi-q-text, driver 535), put in
    # the element of the real H200 XML: the state that means NVLink through the NVSwitches works.
    xml = read_fixture("h200-node/nvidia-smi-q-x.txt").replace(
        "<fabric>\n\t\t\t<state>N/A</state>\n\t\t\t<status>N/A</status>",
        "<fabric>\n\t\t\t<state>Completed</state>\n\t\t\t<status>Success</status>",
    )
    (g,) = parse_nvidia_smi_xml(xml).gpus
    assert (g.fabric_state, g.fabric_status) == ("Completed", "Success")
