"""Nothing unread passes (issue 24): a run directory that `netbench simulate` really wrote, then
damaged the ways a killed run, a hand edit, two runs in one directory, a newer netbench or a
hostile user damage it. Whatever the reader cannot vouch for is a named warning (the verdict is
never PASS), rows it leaves out are counted and named, and `compare` and `baseline` read through
the same reader. Every case goes through the real CLI."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from netbench.reports.rowtable import read_rows_frame
from rowfiles import rows_of, simulated_run

from netbench.cli import cli
from netbench.common.rows import ResultRow
from netbench.common.rundir import RunDir

DROP = object()
"""A fuzzed edit that removes the field."""


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> Path:
    """A real run directory: `netbench simulate` on 8 nodes (a clean fabric: PASS)."""
    out = simulated_run(tmp_path_factory.mktemp("sim") / "run")
    # the layout these cases damage line by line: an older run's results.jsonl (issue 48: its rows
    # as `netbench export --format jsonl` writes them, results.parquet gone); every reader reads it
    exported = CliRunner().invoke(cli, ["export", str(out), "--format", "jsonl", "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    shutil.rmtree(out / "results.parquet")
    return out


@pytest.fixture
def run(simulated: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(simulated, dest)
    for derived in ("findings.json", "report.html"):
        (dest / derived).unlink(missing_ok=True)
    return dest


def rows(run: Path) -> list[dict]:
    return rows_of(run)


def write_rows(run: Path, new: list[dict]) -> None:
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in new))


def edit_json(path: Path, **fields: object) -> None:
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data))


def report(run: Path, *extra: str):
    res = CliRunner().invoke(cli, ["report", str(run), "--no-html", *extra])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def found(run: Path, rule: str) -> list[dict]:
    return [f for f in json.loads((run / "findings.json").read_text())["findings"] if f["rule"] == rule]


def test_the_clean_run_passes(run: Path) -> None:
    res = report(run)
    assert res.exit_code == 0 and res.stdout.startswith("PASS"), res.output


@pytest.mark.parametrize("status", ["running", "starting"])
def test_a_run_that_never_recorded_its_end_is_incomplete(run: Path, status: str) -> None:
    edit_json(run / "run.json", status=status)
    res = report(run)
    assert res.exit_code == 1 and res.stdout.startswith("WARN"), res.output
    [f] = found(run, "run_incomplete")
    assert f"still says {status}" in f["title"]


@pytest.mark.parametrize("text", ["", "  \n\n   \n"])
def test_rows_missing_from_an_empty_results_file_are_named(run: Path, text: str) -> None:
    counted = json.loads((run / "run.json").read_text())["rows"]
    (run / "results.jsonl").write_text(text)
    res = report(run)
    assert res.exit_code == 1 and "PASS" not in res.output, res.output
    [f] = found(run, "run_mismatch")
    assert f"holds 0 row(s), run.json counts {counted}" in f["title"]
    assert "rows are missing" in res.stderr


def test_a_completed_run_without_a_row_does_not_pass(run: Path) -> None:
    edit_json(run / "run.json", rows=None)  # no count to miss: still no PASS on nothing measured
    (run / "results.jsonl").write_text("")
    res = report(run)
    assert res.exit_code == 1, res.output
    [f] = found(run, "run_mismatch")
    assert "holds no row, though run.json says the run completed" in f["title"]


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda r: r.update(time_us=None), "status ok but field 'time_us' is null"),
        (lambda r: r.update(busbw_GBps=None, algbw_GBps=None), "status ok but field 'busbw_GBps' is null"),
        (lambda r: r.pop("status"), "missing field 'status'"),
        (lambda r: r.pop("busbw_GBps"), "missing field 'busbw_GBps'"),
        (lambda r: r.update(status="fine"), "field 'status'"),
        (lambda r: r.update(bytes=-8), "field 'bytes': negative"),
        (lambda r: r.update(count=-2), "field 'count': negative"),
        (lambda r: r.update(time_us=-5.0), "field 'time_us': negative"),
        (lambda r: r.update(busbw_GBps=-1.0), "field 'busbw_GBps': negative"),
        (lambda r: r.update(algbw_GBps=-1.0), "field 'algbw_GBps': negative"),
        (lambda r: r.update(wrong=-3), "field 'wrong': negative"),
        (lambda r: r.update(rank_time_us=[1.0, -1.0]), "field 'rank_time_us': negative"),
    ],
)
def test_rows_the_contract_refuses_are_left_out_counted_and_named(run: Path, damage, reason: str) -> None:
    kept = rows(run)
    for r in kept[:7]:
        damage(r)
    write_rows(run, kept)
    assert read_rows_frame(run / "results.jsonl") is None  # the fast path gives them to the line reader
    res = report(run)
    assert res.exit_code == 1 and res.stdout.startswith("WARN"), res.output
    [f] = found(run, "unreadable_rows")
    assert f["evidence"]["lines_skipped"] == 7 and f["evidence"]["line_numbers"] == list(range(1, 8))
    assert reason in f["title"], f["title"]


@pytest.mark.parametrize("hosts", [lambda h: h[:1], lambda h: [h[0], h[0]], lambda h: [*h, "node0099"]])
def test_a_pair_row_without_two_different_hosts_is_left_out(run: Path, hosts) -> None:
    kept = rows(run)
    pairs = [i for i, r in enumerate(kept) if r["pattern"] == "pair"][:3]
    for i in pairs:
        kept[i]["hosts"] = hosts(kept[i]["hosts"])
    write_rows(run, kept)
    res = report(run)
    assert res.exit_code == 1, res.output
    [f] = found(run, "unreadable_rows")
    assert f["evidence"]["line_numbers"] == [i + 1 for i in pairs]
    assert "a pair row that does not name two different hosts" in f["title"]


def test_two_runs_in_one_results_file_are_mixed_runs(run: Path, tmp_path: Path) -> None:
    base = tmp_path / "base"
    shutil.copytree(run, base)
    kept = rows(run)
    other = [dict(r, run_id="20261201T000000Z-aaaaaa", busbw_GBps=r["busbw_GBps"] * 2) for r in kept]
    write_rows(run, kept + other)
    res = report(run)
    assert res.exit_code == 1 and "PASS" not in res.output, res.output
    [f] = found(run, "mixed_runs")
    assert "rows of 2 run(s)" in f["title"] and "20261201T000000Z-aaaaaa" in f["title"]
    for cur, old in ((run, base), (base, run)):
        cmp = CliRunner().invoke(cli, ["compare", str(cur), "--baseline", str(old)])
        assert cmp.exit_code == 2, cmp.output
        assert "compare needs the rows of one run" in cmp.stderr and "Traceback" not in cmp.output


def test_rows_of_another_run_than_run_json_are_mixed_runs(run: Path) -> None:
    edit_json(run / "run.json", run_id="20261201T000000Z-bbbbbb")
    report(run)
    [f] = found(run, "mixed_runs")
    assert "run.json is 20261201T000000Z-bbbbbb" in f["title"]


@pytest.mark.parametrize("file", ["run.json", "env.json", "results.jsonl"])
def test_an_unknown_schema_is_named(run: Path, file: str) -> None:
    if file == "results.jsonl":
        write_rows(run, [dict(r, schema="netbench.result/9") for r in rows(run)])
    else:
        edit_json(run / file, schema="netbench.future/9")
    res = report(run)
    assert res.exit_code == 1 and res.stdout.startswith("WARN"), res.output
    [f] = found(run, "schema_unknown")
    assert f["subject"] == str(run / file) and "/9'" in f["title"]


def test_a_baseline_of_an_unknown_schema_is_named(run: Path, tmp_path: Path) -> None:
    base = tmp_path / "base"
    shutil.copytree(run, base)
    edit_json(base / "run.json", schema="netbench.run/2")
    res = report(run, "--baseline", str(base))
    assert res.exit_code == 1, res.output
    [f] = found(run, "schema_unknown")
    assert f["subject"] == str(base / "run.json")
    cmp = CliRunner().invoke(cli, ["compare", str(run), "--baseline", str(base)])
    assert "schema 'netbench.run/2'" in cmp.stderr and "(schema_unknown)" in cmp.stderr


def test_run_json_hosts_and_world_are_compared_with_the_rows(run: Path, tmp_path: Path) -> None:
    edit_json(run / "run.json", hosts=["node0001", "node0002"], world_size=16)
    report(run)
    titles = [f["title"] for f in found(run, "run_mismatch")]
    assert any("the rows name 6 host(s) run.json does not list: node0003" in t for t in titles), titles
    assert any("world_size is 16, but a row's group has 64 ranks" in t for t in titles), titles

    many = tmp_path / "many"
    shutil.copytree(run, many)
    (many / "findings.json").unlink()
    edit_json(many / "run.json", hosts=[f"node{i:04d}" for i in range(1, 65)], world_size=512)
    res = report(many)
    assert res.exit_code == 1, res.output
    [f] = found(many, "run_mismatch")
    assert "lists 64 host(s) that stayed up, the rows name only 8" in f["title"]


def test_implausible_port_counters_are_no_error_counts(run: Path) -> None:
    def snap(phase: str, value: int) -> dict:
        return {"schema": "netbench.counters/1", "phase": phase, "host": "node0001", "status": "ok",
                "error": None, "collected_at": "2026-12-03T00:00:00+00:00",
                "ports": [{"port": "mlx5_0/1", "source": "ib", "counters": {"symbol_error": value}}]}

    (run / "counters.jsonl").write_text("".join(json.dumps(snap(*s)) + "\n" for s in (("before", 0),
                                                                                       ("after", 10**40))))
    res = report(run)
    assert res.exit_code == 1, res.output
    assert not found(run, "port_errors")
    [f] = found(run, "unreadable_rows")
    assert f["subject"] == str(run / "counters.jsonl") and f["evidence"]["line_numbers"] == [2]
    assert "a 41-digit number is no value a 64-bit port counter can hold" in f["title"]
    named = [f.get("hosts") for f in json.loads((run / "findings.json").read_text())["findings"]]
    assert "nan" not in json.dumps(named)


# -- baselines ------------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "store"
    monkeypatch.setenv("NETBENCH_BASELINES", str(root))
    return root


def baseline(*args: str):
    res = CliRunner().invoke(cli, ["baseline", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def test_baseline_save_never_follows_a_link_out_of_the_run(run: Path, store: Path) -> None:
    (run / "results.jsonl").unlink()
    (run / "results.jsonl").symlink_to("/etc/passwd")
    res = baseline("save", str(run), "--name", "evil")
    assert res.exit_code == 2, res.output
    assert "is a symbolic link out of the run directory (to /etc/passwd)" in res.stderr
    assert not store.exists() or not list(store.iterdir())  # neither the baseline nor a temporary copy
    assert baseline("save", str(run), "--name", "evil", "--force").exit_code == 2  # --force never follows it


@pytest.mark.parametrize(
    "damage, said",
    [
        (lambda run: (run / "results.jsonl").write_text(""), "no measured row"),
        (lambda run: edit_json(run / "run.json", status="running"), "run.json says running"),
        (lambda run: (run / "results.jsonl").open("a").write("garbage\n"), "not JSON"),
        (lambda run: edit_json(run / "run.json", schema="netbench.run/7"), "schema_unknown"),
    ],
)
def test_baseline_save_refuses_an_empty_incomplete_or_unreadable_run(run: Path, store: Path, damage,
                                                                     said: str) -> None:
    damage(run)
    res = baseline("save", str(run), "--name", "bad")
    assert res.exit_code == 2 and said in res.stderr and "--force saves it anyway" in res.stderr, res.output
    assert not (store / "bad").exists()
    forced = baseline("save", str(run), "--name", "bad", "--force")
    assert forced.exit_code == 0 and "saved with --force" in forced.stderr and said in forced.stderr
    assert (store / "bad" / "results.jsonl").is_file()


def test_overwrite_says_what_it_replaces(run: Path, store: Path, tmp_path: Path) -> None:
    n = len(rows(run))
    run_id = json.loads((run / "run.json").read_text())["run_id"]
    assert baseline("save", str(run), "--name", "nightly").exit_code == 0
    other = tmp_path / "other"
    shutil.copytree(run, other)
    write_rows(other, rows(other)[:5])
    edit_json(other / "run.json", rows=5)
    res = baseline("save", str(other), "--name", "nightly", "--overwrite")
    assert res.exit_code == 0, res.output
    assert f"replaced baseline 'nightly': {n} rows of run {run_id} -> 5 rows of run {run_id}" in res.stderr
    assert len((store / "nightly" / "results.jsonl").read_text().splitlines()) == 5


def test_baseline_list_counts_rows_not_garbage(run: Path, store: Path) -> None:
    assert baseline("save", str(run), "--name", "nightly").exit_code == 0
    with (store / "nightly" / "results.jsonl").open("a") as fh:
        fh.write("garbage\n{\"x\": 1}\n\n")
    res = baseline("list")
    assert res.exit_code == 0
    assert f"{len(rows(run)):>7} rows" in res.output and "(2 unreadable lines)" in res.output, res.output


# -- where a run or report is written --------------------------------------------------------------------


@pytest.mark.parametrize("out", ["/dev/null", "/dev/null/run"])
def test_out_that_is_no_directory_is_named(out: str) -> None:
    res = CliRunner().invoke(cli, ["simulate", "--nodes", "4", "--out", out])
    assert res.exit_code == 2, res.output
    assert "is a character device, not a directory" in res.stderr and "already holds a run" not in res.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="a full file system here is a small tmpfs, which needs root")
@pytest.mark.parametrize("html", [True, False])
def test_a_report_that_cannot_be_written_fails_and_leaves_no_temporary_file(run: Path, tmp_path: Path,
                                                                            html: bool) -> None:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        small = mnt / "run"
        small.mkdir()
        for name in ("run.json", "env.json", "results.jsonl"):
            shutil.copy(run / name, small / name)
        if not html:  # findings.json itself cannot be written
            with open(mnt / "filler", "wb", buffering=0) as fh:
                try:
                    while True:
                        fh.write(bytes(4096))
                except OSError:
                    pass
        proc = subprocess.run([sys.executable, "-m", "netbench", "report", str(small),
                               *([] if html else ["--no-html"])], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert "No space left on device" in proc.stderr and "Traceback" not in proc.stderr
        assert not [p.name for p in small.iterdir() if ".tmp-" in p.name]
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_row_without_a_group_is_never_named_nan(run: Path) -> None:
    """A null read column by column is NaN, which is truthy: a failed ring without a group was the
    group "nan" in the finding's title and subject."""
    kept = rows(run)
    for r in kept[:3]:
        r.update(status="timeout", error="timed out", group=None, time_us=None, time_us_min=None,
                 time_us_max=None, rank_time_us=None, algbw_GBps=None, busbw_GBps=None)
    for r in kept[40:43]:
        r.update(group=None)
    write_rows(run, kept)
    assert read_rows_frame(run / "results.jsonl") is not None  # the fast path: nulls as NaN
    res = report(run)
    assert res.exit_code == 2, res.output
    [f] = found(run, "timeout")
    assert f["subject"] == "ring:8 hosts" and "nan" not in f["title"] + json.dumps(f["evidence"]), f


