"""The nccl-tests importer against real logs (shared fixtures; tests/data/nccl_tests/SOURCES.md)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixtures_path import fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netbench.cli import cli
from netbench.common.errors import UsageError
from netbench.common.rundir import RunDir
from netbench.importers.nccl_tests import (
    DTYPE_BYTES,
    import_logs,
    nccl_version_from_code,
    parse_file,
    parse_text,
    to_rows,
)

H200 = fixture("nccl-tests-h200-1gpu")
# nccl-tests -J output we produced ourselves on the lent H200 (see tests/data/nccl_tests/SOURCES.md)
H200_JSON = Path(__file__).resolve().parent / "data" / "nccl_tests" / "h200-1gpu-json"


def public(name: str) -> Path:
    """A public multi-node or old-layout log (shared fixtures, nccl-tests-public/SOURCES.md names
    each source): missing is a failure, never a skip (fixtures_path.py)."""
    return fixture(f"nccl-tests-public/{name}")


AZURE = "azureml-examples__gpu_perf-README.md"
A3MEGA = "lessizzmore-create-a3mega-ztan-fork__ztan-NCCL-test-result.txt"


def by_key(test, nbytes: int, in_place: bool, dtype: str = "float") -> dict:
    [row] = [r for r in test.rows
             if r["bytes"] == nbytes and r["in_place"] == in_place and r["dtype"] == dtype]
    return row


def test_h200_all_reduce_text():
    [t] = parse_file(H200 / "all_reduce.txt")
    assert t.collective == "all_reduce"
    assert t.nccl_tests_version == "2.19.6"
    assert t.nccl_version == "2.28.3"  # nccl-library=22803
    assert t.hosts == ["vm"] and t.nranks == 1
    assert t.config["iters"] == 20 and t.config["warmup_iters"] == 1 and t.config["graph"] == 0
    assert len(t.rows) == 31 * 2
    big = by_key(t, 8589934592, False)
    assert big["count"] == 2147483648 and big["op"] == "sum"
    assert big["time_us"] == 4000.09 and big["algbw_GBps"] == 2147.4 and big["busbw_GBps"] == 0.0
    assert big["wrong"] == 0
    assert by_key(t, 536870912, True)["algbw_GBps"] == 1e6  # printed "1e+06"
    assert t.out_of_bounds == 0 and t.avg_busbw_GBps == 0


def test_sendrecv_in_place_wrong_is_na():
    [t] = parse_file(H200 / "sendrecv.txt")
    assert by_key(t, 8, False)["wrong"] == 0
    assert by_key(t, 8, True)["wrong"] is None  # "N/A"
    assert by_key(t, 8, False)["time_us"] == 11.46


def test_graph_run_marks_rows():
    [t] = parse_file(H200 / "all_reduce_graph.txt")
    assert t.config["graph"] == 20
    out = list(to_rows(t, "r1"))
    assert all(r.cuda_graph for r in out)
    assert out[0].time_us == 1.00 and out[0].bytes == 8


def test_multinode_h100_hosts_and_ranks():
    [t] = parse_file(public(A3MEGA))
    assert t.hosts == ["ztan-mig-235z", "ztan-mig-gq73"]
    assert t.nranks == 16
    assert [r.device for r in t.ranks[:8]] == list(range(8))
    assert t.ranks[8].bus_id == "0000:04:00" and t.ranks[0].device_name == "NVIDIA H100 80GB HBM3"
    big = by_key(t, 8589934592, False)
    assert (big["time_us"], big["algbw_GBps"], big["busbw_GBps"], big["wrong"]) == (47535, 180.71, 338.82, 0)
    assert by_key(t, 8589934592, True)["busbw_GBps"] == 337.35
    assert t.avg_busbw_GBps == 70.742
    assert len(t.rows) == 31 * 2  # the markdown prose after the table adds nothing


def test_old_layout_tables_in_a_readme():
    """Two all_reduce tables of the old layout (an ``error`` column of relative errors, no root) in
    markdown fences, each with an NCCL INFO line between its header and rows, no preamble: two runs,
    every row read, the INFO lines (one starts with digits) not rows, the ranks from busbw/algbw."""
    v100, a100 = parse_file(public(AZURE))
    for t in (v100, a100):
        assert t.collective == "all_reduce" and t.collective_inferred.startswith("inferred from redop sum")
        assert len(t.rows) == 9 * 2 and t.problems == []
        assert t.nranks == 16  # 2 nodes x 8 GPUs: 2(n-1)/n = 1.875
        assert {r["op"] for r in t.rows} == {"sum"} and {r["root"] for r in t.rows} == {None}
        assert {r["wrong"] for r in t.rows} == {None}  # "error" is not a count of wrong elements
    row = by_key(v100, 8589934592, False)
    assert (row["time_us"], row["algbw_GBps"], row["busbw_GBps"]) == (987274, 8.70, 16.31)
    assert row["max_error"] == 4e-07
    assert by_key(v100, 33554432, True)["time_us"] == 4384.4
    row = by_key(a100, 8589934592, True)
    assert (row["time_us"], row["busbw_GBps"], row["max_error"]) == (85070, 189.33, 5e-07)
    assert by_key(a100, 33554432, False)["count"] == 8388608


def test_old_layout_readme_imports_and_reports(tmp_path):
    """The README through the CLI: 36 rows in two groups of 16 ranks, no warning, a report."""
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(public(AZURE)), "--out", str(tmp_path / "r")])
    assert res.exit_code in (0, 1), res.output
    rows = RunDir.open(tmp_path / "r").read_rows()
    assert len(rows) == 36 and {r["group"] for r in rows} == {"log1", "log2"}
    assert {r["ranks"] for r in rows} == {16}
    assert "import_incomplete" not in res.output and "netbench: warning" not in res.output
    meta = RunDir.open(tmp_path / "r").read_run()
    assert meta["status"] == "completed" and [i["problems"] for i in meta["imported"]] == [[], []]


def test_json_matches_its_stdout():
    """The -J file and the table of the same run agree to the table's printed precision."""
    names = ("all_reduce_1gpu", "broadcast_1gpu", "reduce_scatter_1gpu_periter", "all_reduce_1gpu_alltypes")
    for name in names:
        [j] = parse_file(H200_JSON / f"{name}.json")
        [t] = parse_file(H200_JSON / f"{name}.txt")
        assert j.collective == t.collective and j.nccl_version == t.nccl_version == "2.28.9"
        assert len(j.rows) == len(t.rows) > 0
        for a, b in zip(j.rows, t.rows, strict=True):
            assert (a["bytes"], a["count"], a["dtype"], a["in_place"]) == (b["bytes"], b["count"], b["dtype"],
                                                                           b["in_place"])
            assert a["time_us"] == pytest.approx(b["time_us"], abs=0.006, rel=0.001)
            assert a["wrong"] == b["wrong"]
        assert j.config["iters"] == t.config["iters"]
        assert j.hosts == t.hosts == ["vm"]


