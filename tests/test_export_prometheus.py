"""Prometheus export parsed back with prometheus_client's parser."""

from __future__ import annotations

from netbench.reports.export.prometheus import escape_label, hosts_label, to_prometheus
from prometheus_client.parser import text_string_to_metric_families

from netbench.common.findings import Finding

HOSTILE = 'gpu-"07"\\x\n<script>'


def row(nbytes, busbw, time_us, **kw):
    r = {"collective": "all_reduce", "pattern": "pair", "bytes": nbytes, "dtype": "float", "in_place": False,
         "hosts": ["gpu-02", HOSTILE], "busbw_GBps": busbw, "algbw_GBps": busbw / 2, "time_us": time_us,
         "status": "ok"}
    r.update(kw)
    return r


ROWS = [row(1 << 20, 10.0, 100.0), row(1 << 20, 30.0, 300.0), row(1 << 20, 20.0, 200.0),  # median 20
        row(1 << 30, 40.0, 5000.0), row(1 << 30, 1.0, 1.0, status="timeout")]
FINDINGS = [Finding(rule="slow_pair", severity="fail", subject_kind="pair", subject=HOSTILE, title="t"),
            Finding(rule="x", severity="warn", subject_kind="node", subject="gpu-02", title="t")]
RUN = {"run_id": "r1", "finished": "2026-11-29T01:02:03+00:00", "netbench_version": "0.1.0"}


def samples(text):
    out = {}
    for fam in text_string_to_metric_families(text):
        assert fam.type == "gauge" and fam.documentation
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_values_and_labels():
    text = to_prometheus(ROWS, FINDINGS, RUN)
    s = samples(text)
    bw = {int(x.labels["bytes"]): x for x in s["netbench_busbw_gbps"]}
    assert bw[1 << 20].value == 20.0 and bw[1 << 30].value == 40.0  # median; the timeout row is left out
    assert bw[1 << 20].labels["hosts"] == hosts_label(["gpu-02", HOSTILE])
    assert HOSTILE in bw[1 << 20].labels["hosts"]  # quotes, backslash and newline round-trip
    times = {int(x.labels["bytes"]): x.value for x in s["netbench_time_us"]}
    assert times == {1 << 20: 200.0, 1 << 30: 5000.0}
    sev = {x.labels["severity"]: x.value for x in s["netbench_findings"]}
    assert sev == {"info": 0, "warn": 1, "fail": 1}
    assert {x.labels["subject"] for x in s["netbench_finding"]} == {HOSTILE, "gpu-02"}
    assert s["netbench_run_timestamp_seconds"][0].value == 1795914123.0
    assert s["netbench_run_info"][0].labels["run_id"] == "r1"
    assert text.endswith("\n")


def test_no_rows_no_findings():
    s = samples(to_prometheus([], [], {}))
    assert {x.value for x in s["netbench_findings"]} == {0}
    assert "netbench_busbw_gbps" not in s and "netbench_run_timestamp_seconds" not in s


def test_escape_and_big_groups():
    assert escape_label('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    assert hosts_label([f"n{i:03d}" for i in range(100)]) == "n000..n099 (100 hosts)"
