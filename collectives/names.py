"""The names rows carry, without importing torch: collectives and patterns. A policy file's
``[[expect.busbw]]`` is checked against these (``reports.policy``), so a typo is refused with the
nearest name instead of a floor that never applies."""

from __future__ import annotations

from netbench.common.text import did_you_mean

MEASURED = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "sendrecv")
"""The collectives netbench runs (``collectives.ops.COLLECTIVES``, the same names)."""
IMPORTED = ("gather", "scatter", "all_to_allv", "hypercube")
"""nccl-tests' collectives netbench imports (``netbench import nccl-tests``) but does not run."""
ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallv": "all_to_allv",
    "send_recv": "sendrecv",
}
"""Other spellings users write (nccl-tests' binaries, NCCL's functions) -> netbench's name."""
ROW_PATTERNS = ("world", "ring", "pair", "rail", "intra")
"""A row's ``pattern``: the whole world, the ring, a pair of the pairwise phase, a rail group, the
GPUs of one host."""


def canonical(name: str) -> str:
    """``All-Reduce`` / ``allreduce`` -> ``all_reduce``; a name not known comes back normalised."""
    key = name.strip().lower().replace("-", "_")
    return ALIASES.get(key, key)


def measured(name: str) -> str:
    """The canonical name of a collective netbench runs, or ValueError naming the nearest one: the
    command line's check (no torch) and ``collectives.ops.get_collective`` both refuse through here."""
    key = canonical(name)
    if key not in MEASURED:
        raise ValueError(f"unknown collective {name!r}{did_you_mean(key, MEASURED)}")
    return key

