"""The native engine's timed loop in C: one C call per operation, as nccl-tests makes them.

Why: a small eager all_reduce on one H200 takes 5-7 us, and each call through nccl4py's binding
(argument conversion, the GIL released and taken back, the result checked, all in Python's call
machinery) adds to NCCL's own cost. On a one-rank in-place all_reduce, where NCCL does no work, the
call cost netbench 0.75-1.8 us against nccl-tests' 0.28-0.74 (benchmarks/README.md, "The per-point
gather"), and the eager medians were 0.6-1.6 us above nccl-tests' from 8 B to 2 MiB. So the timed
loop over a point's prepared operations runs in C (``native_loop.c``): Python calls it once a loop,
and it calls libnccl's functions through their addresses in the libnccl nccl4py loaded, with the
arguments the binding would have been given, and then waits for the stream as nccl-tests does
(polling ``cuStreamQuery``), both inside its clock. Warm-up, the correctness pass, graph capture and the
per-operation stamps (--per-iter) still go through the binding: none of them is timed per call.

How it is built: ``native_loop.c`` with the host's C compiler (``$CC``, else ``cc`` or ``gcc``) into a
per-user cache (``$XDG_CACHE_HOME/netbench``, else ``~/.cache/netbench``), once per source and
machine type, written under a temporary name and renamed so that ranks of one host building at once
never load half a file. It needs no CUDA or NCCL header. Where there is no compiler, the build
fails, or libnccl's functions cannot be found, the loop stays in Python and every row it timed says
so (``ResultRow.loop``), with the reason in the rank's log. ``NETBENCH_NATIVE_LOOP=python`` asks for
the Python loop (to compare the two).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from netbench.collectives.ops import NativeOp

SOURCE = Path(__file__).with_name("native_loop.c")
ENV = "NETBENCH_NATIVE_LOOP"  # "python": the binding's loop even where the C one builds

# nccl4py's binding function -> (libnccl's symbol, its kind in native_loop.c's nb_run)
SRC_DST_OP, SRC_DST, REDUCE, PEER, GROUP = range(5)
CUDA_ERROR_NOT_READY = 600  # cuda.h: the stream still has work
SYMBOLS: dict[str, tuple[str, int]] = {
    "all_reduce": ("ncclAllReduce", SRC_DST_OP),
    "reduce_scatter": ("ncclReduceScatter", SRC_DST_OP),
    "broadcast": ("ncclBroadcast", SRC_DST_OP),
    "all_gather": ("ncclAllGather", SRC_DST),
    "reduce": ("ncclReduce", REDUCE),
    "send": ("ncclSend", PEER),
    "recv": ("ncclRecv", PEER),
    "group_start": ("ncclGroupStart", GROUP),
    "group_end": ("ncclGroupEnd", GROUP),
}


class _Call(ctypes.Structure):
    """``nb_call`` of native_loop.c: the function, its kind, its arguments as 64-bit words."""

    _fields_ = [("fn", ctypes.c_void_p), ("kind", ctypes.c_int64), ("a", ctypes.c_uint64 * 8)]


@dataclass(frozen=True)
class LoopChoice:
    """Which loop times the native engine's eager points in this process, and why not C."""

    loop: CompiledLoop | None
    reason: str | None  # None when ``loop`` is the C one

    @property
    def name(self) -> str:
        return "c" if self.loop is not None else "python"


