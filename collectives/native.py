"""The native engine: NCCL called directly through NVIDIA's Python bindings (``nccl4py``).

Why a second engine: torch's process group costs 10-25 us of host time per call (work objects,
stream bookkeeping), so without CUDA graphs small messages measured through torch are 4-6x slower
than nccl-tests, and torch has no out-of-place all_reduce. nccl4py's low-level bindings
(``nccl.bindings.nccl``) call ``ncclAllReduce`` and friends on raw pointers for a few microseconds,
in the same process as torch and on the libnccl torch has already loaded (the dynamic loader hands
back the library that is in the process), so both engines measure the same NCCL.

Division of labour: torch allocates the buffers and owns the streams (the harness times torch's
current stream with CUDA events, graphs capture it as before); the group's torch process group still
lines ranks up and gathers their times; only the timed operations go through the NCCL communicator
made here. Nothing of nccl4py is imported unless a GPU rank asks for this engine.
"""

from __future__ import annotations

import datetime as _dt
import importlib
from typing import Any

import torch

# ncclDataType_t and ncclRedOp_t (nccl.h): fixed by the NCCL ABI
NCCL_DTYPES = {
    torch.int8: 0,
    torch.uint8: 1,
    torch.int32: 2,
    torch.int64: 4,
    torch.float16: 6,
    torch.float32: 7,
    torch.float64: 8,
    torch.bfloat16: 9,
}
NCCL_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


def bindings() -> Any:
    """``nccl.bindings.nccl``, or ImportError with the reason."""
    return importlib.import_module("nccl.bindings.nccl")


def unavailable_reason() -> str | None:
    """None when the native engine can run here, else why not (shown to the user, recorded)."""
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    try:
        bindings()
    except Exception as exc:  # noqa: BLE001 - ImportError or a loader error of the shared library
        return f"nccl4py not importable ({type(exc).__name__}: {exc}); pip install nccl4py"
    return None


def engines_for(requested: str, device: str) -> list[str]:
    """The engines a rank measures with. ``auto``: NCCL directly on GPUs when nccl4py imports (the
    numbers nccl-tests users compare with), torch otherwise; ``both``: torch beside it."""
    if device != "cuda":
        return ["torch"]
    if requested == "torch":
        return ["torch"]
    reason = unavailable_reason()
    if requested == "auto":
        return ["torch"] if reason else ["nccl"]
    if reason:
        raise RuntimeError(f"--engine {requested} needs the native NCCL engine: {reason}")
    return ["nccl", "torch"] if requested == "both" else ["nccl"]


class NativeComm:
    """One NCCL communicator for one group, made beside the group's torch process group.

    The unique id travels through the group's own (prefixed) store, as torch's does."""

    def __init__(self, store: Any, grank: int, nranks: int, timeout_s: float):
        self.nccl = bindings()
        if grank == 0:
            store.set("native_uid", bytes(self.nccl.get_unique_id()))
        store.wait(["native_uid"], _dt.timedelta(seconds=timeout_s))
        # nccl4py's own Communicator.initialize makes communicators this way: ids as one byte
        # buffer, a null config (0) for NCCL's defaults
        uid = bytearray(store.get("native_uid"))
        self.comm = self.nccl.comm_init_rank_scalable(nranks, grank, 1, uid, 0)
        self.grank, self.nranks = grank, nranks

    def close(self, failed: bool = False) -> None:
        """Destroy (or, after a failure, abort: a peer may be gone) the communicator."""
        try:
            (self.nccl.comm_abort if failed else self.nccl.comm_destroy)(self.comm)
        except Exception:  # noqa: BLE001 - best effort at the end of a group
            pass