def test_json_details():
    [j] = parse_file(H200_JSON / "reduce_scatter_1gpu_periter.json")
    first = j.rows[0]
    assert first["per_iter"]["times_us"] == [15.488, 12.864, 8.064, 8.928, 9.984]
    assert j.env == {"NCCL_NVLS_ENABLE": "0"}  # only NCCL_* variables are kept
    [b] = parse_file(H200_JSON / "broadcast_1gpu.json")
    assert {r["root"] for r in b.rows} == {"0"}
    [types] = parse_file(H200_JSON / "all_reduce_1gpu_alltypes.json")
    assert len({r["dtype"] for r in types.rows}) == 12


def test_prefixed_lines_mpirun_and_srun():
    text = (H200 / "all_reduce.txt").read_text()
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in text.splitlines())
    labelled = "\n".join(f" 0: {line}" for line in text.splitlines())
    plain = parse_text(text)[0].rows
    assert parse_text(tagged)[0].rows == plain
    assert parse_text(labelled)[0].rows == plain


def test_nccl_version_codes():
    assert nccl_version_from_code(22803) == "2.28.3"
    assert nccl_version_from_code(2708) == "2.7.8"


@pytest.mark.parametrize("content", ["hello\n", "", "# nThread 1 nGpus 1\n", "{not json", '{"results": 3}'])
def test_bad_input_is_usage_error(tmp_path, content):
    f = tmp_path / "x.log"
    f.write_text(content)
    with pytest.raises(UsageError):
        parse_file(f)


def test_cli_import_writes_run_dir(tmp_path):
    out = tmp_path / "run"
    multinode = public(A3MEGA)
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(H200 / "all_reduce.txt"), str(multinode),
                                   "--out", str(out), "--no-report"])
    assert res.exit_code == 0, res.output
    run = RunDir.open(out)
    meta = run.read_run()
    assert meta["launcher"] == "import" and len(meta["sources"]) == 2
    rows = run.read_rows()
    assert len(rows) == 62 * 2
    assert {r["pattern"] for r in rows} == {"world"} and {r["backend"] for r in rows} == {"nccl"}
    assert {r["engine"] for r in rows} == {"nccl"}  # nccl-tests calls NCCL directly: not torch's
    # the headline, as sweep and report end: no NIC in a log, so no ceiling, and how to give one
    assert "# all_reduce      large-message busbw  329.030 GB/s" in res.output
    assert "ceiling unknown: ztan-mig-235z: no NIC rate (an nccl-tests log names no NIC: import it with " \
        "--nics PORTSxGBPS (e.g. 8x400) to judge it)" in res.output
    multi = [r for r in rows if r["ranks"] == 16]
    assert len(multi) == 62 and multi[0]["hosts"] == ["ztan-mig-235z", "ztan-mig-gq73"]
    assert multi[0]["iters"] == 20 and multi[0]["warmup"] == 5
    env = json.loads((out / "env.json").read_text())
    assert env["hosts"]["vm"]["nccl"] == "2.28.3" and env["hosts"]["vm"]["nccl_tests_version"] == "2.19.6"
    inv = run.read_inventory()
    assert {n["host"] for n in inv} == {"vm", "ztan-mig-235z", "ztan-mig-gq73"}
    assert len(next(n for n in inv if n["host"] == "ztan-mig-gq73")["gpus"]) == 8