class CompiledLoop:
    """``nb_timed`` of the built library, with the addresses of libnccl's functions it calls and of
    the CUDA driver's ``cuStreamQuery`` it waits with."""

    def __init__(self, lib: ctypes.CDLL, functions: dict[str, int], query: int):
        self.timed_calls = lib.nb_timed
        self.timed_calls.argtypes = [ctypes.POINTER(_Call), ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                     ctypes.POINTER(ctypes.c_double)]
        self.timed_calls.restype = ctypes.c_int
        self.functions, self.query = functions, query

    def prepare(self, ops: Sequence[NativeOp]) -> ctypes.Array:
        """The C array of every call of ``ops``, in order (made before a loop's clock starts)."""
        flat = [(name, args) for op in ops for name, args in op.calls]
        arr = (_Call * len(flat))()
        for slot, (name, args) in zip(arr, flat, strict=True):
            slot.fn = self.functions[name]
            slot.kind = SYMBOLS[name][1]
            slot.a[: len(args)] = args
        return arr

    def timed(self, calls: ctypes.Array, stream: int) -> float:
        """Make the prepared calls and wait for ``stream`` to finish them, as nccl-tests times its
        loop: the microseconds from before the first call until the stream was seen finished.
        RuntimeError naming the first call that failed (the rest are not made) or the wait's error."""
        at, us = ctypes.c_int64(-1), ctypes.c_double(0.0)
        rc = self.timed_calls(calls, len(calls), ctypes.byref(at), self.query, stream or None,
                              CUDA_ERROR_NOT_READY, ctypes.byref(us))
        if rc != 0 and at.value < 0:
            raise RuntimeError(f"cuStreamQuery returned {rc} after the timed loop")
        if rc != 0:
            fn = next(n for n in SYMBOLS if self.functions[n] == calls[at.value].fn)
            raise RuntimeError(f"{SYMBOLS[fn][0]} returned {rc} at call {at.value} of the timed loop")
        return us.value


def cache_dir() -> Path:
    """Where the built library is kept: per user, as other build caches."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "netbench"


def build(source: Path = SOURCE, into: Path | None = None) -> Path:
    """The shared library built from ``source`` (cached: built once per source and machine type).
    RuntimeError with the compiler's first error line when it cannot be built."""
    text = source.read_bytes()
    tag = hashlib.sha256(text + platform.machine().encode() + sys.platform.encode()).hexdigest()[:16]
    into = into or cache_dir()
    lib = into / f"native_loop-{tag}.so"
    if lib.exists():
        return lib
    found = shutil.which("cc") or shutil.which("gcc")
    cc = shlex.split(os.environ.get("CC", "")) or ([found] if found else [])
    if not cc:
        raise RuntimeError("no C compiler (cc, gcc or $CC) on this host")
    into.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=lib.name + ".", dir=into)
    os.close(fd)
    try:
        # $CC may carry flags (CC="gcc -m64"): split as a shell would, never run through one
        res = subprocess.run([*cc, "-O2", "-shared", "-fPIC", "-o", tmp, str(source)], capture_output=True,
                             text=True, timeout=120)
        if res.returncode != 0:
            first = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr.strip()[:200])
            raise RuntimeError(f"{Path(cc[0]).name} failed on {source.name}: {first}")
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


def _libnccl_functions() -> dict[str, int]:
    """The addresses of the functions ``SYMBOLS`` names in the libnccl nccl4py loaded (the one its
    communicators live in: opened again by its own path without loading, so never a second copy)."""
    from nccl.bindings._internal import nccl as internal

    path = internal._inspect_loaded_library_path()
    if not path:  # CDLL(None) would search the whole process, where another libnccl may be
        raise RuntimeError("nccl4py has not loaded libnccl yet")
    lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    # a missing symbol raises AttributeError ("undefined symbol: ..."), the reason the caller reports
    return {name: ctypes.cast(getattr(lib, sym), ctypes.c_void_p).value for name, (sym, _) in SYMBOLS.items()}


def _stream_query() -> int:
    """The address of the CUDA driver's ``cuStreamQuery`` (libcuda, in the process already: torch
    made its context; a runtime stream handle is the driver's)."""
    lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    return ctypes.cast(lib.cuStreamQuery, ctypes.c_void_p).value


@functools.cache
def choose() -> LoopChoice:
    """The loop for this process (decided once; nccl4py is loaded by then: a native communicator
    exists before any point is measured)."""
    if os.environ.get(ENV, "c") == "python":
        return LoopChoice(None, f"{ENV}=python")
    try:
        functions, query = _libnccl_functions(), _stream_query()
        lib = ctypes.CDLL(str(build()))
    except Exception as exc:  # noqa: BLE001 - any failure leaves the binding's loop, said in the rows
        first = str(exc).splitlines()[0] if str(exc) else ""
        return LoopChoice(None, f"{type(exc).__name__}: {first}"[:300])
    return LoopChoice(CompiledLoop(lib, functions, query), None)
