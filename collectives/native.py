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
made here. Nothing of nccl4py is imported unless a GPU rank's plan asks for this engine.

Which engine a run uses is decided once, by the planner (``netbench.run.planner.choose_engine``), and
written into the plan; a rank follows it or, when it cannot (``engine_unmet``), says so in its hello.
"""

from __future__ import annotations

import datetime as _dt
import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from netbench.common.text import quote_untrusted

if TYPE_CHECKING:
    from netbench.collectives.plan import WorkerPlan

# ncclDataType_t and ncclRedOp_t (nccl.h): fixed by the NCCL ABI. Keyed by torch's dtype names (str of
# the dtype without ``torch.``): the planner reads this module and never imports torch.
NCCL_DTYPES = {
    "int8": 0,
    "uint8": 1,
    "int32": 2,
    "int64": 4,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
}
NCCL_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


def bindings() -> Any:
    """``nccl.bindings.nccl``, or ImportError with the reason."""
    return importlib.import_module("nccl.bindings.nccl")


def nccl4py_status() -> tuple[str | None, str | None]:
    """(the installed nccl4py's version, why its bindings do not import, as ``Type: message``): what
    a rank reports in its hello and ``planner.HostCaps.here`` reads. The probe (inventory/probe.sh)
    asks the same two questions of a remote host's python, so the planner decides from what a rank
    would find."""
    from importlib import metadata

    try:
        version: str | None = metadata.version("nccl4py")
    except Exception:  # noqa: BLE001 - not installed (or no metadata): the import below says more
        version = None
    try:
        bindings()
    except Exception as exc:  # noqa: BLE001 - ImportError or a loader error of the shared library
        first = str(exc).splitlines()[0] if str(exc) else ""
        return version, f"{type(exc).__name__}: {first}"
    return version, None


# The engines of a plan's phase (``SweepSpec.engine``), in the order a group measures them. The
# plan always names one of these: ``auto`` is resolved once for the whole run by the planner
# (``netbench.run.planner.choose_engine``, from every host's inventory), never on a rank, so the ranks
# of one group can never time with different engines.
PLAN_ENGINES: dict[str, tuple[str, ...]] = {"nccl": ("nccl",), "torch": ("torch",), "both": ("nccl", "torch")}


def engines_of(engine: str) -> list[str]:
    """The engines a rank measures with for a phase whose spec says ``engine``: exactly the plan's."""
    try:
        return list(PLAN_ENGINES[engine])
    except KeyError:
        raise ValueError(
            f"the plan's engine is {engine!r}, not one of {', '.join(PLAN_ENGINES)}: the planner decides "
            "the engine (netbench.run.planner.choose_engine), a rank never does"
        ) from None


def plan_uses_native(plan: WorkerPlan) -> bool:
    """Whether a rank of this plan times anything through nccl4py (and so must import it)."""
    return plan.device == "cuda" and any("nccl" in PLAN_ENGINES.get(p.spec.engine, ()) for p in plan.phases)


def engine_unmet(plan: WorkerPlan, caps: Mapping[str, Any]) -> str | None:
    """Why a rank with these capabilities (its hello's, ``envinfo.capabilities``) cannot run the
    plan's engine, else None. The rank then stops after its hello and the coordinator reports a
    capability fault naming its host: switching that rank to torch would time one group with two
    engines (and the NCCL engine's ranks would wait for a communicator the torch rank never joins)."""
    error = caps.get("nccl4py_error")
    if not error or not plan_uses_native(plan):
        return None
    return (
        "the run's engine is nccl (NCCL called directly, decided for every host by the plan) but nccl4py "
        f"does not import there ({quote_untrusted(error, 160)}); install it for the hosts' python "
        "(pip install 'netbench[nccl]') or use --engine torch"
    )


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