def test_nics_given_for_the_log_judge_it_against_ceiling_and_reference(tmp_path):
    """2 x 8 H100 with --nics: the ceiling and the published per-NIC reference apply, the report and
    its terminal lines say so; too few NICs for the busbw is called what it is (Tree on two nodes)."""
    multinode = public(A3MEGA)
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(multinode), "--nics", "8x400",
                                   "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert "#   82% of ceiling 400.0 GB/s (slowest node ztan-mig-235z: 8 x 400 Gb/s = 400.0 GB/s); " \
        "reference 368-384 GB/s (Ring, ndr-400g-ring: " in res.output
    nics = RunDir.open(tmp_path / "a").read_inventory()[0]["nics"]
    assert [(n["name"], n["rate_gbps"]) for n in nics] == [(f"given-{k}", 400.0) for k in range(8)]
    few = CliRunner().invoke(cli, ["import", "nccl-tests", str(multinode), "--nics", "8 x 50G",
                                   "--out", str(tmp_path / "b")])
    assert "above_ceiling" in few.output and "658% of ceiling 50.0 GB/s" in few.output
    for bad in ("8y400", "0x400", "8x99999", "x400"):
        r = CliRunner().invoke(cli, ["import", "nccl-tests", str(multinode), "--nics", bad,
                                     "--out", str(tmp_path / "c")])
        assert r.exit_code == 2 and "--nics" in r.output and "Traceback" not in r.output, r.output
        assert not (tmp_path / "c").exists()


def test_cli_bad_input_one_line_exit_2(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("just some text\n")
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(bad), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert "no nccl-tests results" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "r").exists()


# -- logs as users have them: built from the team's real H200 logs, transformed here --------------

NCCL_DEBUG_LOG = fixture("h200-node/nccl-debug-init.txt").read_text()
NCCL_INFO = [line for line in NCCL_DEBUG_LOG.splitlines() if " NCCL INFO " in line]


def values(test) -> list[dict]:
    """The parsed rows without their line numbers (which the transformations move)."""
    return [{k: v for k, v in r.items() if k != "line"} for r in test.rows]


def pasted_table(name: str) -> str:
    """The table alone, as pasted into a ticket: from the column header to the last size."""
    lines = (H200 / f"{name}.txt").read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if "out-of-place" in line)
    last = max(i for i, line in enumerate(lines) if line.strip() and line.split()[0].isdigit())
    return "\n".join(lines[first : last + 1]) + "\n"


def unnamed(name: str) -> str:
    """The log without the lines that name the collective (older nccl-tests, or cut by the user)."""
    text = (H200 / f"{name}.txt").read_text()
    return "".join(line for line in text.splitlines(True) if "Collective test" not in line)


