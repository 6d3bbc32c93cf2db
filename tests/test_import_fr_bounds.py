"""``netbench import flight-recorder`` on hostile and odd dumps (issue 44): what a pickle may expand to
is bounded (shared references, nesting, integers, a list inside itself, bytes, time), a refused dump
is skipped with its reason and the rest are read, and what could not be judged is said, never PASS."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from netbench.cli import cli
from netbench.importers.bounded import Limits
from netbench.importers.flight_recorder import dump as dump_module

DATA = Path(__file__).parent / "data" / "flight_recorder"
HANG = DATA / "hang-gloo-pickle"


def _import(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["import", "flight-recorder", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    return res.exit_code, res.output


def _entry(seq: int, sizes: object = ((4096,),), p2p: bool = False) -> dict[str, object]:
    return {"collective_seq_id": 0 if p2p else seq, "p2p_seq_id": seq if p2p else 0, "is_p2p": p2p,
            "profiling_name": "nccl:send" if p2p else "nccl:all_reduce", "process_group": ("0", "default_pg"),
            "state": "completed", "input_sizes": sizes}


def _shared_tree(levels: int) -> list[object]:
    """A list whose expansion has 2**levels leaves, pickled in a few hundred bytes (the memo)."""
    tree: list[object] = [0, 0]
    for _ in range(levels):
        tree = [tree, tree]
    return tree


def _hang_with(tmp_path: Path, rank2: bytes) -> Path:
    """The real 3-rank hang, rank 2's dump replaced by ``rank2``."""
    shutil.copytree(HANG, tmp_path / "d")
    (tmp_path / "d" / "h2" / "fr_trace_2").write_bytes(rank2)
    return tmp_path / "d"


