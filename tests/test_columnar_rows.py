"""Issue 48: a run's rows stored columnar (results.parquet: Parquet parts, the part being filled as a
JSON-lines tail), a compact plan.json, the exit status from what the analysis read, and every reader
of a run directory reading both layouts (an older run's results.jsonl included).

Each case goes through the real command line (subprocess or click's runner) or, for what a killed
run keeps, a real process killed with SIGKILL while it writes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from netbench.collectives.planfile import read_plan
from netbench.reports.rowstore import RowWriter
from rowfiles import simulated_run
from synthetic import make_fleet, write_run_dir

from netbench.cli import cli
from netbench.common.rows import ResultRow
from netbench.common.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]


def cli_run(*args: str):
    res = CliRunner().invoke(cli, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> Path:
    """A run directory `netbench simulate` wrote (8 nodes, a clean fabric)."""
    out = simulated_run(tmp_path_factory.mktemp("sim") / "run")
    return out


@pytest.fixture(scope="module")
def old_layout(tmp_path_factory) -> Path:
    """An older run directory: results.jsonl, a row a line, as the fixture writer (and netbench
    before issue 48) writes it."""
    return write_run_dir(make_fleet(4, 2, noise=0.02, seed=5), tmp_path_factory.mktemp("old") / "run")


def test_a_simulated_run_keeps_its_rows_as_parquet_parts_readable_whole(simulated):
    assert not (simulated / "results.jsonl").exists()
    parts = sorted((simulated / "results.parquet").iterdir())
    assert parts and all(p.name.startswith("part-") and p.suffix == ".parquet" for p in parts)
    rows = RunDir.open(simulated).read_rows()
    frame = pd.read_parquet(simulated / "results.parquet")  # a Parquet dataset: pandas reads it whole
    assert len(frame) == len(rows) > 0
    assert sorted(frame.columns) == sorted(f for f in ResultRow.__dataclass_fields__)
    pair = next(r for r in rows if r["pattern"] == "pair")
    assert pair["rank_time_us"] is None and pair["time_us_min"] <= pair["time_us"] <= pair["time_us_max"]
    ring = next(r for r in rows if r["pattern"] == "ring")
    assert len(ring["rank_time_us"]) == ring["ranks"]  # kept where a rule reads them


def test_export_jsonl_gives_the_rows_as_results_jsonl(simulated, tmp_path):
    res = cli_run("export", str(simulated), "--format", "jsonl", "--out", str(tmp_path / "x"))
    assert res.exit_code == 0, res.output
    lines = (tmp_path / "x" / "results.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == RunDir.open(simulated).read_rows()
    assert list(json.loads(lines[0])) == list(ResultRow.__dataclass_fields__)  # the contract's order


def test_the_same_rows_in_either_layout_give_the_same_report(simulated, tmp_path):
    """The simulated run, and the same run with its rows as an older results.jsonl: the same
    findings, the same exit status, and compare of one against the other finds no change."""
    old = tmp_path / "old"
    shutil.copytree(simulated, old)
    assert cli_run("export", str(old), "--format", "jsonl", "--out", str(old)).exit_code == 0
    shutil.rmtree(old / "results.parquet")
    new_report = cli_run("report", str(simulated), "--no-html", "--format", "json")
    old_report = cli_run("report", str(old), "--no-html", "--format", "json")
    assert new_report.exit_code == old_report.exit_code == 0
    said = [json.loads((d / "findings.json").read_text())["findings"] for d in (simulated, old)]
    assert [f["rule"] for f in said[0]] == [f["rule"] for f in said[1]]
    res = cli_run("compare", str(simulated), "--baseline", str(old))
    assert res.exit_code == 0, res.output


def test_every_reader_reads_an_older_jsonl_run(old_layout, tmp_path, monkeypatch):
    """report, compare, baseline save / list / compare by name, and export (csv, jsonl) on a run
    directory of the older layout."""
    monkeypatch.setenv("NETBENCH_BASELINES", str(tmp_path / "baselines"))
    assert cli_run("report", str(old_layout), "--no-html").exit_code in (0, 1, 2)
    assert (old_layout / "findings.json").is_file()
    saved = cli_run("baseline", "save", str(old_layout), "--name", "older", "--force")
    assert saved.exit_code == 0, saved.output
    assert (tmp_path / "baselines" / "older" / "results.jsonl").is_file()
    listed = cli_run("baseline", "list")
    assert "older" in listed.output
    assert cli_run("compare", str(old_layout), "--baseline", "older").exit_code == 0
    out = tmp_path / "x"
    assert cli_run("export", str(old_layout), "--format", "jsonl", "--out", str(out)).exit_code == 0
    n = len((old_layout / "results.jsonl").read_text().splitlines())
    assert len((out / "results.jsonl").read_text().splitlines()) == n
    assert cli_run("export", str(old_layout), "--format", "csv", "--out", str(out)).exit_code == 0


def test_a_baseline_of_a_columnar_run_copies_its_parts(simulated, tmp_path, monkeypatch):
    monkeypatch.setenv("NETBENCH_BASELINES", str(tmp_path / "baselines"))
    res = cli_run("baseline", "save", str(simulated), "--name", "nightly")
    assert res.exit_code == 0, res.output
    kept = tmp_path / "baselines" / "nightly"
    assert sorted(p.name for p in (kept / "results.parquet").iterdir()) == \
        sorted(p.name for p in (simulated / "results.parquet").iterdir())
    assert RunDir.open(kept).read_rows() == RunDir.open(simulated).read_rows()
    assert cli_run("compare", str(simulated), "--baseline", "nightly").exit_code == 0


def test_a_results_jsonl_beside_the_parts_is_an_export_not_more_rows(simulated, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(simulated, run)
    assert cli_run("export", str(run), "--format", "jsonl", "--out", str(run)).exit_code == 0
    assert len(RunDir.open(run).read_rows()) == len(RunDir.open(simulated).read_rows())


_KILLED = textwrap.dedent("""
    import os, signal, sys
    from netbench.common.rundir import RunDir
    from netbench.reports.rowstore import RowWriter
    rd = RunDir.create(sys.argv[1], run_id="r1")
    w = RowWriter(rd, part_rows=int(sys.argv[3]))
    for i in range(int(sys.argv[2])):
        w.write({"run_id": "r1", "collective": "all_reduce", "backend": "gloo", "pattern": "pair",
                 "hosts": ["a", "b"], "ranks": 2, "round": i, "bytes": 1024, "count": 256,
                 "dtype": "float", "op": "sum", "in_place": False, "iters": 5, "warmup": 1,
                 "time_us": 10.0 + i, "time_us_min": 9.0, "time_us_max": 11.0 + i,
                 "rank_time_us": [9.0, 11.0 + i], "algbw_GBps": 0.1, "busbw_GBps": 0.1, "wrong": 0,
                 "status": "ok", "error": None, "extra": {"i": i}})
    os.kill(os.getpid(), signal.SIGKILL)  # no close: the run dies as kill -9 leaves it