def tagged_and_interleaved(name: str) -> str:
    """As ``mpirun --tag-output`` with NCCL_DEBUG=INFO prints it: every line prefixed by its rank and
    stream, NCCL's INFO lines (stderr) between the table's lines."""
    out = []
    for i, line in enumerate((H200 / f"{name}.txt").read_text().splitlines()):
        out.append(f"[1,0]<stdout>:{line}")
        out.append(f"[1,0]<stderr>:{NCCL_INFO[i % len(NCCL_INFO)]}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "sendrecv"])
def test_table_pasted_without_its_preamble(name):
    [t] = parse_text(pasted_table(name), "ticket-1234.txt")
    [full] = parse_file(H200 / f"{name}.txt")
    assert values(t) == values(full)  # every size, both placements, as printed
    assert t.collective_inferred and t.collective_inferred.startswith("inferred from redop")


@pytest.mark.parametrize(
    "name, expected, alternatives",
    [
        ("all_reduce", "all_reduce", "(could also be reduce_scatter)"),  # 1 rank: busbw factor 0 for both
        ("reduce_scatter", "all_reduce", "(could also be reduce_scatter)"),
        ("all_gather", "all_gather", "(could also be all_to_all)"),
        ("sendrecv", "sendrecv", None),  # factor 1 on 1 rank: only sendrecv
    ],
)
def test_collective_inferred_when_the_log_does_not_name_it(tmp_path, name, expected, alternatives):
    log = tmp_path / "job-5512.out"  # a file name that says nothing
    log.write_text(unnamed(name))
    [t] = parse_file(log)
    assert t.collective == expected
    assert "on 1 ranks" in t.collective_inferred
    if alternatives:
        assert t.collective_inferred.endswith(alternatives)
    else:
        assert "could also be" not in t.collective_inferred
    row = next(to_rows(t, "r"))
    assert row.extra["collective_inferred"] == t.collective_inferred


def test_tag_output_prefixes_and_interleaved_nccl_info():
    [t] = parse_text(tagged_and_interleaved("all_reduce"))
    [plain] = parse_file(H200 / "all_reduce.txt")
    assert values(t) == values(plain) and t.collective == "all_reduce" and t.collective_inferred is None
    assert t.nccl_version == "2.28.3"  # nccl-library= in the header wins over the INFO line


def test_cli_says_when_it_inferred_the_collective(tmp_path):
    log = tmp_path / "job.out"
    log.write_text(pasted_table("all_gather"))
    args = ["import", "nccl-tests", str(log), "--out", str(tmp_path / "r"), "--no-report"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert f"{log}: collective all_gather inferred from redop none, root -1" in res.output
    meta = RunDir.open(tmp_path / "r").read_run()
    assert meta["imported"][0]["collective_inferred"].startswith("inferred from redop none")


def _json_doc() -> dict:
    return json.loads((H200_JSON / "all_reduce_1gpu_alltypes.json").read_text())


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["results"][0].update(size="big"),
        lambda d: d["results"][0].update(size=10**400),
        lambda d: d["results"].append("row"),
        lambda d: d.update(config=[1, 2]),
    ],
)
def test_json_of_the_wrong_types_is_one_line_exit_2(tmp_path, damage):
    doc = _json_doc()
    damage(doc)
    f = tmp_path / "x.json"
    f.write_text(json.dumps(doc))
    args = ["import", "nccl-tests", str(f), "--out", str(tmp_path / "r"), "--no-report"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"netbench: error: {f}: ") and res.output.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_json_non_finite_bandwidth_is_not_a_measurement(tmp_path):
    """1e999 is a value, not a bandwidth nccl-tests left out (issue 44: it read "nccl-tests printed no
    bus bandwidth", a failed row): the entry is left out and named, with the value."""
    doc = _json_doc()
    f = tmp_path / "x.json"
    f.write_text(json.dumps(doc).replace('"bus_bw": ', '"bus_bw": 1e999, "was": ', 1))
    [t] = parse_file(f)
    assert len(t.rows) == 2 * (len(doc["results"]) - 1) and t.rows[0]["line"] == 1
    [p] = t.problems
    assert (p.kind, p.reason, p.lines) == ("refused", "busbw is not finite", [0])
    assert p.example == "results[0]: inf"
    run, _ = import_logs([f], tmp_path / "r")
    loaded = run.load_rows()
    assert loaded.unreadable == [] and {r["status"] for r in loaded.records} == {"ok"}


def test_a_fifo_log_is_refused(tmp_path):
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        parse_file(fifo)


# -- nothing unread passes (issue 24): logs damaged as real ones are, each a named problem -----------

AR_LINES = (H200 / "all_reduce.txt").read_text().splitlines()
ROW_1M = next(i for i, line in enumerate(AR_LINES) if line.split()[:1] == ["1048576"])  # 0-based
# what nccl-tests prints when an NCCL call fails (src/common.h NCCLCHECK, 2.13+) and its caller's line
NCCL_FAILURE = ("vm: Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO "
                "for details) / remote process exited or there was a network error'")
TEST_FAILURE = " .. vm pid 1182: Test failure common.cu:892"


def write_log(tmp_path: Path, lines: list[str], name: str = "job.log", end: str = "\n") -> Path:
    f = tmp_path / name
    f.write_text("\n".join(lines) + end)
    return f


def import_cli(tmp_path: Path, log: Path, *more: str):
    """``netbench import nccl-tests LOG`` with its report; (result, run.json, findings' rule ids)."""
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(log), "--out", str(out), *more])
    assert "Traceback" not in res.output, res.output
    meta = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
    findings = json.loads((out / "findings.json").read_text()) if (out / "findings.json").exists() else {}
    return res, meta, [f["rule"] for f in findings.get("findings", [])]


def edited(index: int, old: str, new: str) -> list[str]:
    lines = list(AR_LINES)
    assert old in lines[index]
    lines[index] = lines[index].replace(old, new, 1)
    return lines


