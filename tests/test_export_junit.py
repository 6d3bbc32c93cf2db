"""JUnit export read back with junitparser; hostile strings survive."""

from __future__ import annotations

from junitparser import Failure, JUnitXml
from netbench.reports.export.junit import to_junit

from netbench.common.findings import Finding

HOSTILE = 'gpu-"07"\n<script>alert(1)</script> & \x1b[31m'

FINDINGS = [
    Finding(rule="slow_pair", severity="fail", subject_kind="pair", subject="gpu-01|gpu-02",
            title="pair 3.1x slower than its class", evidence={"busbw_GBps": 12.5, "median": 39.0},
            action="drain gpu-02", hosts=["gpu-02"]),
    Finding(rule="outdated_firmware", severity="warn", subject_kind="node", subject=HOSTILE,
            title=f"firmware old on {HOSTILE}", hosts=[HOSTILE]),
    Finding(rule="fabric_summary", severity="info", subject_kind="run", subject="run", title="8 nodes"),
]
RUN = {"run_id": "20261129T000000Z-abc123", "started": "2026-11-29T00:00:00+00:00",
       "netbench_version": "0.1.0"}


def parse(text: str, tmp_path) -> list:
    path = tmp_path / "junit.xml"
    path.write_text(text, encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    [suite] = list(xml)
    return suite, list(suite)


def test_counts_and_mapping(tmp_path):
    text = to_junit(FINDINGS, ["slow_pair", "outdated_firmware", "nic_down", "fabric_summary"], RUN)
    suite, cases = parse(text, tmp_path)
    # 3 findings + passing checks nic_down and fabric_summary (info does not fail a check)
    assert suite.tests == 5 and suite.failures == 1 and suite.errors == 0
    by_name = {(c.classname, c.name): c for c in cases}
    slow = by_name[("netbench.slow_pair", "pair:gpu-01|gpu-02")]
    [res] = slow.result
    assert isinstance(res, Failure) and res.type == "fail"
    assert res.message == "pair 3.1x slower than its class"
    assert "drain gpu-02" in res.text and "12.5" in res.text
    assert by_name[("netbench.nic_down", "all")].is_passed
    warn = next(c for c in cases if c.classname == "netbench.outdated_firmware")
    assert warn.is_passed and "WARN:" in warn.system_out


def test_warn_as_failure(tmp_path):
    suite, cases = parse(to_junit(FINDINGS, None, RUN, warn_as_failure=True), tmp_path)
    assert suite.tests == 3 and suite.failures == 2
    warn = next(c for c in cases if c.classname == "netbench.outdated_firmware")
    [res] = warn.result
    assert res.type == "warn"


def test_hostile_strings_survive(tmp_path):
    suite, cases = parse(to_junit(FINDINGS, None, RUN, warn_as_failure=True), tmp_path)
    warn = next(c for c in cases if c.classname == "netbench.outdated_firmware")
    clean = HOSTILE.replace("\x1b", "")  # XML 1.0 cannot carry ESC; everything else round-trips
    assert warn.name == f"node:{clean}"
    assert warn.result[0].message == f"firmware old on {clean}"
    assert "<script>" not in to_junit(FINDINGS, None, RUN)  # escaped, never raw markup


def test_empty_run_is_valid(tmp_path):
    suite, cases = parse(to_junit([], [], {}), tmp_path)
    assert suite.tests == 0 and cases == []