""")


def test_a_killed_run_keeps_every_row_it_wrote(tmp_path):
    """7 rows, parts of 3: two whole parts and one row only in the tail of the third; kill -9."""
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", _KILLED, str(out), "7", "3"], capture_output=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    names = sorted(p.name for p in (out / "results.parquet").iterdir())
    assert names == ["_part-000003.jsonl", "part-000001.parquet", "part-000002.parquet"]
    rows = RunDir.open(out).read_rows()
    assert [r["round"] for r in rows] == list(range(7))
    assert rows[6]["extra"] == {"i": 6} and rows[0]["extra"] == {"i": 0}
    # a later writer of the run (sweep's re-tests) goes on after the tail; its close makes a part
    with RowWriter(RunDir.open(out)) as w:
        w.write(rows[0] | {"round": 7})
    assert [r["round"] for r in RunDir.open(out).read_rows()] == list(range(8))
    assert (out / "results.parquet" / "part-000004.parquet").is_file()
    assert not (out / "results.parquet" / "_part-000004.jsonl").exists()


def test_a_part_and_its_tail_both_left_are_read_once(tmp_path):
    """Killed between a part's rename and its tail's removal: the part wins, no row twice."""
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-c", _KILLED, str(out), "4", "2"], capture_output=True, timeout=120)
    store = out / "results.parquet"
    lines = [json.dumps(r) + "\n" for r in RunDir.open(out).read_rows()[:2]]
    (store / "_part-000001.jsonl").write_text("".join(lines))
    assert [r["round"] for r in RunDir.open(out).read_rows()] == [0, 1, 2, 3]


def test_a_damaged_part_is_named_and_never_passes(simulated, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(simulated, run)
    part = sorted((run / "results.parquet").glob("part-*.parquet"))[0]
    part.write_bytes(part.read_bytes()[: len(part.read_bytes()) // 2])  # a torn copy
    res = cli_run("report", str(run), "--no-html")
    assert res.exit_code != 0
    assert part.name in res.output and "not a Parquet part" in res.output


def test_plan_json_is_compact_and_reads_back_as_the_plan(simulated):
    text = (simulated / "plan.json").read_text()
    doc = json.loads(text)
    assert doc["schema"] == "netbench.plan/2"
    pairwise = [p for p in doc["phases"] if "pairs" in p]
    assert pairwise and all("groups" not in p for p in pairwise)
    plan = read_plan(text)
    records = '{"schema": "netbench.plan/1", ' + plan.to_json()[1:]  # the older form, groups as records
    assert len(text) * 3 < len(records)
    assert json.loads(read_plan(records).to_json()) == json.loads(plan.to_json())
    groups = [g for p in plan.phases for g in p.groups if g.pattern == "pair"]
    rows = {r["group"] for r in RunDir.open(simulated).read_rows() if r["pattern"] == "pair"}
    assert {g.id for g in groups} == rows
    assert all(len(g.ranks) == 16 and g.load is not None and g.hop_class for g in groups)


@pytest.mark.parametrize("text", ['{"schema": "netbench.plan/2", "hosts": ["a"]}', "[]",
                                  '{"schema": "netbench.plan/9"}'])
def test_a_plan_that_is_no_plan_is_a_value_error(text):
    with pytest.raises(ValueError):
        read_plan(text)


_WATCH = textwrap.dedent("""
    import sys
    def hook(event, args):
        if event == "open" and "results.parquet" in str(args[0]):
            sys.stdout.write("OPENED " + str(args[0]) + "\\n")
    sys.addaudithook(hook)
    from netbench.__main__ import main
    sys.argv = ["netbench"] + sys.argv[1:]
    main()