def test_a_log_ending_in_an_nccl_failure_is_not_a_pass(tmp_path):
    """The run broke off at 1 MiB: the 17 sizes before it are kept and judged, the verdict is FAIL
    with the failure line named, never PASS."""
    log = write_log(tmp_path, AR_LINES[:ROW_1M] + [NCCL_FAILURE, TEST_FAILURE])
    res, meta, rules = import_cli(tmp_path, log)
    assert res.exit_code == 2, res.output
    said = f"netbench: warning: {log}: the run failed (line {ROW_1M + 1}: {NCCL_FAILURE[:60]}"
    assert said in res.output and "; 1 more failure line(s))" in res.output
    assert "imported_run_failed" in rules and "FAIL" in res.output and "PASS" not in res.output
    [imported] = meta["imported"]
    assert imported["rows"] == 2 * 17
    [problem] = imported["problems"]
    assert problem["kind"] == "failure" and problem["count"] == 2
    assert problem["lines"] == [ROW_1M + 1, ROW_1M + 2]


def test_a_failure_line_from_mpirun_ranks_in_a_multinode_log(tmp_path):
    """The 2 x 8 H100 log, tagged by mpirun, with rank 9's failure in the middle of its table."""
    text = public(A3MEGA).read_text().splitlines()
    at = next(i for i, line in enumerate(text) if line.split()[:1] == ["1048576"])
    lines = [f"[1,0]<stdout>:{line}" for line in text[:at]]
    lines.append("[1,9]<stdout>:ztan-mig-gq73: Test NCCL failure common.cu:1005 'unhandled system error / '")
    lines.append("[1,9]<stdout>:MPI_ABORT was invoked on rank 9 in communicator MPI_COMM_WORLD")
    [t] = parse_file(write_log(tmp_path, lines))
    assert len(t.rows) == 2 * 17 and t.hosts == ["ztan-mig-235z", "ztan-mig-gq73"]
    [failure] = t.problems
    assert failure.kind == "failure" and failure.count == 2
    assert "ztan-mig-gq73: Test NCCL failure" in failure.example


def test_a_run_that_failed_before_its_table_is_one_error_line(tmp_path):
    log = write_log(tmp_path, AR_LINES[:8] + [NCCL_FAILURE])
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(log), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    said = f"netbench: error: {log}: no nccl-tests results before the run failed (line 9: "
    assert res.output.startswith(said)
    assert not (tmp_path / "r").exists()


def test_an_import_that_broke_off_is_not_completed(tmp_path, monkeypatch):
    """run.json says 'completed' only after every row is written: an import that dies while writing
    (here: the second log's rows) leaves 'starting', which the report calls run_incomplete."""
    import netbench.importers.nccl_tests as importer

    real = importer.to_rows

    def breaks(test, run_id, group=None):
        if group == "log2":
            raise KeyboardInterrupt
        return real(test, run_id, group)

    monkeypatch.setattr(importer, "to_rows", breaks)
    with pytest.raises(KeyboardInterrupt):
        import_logs([H200 / "all_reduce.txt", H200 / "all_gather.txt"], tmp_path / "r")
    assert json.loads((tmp_path / "r" / "run.json").read_text())["status"] == "starting"
    monkeypatch.undo()
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "r")])
    assert res.exit_code != 0 and "run_incomplete" in res.output and "PASS" not in res.output, res.output
    run, _ = import_logs([H200 / "all_reduce.txt"], tmp_path / "whole")
    assert run.read_run()["status"] == "completed"


def glued(a: list[str], b: list[str]) -> list[list[str]]:
    """Ways two ranks' rows end up on one line: the start of one, then the other whole; the first
    column of one, then the other without its type column (as many columns as a row has)."""
    return [a[:3] + b, a[:2] + b, a[:1] + b[:2] + b[3:]]


@pytest.mark.parametrize("way", range(3))
def test_rows_of_two_ranks_glued_together_are_never_a_row(tmp_path, way):
    """The issue's case read a glued line's third column as the type '4194304' and its '#wrong' from
    another column: a false wrong_results FAIL. The line is left out and named, the verdict WARN."""
    at = next(i for i, line in enumerate(AR_LINES) if line.split()[:1] == ["4194304"])
    tokens = glued(AR_LINES[at].split(), AR_LINES[at + 1].split())[way]
    lines = AR_LINES[:at] + ["  ".join(tokens)] + AR_LINES[at + 2:]
    res, meta, rules = import_cli(tmp_path, write_log(tmp_path, lines))
    assert res.exit_code == 1, res.output
    assert "wrong_results" not in rules and rules.count("import_incomplete") == 1
    [problem] = meta["imported"][0]["problems"]
    assert problem["kind"] == "refused" and problem["count"] == 1 and problem["lines"] == [at + 1]
    assert problem["reason"] in ("more columns than the header (lines glued together)",
                                 "type is not one nccl-tests prints")
    assert meta["imported"][0]["rows"] == 62 - 4


