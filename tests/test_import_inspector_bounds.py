"""``netbench import inspector`` on logs that cannot be judged as they stand (issue 44): a rank timed
by a CPU clock or a 0-us timer is never blamed, ranks missing, unreadable lines and absurd values are
said and never PASS, and one bad file is skipped with its reason, the rest read."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from netbench.cli import cli

DATA = Path(__file__).parent / "data" / "inspector"


def _import(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["import", "inspector", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    return res.exit_code, res.output


def _copy(src: str, tmp_path: Path) -> Path:
    shutil.copytree(DATA / src, tmp_path / "logs")
    return tmp_path / "logs"


def _rules(run: Path) -> list[tuple[str, str]]:
    return [(f["rule"], f["title"]) for f in json.loads((run / "findings.json").read_text())["findings"]]


def _edit(path: Path, pattern: str, repl: str) -> None:
    path.write_text(re.sub(pattern, repl, path.read_text()))


def test_a_rank_timed_by_a_cpu_clock_or_a_0_us_timer_is_not_blamed(tmp_path: Path) -> None:
    logs = _copy("late-rank6", tmp_path)
    late = logs / "node-b-pid4006.log"  # rank 6: the really late rank, and the one whose timing breaks
    for n, (pattern, repl, why) in enumerate([
        (r'"coll_exec_time_us": \d+', '"coll_exec_time_us": 0', "0 us, a timer that did not run,"),
        ('"kernel_gpu"', '"collective_cpu"', "timed by collective_cpu, not by the GPU kernel,"),
    ]):
        shutil.copy(DATA / "late-rank6" / late.name, late)
        _edit(late, pattern, repl)
        code, out = _import(str(logs), "--out", str(tmp_path / f"r{n}"))
        assert code == 1 and "slow rank" not in out, out
        assert f"rank 6 on node-b: timings unusable ({why} in 60 of 60 record(s)): it is not blamed" in out
        assert [r for r, _ in _rules(tmp_path / f"r{n}")] == ["import_incomplete"]


def test_a_0_us_timer_on_a_rank_that_was_not_late_blames_no_one(tmp_path: Path) -> None:
    logs = _copy("no-late", tmp_path)
    _edit(logs / "node-a-pid4001.log", r'"coll_exec_time_us": \d+', '"coll_exec_time_us": 0')
    code, out = _import(str(logs), "--out", str(tmp_path / "r"))
    assert code == 1 and "slow rank" not in out and "rank 1 on node-a: timings unusable" in out


def test_ranks_missing_is_not_judged_never_pass(tmp_path: Path) -> None:
    logs = _copy("no-late", tmp_path)
    for pid in (4006, 4007):
        os.remove(logs / f"node-b-pid{pid}.log")
    code, out = _import(str(logs), "--out", str(tmp_path / "r"))
    assert code == 1 and "PASS" not in out, out
    assert ("communicator 0x5e1f00d27a: rank(s) 6, 7 of 8 logged no collective: who arrives last is not "
            "judged") in out


def test_a_third_of_the_lines_unreadable_is_said_never_pass(tmp_path: Path) -> None:
    logs = _copy("no-late", tmp_path)
    for f in sorted(logs.iterdir()):
        lines = f.read_text().splitlines()
        f.write_text("\n".join(line[:40] if i % 3 == 0 else line for i, line in enumerate(lines)) + "\n")
    code, out = _import(str(logs), "--out", str(tmp_path / "r"))
    assert code == 1 and "PASS" not in out and "160 line(s) left out" in out, out
    rules = _rules(tmp_path / "r")
    assert len(rules) == 8 and all(r == "import_incomplete" and "20 line(s) left out: not JSON" in t
                                   for r, t in rules)


def test_absurd_message_sizes_are_left_out_never_pass(tmp_path: Path) -> None:
    logs = _copy("no-late", tmp_path)
    # rank 0's first 9 collectives: 1e300 bytes; the other 51 are judged, without them
    _edit(logs / "node-a-pid4000.log", r'("coll_sn": \d, "coll_msg_size_bytes": )67108864', r"\g<1>1e300")
    code, out = _import(str(logs), "--out", str(tmp_path / "r"))
    assert code == 1 and "PASS" not in out, out
    assert "9 line(s) left out: a value out of range" in out
    _edit(logs / "node-a-pid4000.log", "1e300", "1" + "0" * 400)  # an integer too large for a float
    code, out = _import(str(logs), "--out", str(tmp_path / "r2"))
    assert code == 1 and "9 line(s) left out: a value out of range" in out


def test_one_bad_file_is_skipped_with_its_reason_the_rest_read(tmp_path: Path) -> None:
    logs = _copy("late-rank6", tmp_path)
    (logs / "notes.txt").write_text("these are the job's logs\n")
    (logs / "binary.log").write_bytes(bytes(range(256)) * 10)
    os.mkfifo(logs / "pipe.log")
    code, out = _import(str(logs), "--out", str(tmp_path / "r"))
    assert code == 1, out
    assert "imported 480 collective record(s) from 8 Inspector log(s)" in out and "3 file(s) skipped" in out
    assert f"{logs}/notes.txt: skipped: no NCCL Inspector collective records" in out
    assert f"{logs}/pipe.log: skipped: is not a regular file (a FIFO)" in out
    assert "slow rank: rank 6 on node-b" in out  # what was read is still judged
    assert sorted(r for r, _ in _rules(tmp_path / "r")) == ["import_incomplete"] * 3 + ["inspector_slow_rank"]


def test_no_readable_file_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("hello\n")
    (tmp_path / "b.log").write_text('{"header": {}}\n')
    code, out = _import(str(tmp_path), "--no-report")
    assert code == 2 and out.count("\n") == 1
    assert "no readable NCCL Inspector log" in out and "(and 1 more file(s) skipped)" in out


def test_a_single_rank_communicator_is_not_judged_never_pass(tmp_path: Path) -> None:
    line = json.loads((DATA / "no-late" / "node-a-pid4000.log").read_text().splitlines()[0])
    line["header"]["n_ranks"] = 1
    (tmp_path / "one.log").write_text(json.dumps(line) + "\n")
    code, out = _import(str(tmp_path / "one.log"), "--out", str(tmp_path / "r"))
    assert code == 1 and "PASS" not in out and "1 rank only: no rank waits for another" in out, out
