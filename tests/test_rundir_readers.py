"""Damaged run directories: every reader checks what it reads, ``netbench report`` always writes a
report (naming what it left out, never PASS then) or prints one error line and exits 2."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from netbench.reports.pairrows import GrowingRows, PairRows
from synthetic import make_fleet, write_run_dir

from netbench.cli import cli
from netbench.common import jsonread
from netbench.common.rows import row_problem
from netbench.common.rundir import RunDir, read_jsonl


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    fleet = make_fleet(4, 2, gpus_per_node=2, noise=0.01, seed=5)
    return write_run_dir(fleet, tmp_path_factory.mktemp("g") / "r")


def copy(good: Path, dest: Path) -> Path:
    shutil.copytree(good, dest)
    return dest


def report(run: Path, *extra: str):
    (run / "findings.json").unlink(missing_ok=True)
    res = CliRunner().invoke(cli, ["report", str(run), "--no-html", *extra])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def findings(run: Path) -> dict:
    return json.loads((run / "findings.json").read_text())


def unreadable(run: Path) -> list[dict]:
    return [f for f in findings(run)["findings"] if f["rule"] in ("unreadable_rows", "unreadable_file")]


def test_good_run_passes_and_reports_nothing_unreadable(good, tmp_path):
    run = copy(good, tmp_path / "r")
    res = report(run)
    assert res.exit_code == 0, res.output
    assert unreadable(run) == []


def edit_rows(run: Path, edits: dict[int, object]) -> None:
    """Replace lines (0-based) of results.jsonl: a dict is merged into that row, bytes replace the
    line, (field, raw JSON text) sets a field to text json.dumps would not write."""
    lines = (run / "results.jsonl").read_bytes().splitlines()
    for i, change in edits.items():
        if isinstance(change, bytes):
            lines[i] = change
        elif isinstance(change, tuple):
            lines[i] = json.dumps({**json.loads(lines[i]), change[0]: "@"}).replace('"@"', change[1]).encode()
        else:
            lines[i] = json.dumps({**json.loads(lines[i]), **change}).encode()
    (run / "results.jsonl").write_bytes(b"\n".join(lines) + b"\n")


@pytest.mark.parametrize(
    "change, reason",
    [
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
        (b'{"run_id": "x", "collec', "not JSON"),
        (b"[1, 2, 3]", "not a JSON object"),
        (b'{"busbw_GBps": NaN}', "non-finite number NaN"),
        (("busbw_GBps", "1e999"), "field 'busbw_GBps': expected a finite number"),
        ({"bytes": None}, "field 'bytes': expected an integer, got null"),
        ({"bytes": 10**400}, "field 'bytes': expected an integer, got a number out of range"),
        ({"bytes": "1M"}, "field 'bytes': expected an integer, got a string"),
        ({"hosts": "node-01"}, "field 'hosts': expected a list"),
        ({"rank_time_us": [1.0, "x"]}, "field 'rank_time_us[1]'"),
    ],
)
def test_a_bad_row_is_left_out_counted_and_named(good, tmp_path, change, reason):
    run = copy(good, tmp_path / "r")
    edit_rows(run, {2: change})
    res = report(run)
    assert res.exit_code == 1, res.output  # WARN, not PASS: a row was not read
    (f,) = unreadable(run)
    assert f["rule"] == "unreadable_rows" and f["severity"] == "warn"
    assert f["evidence"]["lines_skipped"] == 1 and f["evidence"]["line_numbers"] == [3]
    assert reason in f["title"], f["title"]
    assert f"netbench: warning: {run}/results.jsonl: 1 line(s)" in res.output  # on the terminal too


def test_a_missing_contract_field_is_a_bad_row(good, tmp_path):
    run = copy(good, tmp_path / "r")
    row = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    assert row_problem(row) is None
    del row["time_us"]
    assert row_problem(row) == "missing field 'time_us'"


def test_a_policy_cannot_turn_unreadable_data_into_a_pass(good, tmp_path):
    run = copy(good, tmp_path / "r")
    edit_rows(run, {0: b"half a li"})
    pol = tmp_path / "p.toml"
    pol.write_text('[severity]\nunreadable_rows = "info"\n')
    assert report(run, "--policy", str(pol)).exit_code == 1


@pytest.mark.parametrize(
    "name, text, reason",
    [
        ("run.json", "[1, 2]", "not a JSON object"),
        ("run.json", "{bad", "not JSON"),
        ("run.json", '{"topology": {"leaf1": [1, {}]}}', "field 'topology' is neither"),
        ("run.json", '{"options": {"topology": {"a": 5}}}', "field 'topology' is neither"),
        ("run.json", '{"argv": "netbench sweep"}', "field 'argv' is not a list"),
        ("env.json", "[]", "not a JSON object"),
        ("env.json", '{"hosts": [1]}', "'hosts' is not an object"),
        ("env.json", '{"hosts": {"node-01": "x"}}', "host 'node-01': entry is not an object"),
        ("env.json", "\ufeff{}".encode().decode("latin-1"), "not JSON"),
    ],
)
def test_a_bad_json_file_or_field_is_named(good, tmp_path, name, text, reason):
    run = copy(good, tmp_path / "r")
    (run / name).write_text(text, encoding="utf-8")
    res = report(run)
    assert res.exit_code == 1, res.output
    (f,) = unreadable(run)
    assert f["rule"] == "unreadable_file" and reason in f["title"], f["title"]


def test_inventory_of_the_wrong_shape_is_named_per_line(good, tmp_path):
    run = copy(good, tmp_path / "r")
    lines = (run / "inventory.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    lines[1] = json.dumps({**first, "labels": ["switch=leaf1"]})
    lines[2] = json.dumps({**first, "labels": {"switch": 5}})
    (run / "inventory.jsonl").write_text("\n".join(lines) + "\n")
    res = report(run)
    assert res.exit_code == 1, res.output
    (f,) = unreadable(run)
    assert f["evidence"]["line_numbers"] == [2, 3]
    assert "field 'labels': expected an object, got a list" in f["title"]


def test_non_utf8_policy_is_one_line_exit_2(good, tmp_path):
    pol = tmp_path / "p.toml"
    pol.write_bytes(b"\xff\xfe[severity]\n")
    res = report(copy(good, tmp_path / "r"), "--policy", str(pol))
    assert res.exit_code == 2 and res.output == f"netbench: error: {pol}: not UTF-8 text (byte 0)\n"


def test_non_utf8_topology_is_one_line_exit_2(good, tmp_path):
    topo = tmp_path / "t.conf"
    topo.write_bytes(b"\xff\xfeSwitchName=leaf1 Nodes=a\n")
    res = report(copy(good, tmp_path / "r"), "--topology", str(topo))
    assert res.exit_code == 2 and res.output.startswith("netbench: error: ") and res.output.count("\n") == 1


def test_a_fifo_is_refused_without_hanging(good, tmp_path):
    run = copy(good, tmp_path / "r")
    (run / "results.jsonl").unlink()
    os.mkfifo(run / "results.jsonl")
    res = report(run)
    assert res.exit_code == 2
    why = "is not a regular file (a FIFO); refusing to read it"
    assert res.output == f"netbench: error: {run}/results.jsonl {why}\n"


def test_dev_zero_as_inventory_is_refused(good, tmp_path):
    run = copy(good, tmp_path / "r")
    (run / "inventory.jsonl").unlink()
    (run / "inventory.jsonl").symlink_to("/dev/zero")
    res = report(run)
    assert res.exit_code == 2 and "is not a regular file (a character device)" in res.output


def test_an_endless_line_is_skipped_with_bounded_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonread, "MAX_LINE_BYTES", 1000)  # the reader lives there
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b"x" * 5000 + b"\n" + b'{"b": 2}\n' + b"y" * 3000)
    got = read_jsonl(path)
    assert got.records == [{"a": 1}, {"b": 2}]
    assert [(u.line, u.reason) for u in got.unreadable] == [
        (2, "line longer than 1000 bytes"),
        (4, "line longer than 1000 bytes"),
    ]


def test_write_inventory_replaces_atomically(tmp_path, monkeypatch):
    rd = RunDir.create(tmp_path / "r")
    rd.write_inventory([{"host": "a"}])
    before = rd.inventory_path.stat().st_ino
    rd.write_inventory([{"host": "b"}, {"host": "c"}])
    assert rd.inventory_path.stat().st_ino != before  # a new file renamed over the old one
    assert [n["host"] for n in rd.read_inventory()] == ["b", "c"]
    # no temporary left behind (run.json: the claim RunDir.create makes on a new run directory)
    assert sorted(p.name for p in rd.path.iterdir()) == ["inventory.jsonl", "run.json"]


# -- property: arbitrary content never crashes the report, and what was not read is never a PASS --

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
# a line that can never be a row: not starting with "{" (so not an object) or a JSON non-object
BAD_LINE = st.one_of(
    st.binary(max_size=40).filter(lambda b: b.strip() and not b.lstrip().startswith(b"{") and b"\n" not in b),
    JSON.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.text(max_size=6), JSON, max_size=4).map(lambda d: json.dumps(d).encode()),
)
LINE_EDITS = st.dictionaries(st.integers(0, 40), BAD_LINE, min_size=1, max_size=4)
FILE_CONTENT = st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode())


def _check_outcome(run: Path, res) -> dict | None:
    """exit 0/1/2 with a report, or 2 with one error line; returns findings.json when written."""
    assert res.exit_code in (0, 1, 2), res.output
    if not (run / "findings.json").exists():
        assert res.exit_code == 2 and res.output.startswith("netbench: error: ")
        assert res.output.count("\n") == 1, res.output
        return None
    return findings(run)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=LINE_EDITS)
def test_property_bad_rows_are_named_never_pass(good, tmp_path_factory, edits):
    run = copy(good, tmp_path_factory.mktemp("p") / "r")
    n = len((run / "results.jsonl").read_bytes().splitlines())
    edits = {i % n: line for i, line in edits.items()}
    edit_rows(run, edits)
    doc = _check_outcome(run, report(run))
    assert doc is not None and doc["verdict"] != "PASS"
    (f,) = [f for f in doc["findings"] if f["rule"] == "unreadable_rows"]
    assert f["evidence"]["line_numbers"] == sorted(i + 1 for i in edits)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["results.jsonl", "run.json", "env.json", "inventory.jsonl"]), FILE_CONTENT)
def test_property_any_file_content_never_crashes(good, tmp_path_factory, name, content):
    run = copy(good, tmp_path_factory.mktemp("p") / "r")
    (run / name).write_bytes(content)
    doc = _check_outcome(run, report(run))
    if doc is None:
        return
    left_out = [f for f in doc["findings"] if f["rule"] in ("unreadable_rows", "unreadable_file")]
    if left_out:
        assert doc["verdict"] != "PASS"
    if name.endswith(".json") and not content.strip().startswith(b"{"):
        assert left_out, "a non-object JSON file must be named"


def test_load_results_warns_about_what_it_left_out(good, tmp_path):
    import netbench

    run = copy(good, tmp_path / "r")
    n = len((run / "results.jsonl").read_bytes().splitlines())
    edit_rows(run, {1: b"{broken"})
    with pytest.warns(UserWarning, match=r"results.jsonl: 1 line\(s\) left out \(line 2: not JSON"):
        df = netbench.load_results(run)
    assert len(df) == n - 1


def test_growing_rows_read_only_what_was_appended(good, tmp_path):
    """The re-test loop reads the run after each launch: first all of it (column by column when every
    line is plainly good), then the lines appended since, numbered on from the last read; each time
    the pair rows the line reader gives (``PairRows``: hosts, round, bytes, busbw, ok)."""
    run = copy(good, tmp_path / "r")
    path = run / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:12]))  # pair rows, the rest of them appended (and world rows)

    def pair_columns(rows):  # noqa: ANN001, ANN202
        busbw = [None if v != v else v for v in rows.busbw.tolist()]
        return rows.pairs(), rows.round.tolist(), rows.nbytes.tolist(), busbw, rows.ok.tolist()

    def by_line_reader():  # noqa: ANN202
        return pair_columns(PairRows.from_records(read_jsonl(path, row_problem).records))

    grow = GrowingRows(RunDir.open(run))
    first = grow()
    assert grow.lines == 12 and grow.end == path.stat().st_size
    n_first = len(first)
    assert n_first and pair_columns(first) == by_line_reader()
    with path.open("a") as fh:
        fh.write("".join(lines[12:24]) + "{not json\n")
    rows = grow()
    assert len(rows) > n_first and grow.lines == 25 and grow.end == path.stat().st_size
    assert pair_columns(rows) == by_line_reader()
    assert grow() is rows and pair_columns(grow()) == by_line_reader()  # nothing new: nothing read again


@pytest.mark.parametrize(
    ("edits", "code"),
    [
        ({}, 0),
        ({3: {"status": "error", "error": "timeout", "busbw_GBps": None}}, 2),
        ({30: {"wrong": 2}}, 2),
        ({5: b"{broken"}, 0),  # read line by line then: the broken line is the report's, not a failure
        ({5: b"{broken", 30: {"wrong": 2}}, 2),
    ],
)
def test_the_exit_status_sees_a_failed_or_wrong_row(good, tmp_path, edits, code):
    """``sweep``'s exit status reads the rows column by column where it can (4,096 nodes: 8.4M rows),
    line by line otherwise, and says 2 (a failure) for a row that failed or came out wrong either way,
    whatever the findings (here none: the counts alone, as with --no-report)."""
    from netbench.agents.coordinator import Outcome
    from netbench.run.execute import exit_status

    run = copy(good, tmp_path / "r")
    edit_rows(run, edits)
    assert exit_status(Outcome("completed"), RunDir.open(run), None, judged=False) == code