def eight_ranks(tagged: bool, shuffled: bool = False) -> list[str]:
    """What eight processes of an nccl-tests build without MPI print under ``mpirun -np 8``: each
    its own one-GPU run, its own pid, the lines interleaved as they arrive (in turn, or in a random
    order that keeps each process's own)."""
    import random

    streams = [[line.replace("Pid   1182", f"Pid   {1182 + rank}") for line in AR_LINES] for rank in range(8)]
    if tagged:
        streams = [[f"[1,{rank}]<stdout>:{line}" for line in lines] for rank, lines in enumerate(streams)]
    if not shuffled:
        return [line for lines in zip(*streams, strict=True) for line in lines]
    pick, out = random.Random(24), []
    while any(streams):
        out.append(pick.choice([s for s in streams if s]).pop(0))
    return out


@pytest.mark.parametrize("tagged, shuffled", [(True, False), (True, True), (False, False)])
def test_eight_ranks_printing_one_table_interleaved_is_one_table(tmp_path, tagged, shuffled):
    """Never 8 x the rows: tagged lines are read process by process and the copies of one table
    counted; untagged, each size printed again is."""
    log = write_log(tmp_path, eight_ranks(tagged, shuffled), "all_reduce_8ranks.log")
    [t] = parse_file(log)
    [full] = parse_file(H200 / "all_reduce.txt")
    assert values(t) == values(full) and t.collective == "all_reduce" and t.collective_inferred is None
    assert t.nranks == 1 and len(t.ranks) == 1  # rank 0 printed 8 times is one rank
    [rep] = t.problems
    assert rep.kind == "repeated" and rep.count == 7 * 31
    if tagged:
        assert rep.reason.startswith("the same table printed by another process")
    else:
        assert "7 rank line(s) repeated too" in rep.reason
    res, meta, rules = import_cli(tmp_path, log)
    assert res.exit_code == 1 and "import_incomplete" in rules, res.output
    assert f"netbench: warning: {log}: 217 line(s) left out: " in res.output
    assert len(RunDir.open(tmp_path / "run").read_rows()) == 62


def test_two_whole_runs_in_one_log_are_two_runs(tmp_path):
    """A log holding one run after another (each ended by its summary) is not a repeated table: each
    run is read. (The same run twice, pids and values alike, is imported once: issue 44's copies,
    tests/test_import_nccl_hardening.py.)"""
    [a, b] = parse_file(write_log(tmp_path, AR_LINES + AR_LINES))
    assert values(a) == values(b) and a.problems == b.problems == []


def test_a_file_name_does_not_override_the_table(tmp_path):
    """all_gather_perf.log holding an all_reduce table: the table wins, and a warning says so."""
    unnamed_ar = [line for line in AR_LINES if "Collective test" not in line]
    log = write_log(tmp_path, unnamed_ar, "all_gather_perf.log")
    [t] = parse_file(log)
    assert t.collective == "all_reduce"
    [p] = t.problems
    assert p.kind == "collective" and p.reason.startswith(
        "the file name 'all_gather_perf.log' says all_gather, but the table is not all_gather's: "
        "imported as all_reduce (inferred from redop sum")
    res, meta, rules = import_cli(tmp_path, log, "--no-report")
    assert res.exit_code == 0 and "netbench: warning: " in res.output
    assert {r["collective"] for r in RunDir.open(tmp_path / "run").read_rows()} == {"all_reduce"}
    # the log names its collective: the name in it wins, and the file name's is said to disagree
    [named] = parse_file(write_log(tmp_path, AR_LINES, "all_gather_perf.log"))
    assert named.collective == "all_reduce" and [p.kind for p in named.problems] == ["collective"]
    # a file name that fits the table names it, without a word
    ag_lines = (H200 / "all_gather.txt").read_text().splitlines()
    unnamed_ag = [line for line in ag_lines if "Collective test" not in line]
    [ag] = parse_file(write_log(tmp_path, unnamed_ag, "all_gather_perf.log"))
    assert ag.collective == "all_gather" and ag.problems == []


