"""The result row: one measurement, with its dimensions as columns ("tidy" data).

Field names are a contract (DESIGN.md): tests, reports and users' scripts read them, so add fields
freely but never rename one. ``time_us`` is the average over the group's ranks (nccl-tests'
default); ``time_us_max`` is when the collective really finished for everyone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "netbench.result/1"
# the fields DESIGN.md promises in every row, in the order tables and CSV show them
CONTRACT_FIELDS = (
    "run_id",
    "collective",
    "backend",
    "pattern",
    "hosts",
    "ranks",
    "round",
    "bytes",
    "count",
    "dtype",
    "op",
    "in_place",
    "iters",
    "warmup",
    "time_us",
    "time_us_min",
    "time_us_max",
    "rank_time_us",
    "algbw_GBps",
    "busbw_GBps",
    "wrong",
    "status",
    "error",
)


@dataclass
class ResultRow:
    run_id: str
    collective: str
    backend: str  # gloo | nccl | mpi
    pattern: str  # world | ring | pair | rail | intra | copy
    hosts: list[str]
    ranks: int
    round: int | None
    bytes: int  # nccl-tests "size"
    count: int  # elements per rank buffer, as nccl-tests prints it
    dtype: str
    op: str | None  # reduction op, None for data movement
    in_place: bool
    iters: int
    warmup: int
    time_us: float | None
    time_us_min: float | None
    time_us_max: float | None
    rank_time_us: list[float] | None
    algbw_GBps: float | None
    busbw_GBps: float | None
    wrong: int | None
    status: str = "ok"  # ok | timeout | error
    error: str | None = None
    root: int | None = None
    group: str | None = None  # stable id of the group (e.g. "pair:a|b")
    device: str | None = None  # cpu | cuda
    cuda_graph: bool = False
    engine: str = "torch"  # torch (the process group) | nccl (NCCL called directly, nccl4py)
    ts: float | None = None  # unix time the row was measured
    rail: int | None = None  # pattern rail: the local rank (GPU, NIC) both hosts measured with
    # a pair's facts as its plan recorded them (``GroupSpec.load`` / ``GroupSpec.hop_class``, worked
    # out once by the planner from the switches it scheduled with), written into the row by the
    # coordinator that stores it, so the analysis reads them instead of working them out again; None
    # where the plan has none (not a pair, a host the topology does not place, an older run)
    load: int | None = None  # the most pairs of its round through one uplink on its path (0 in a leaf)
    hop_class: str | None = None  # leaf | spine | core | tier-N (netbench.inventory.topology)
    # how the row's group was made (collectives/groups.py: fresh, when its turn came; ahead, on a
    # lane while earlier groups measured, collectives/ahead.py; split reserved for communicators
    # split from a world one), what making it cost this rank (rendezvous, connections, the first
    # operation) and how long the rank waited for it when its turn came, in seconds; None in rows
    # of runs from before they were recorded
    group_made: str | None = None
    setup_s: float | None = None
    setup_wait_s: float | None = None
    # a failed row's cause as the coordinator found it (``failed_row``): ``blame`` the hosts whose
    # loss failed the group (down, hung, cut off; its other hosts are blameless, an empty list when
    # it names none: every rank alive, or the collective's own error), ``ran`` False for a group
    # that never started (a host was down before it: no measurement of anything); None in ok rows
    # and in rows of runs from before they were recorded
    blame: list[str] | None = None
    ran: bool | None = None
    # how the native engine's eager loop made its calls: "c" (collectives/native_loop.py, one C call
    # an operation, as nccl-tests) or "python" (nccl4py's binding from Python, where the C loop could
    # not be built: small sizes read up to ~2 us an operation high); None for every other row
    loop: str | None = None
    schema: str = SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResultRow:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def blamed_hosts(row: Mapping[str, Any]) -> set[str]:
    """The hosts of a failed row that caused its failure, of its own ``hosts`` only. Empty when it
    blames none (a timeout with every rank alive, a collective's own error, a row of a run from
    before rows recorded it)."""
    blame, hosts = row.get("blame"), row.get("hosts")
    if not isinstance(blame, list) or not isinstance(hosts, list):
        return set()
    return {h for h in blame if isinstance(h, str)} & {h for h in hosts if isinstance(h, str)}


def never_ran(row: Mapping[str, Any]) -> bool:
    """A failed row of a group that never started (a host of it was down before): no measurement."""
    return row.get("ran") is False


STATUSES = ("ok", "timeout", "error")
"""A row's ``status``: a measurement (``ok``) or a group that gave none, and why."""
REQUIRED_KEYS = ("status",)
"""Fields with a default in ``ResultRow`` (a writer may leave them out of the class) that a row on
disk must still name: a row without a status could be anything (docs/guide.md, "Reading a run
directory back")."""
MEASURED = ("time_us", "busbw_GBps")
"""What an ``ok`` row measured: null in one is no measurement, so the row is left out."""
NON_NEGATIVE = (
    "ranks", "round", "bytes", "count", "iters", "warmup", "time_us", "time_us_min", "time_us_max",
    "rank_time_us", "algbw_GBps", "busbw_GBps", "wrong", "root", "ts", "rail", "load", "setup_s",
    "setup_wait_s",
)
"""Numeric fields (a list: each of its items) that no measurement can make negative."""


