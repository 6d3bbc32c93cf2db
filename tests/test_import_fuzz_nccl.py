"""Fuzz `netbench import nccl-tests` (issue 44): real logs and -J files damaged as hostile or careless
hands damage them (cells and headers replaced by anything, blocks of lines repeated or dropped, HTML
in the header, values of the wrong type, of 400 digits, Infinity, NaN, deep nesting) end in a
documented exit status (0, 1 a warning, 2 a FAIL verdict or bad input, 3 no verdict), with one
`netbench: error:` line when nothing was imported; never a traceback or an internal error."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from click.testing import CliRunner
from fixtures_path import fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netbench.cli import cli

LOGS = {name: (fixture("nccl-tests-h200-1gpu") / f"{name}.txt").read_text().splitlines()
        for name in ("all_reduce", "sendrecv")}
LOGS["a3mega"] = fixture(
    "nccl-tests-public/lessizzmore-create-a3mega-ztan-fork__ztan-NCCL-test-result.txt").read_text().splitlines()
JSON_DOC = json.loads((Path(__file__).resolve().parent / "data" / "nccl_tests" / "h200-1gpu-json"
                       / "reduce_scatter_1gpu_periter.json").read_text())
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# any character but those that end a line (a new line is another line, not this one's damage)
CHARS = st.characters(blacklist_categories=("Cs",),
                      blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
TOKENS = st.one_of(
    st.text(CHARS, max_size=16),
    st.sampled_from(["1e400", "-1e400", "nan", "inf", "-1", "0", "N/A", "9" * 30, str(512 << 40),
                     "<b>all_reduce_perf</b>", "b>", "float", "sum", "#", "Rank", "size", "count",
                     "Test NCCL failure common.cu:1", "# Avg bus bandwidth : 1e400"]),
)
EDITS = st.lists(st.one_of(
    st.tuples(st.just("cell"), st.integers(0, 80), st.integers(0, 14), TOKENS),
    st.tuples(st.just("line"), st.integers(0, 80), st.text(CHARS, max_size=120)),
    st.tuples(st.just("repeat"), st.integers(0, 80), st.integers(1, 60), st.integers(1, 3)),
    st.tuples(st.just("drop"), st.integers(0, 80), st.integers(1, 30)),
    st.tuples(st.just("header"), TOKENS),
), min_size=1, max_size=5)


def damaged(lines: list[str], edits: list[tuple]) -> list[str]:
    out = list(lines)
    for edit in edits:
        at = edit[1] % len(out) if isinstance(edit[1], int) and out else 0
        if edit[0] == "cell" and out:
            cells = out[at].split() or [""]
            cells[edit[2] % len(cells)] = edit[3]
            out[at] = "   ".join(cells)
        elif edit[0] == "line" and out:
            out[at] = edit[2]
        elif edit[0] == "repeat":
            out[at:at] = out[at:at + edit[2]] * edit[3]
        elif edit[0] == "drop":
            del out[at:at + edit[2]]
        elif edit[0] == "header":
            out = [f"# Collective test starting: {edit[1]}" if "Collective test starting" in line else line
                   for line in out]
    return out


def check(path: Path, out: Path, report: bool) -> None:
    """The command's end: a documented status, no traceback, one error line when nothing was written."""
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(path), "--out", str(out),
                                   *([] if report else ["--no-report"])])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert res.exit_code in (0, 1, 2, 3), res.output
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    if not out.exists():
        assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
        assert res.output.startswith("netbench: error: "), res.output
    else:
        assert json.loads((out / "run.json").read_text())["status"] == "completed"


@SETTINGS
@given(log=st.sampled_from(sorted(LOGS)), edits=EDITS, report=st.booleans())
def test_fuzz_a_damaged_text_log_ends_in_a_documented_status(log, edits, report):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{log}.log"
        path.write_text("\n".join(damaged(LOGS[log], edits)) + "\n")
        check(path, Path(tmp) / "run", report)


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True),
              st.sampled_from([10**400, -(10**400), "nan", "inf", "<b>x</b>", "", "    -1", "float", "sum"]),
              st.text(CHARS, max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
# where a value is put: a top-level key, a config key, or a key of a result or its placements
SPOTS = st.one_of(
    st.tuples(st.just("top"), st.sampled_from(["args", "config", "results", "nccl_version", "errors", "env",
                                               "average_bus_bandwidth", "out_of_bounds"])),
    st.tuples(st.just("config"), st.sampled_from(["nthreads", "ngpus", "iterations", "devices", "graph"])),
    st.tuples(st.just("result"), st.integers(0, 8), st.sampled_from(["size", "count", "type", "redop", "root",
                                                                      "out_of_place", "in_place_per_iter"])),
    st.tuples(st.just("placement"), st.integers(0, 8), st.sampled_from(["out_of_place", "in_place"]),
              st.sampled_from(["time", "alg_bw", "bus_bw", "nwrong", "cpu_time"])),
)


def put(doc: dict, spot: tuple, value: object) -> None:
    results = doc["results"] if isinstance(doc.get("results"), list) else []
    if spot[0] == "top":
        doc[spot[1]] = value
    elif spot[0] == "config" and isinstance(doc.get("config"), dict):
        doc["config"][spot[1]] = value
    elif spot[0] == "result" and results and isinstance(results[spot[1] % len(results)], dict):
        results[spot[1] % len(results)][spot[2]] = value
    elif spot[0] == "placement" and results:
        body = results[spot[1] % len(results)]
        if isinstance(body, dict) and isinstance(body.get(spot[2]), dict):
            body[spot[2]][spot[3]] = value


@SETTINGS
@given(changes=st.lists(st.tuples(SPOTS, JSON_VALUES), min_size=1, max_size=4),
       nesting=st.sampled_from([0, 0, 0, 100_000]), report=st.booleans())
def test_fuzz_a_damaged_json_file_ends_in_a_documented_status(changes, nesting, report):
    doc = json.loads(json.dumps(JSON_DOC))
    for spot, value in changes:
        put(doc, spot, value)
    text = json.dumps(doc)
    if nesting:  # deeper than any parser recurses: a value of nested lists, written by hand
        text = text.replace('"results": [', '"results": [' + "[" * nesting + "]" * nesting + ", ", 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "all_reduce.json"
        path.write_text(text)
        check(path, Path(tmp) / "run", report)