@pytest.mark.parametrize(
    "old, new, reason",
    [
        ("     1048576", "        1e30", "size is not a whole number"),
        ("     1048576", "   1048576.5", "size is not a whole number"),
        ("     1048576", "   1,048,576", "size is not a whole number"),
        ("     1048576", "    -1048576", "size is negative"),
        ("262144", "262145", "count does not fit the size"),
        ("262144", "524288", "count does not fit the size"),
        ("     float", "    floatx", "type is not one nccl-tests prints"),
        ("sum", "add", "redop is not one nccl-tests prints"),
        ("  8.72", " -8.72", "time is negative"),
        ("120.18", "  -inf", "algbw is not finite"),
        ("120.18", "   nan", "algbw is not finite"),
        ("    0.00       0     1.62", "   -0.01       0     1.62", "busbw is negative"),
        ("0.00       0     1.62", "0.00      -1     1.62", "#wrong is negative"),
        ("0.00       0     1.62", "0.00     0.5     1.62", "#wrong is not a whole number"),
    ],
)
def test_a_row_edited_out_of_shape_is_counted_and_named(tmp_path, old, new, reason):
    """Each is one line left out, with how many and why on stderr, and a WARN: never a silent drop."""
    log = write_log(tmp_path, edited(ROW_1M, old, new))
    res, meta, rules = import_cli(tmp_path, log)
    assert res.exit_code == 1 and "import_incomplete" in rules, res.output
    assert f"netbench: warning: {log}: 1 line(s) left out: {reason} (line {ROW_1M + 1}: " in res.output
    [imported] = meta["imported"]
    assert imported["rows"] == 60
    example = f"line {ROW_1M + 1}: {edited(ROW_1M, old, new)[ROW_1M].strip()}"
    assert imported["problems"] == [{"kind": "refused", "reason": reason, "count": 1, "lines": [ROW_1M + 1],
                                     "example": example}]


def test_a_last_row_cut_mid_line_is_reported_truncated(tmp_path):
    last = max(i for i, line in enumerate(AR_LINES) if line.split()[:1] == ["8589934592"])
    for end in ("", "\n"):
        log = write_log(tmp_path, AR_LINES[:last] + [AR_LINES[last][:60]], end=end)
        [t] = parse_file(log)
        assert len(t.rows) == 60
        cut, unfinished = t.problems
        assert (cut.kind, cut.lines) == ("refused", [last + 1])
        assert cut.reason == "the log ends in the middle of this row (truncated)"
        assert unfinished.kind == "unfinished" and "'# Avg bus bandwidth'" in unfinished.reason
    # a row cut in the middle of the log (a copy and paste) is said as what it is
    [t] = parse_file(write_log(tmp_path, AR_LINES[:ROW_1M] + [AR_LINES[ROW_1M][:60]] + AR_LINES[ROW_1M + 1:]))
    assert [(p.reason, p.lines) for p in t.problems] == [("fewer columns than the header", [ROW_1M + 1])]


def test_a_log_cut_after_whole_rows_is_unfinished(tmp_path):
    res, meta, rules = import_cli(tmp_path, write_log(tmp_path, AR_LINES[:ROW_1M]))
    assert res.exit_code == 1 and "import_incomplete" in rules and "PASS" not in res.output
    assert [p["kind"] for p in meta["imported"][0]["problems"]] == ["unfinished"]


def test_every_damaged_log_is_refused_or_judged_below_pass(tmp_path):
    """All the damage above at once, in the multi-node log too: never PASS."""
    text = public(A3MEGA).read_text().splitlines()
    big = next(i for i, line in enumerate(text) if line.split()[:1] == ["1073741824"])
    damaged = text[:big] + [text[big].replace("1073741824", "1,073,741,824")] + text[big + 1:]
    res, meta, rules = import_cli(tmp_path, write_log(tmp_path, damaged))
    assert res.exit_code != 0 and "PASS" not in res.output and "import_incomplete" in rules
    assert meta["imported"][0]["rows"] == 60 and meta["imported"][0]["problems"][0]["lines"] == [big + 1]


def test_json_rows_with_negative_values_are_left_out_and_named(tmp_path):
    doc = _json_doc()
    doc["results"][1]["out_of_place"]["time"] = -3.5
    doc["results"][2]["size"] = -8
    f = tmp_path / "x.json"
    f.write_text(json.dumps(doc))
    [t] = parse_file(f)
    assert len(t.rows) == 2 * (len(doc["results"]) - 2)
    assert sorted((p.reason, p.lines) for p in t.problems) == [("size or count is negative", [2]),
                                                              ("time is negative", [1])]


def test_progress_on_a_terminal(tmp_path):
    """A log read and written with a bar on a terminal (Progress: never in logs or CI)."""
    import io

    from netbench.run.progress import Progress

    stream = io.StringIO()
    # 3,000 whole runs, 150k lines: 3,000 jobs, each its own pid (the same run 3,000 times is one run)
    jobs = [line.replace("Pid   1182", f"Pid {job:>6}") for job in range(3000) for line in AR_LINES]
    big = write_log(tmp_path, jobs)
    run, tests = import_logs([big], tmp_path / "r", progress=Progress(enabled=True, stream=stream))
    shown = stream.getvalue()
    assert len(tests) == 3000 and "reading job.log" in shown and "writing rows" in shown
    assert stream.getvalue().endswith("\r")  # cleared before anything else is printed


