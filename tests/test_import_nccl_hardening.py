"""`netbench import nccl-tests` on the logs issue 44 found judged wrongly (round 2's leftovers): a
header damaged by HTML, a log concatenated with itself, a time of 1e400, a size no GPU can hold, and
what a log does not say. Each on the command line, on the real logs (shared fixtures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixtures_path import fixture

from netbench.cli import cli
from netbench.importers.nccl_tests.model import MAX_LINE_CHARS, MAX_LOG_LINES

H200 = fixture("nccl-tests-h200-1gpu")
H200_JSON = Path(__file__).resolve().parent / "data" / "nccl_tests" / "h200-1gpu-json"
A3MEGA = fixture("nccl-tests-public/lessizzmore-create-a3mega-ztan-fork__ztan-NCCL-test-result.txt")
AR = (H200 / "all_reduce.txt").read_text().splitlines()
AG = (H200 / "all_gather.txt").read_text().splitlines()
ROW_1M = next(i for i, line in enumerate(AR) if line.split()[:1] == ["1048576"])  # 0-based


def write(tmp_path: Path, lines: list[str], name: str = "job.log") -> Path:
    f = tmp_path / name
    f.write_text("\n".join(lines) + "\n")
    return f


def imported(tmp_path: Path, *args: str, report: bool = True):
    """``netbench import nccl-tests ARGS``: (result, run.json or {}, the findings' rule ids)."""
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, ["import", "nccl-tests", *args, "--out", str(out),
                                   *([] if report else ["--no-report"])])
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    meta = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
    found = json.loads((out / "findings.json").read_text()) if (out / "findings.json").exists() else {}
    return res, meta, [f["rule"] for f in found.get("findings", [])]


def one_error_line(res, start: str) -> None:
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and res.output.startswith(f"netbench: error: {start}"), res.output


# -- a collective parsed as `b>` from an HTML-damaged header --------------------------------------------

HTML_HEADER = "# Collective test starting: <b>all_reduce_perf</b>"


