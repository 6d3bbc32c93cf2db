"""CSV and JSON exporters."""

from __future__ import annotations

import csv
import io
import json

import pytest
from netbench.reports.export.csv import rows_to_csv
from netbench.reports.export.json_out import dumps, to_report
from netbench.reports.verdict import judge

from netbench.common.findings import Finding
from netbench.common.rows import ResultRow


def make_row(**kw) -> dict:
    base = dict(run_id="r", collective="all_reduce", backend="gloo", pattern="world", hosts=["a", 'b,"c"'],
                ranks=4, round=None, bytes=1024, count=256, dtype="float", op="sum", in_place=False, iters=5,
                warmup=1, time_us=10.5, time_us_min=9.0, time_us_max=12.0,
                rank_time_us=[9.0, 10.0, 11.0, 12.0], algbw_GBps=0.1, busbw_GBps=0.15, wrong=0)
    base.update(kw)
    return ResultRow(**base).to_dict()


def test_csv_round_trip():
    rows = [make_row(), dict(make_row(bytes=2048, rank_time_us=None, extra={"note": "x\ny"}), custom=1)]
    text = rows_to_csv(rows)
    back = list(csv.DictReader(io.StringIO(text)))
    assert len(back) == 2
    assert back[0]["rank_time_us"] == "9.0;10.0;11.0;12.0"
    assert back[0]["hosts"] == 'a;b,"c"'
    assert back[0]["in_place"] == "false" and back[0]["round"] == ""
    assert back[1]["rank_time_us"] == "" and json.loads(back[1]["extra"]) == {"note": "x\ny"}
    assert back[1]["custom"] == "1" and list(back[0])[:3] == ["run_id", "collective", "backend"]


def test_verdict_and_report():
    fail = Finding(rule="r", severity="fail", subject_kind="node", subject="n1", title="t", hosts=["n1"])
    warn = Finding(rule="w", severity="warn", subject_kind="node", subject="n2", title="t", hosts=["n2"])
    info = Finding(rule="i", severity="info", subject_kind="run", subject="run", title="t")
    def verdict(findings: list[Finding], could_run: bool = True) -> tuple[str, int]:
        said = judge(findings, 2, could_run=could_run)
        return said.status, said.code

    assert verdict([]) == ("pass", 0) and verdict([info]) == ("pass", 0)
    assert verdict([info, warn]) == ("warn", 1) and verdict([warn, fail]) == ("fail", 2)
    assert verdict([], could_run=False) == ("error", 3)
    rep = to_report([fail, warn.to_dict(), info], {"run_id": "x"}, checks=["r", "w", "i", "z"],
                    hosts=["n2", "n1"])
    assert rep["verdict"] == "fail" and rep["exit_code"] == 2 and rep["drain"] == ["n1"]
    assert rep["counts"] == {"info": 1, "warn": 1, "fail": 1}
    assert rep["checks"]["passed"] == ["i", "z"]
    assert json.loads(dumps(rep))["findings"][1]["rule"] == "w"


@pytest.mark.parametrize(
    "hostile", ['=HYPERLINK("http://x")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx", "\r=1"]
)
def test_csv_cells_cannot_be_formulas(hostile):
    row = {**make_row(hosts=[hostile, "b"], error=hostile), hostile: "x"}  # a key from a damaged file
    back = list(csv.reader(io.StringIO(rows_to_csv([row]), newline="")))
    header, cells = back[0], dict(zip(back[0], back[1], strict=True))
    shown = "'" + hostile.replace("\r", "\n")  # a lone CR is written as LF (see _safe)
    assert shown in header
    assert cells["error"] == shown and cells["hosts"] == shown + ";b"


def test_csv_numbers_stay_numbers():
    row = make_row(root=-1, time_us=-0.5, error="-3", busbw_GBps=1e-3)
    cells = next(csv.DictReader(io.StringIO(rows_to_csv([row]))))
    got = (cells["root"], cells["time_us"], cells["error"], cells["busbw_GBps"])
    assert got == ("-1", "-0.5", "-3", "0.001")