def test_a_log_of_which_no_row_can_be_read_is_one_error_line(tmp_path):
    """Every size written as a decimal (8.0): nothing to import, exit 2, one line naming why."""
    lines = [f"{float(line[:12]):>12.1f}{line[12:]}" if line[:12].strip().isdigit() else line
             for line in AR_LINES]
    log = write_log(tmp_path, lines)
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(log), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert res.output.startswith(f"netbench: error: {log}: no table row could be read: 31 line(s) left out, "
                                 "size is not a whole number (line 11: 8.0 ")
    assert not (tmp_path / "r").exists()


def test_a_log_line_is_escaped_on_the_terminal(tmp_path):
    """A damaged line is quoted in the warning and the finding: its escape sequences are not sent.
    (It starts with a number but is past looking like a row: in an open table it is still named.)"""
    log = write_log(tmp_path, edited(ROW_1M, "     float", "\x1b]0;owned\x07\x1b[31mfloat"))
    res, meta, rules = import_cli(tmp_path, log)
    assert res.exit_code == 1 and "import_incomplete" in rules
    assert "\x1b" not in res.output and "\\x1b]0;owned\\x07" in res.output


@pytest.mark.parametrize("name", ["all_gather", "all_gather_graph", "all_reduce", "all_reduce_graph",
                                  "reduce_scatter", "reduce_scatter_graph", "sendrecv"])
def test_real_logs_as_printed_have_no_problem(name):
    """The strictness costs nothing on what nccl-tests really printed: no line refused or repeated."""
    for t in parse_file(H200 / f"{name}.txt") + parse_file(public(A3MEGA)):
        assert t.problems == []


def row_lines(lines: list[str]) -> set[int]:
    """The line numbers of the table rows in the real log (1-based)."""
    return {i for i, line in enumerate(lines, start=1) if line[:12].strip().isdigit()}


TABLE_ROWS = row_lines(AR_LINES)
# any character but those that end a line (a new line is another line, not this one's damage)
FUZZ_CHARS = st.characters(blacklist_categories=("Cs",),
                           blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(sorted(TABLE_ROWS)), st.integers(0, 12),
                  st.one_of(st.text(FUZZ_CHARS, max_size=12), st.sampled_from(
                      ["1e30", "-1", "nan", "inf", "N/A", "1,024", "0.5", "int8", "none", "8388608", "", "  ",
                       "sum  -1", NCCL_FAILURE]))),
        min_size=1, max_size=4),
    cut=st.one_of(st.none(), st.integers(1, 200)),
)
def test_fuzz_every_table_line_is_read_or_named(edits, cut):
    """Whatever is done to the real log's rows (a column replaced by anything, the last row cut):
    every table line is a row read or a line named in a problem, or the import is refused, or the log
    says the run failed; and every row read has checked values. (A line made to start with '#' is
    a comment, as nccl-tests prints them: not generated.)"""
    lines = list(AR_LINES)
    for line_no, column, text in edits:
        if text.lstrip().startswith("#"):
            continue
        tokens = lines[line_no - 1].split() or [""]
        tokens[column % len(tokens)] = text
        lines[line_no - 1] = "   ".join(tokens)
    if cut is not None:
        last = max(TABLE_ROWS)
        lines = lines[: last - 1] + [lines[last - 1][:cut]]
    try:
        tests = parse_text("\n".join(lines) + "\n", "fuzz.log")
    except UsageError:
        return
    read = {r["line"] for t in tests for r in t.rows}
    named = {n for t in tests for p in t.problems for n in p.lines}
    # a line cut to nothing is no line: the table is then named as cut short (or the run failed)
    said = {p.kind for t in tests for p in t.problems} & {"failure", "unfinished"}
    unaccounted = {n for n in TABLE_ROWS if lines[n - 1].strip()} - read - named
    assert not unaccounted or said, (unaccounted, [lines[n - 1] for n in sorted(unaccounted)])
    if cut is not None and not lines[-1].strip():
        assert said
    for t in tests:
        for r in t.rows:
            assert r["bytes"] >= 0 and r["count"] >= 0 and r["dtype"] in DTYPE_BYTES
            for key in ("time_us", "algbw_GBps", "busbw_GBps"):
                assert r[key] is None or (math.isfinite(r[key]) and r[key] >= 0)


def test_json_errors_are_a_failed_run(tmp_path):
    """-J keeps the run's failure lines in ``errors`` (empty strings when none): a failed run."""
    doc = _json_doc()
    assert doc["errors"] == [""]
    doc["errors"] = ["vm: Test NCCL failure common.cu:1005 'unhandled system error / '"]
    f = tmp_path / "x.json"
    f.write_text(json.dumps(doc))
    [failure] = parse_file(f)[0].problems
    assert failure.kind == "failure" and failure.example.startswith("errors[0]: vm: Test NCCL failure")
    res, meta, rules = import_cli(tmp_path, f)
    assert res.exit_code == 2 and "imported_run_failed" in rules and "PASS" not in res.output, res.output
