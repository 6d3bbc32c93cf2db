"""The native engine's compiled loop (collectives/native_loop.c) on a CPU: built with the host's
compiler, it makes each prepared call through its function pointer with its arguments, in order,
and stops at the first failure. The functions here are ctypes callbacks with NCCL's signatures that
record what they were given; on a GPU the same loop calls libnccl (tests/test_engines.py)."""

from __future__ import annotations

import ctypes
import os
import shutil

import pytest
import torch
from netbench.collectives import native_loop
from netbench.collectives.ops import Buffers, NativeCall, get_collective

pytestmark = pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="needs a C compiler")

P, S, N = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
SIGNATURES = {  # nccl.h, as native_loop.c declares them
    native_loop.SRC_DST_OP: (P, P, S, N, N, P, P),
    native_loop.SRC_DST: (P, P, S, N, P, P),
    native_loop.REDUCE: (P, P, S, N, N, N, P, P),
    native_loop.PEER: (P, S, N, N, P, P),
    native_loop.GROUP: (),
}


class Recorder:
    """A C-callable stand-in for each of libnccl's functions: records (name, args); the call
    numbered ``fail_at`` returns ``rc``. And for cuStreamQuery: "not ready" ``busy`` times, then
    ``done`` (0: finished), each poll recorded."""

    def __init__(self, fail_at: int = -1, rc: int = 3, busy: int = 2, done: int = 0):
        self.seen: list[tuple[str, tuple]] = []
        self.polls: list[int] = []
        self.keep = []  # the callbacks must outlive the loop
        self.functions: dict[str, int] = {}
        for name, (_, kind) in native_loop.SYMBOLS.items():
            proto = ctypes.CFUNCTYPE(ctypes.c_int, *SIGNATURES[kind])

            def fn(*args, name=name):  # noqa: ANN002, ANN202
                self.seen.append((name, tuple(a or 0 for a in args)))
                return rc if len(self.seen) - 1 == fail_at else 0

            cb = proto(fn)
            self.keep.append(cb)
            self.functions[name] = ctypes.cast(cb, ctypes.c_void_p).value

        def query(stream):  # noqa: ANN001, ANN202
            self.polls.append(stream or 0)
            return native_loop.CUDA_ERROR_NOT_READY if len(self.polls) <= busy else done

        self.keep.append(ctypes.CFUNCTYPE(ctypes.c_int, P)(query))
        self.query = ctypes.cast(self.keep[-1], ctypes.c_void_p).value

    def loop(self, lib: ctypes.CDLL) -> native_loop.CompiledLoop:
        return native_loop.CompiledLoop(lib, self.functions, self.query)


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    return ctypes.CDLL(str(native_loop.build(into=tmp_path_factory.mktemp("cache"))))


def native_ops(name: str, slots: int = 3, nranks: int = 4) -> list:
    coll = get_collective(name)
    nc = NativeCall(comm=0xC0FFEE, stream=0x5EA, rank=1, nranks=nranks, dtype=7, op=0, root=2)
    bufs = [Buffers(torch.zeros(64), torch.zeros(64 * nranks)) for _ in range(slots)]
    return [coll.native(nc, b) for b in bufs]


@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                                  "sendrecv", "all_to_all"])
def test_each_call_is_made_with_its_arguments_in_order(lib: ctypes.CDLL, name: str) -> None:
    rec = Recorder()
    loop = rec.loop(lib)
    ops = native_ops(name)
    order = [ops[i % 3] for i in (1, 2, 0, 1, 2)]  # as a timed loop's slots come
    assert loop.timed(loop.prepare(order), 0x5EA) > 0
    assert rec.seen == [call for op in order for call in op.calls]
    assert rec.polls == [0x5EA] * 3  # the stream polled until it said done, after the last call
    first = next(args for _, args in rec.seen if args)  # a group starts with group_start()
    assert first[-2:] == (0xC0FFEE, 0x5EA)  # the communicator and stream, NCCL's last two arguments


