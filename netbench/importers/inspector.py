"""Read NCCL Inspector logs (NVIDIA/nccl ``plugins/profiler/inspector``): per-rank duration and
bandwidth of every collective, and the rank the others wait for.

The format (``inspector_json.cc``, ``inspector_output_format_version`` v4.0): one JSON object a line,
one line per completed collective per rank (files per process under ``NCCL_INSPECTOR_DUMP_DIR``):

    {"header": {"id": "<comm hash>", "comm_name": "...", "rank": 2, "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "...", "rec_mechanism": "...",
                  "dump_timestamp_us": ..., "hostname": "...", "pid": ...},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": ..., "coll_exec_time_us":
                   ..., "coll_timing_source": "kernel_gpu", "coll_algobw_gbs": ..., "coll_busbw_gbs": ...}}

Lines with ``p2p_perf`` instead (send/recv) are counted and left aside.

Who is slow: every rank's kernel of one collective (same communicator ``id``, same ``coll_sn``) ends at
about the same moment, so the rank whose kernel was the *shortest* started last: the others' kernels
were already running, waiting for it. A rank shortest in more collectives than chance (1/n; binomial,
Bonferroni over the ranks) and by more than ``MIN_WAIT_SHARE`` of the collective's median time is the
slow rank (its host named); per-rank median duration and busbw are kept for the report. The longest
kernel, or the lowest busbw, points at a rank that waited: Inspector's own bandwidth figures blame the
victims, which is why they are not the test.

Untrusted input: size-capped, each line checked (types, ranges); a line that is not an Inspector
record is counted as left out, and a file with none is a one-line UsageError.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from netbench.common.errors import UsageError
from netbench.importers.base import Imported, Importer

MAX_LOG_BYTES = 1 << 30
MAX_LINE = 1 << 16
ALPHA = 0.01
MIN_WAIT_SHARE = 0.05  # the others waited at least 5% of the collective for it
MIN_COLLECTIVES = 5


@dataclass(frozen=True)
class CollRecord:
    comm: str
    rank: int
    n_ranks: int
    host: str
    coll: str
    sn: int
    nbytes: int
    exec_us: float
    busbw: float | None


@dataclass
class InspectorLog:
    records: list[CollRecord] = field(default_factory=list)
    p2p: int = 0
    left_out: int = 0
    sources: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SlowRank:
    rank: int
    host: str | None
    comm: str
    collectives: int  # collectives of its communicator seen with every rank
    collectives_slow: int  # of them where its kernel was the shortest by MIN_WAIT_SHARE
    wait_us: float  # mean, over those: the others' median time minus its own
    slower: float  # wait_us / the collective's median time (share of the collective spent waiting)
    p_value: float
    busbw_GBps: float | None  # its median (high: it did not wait)
    median_busbw_GBps: float | None
    source: str = "NCCL Inspector"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _num(v: Any, lo: float = 0.0) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        x = float(v)
    except OverflowError:
        return None
    return x if math.isfinite(x) and x >= lo else None


def _record(obj: Any) -> CollRecord | None:
    if not isinstance(obj, dict):
        return None
    h, m, c = obj.get("header"), obj.get("metadata"), obj.get("coll_perf")
    if not (isinstance(h, dict) and isinstance(m, dict) and isinstance(c, dict)):
        return None
    rank, n, sn = _num(h.get("rank")), _num(h.get("n_ranks"), 1), _num(c.get("coll_sn"))
    exec_us, nbytes = _num(c.get("coll_exec_time_us")), _num(c.get("coll_msg_size_bytes"))
    comm, coll, host = h.get("id"), c.get("coll"), m.get("hostname")
    if None in (rank, n, sn, exec_us, nbytes) or not all(isinstance(x, str) for x in (comm, coll)):
        return None
    if rank >= n or n > 1 << 24 or rank != int(rank) or sn != int(sn):
        return None
    return CollRecord(comm=comm[:100], rank=int(rank), n_ranks=int(n),
                      host=host[:253] if isinstance(host, str) and host else "", coll=coll[:40], sn=int(sn),
                      nbytes=int(nbytes), exec_us=exec_us, busbw=_num(c.get("coll_busbw_gbs")))


def parse_file(path: str | Path, log: InspectorLog) -> None:
    from netbench.common.rundir import open_regular

    path = Path(path)
    with open_regular(path) as fh:
        raw = fh.read(MAX_LOG_BYTES + 1)
    if len(raw) > MAX_LOG_BYTES:
        raise UsageError(f"{path}: larger than {MAX_LOG_BYTES >> 20} MiB")
    before = len(log.records)
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line) if len(line) <= MAX_LINE else None
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict) and "p2p_perf" in obj:
            log.p2p += 1
            continue
        rec = _record(obj)
        if rec is None:
            log.left_out += 1
        else:
            log.records.append(rec)
    if len(log.records) == before:
        raise UsageError(f"{path}: no NCCL Inspector collective records (JSON lines with header, metadata, "
                         "coll_perf)")
    log.sources.append(str(path))


def read_logs(paths: list[str | Path]) -> InspectorLog:
    log = InspectorLog()
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.is_file())
        elif p.exists():
            files.append(p)
        else:
            raise UsageError(f"{p}: no such file or folder")
    if not files:
        raise UsageError("no NCCL Inspector logs given")
    for f in files:
        parse_file(f, log)
    return log


def slow_ranks(log: InspectorLog) -> tuple[list[SlowRank], dict[tuple[str, int], dict[str, Any]]]:
    """The ranks the others wait for (per communicator), and every rank's median duration and busbw."""
    from netbench.reports.stats import binomial_sf

    by_coll: dict[tuple[str, int], dict[int, CollRecord]] = defaultdict(dict)
    for r in log.records:
        by_coll[(r.comm, r.sn)][r.rank] = r
    per_rank: dict[tuple[str, int], dict[str, Any]] = {}
    for r in log.records:
        d = per_rank.setdefault((r.comm, r.rank), {"host": r.host, "exec_us": [], "busbw": []})
        d["exec_us"].append(r.exec_us)
        if r.busbw is not None:
            d["busbw"].append(r.busbw)
    summary = {k: {"host": v["host"], "median_exec_us": median(v["exec_us"]),
                   "median_busbw_GBps": median(v["busbw"]) if v["busbw"] else None,
                   "collectives": len(v["exec_us"])}
               for k, v in per_rank.items()}
    shortest: dict[str, Counter] = defaultdict(Counter)
    waits: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    complete: Counter = Counter()
    for (comm, _sn), ranks in by_coll.items():
        n = next(iter(ranks.values())).n_ranks
        if len(ranks) != n or n < 2:
            continue  # a collective not every rank logged says nothing about who was last
        complete[comm] += 1
        times = sorted(ranks.values(), key=lambda r: r.exec_us)
        med = median(r.exec_us for r in times)
        first = times[0]
        if med > 0 and med - first.exec_us >= MIN_WAIT_SHARE * med:
            shortest[comm][first.rank] += 1
            waits[(comm, first.rank)].append((med - first.exec_us, (med - first.exec_us) / med))
    out = []
    for comm, counts in shortest.items():
        total = complete[comm]
        if total < MIN_COLLECTIVES:
            continue
        n = next(r.n_ranks for r in log.records if r.comm == comm)
        all_bw = [r.busbw for r in log.records if r.comm == comm and r.busbw is not None]
        for rank, k in counts.most_common():
            p = binomial_sf(k, total, 1.0 / n)
            if p >= ALPHA / n or 2 * k < total:
                continue
            w = waits[(comm, rank)]
            s = summary[(comm, rank)]
            out.append(SlowRank(rank=rank, host=s["host"] or None, comm=comm, collectives=total,
                                collectives_slow=k,
                                wait_us=sum(x for x, _ in w) / len(w), slower=sum(y for _, y in w) / len(w),
                                p_value=p, busbw_GBps=s["median_busbw_GBps"],
                                median_busbw_GBps=median(all_bw) if all_bw else None))
    return out, summary


