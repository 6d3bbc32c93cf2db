"""``netbench import flight-recorder``: real dumps of a real hang (tests/data/flight_recorder,
SOURCES.md says how they were made), and dumps that are not what they claim."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from netbench.cli import cli
from netbench.importers.flight_recorder import collect, never_entered

DATA = Path(__file__).parent / "data" / "flight_recorder"


@pytest.mark.parametrize("folder", ["hang-gloo-pickle", "hang-gloo-json"])
def test_real_hang_names_the_rank_and_host_that_never_entered(folder: str, tmp_path: Path) -> None:
    dumps = collect([DATA / folder]).dumps
    assert [(d.rank, d.host) for d in dumps] == [(0, "h0"), (1, "h1"), (2, "h2")]
    [v] = never_entered(dumps)
    assert (v.seq, v.collective, v.entered) == (6, "gloo:all_reduce", [0, 1])
    assert (v.missing, v.missing_hosts, v.no_dump) == ([2], ["h2"], [])
    out = str(tmp_path / "r")
    res = CliRunner().invoke(cli, ["import", "flight-recorder", str(DATA / folder), "--out", out])
    assert res.exit_code == 2, res.output  # the report fails
    assert "never entered by rank 2 on h2" in res.output
    found = json.loads((tmp_path / "r" / "findings.json").read_text())["findings"]
    assert [(f["rule"], f["subject"]) for f in found] == [("collective_never_entered", "h2")]


def test_rank_without_a_dump_is_named_apart(tmp_path: Path) -> None:
    shutil.copytree(DATA / "hang-gloo-json", tmp_path / "d")
    shutil.rmtree(tmp_path / "d" / "h2")  # the hung host's dump never came back
    [v] = never_entered(collect([tmp_path / "d"]).dumps)
    assert v.missing == [] and v.no_dump == [2]


def test_a_pickle_that_would_run_code_is_refused_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    (tmp_path / "fr_trace_0").write_bytes(pickle.dumps({"entries": [Evil()]}))
    res = CliRunner().invoke(cli, ["import", "flight-recorder", str(tmp_path / "fr_trace_0"), "--no-report"])
    assert res.exit_code == 2 and not marker.exists()
    assert "not a Flight Recorder dump" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("content, why", [
    (b"\x00\x01garbage", "not a Flight Recorder dump"),
    (b'{"entries": [{"collective_seq_id": "x"}]}', "no collective_seq_id"),
    (b'{"no": 1}', "no 'entries' list"),
])
def test_bad_dumps_are_one_line_exit_2(tmp_path: Path, content: bytes, why: str) -> None:
    (tmp_path / "fr_trace_3").write_bytes(content)
    res = CliRunner().invoke(cli, ["import", "flight-recorder", str(tmp_path / "fr_trace_3"), "--no-report"])
    assert res.exit_code == 2 and why in res.output and "Traceback" not in res.output
