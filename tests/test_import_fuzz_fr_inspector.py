"""Fuzzing ``netbench import flight-recorder`` and ``netbench import inspector`` (issue 44): whatever a
dump or log holds (pickles of shared references, nested and self-containing containers, huge
integers, damaged bytes; Inspector lines of any value), the command ends with 0, 1, 2 or 3, one
clear line at most for an error, never a traceback or ``internal error``. Small example counts: it
runs in CI on 2 cores."""

from __future__ import annotations

import json
import pickle
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netbench.cli import cli

DATA = Path(__file__).parent / "data"
REAL_DUMP = (DATA / "flight_recorder" / "hang-gloo-pickle" / "h0" / "fr_trace_0").read_bytes()
REAL_LINE = (DATA / "inspector" / "late-rank6" / "node-a-pid4000.log").read_text().splitlines()[0]
FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.data_too_large])

# integers of 5001 digits made by .map: hypothesis cannot show 10**5001 (Python refuses its repr)
_atoms = (st.none() | st.booleans() | st.integers()
          | st.sampled_from([5001, 61, 19]).map(lambda digits: -(10**digits))
          | st.floats() | st.text(max_size=12) | st.binary(max_size=8))
_values = st.recursive(_atoms, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=16)


class Shape(NamedTuple):
    """A value to put in a field, then shared ``levels`` times over (2**levels references once
    expanded), nested ``depth`` deep, or put inside itself: built in the test (``_built``), so that
    hypothesis only ever prints the recipe."""

    value: Any
    levels: int
    depth: int
    loop: bool


_shape = st.builds(Shape, _values, st.integers(0, 45), st.sampled_from([0, 0, 3, 70, 300]), st.booleans())


def _field(plain: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return plain | _shape


def _built(x: Any, shared: bool = True) -> Any:
    """``x`` with every Shape built; ``shared=False`` (what JSON can hold): no sharing, no loop."""
    if isinstance(x, Shape):
        value = x.value
        for _ in range(x.levels if shared else 0):
            value = [value, value]  # one object referenced twice: the pickle's memo
        for _ in range(x.depth):
            value = [value]
        if x.loop and shared:
            loop: list[Any] = [value]
            loop.append(loop)
            value = loop
        return value
    if isinstance(x, dict):
        return {k: _built(v, shared) for k, v in x.items()}
    if isinstance(x, list):
        return [_built(v, shared) for v in x]
    return x


_entry = st.fixed_dictionaries({
    "collective_seq_id": _field(st.integers(0, 8)),
    "profiling_name": _field(st.sampled_from(["nccl:all_reduce", "gloo:broadcast"])),
    "is_p2p": _field(st.booleans()),
    "process_group": _field(st.just(("0", "default_pg"))),
    "input_sizes": _field(st.just([[4096]])),
    "state": _field(st.sampled_from(["completed", "scheduled"])),
})
_dump = st.fixed_dictionaries({
    "version": _field(st.just("2.10")),
    "pg_config": _field(st.just({"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}})),
    "entries": st.lists(_entry, max_size=5) | _shape,
})


def _damaged(data: st.DataObject) -> bytes:
    raw = bytearray(REAL_DUMP)
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at:at + 1] = data.draw(st.binary(min_size=0, max_size=3))
    return bytes(raw)


def _run(importer: str, folder: Path, report: bool) -> None:
    args = ["import", importer, str(folder), "--out", str(folder.parent / "run")]
    res = CliRunner().invoke(cli, args + ([] if report else ["--no-report"]))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert res.exit_code in (0, 1, 2, 3), res.output
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output


@FUZZ
@given(data=st.data(), ranks=st.integers(1, 3), report=st.booleans())
def test_fuzzed_flight_recorder_dumps_end_cleanly(data: st.DataObject, ranks: int, report: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dumps = Path(tmp) / "dumps"
        dumps.mkdir()
        for rank in range(ranks):
            how = data.draw(st.sampled_from(["pickle", "json", "damaged"]))
            if how == "damaged":
                raw = _damaged(data)
            else:
                dump = _built(data.draw(_dump), shared=how == "pickle")
                try:
                    raw = (json.dumps(dump).encode() if how == "json"
                           else pickle.dumps(dump, protocol=data.draw(st.sampled_from([0, 2, 4, 5]))))
                except (TypeError, ValueError, RecursionError):  # not JSON (bytes keys): the pickle then
                    raw = pickle.dumps(dump)
            (dumps / f"fr_trace_{rank}").write_bytes(raw)
        _run("flight-recorder", dumps, report)


_inspector_record = st.fixed_dictionaries({
    "header": _field(st.fixed_dictionaries({
        "id": st.sampled_from(["0x1", "0x2"]), "rank": _field(st.integers(-1, 4)),
        "n_ranks": _field(st.integers(0, 4)), "nnodes": st.just(1)})),
    "metadata": st.fixed_dictionaries({"hostname": _field(st.sampled_from(["node-a", "node-b"]))}),
    "coll_perf": _field(st.fixed_dictionaries({
        "coll": st.just("AllReduce"), "coll_sn": _field(st.integers(0, 8)),
        "coll_msg_size_bytes": _field(st.sampled_from([8, 1 << 26, 1e300, 10**400, -1])),
        "coll_exec_time_us": _field(st.sampled_from([0, 1, 2000, 1e300]) | st.floats(0, 1e4)),
        "coll_timing_source": st.sampled_from(["kernel_gpu", "kernel_cpu", "collective_cpu", "unknown"]),
        "coll_busbw_gbs": _field(st.floats(0, 1e3) | st.just(1e300))})),
})


@st.composite
def _inspector_line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["record", "record", "real", "text", "p2p"]))
    if kind == "real":
        return REAL_LINE
    if kind == "text":
        return draw(st.text(max_size=40).filter(lambda s: "\n" not in s and "\r" not in s))
    record = _built(draw(_inspector_record), shared=False)
    if kind == "p2p":
        record = {**record, "p2p_perf": record.pop("coll_perf")}
    try:
        return json.dumps(record)
    except (TypeError, ValueError, RecursionError):  # bytes, 5001-digit integers: a line not JSON
        return '{"header": {"rank": b"\\x00"'



@FUZZ
@given(files=st.lists(st.lists(_inspector_line(), min_size=0, max_size=12), min_size=1, max_size=3),
       report=st.booleans())
def test_fuzzed_inspector_logs_end_cleanly(files: list[list[str]], report: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        for i, lines in enumerate(files):
            (logs / f"rank{i}.log").write_text("\n".join(lines) + "\n")
        _run("inspector", logs, report)