def test_a_tree_of_shared_references_is_refused_quickly_and_the_rest_read(tmp_path: Path) -> None:
    hostile = pickle.dumps({"version": "2.10", "entries": [_entry(1, _shared_tree(40))]})
    assert len(hostile) < 20_000  # 2**40 leaves once expanded
    d = _hang_with(tmp_path, hostile)
    res = subprocess.run([sys.executable, "-m", "netbench", "import", "flight-recorder", str(d), "--out",
                          str(tmp_path / "r")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stdout + res.stderr  # a warning: rank 2 is not judged, never PASS
    assert f"{d}/h2/fr_trace_2: skipped: not a Flight Recorder dump: expands to more than" in res.stderr
    assert "imported 2 Flight Recorder dump(s)" in res.stdout and "rank(s) 2: dump not read" in res.stdout
    assert "left no dump" not in res.stdout
    found = json.loads((tmp_path / "r" / "findings.json").read_text())["findings"]
    assert [(f["rule"], f["subject"]) for f in found] == [("import_incomplete", f"{d}/h2/fr_trace_2")]


@pytest.mark.parametrize("raw, why", [
    # a list 100,000 deep: built by opcodes (pickle.dumps itself would overflow the stack)
    (b"\x80\x02}X\x07\x00\x00\x00entries" + b"]" * 100_000 + b"a" * 99_999 + b"s.", "nested more than 64"),
    # a tuple 100,000 deep as a dict key: hashing it would recurse in C while loading
    (b"\x80\x02}N" + b"\x85" * 100_000 + b"N" + b"s.", "nested more than 64"),
    (pickle.dumps({"entries": [], "version": 10**5000}), "an integer of about 5,001 digits"),
    (b"(dS'entries'\nL" + b"7" * 5001 + b"L\ns.", "5001 digits"),
    (pickle.dumps({"entries": [_entry(1, ["x" * 1_000_000] * 2_000)]}), "MiB of text"),
    (b"\x80\x02}r\xff\xff\xff\x7f.", "memo index 2147483647 out of range"),
])
def test_a_dump_past_a_bound_is_one_line_exit_2(tmp_path: Path, raw: bytes, why: str) -> None:
    (tmp_path / "fr_trace_0").write_bytes(raw)
    code, out = _import(str(tmp_path / "fr_trace_0"), "--no-report")
    assert code == 2 and why in out, out
    assert out.count("\n") == 1 and "no readable Flight Recorder dump" in out


def test_a_list_inside_itself_is_refused(tmp_path: Path) -> None:
    loop: list[object] = []
    loop.append(loop)
    (tmp_path / "fr_trace_0").write_bytes(pickle.dumps({"entries": [_entry(1, loop)]}))
    code, out = _import(str(tmp_path / "fr_trace_0"), "--no-report")
    assert code == 2 and "holds a container inside itself" in out


@pytest.mark.parametrize("raw", [
    b"cos\nsystem\n(S'touch MARK'\ntR.",  # GLOBAL + REDUCE, protocol 0
    b"(S'touch MARK'\nios\nsystem\n.",  # INST
    b"\x80\x02(cos\nsystem\nS'touch MARK'\no.",  # OBJ
    b"\x80\x02cos\nsystem\n)\x81.",  # NEWOBJ
    b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93BINCMD\x85R.",  # STACK_GLOBAL
    b"\x80\x02}}b.",  # BUILD (a __setstate__ call)
    b"\x80\x02\x82\x01.",  # EXT1: the copyreg extension registry
    b"Pfoo\n.",  # PERSID
])
def test_a_pickle_naming_code_is_refused_unrun(tmp_path: Path, raw: bytes) -> None:
    cmd = b"touch " + str(tmp_path / "ran").encode()
    raw = raw.replace(b"touch MARK", cmd).replace(b"BINCMD", b"X" + len(cmd).to_bytes(4, "little") + cmd)
    (tmp_path / "fr_trace_0").write_bytes(raw)
    code, out = _import(str(tmp_path / "fr_trace_0"), "--no-report")
    assert code == 2 and "not a Flight Recorder dump" in out and not (tmp_path / "ran").exists()


def test_byte_and_time_bounds_skip_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dump_module, "LIMITS", Limits(bytes=1000))
    code, out = _import(str(HANG / "h0" / "fr_trace_0"), "--no-report")
    assert code == 2 and "larger than 1,000 bytes" in out
    (tmp_path / "fr_trace_0").write_bytes(pickle.dumps({"entries": [_entry(1, list(range(70_000)))]}))
    monkeypatch.setattr(dump_module, "LIMITS", Limits(seconds=0))
    code, out = _import(str(tmp_path / "fr_trace_0"), "--no-report")
    assert code == 2 and "not read within 0 s" in out


def test_only_point_to_point_entries_is_not_judged_never_pass(tmp_path: Path) -> None:
    for rank in (0, 1):
        (tmp_path / f"fr_trace_{rank}").write_bytes(pickle.dumps(
            {"version": "2.10", "entries": [_entry(s, p2p=True) for s in (1, 2, 3)]}))
    code, out = _import(str(tmp_path / "fr_trace_0"), str(tmp_path / "fr_trace_1"), "--out",
                        str(tmp_path / "r"))
    assert code == 1 and "PASS" not in out, out
    assert "no collective in any of the 2 dump(s) (only 6 point-to-point operation(s))" in out
    assert "nothing was judged" in out
    found = json.loads((tmp_path / "r" / "findings.json").read_text())["findings"]
    assert [f["rule"] for f in found] == ["import_incomplete"]


def test_a_negative_rank_is_refused_not_read_as_its_digits(tmp_path: Path) -> None:
    shutil.copy(HANG / "h0" / "fr_trace_0", tmp_path / "fr_trace_-1")
    code, out = _import(str(tmp_path / "fr_trace_-1"), "--no-report")
    assert code == 2 and "rank -1: a rank is never negative" in out
    shutil.copy(HANG / "h0" / "fr_trace_0", tmp_path / "fr_trace_123456789")
    code, out = _import(str(tmp_path / "fr_trace_123456789"), "--no-report")
    assert code == 2 and "beyond 9,999,999" in out


def test_dumps_in_folders_not_named_like_hosts_are_read_and_said(tmp_path: Path) -> None:
    for folder, ranks in (("node one", (0, 1)), ("node two", (2,))):
        (tmp_path / "d" / folder).mkdir(parents=True)
        for r in ranks:
            shutil.copy(HANG / f"h{r}" / f"fr_trace_{r}", tmp_path / "d" / folder)
    code, out = _import(str(tmp_path / "d"), "--no-report")
    assert "imported 3 Flight Recorder dump(s)" in out, out
    assert f"{tmp_path}/d/node one: 2 dump(s) read (rank 0, 1); their host is unknown" in out
    assert "never entered by rank 2" in out and "no dump" not in out


def test_two_dumps_of_one_rank_that_disagree_are_said_not_merged(tmp_path: Path) -> None:
    d = tmp_path / "d"
    for h in ("h0", "h1", "h1b"):
        (d / h).mkdir(parents=True)
    shutil.copy(HANG / "h0" / "fr_trace_0", d / "h0")
    shutil.copy(HANG / "h1" / "fr_trace_1", d / "h1")
    shutil.copy(HANG / "h2" / "fr_trace_2", d / "h1b" / "fr_trace_1")  # rank 2's dump under rank 1's name
    code, out = _import(str(d), "--no-report")
    assert (f"rank 1 has 2 dumps that disagree ({d}/h1/fr_trace_1, {d}/h1b/fr_trace_1): none of them is "
            "read") in out
    assert "rank(s) 1: dump not read" in out
    shutil.copy(HANG / "h1" / "fr_trace_1", d / "h1b" / "fr_trace_1")  # the same dump twice: read once
    code, out = _import(str(d), "--no-report")
    assert "rank 1: 2 files hold the same dump" in out and "read once" in out and "skipped" not in out


def test_a_long_list_of_ranks_without_a_dump_says_how_many_more(tmp_path: Path) -> None:
    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(50)))}}
    for r in (0, 1):
        seqs = (1, 2) if r == 0 else (1,)
        entries = [{**_entry(s), "process_group": ["0", "default_pg"]} for s in seqs]
        (tmp_path / f"fr_trace_{r}.json").write_text(json.dumps({"version": "2.10", "pg_config": cfg,
                                                                 "entries": entries}))
    code, out = _import(str(tmp_path), "--out", str(tmp_path / "r"))
    assert code == 2 and "no dump from rank(s) 2, 3, 4" in out and "21 and 28 more" in out, out
    found = json.loads((tmp_path / "r" / "findings.json").read_text())["findings"]
    assert "21 and 28 more left no dump" in found[0]["title"]


def test_one_rank_alone_is_not_judged_never_pass(tmp_path: Path) -> None:
    dump = {"version": "2.10", "entries": [_entry(1), _entry(2)]}  # no pg_config: no other rank named
    (tmp_path / "fr_trace_0.json").write_text(json.dumps(dump))
    code, out = _import(str(tmp_path / "fr_trace_0.json"), "--out", str(tmp_path / "r"))
    assert code == 1 and "PASS" not in out and "nobody to compare it with, so nothing was judged" in out, out
