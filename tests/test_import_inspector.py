"""``netbench import inspector``: NCCL Inspector logs derived from the format's definition
(tests/data/inspector/SOURCES.md), and lines that are not Inspector records."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from netbench.cli import cli
from netbench.importers.inspector import read_logs, slow_ranks

DATA = Path(__file__).parent / "data" / "inspector"


def test_late_rank_is_named_with_its_host(tmp_path: Path) -> None:
    [s], summary = slow_ranks(read_logs([DATA / "late-rank6"]))
    assert (s.rank, s.host, s.collectives) == (6, "node-b", 60)
    assert s.collectives_slow >= 55 and 300 < s.wait_us < 500 and s.p_value < 1e-6
    # its own busbw is the best: Inspector's bandwidth blames the ranks that waited
    assert s.busbw_GBps == max(v["median_busbw_GBps"] for v in summary.values())
    out = str(tmp_path / "r")
    res = CliRunner().invoke(cli, ["import", "inspector", str(DATA / "late-rank6"), "--out", out])
    assert res.exit_code == 1, res.output  # a warning
    found = json.loads((tmp_path / "r" / "findings.json").read_text())["findings"]
    assert [(f["rule"], f["subject"], f["evidence"]["rank"]) for f in found] == [
        ("inspector_slow_rank", "node-b", 6)]


def test_nobody_late_names_no_one() -> None:
    slow, summary = slow_ranks(read_logs([DATA / "no-late"]))
    assert slow == [] and len(summary) == 8


def test_bad_lines_are_left_out_and_a_file_without_records_is_one_line(tmp_path: Path) -> None:
    good = (DATA / "late-rank6" / "node-a-pid4000.log").read_text().splitlines()
    mixed = tmp_path / "mixed.log"
    mixed.write_text("\n".join(good[:3] + ["{not json", '{"header": {"rank": -1}}', "[1,2]"]) + "\n")
    log = read_logs([mixed])
    assert len(log.records) == 3 and log.left_out == 3
    (tmp_path / "junk.log").write_text("hello\n")
    res = CliRunner().invoke(cli, ["import", "inspector", str(tmp_path / "junk.log"), "--no-report"])
    assert res.exit_code == 2 and "no NCCL Inspector collective records" in res.output
    assert "Traceback" not in res.output