def import_logs(
    paths: list[str | Path], out: str | Path | None = None
) -> tuple[Any, InspectorLog, list[SlowRank]]:
    """Parse the logs and write a run directory whose run.json carries the per-rank summary and the
    slow ranks (``telemetry.inspector``) for the report's ``telemetry`` rule."""
    from netbench import __version__
    from netbench.common.rundir import RunDir, utc_now

    log = read_logs(paths)
    slow, summary = slow_ranks(log)
    run = RunDir.create(out)
    with run.writer():
        pass
    run.write_run(
        started=utc_now(), finished=utc_now(), netbench_version=__version__, launcher="import",
        status="completed", sources=log.sources, hosts=sorted({r.host for r in log.records if r.host}),
        imported=[{"source": s, "tool": "nccl-inspector", "problems": []} for s in log.sources],
        telemetry={"inspector": {
            "collectives": len(log.records), "p2p_left_aside": log.p2p, "lines_left_out": log.left_out,
            "ranks": [{"comm": c, "rank": r, **v} for (c, r), v in sorted(summary.items())],
            "slow_ranks": [s.to_dict() for s in slow]}},
    )
    return run, log, slow


def load(paths: list[str], out: str | None) -> Imported:
    """``netbench import inspector``: the logs into a run directory, and the ranks that arrived last."""
    run, log, slow = import_logs(list(paths), out)
    said = [f"imported {len(log.records)} collective record(s) from {len(log.sources)} Inspector log(s) "
            f"into {run.path}" + (f"; {log.left_out} line(s) left out" if log.left_out else "")]
    for s in slow:
        where = f"rank {s.rank}" + (f" on {s.host}" if s.host else "")
        said.append(f"slow rank: {where}, shortest kernel (arrived last) in {s.collectives_slow} of "
                    f"{s.collectives} collectives of communicator {s.comm}")
    if not slow:
        said.append("no rank arrived last more often than chance")
    return Imported(run.path, tuple(said))


IMPORTER = Importer(
    name="inspector",
    reads="NCCL Inspector logs",
    summary="Import NCCL Inspector logs: per-rank duration and busbw, the rank the others wait for.",
    help="""\
The JSON lines the NCCL Inspector profiler plugin writes (NVIDIA/nccl plugins/profiler/inspector,
NCCL_INSPECTOR_DUMP_DIR): one line per rank and collective. Files or folders (read recursively).
The rank whose kernel is the shortest again and again arrived last: the others' kernels were waiting.""",
    examples=(
        "netbench import inspector /logs/nccl-inspector-4711/ --out runs/job-4711",
        "netbench import inspector node*.log --no-report",
    ),
    load=load,
)