# -- fuzz: whatever a field holds, the reader vouches for it or names it -------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
FIELDS = ("run_id", "collective", "pattern", "hosts", "ranks", "bytes", "count", "time_us", "time_us_min",
          "rank_time_us", "algbw_GBps", "busbw_GBps", "wrong", "status", "group", "round", "schema")


HINTS = typing.get_type_hints(ResultRow)
LENIENT = {f"missing field {f.name!r}" for f in dataclasses.fields(ResultRow)
           if f.default is dataclasses.MISSING and type(None) in typing.get_args(HINTS[f.name])}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 111), st.sampled_from(FIELDS), JSON | st.just(DROP)),
                      min_size=1, max_size=4))
def test_fuzzed_rows_are_vouched_for_or_named(simulated: Path, tmp_path_factory, edits) -> None:
    """The columnar fast path keeps a file only when the line reader would keep every line of it; a
    report never crashes, and it is PASS only when every line was a row of this run that it read."""
    run = tmp_path_factory.mktemp("fuzz") / "run"
    shutil.copytree(simulated, run)
    (run / "findings.json").unlink()
    kept = rows(run)
    for i, name, value in edits:
        if value is DROP:
            kept[i].pop(name, None)
        else:
            kept[i][name] = value
    write_rows(run, kept)
    lines = RunDir.open(run).load_rows()
    frame = read_rows_frame(run / "results.jsonl")
    if frame is not None:  # its one leniency (rowtable's docstring): a nullable field left out is null
        assert all(u.reason in LENIENT for u in lines.unreadable), lines.unreadable
        assert len(frame) == len(lines.records) + len(lines.unreadable)
    res = report(run)
    assert res.exit_code in (0, 1, 2) and "Traceback" not in res.output, res.output
    if res.exit_code == 0:
        own = json.loads((run / "run.json").read_text())["run_id"]
        assert all(u.reason in LENIENT for u in lines.unreadable), lines.unreadable
        assert {r["run_id"] for r in lines.records} == {own}
        assert {r.get("schema", "netbench.result/1") for r in lines.records} == {"netbench.result/1"}


def test_an_unknown_inventory_schema_is_named(tmp_path: Path) -> None:
    """An imported nccl-tests log: a real run directory with an inventory."""
    from fixtures_path import fixture

    out = tmp_path / "imported"
    log = fixture("nccl-tests-h200-1gpu") / "all_reduce.txt"
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(log), "--out", str(out), "--no-report"])
    assert res.exit_code == 0, res.output
    nodes = [json.loads(line) for line in (out / "inventory.jsonl").read_text().splitlines()]
    assert nodes
    (out / "inventory.jsonl").write_text("".join(json.dumps(dict(n, schema="netbench.inventory/3")) + "\n"
                                                 for n in nodes))
    res = report(out)
    assert res.exit_code == 1, res.output
    [f] = found(out, "schema_unknown")
    assert f["subject"] == str(out / "inventory.jsonl") and "'netbench.inventory/3'" in f["title"]