def test_the_first_failed_call_is_named_and_the_rest_are_not_made(lib: ctypes.CDLL) -> None:
    rec = Recorder(fail_at=5)  # sendrecv: group_start, send, recv, group_end, group_start, send <- fails
    loop = rec.loop(lib)
    ops = native_ops("sendrecv", slots=2)
    with pytest.raises(RuntimeError, match=r"ncclSend returned 3 at call 5 of the timed loop"):
        loop.timed(loop.prepare(ops * 3), 0x5EA)
    assert len(rec.seen) == 6 and rec.polls == []  # nothing waited for after a failed call


def test_a_failed_wait_for_the_stream_is_named(lib: ctypes.CDLL) -> None:
    rec = Recorder(busy=1, done=700)  # cudaErrorIllegalAddress, say, once the stream has run
    loop = rec.loop(lib)
    with pytest.raises(RuntimeError, match=r"cuStreamQuery returned 700 after the timed loop"):
        loop.timed(loop.prepare(native_ops("all_reduce")), 0)
    assert len(rec.seen) == 3 and rec.polls == [0, 0]


def test_the_build_is_cached_and_a_broken_source_says_why(tmp_path) -> None:  # noqa: ANN001
    first = native_loop.build(into=tmp_path)
    assert native_loop.build(into=tmp_path) == first and first.stat().st_size > 0
    bad = tmp_path / "bad.c"
    bad.write_text("int nb_run(void) { return }\n")
    with pytest.raises(RuntimeError, match=r"failed on bad\.c: .*error"):
        native_loop.build(bad, into=tmp_path / "out")
    assert not list((tmp_path / "out").glob("*"))  # no half-written library left behind


def test_no_compiler_is_said_and_cc_may_carry_flags(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    gcc, path = shutil.which("gcc") or shutil.which("cc"), os.environ["PATH"]
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError, match=r"no C compiler \(cc, gcc or \$CC\) on this host"):
        native_loop.build(into=tmp_path / "a")
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("CC", f"{gcc} -m64 -Wall")
    assert native_loop.build(into=tmp_path / "b").stat().st_size > 0


def test_without_nccl4py_the_loop_stays_in_python_and_says_why(monkeypatch) -> None:  # noqa: ANN001
    native_loop.choose.cache_clear()
    try:
        choice = native_loop.choose()  # this machine has no nccl4py (a CPU torch)
        assert (choice.name, choice.loop) == ("python", None) and "nccl" in choice.reason
        native_loop.choose.cache_clear()
        monkeypatch.setenv(native_loop.ENV, "python")
        assert native_loop.choose().reason == "NETBENCH_NATIVE_LOOP=python"
    finally:
        native_loop.choose.cache_clear()


def test_a_table_section_timed_by_the_python_loop_says_so_and_why() -> None:
    """The NCCL engine's rows say which loop timed them; where it was Python's, the table says so
    under the section's title, once, with the rank's reason quoted (a remote rank's words)."""
    from netbench.run.table import TablePrinter

    def row(size: int, in_place: bool, loop: str, why: str | None) -> dict:
        return {"run_id": "r", "collective": "all_reduce", "backend": "nccl", "pattern": "world",
                "hosts": ["a"], "ranks": 1, "round": None, "bytes": size, "count": size // 4,
                "dtype": "float", "op": "sum", "in_place": in_place, "iters": 20, "warmup": 5, "time_us": 6.0,
                "time_us_min": 6.0, "time_us_max": 6.0, "rank_time_us": [6.0], "algbw_GBps": 0.1,
                "busbw_GBps": 0.1, "wrong": 0, "status": "ok", "error": None, "group": "world",
                "engine": "nccl", "cuda_graph": False, "loop": loop,
                "extra": {"loop_reason": why} if why else {}}

    out: list[str] = []
    table = TablePrinter(out.append)
    why = "RuntimeError: no C compiler (cc, gcc or $CC) on this host\x1b[31m"
    for size in (8, 64):
        for in_place in (False, True):
            table.add(row(size, in_place, "python", why), True, True)
    text = "\n".join(out)
    assert text.count("# loop: python, not C: small sizes read up to 2 us an operation high") == 1
    assert "no C compiler (cc, gcc or $CC) on this host" in text and "\x1b" not in text
    quiet: list[str] = []
    table = TablePrinter(quiet.append)
    table.add(row(8, False, "c", None), True, False)
    assert "# loop" not in "\n".join(quiet)