def row_problem(data: Any) -> str | None:
    """Why a decoded results.jsonl line cannot be used as a row (None when it can): every field
    without a default above must be present (and ``status``), every field present must have its
    declared type (finite numbers only, ``bytes`` an integer), no count, size, time or bandwidth is
    negative, ``status`` is one of STATUSES, an ``ok`` row has its time and busbw, and a pair names
    two different hosts. A reader leaves such a row out and names it."""
    from netbench.common.shape import problem

    why = problem(data, ResultRow)
    if why is not None:
        return why
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        return f"missing field {missing[0]!r}"
    if data["status"] not in STATUSES:
        return f"field 'status': {str(data['status'])[:40]!r} is none of {', '.join(STATUSES)}"
    for name in NON_NEGATIVE:
        value = data.get(name)
        values = value if isinstance(value, list) else [value]
        if any(v is not None and v < 0 for v in values):
            return f"field {name!r}: negative"
    if data["status"] == "ok":
        null = [k for k in MEASURED if data.get(k) is None]
        if null:
            return f"status ok but field {null[0]!r} is null: no measurement"
    if data["pattern"] == "pair" and (len(data["hosts"]) != 2 or data["hosts"][0] == data["hosts"][1]):
        return "a pair row that does not name two different hosts"
    return None


def failed_row(
    *,
    run_id: str,
    collective: str,
    backend: str,
    pattern: str,
    hosts: list[str],
    ranks: int,
    round: int | None,
    status: str,
    error: str,
    group: str | None = None,
    nbytes: int = 0,
    dtype: str = "float",
    rail: int | None = None,
    load: int | None = None,
    hop_class: str | None = None,
    blame: list[str] | None = None,
    ran: bool = True,
) -> ResultRow:
    """A row that records a measurement (or a whole group) that did not happen, why, whom it blames
    and whether it ran at all."""
    return ResultRow(
        run_id=run_id,
        collective=collective,
        backend=backend,
        pattern=pattern,
        hosts=hosts,
        ranks=ranks,
        round=round,
        bytes=nbytes,
        count=0,
        dtype=dtype,
        op=None,
        in_place=False,
        iters=0,
        warmup=0,
        time_us=None,
        time_us_min=None,
        time_us_max=None,
        rank_time_us=None,
        algbw_GBps=None,
        busbw_GBps=None,
        wrong=None,
        status=status,
        error=error,
        group=group,
        rail=rail,
        load=load,
        hop_class=hop_class,
        blame=sorted(blame or ()),
        ran=ran,
    )