def test_a_header_damaged_by_html_is_one_error_line_on_the_command_line(tmp_path):
    """Its only run named `b>` imported and judged PASS; now nothing is imported, and one line says
    which line is damaged (the real command line: python -m netbench)."""
    log = write(tmp_path, [HTML_HEADER if "Collective test starting" in line else line for line in AR])
    res = subprocess.run([sys.executable, "-m", "netbench", "import", "nccl-tests", str(log),
                          "--out", str(tmp_path / "r")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stdout == "", res
    assert res.stderr == (f"netbench: error: {log}: nothing to import: 31 line(s) left out: a table under a "
                          "header that names no nccl-tests collective (damaged: HTML copied with the log, an "
                          f"edit?): left out, not judged as any collective (line 2: {HTML_HEADER})\n")
    assert not (tmp_path / "r").exists()


def test_a_damaged_table_beside_good_ones_is_left_out_and_named(tmp_path):
    damaged = [HTML_HEADER if "Collective test starting" in line else line for line in AR]
    res, meta, rules = imported(tmp_path, str(write(tmp_path, damaged + AG)))
    assert res.exit_code == 1 and "import_incomplete" in rules and "PASS" not in res.output, res.output
    [run] = meta["imported"]
    assert run["collective"] == "all_gather" and run["rows"] == 62
    [p] = run["problems"]
    assert p["kind"] == "refused" and p["count"] == 31 and p["example"] == f"line 2: {HTML_HEADER}"
    rows = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert {json.loads(r)["collective"] for r in rows} == {"all_gather"}


@pytest.mark.parametrize("argv0", ["<b>all_reduce_perf</b>", "./build/b>", "rm -rf /", 7])
def test_a_json_run_naming_no_nccl_tests_program_is_one_error_line(tmp_path, argv0):
    doc = json.loads((H200_JSON / "all_reduce_1gpu.json").read_text())
    doc["args"][0] = argv0
    f = tmp_path / "all_reduce.json"
    f.write_text(json.dumps(doc))
    res, _, _ = imported(tmp_path, str(f))
    one_error_line(res, f"{f}: args[0] {str(argv0)!r} is no nccl-tests program")


# -- every row tripled, the log concatenated three times ------------------------------------------------

def test_a_log_concatenated_three_times_is_one_run_and_said(tmp_path):
    """Three copies of one run were three samples and PASS; now one run, the copies counted, WARN."""
    res, meta, rules = imported(tmp_path, str(write(tmp_path, AR * 3)))
    assert res.exit_code == 1 and "import_incomplete" in rules and "PASS" not in res.output, res.output
    [run] = meta["imported"]
    assert run["rows"] == 62
    [p] = run["problems"]
    assert (p["kind"], p["count"]) == ("repeated", 2 * 31) and "a log concatenated with itself" in p["reason"]
    assert p["lines"][:2] == [len(AR) + 11, len(AR) + 12]  # the second copy's first rows (1-based)
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 62


def test_one_file_given_twice_is_imported_once(tmp_path):
    log = H200 / "all_reduce.txt"
    res, meta, rules = imported(tmp_path, str(log), str(log))
    assert res.exit_code == 1 and "import_incomplete" in rules, res.output
    [run] = meta["imported"]
    assert run["problems"][0]["example"] == f"{log} line 11: the run again"


def test_every_row_tripled_is_one_table_and_said(tmp_path):
    tripled = [copy for line in AR for copy in ([line] * 3 if line[:12].strip().isdigit() else [line])]
    res, meta, rules = imported(tmp_path, str(write(tmp_path, tripled)))
    assert res.exit_code == 1 and "import_incomplete" in rules and "PASS" not in res.output, res.output
    [run] = meta["imported"]
    [p] = run["problems"]
    assert run["rows"] == 62 and (p["kind"], p["count"]) == ("repeated", 62)


def test_two_jobs_of_one_binary_are_two_runs(tmp_path):
    """What a copy is not: the same program run twice (its own pid, its own times) is two runs."""
    second = [line.replace("Pid   1182", "Pid   2345").replace("  8.72  ", "  8.91  ") for line in AR]
    res, meta, _ = imported(tmp_path, str(write(tmp_path, AR + second)), report=False)
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    assert [(r["rows"], r["problems"]) for r in meta["imported"]] == [(62, []), (62, [])]


# -- a time of 1e400 read as "nccl-tests printed no time" ----------------------------------------------

@pytest.mark.parametrize("value, reason", [("1e400", "time is not finite"), ("nan", "time is not finite"),
                                           ("-1e400", "time is not finite"), ("-8.72", "time is negative")])
def test_an_impossible_time_in_a_table_is_named_at_its_line(tmp_path, value, reason):
    lines = list(AR)
    lines[ROW_1M] = lines[ROW_1M].replace("  8.72", f"  {value}", 1)
    res, meta, rules = imported(tmp_path, str(write(tmp_path, lines)))
    assert res.exit_code == 1 and "import_incomplete" in rules and "printed no time" not in res.output
    assert f"1 line(s) left out: {reason} (line {ROW_1M + 1}: 1048576 " in res.output


@pytest.mark.parametrize("key, value, reason, shown", [
    ("time", "1e400", "time is not finite", "inf"),
    ("time", "NaN", "time is not finite", "nan"),
    ("time", '"nan"', "time is not finite", "nan"),
    ("time", "-1e400", "time is not finite", "-inf"),
    ("time", "1" + "0" * 400, "time is not finite", "1" + "0" * 19 + "... (401 digits)"),
    ("time", '"7.4"', "time is not a number", "'7.4'"),
    ("alg_bw", "Infinity", "algbw is not finite", "inf"),
    ("bus_bw", "-0.5", "busbw is negative", "-0.5"),
])
def test_an_impossible_value_in_json_is_named_not_read_as_missing(tmp_path, key, value, reason, shown):
    text = (H200_JSON / "all_reduce_1gpu.json").read_text()
    first = text.index(f'"{key}":')
    end = text.index(",", first)
    f = tmp_path / "all_reduce.json"
    f.write_text(text[:first] + f'"{key}":{value}' + text[end:])
    res, meta, rules = imported(tmp_path, str(f))
    assert res.exit_code == 1 and "import_incomplete" in rules, res.output
    assert "printed no" not in res.output and "failed in" not in res.output
    assert f"1 line(s) left out: {reason} (results[0]: {shown})" in res.output
    assert meta["imported"][0]["rows"] == 24


# -- a 512 TiB size that cannot be allocated ------------------------------------------------------------

def test_a_size_no_gpu_holds_is_refused_with_its_line_never_judged(tmp_path):
    """A 512 TiB row in the 2 x 8 H100 log, slow: it entered the headline (the mean of the largest
    sizes) and could drain a host. Now the line is left out and named; the headline is the log's own."""
    lines = A3MEGA.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["8589934592"]) + 1
    size = 512 << 40
    lines.insert(at, f"{size:>16} {size // 4:>16}     float     sum      -1  9999999   1.00    1.00      0"
                     "  9999999   1.00    1.00      0")
    res, meta, rules = imported(tmp_path, str(write(tmp_path, lines)), "--nics", "8x400")
    assert res.exit_code == 1 and "import_incomplete" in rules and "Drain" not in res.output, res.output
    assert (f"1 line(s) left out: size is larger than any GPU's memory (over 4 TiB) (line {at + 1}: "
            f"{size} ") in res.output
    assert "mean of the 3 largest sizes: 2G, 4G, 8G" in res.output
    assert meta["imported"][0]["rows"] == 62


# -- bounds: lines too long, too many lines ---------------------------------------------------------------

def test_a_line_too_long_to_read_is_left_out_and_named(tmp_path):
    lines = AR[:3] + ["# " + "x" * MAX_LINE_CHARS] + AR[3:]
    res, meta, rules = imported(tmp_path, str(write(tmp_path, lines)))
    assert res.exit_code == 1 and "import_incomplete" in rules, res.output
    [p] = meta["imported"][0]["problems"]
    assert p["lines"] == [4] and p["reason"].startswith(f"a line longer than {MAX_LINE_CHARS:,} characters")
    # before any run: counted with the first run
    res, meta, _ = imported(tmp_path / "b", str(write(tmp_path, ["x" * (MAX_LINE_CHARS + 1)] + AR)))
    assert res.exit_code == 1 and meta["imported"][0]["problems"][0]["lines"] == [1], res.output


def test_a_log_of_too_many_lines_is_one_error_line(tmp_path):
    f = tmp_path / "job.log"
    f.write_text("\n".join(AR) + "\n" * MAX_LOG_LINES)
    res, _, _ = imported(tmp_path, str(f))
    one_error_line(res, f"{f}: more than {MAX_LOG_LINES:,} lines")
    assert not (tmp_path / "run").exists()


# -- what a log does not say is never judged as if it had said it -----------------------------------------

def test_a_table_without_rank_lines_whose_ranks_cannot_be_told_is_not_a_pass(tmp_path):
    """A broadcast table pasted without its preamble: busbw = algbw on any rank count, so it is one
    rank only because nothing says otherwise: said, never PASS."""
    text = (H200_JSON / "broadcast_1gpu.txt").read_text().splitlines()
    pasted = [line for line in text if not line.lstrip("# ").startswith(("Rank", "nThread", "Collective",
                                                                          "nccl-tests version"))]
    res, meta, rules = imported(tmp_path, str(write(tmp_path, pasted)))
    assert res.exit_code == 1 and "PASS" not in res.output and "import_incomplete" in rules, res.output
    [run] = meta["imported"]
    assert run["collective"] == "broadcast" and [p["kind"] for p in run["problems"]] == ["unjudged"]


def test_a_table_that_fits_no_collective_is_not_a_pass(tmp_path):
    """No name anywhere and a busbw/algbw of 5 (no collective has it): 'unknown', said, never PASS."""
    lines = []
    for line in AR:
        if "Collective test" in line:
            continue
        cells = line.split()
        if line[:12].strip().isdigit():
            cells[7], cells[11] = f"{5 * float(cells[6]):.2f}", f"{5 * float(cells[10]):.2f}"
            line = "  ".join(cells)
        lines.append(line)
    res, meta, rules = imported(tmp_path, str(write(tmp_path, lines)))
    assert res.exit_code == 1 and "PASS" not in res.output and "import_incomplete" in rules, res.output
    [run] = meta["imported"]
    assert run["collective"] is None and "unjudged" in [p["kind"] for p in run["problems"]]


# -- a log of many jobs: what is said stays readable ------------------------------------------------------

def test_a_log_of_many_jobs_says_each_conclusion_once_and_counts_headlines(tmp_path):
    run = A3MEGA.read_text().splitlines()
    start = run.index("```") + 1
    body = run[start:run.index("```", start)]
    unnamed = [line for line in body if "Collective test" not in line]
    jobs = [line.replace("Pid   6899", f"Pid {9000 + k}") for k in range(14) for line in unnamed]
    res, meta, _ = imported(tmp_path, str(write(tmp_path, jobs)), report=False)
    assert res.exit_code == 0 and len(meta["imported"]) == 14, res.output
    said = res.output.splitlines()
    how = meta["imported"][0]["collective_inferred"]
    log = tmp_path / "job.log"
    assert [s for s in said if "inferred" in s] == [f"{log}: collective all_reduce {how} (14 runs)"]
    assert sum("large-message busbw" in s for s in said) == 10
    assert said[-1] == f"# ... and 4 more run(s): `netbench report {tmp_path / 'run'}`"