""")


def test_nothing_reads_the_rows_after_the_verdict_line(tmp_path):
    """The exit status comes from the rows the analysis read: after the verdict line the run opens
    no file of its rows (at 4,096 nodes that second pass took minutes)."""
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", _WATCH, "simulate", "--nodes", "8", "--out", str(out),
                           "--fault", "gpu:node0003"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    verdict = max(i for i, x in enumerate(lines) if x.startswith("FAIL"))
    assert any(x.startswith("OPENED") for x in lines[:verdict])
    assert not [x for x in lines[verdict:] if x.startswith("OPENED")]


def test_no_report_counts_the_failed_rows_from_the_parts(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "netbench", "simulate", "--nodes", "8", "--out", str(out),
                           "--fault", "gpu:node0003", "--no-report", "--confirm-budget", "0"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    clean = tmp_path / "clean"
    proc = subprocess.run([sys.executable, "-m", "netbench", "simulate", "--nodes", "8", "--out", str(clean),
                           "--no-report", "--confirm-budget", "0"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_rows_arrow_cannot_type_stay_in_their_tail(tmp_path):
    """A row whose field has another type than the contract's: its part stays JSON lines, read (and
    the row named) by the line reader, never lost to the conversion."""
    rd = RunDir.create(tmp_path / "run", run_id="r1")
    good = make_fleet(2, 1, seed=1).rows[0] | {"run_id": "r1"}
    with RowWriter(rd, part_rows=2) as w:
        w.write(good)
        w.write(good | {"bytes": "many"})
        w.write(good)
    names = sorted(p.name for p in (rd.path / "results.parquet").iterdir())
    assert names == ["_part-000001.jsonl", "part-000002.parquet"]
    read = rd.load_rows()
    assert len(read.records) == 2 and len(read.unreadable) == 1 and "bytes" in read.unreadable[0].reason


def test_a_run_directory_whose_parts_are_a_link_is_not_written_through(tmp_path):
    rd = RunDir.create(tmp_path / "run", run_id="r1")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, rd.path / "results.parquet")
    with pytest.raises(OSError, match="symbolic link"):
        RowWriter(rd)
    assert not list(elsewhere.iterdir())
