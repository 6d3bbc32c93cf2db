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

Who is slow, and what is not judged: ``judge`` (the rank whose kernel is the shortest again and
again arrived last; a rank timed by a CPU clock or a 0-us timer is never blamed, and a communicator
with ranks missing is not judged). Reading, line by line with bounds: ``read``.

Untrusted input: size-, line- and time-capped per file, each line checked (types, ranges); a line
that is not an Inspector record is left out and counted per reason; a file that cannot be read or
holds none is skipped with its reason, and the others are read. What was left out or not judged is
in run.json's ``imported[].problems`` (the report's ``import_incomplete``): never a PASS on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from netbench.importers.base import Imported, Importer
from netbench.importers.inspector.judge import SlowRank, not_judged, slow_ranks
from netbench.importers.inspector.read import InspectorLog, read_logs

__all__ = ["IMPORTER", "InspectorLog", "SlowRank", "import_logs", "not_judged", "read_logs", "slow_ranks"]

TOOL = "nccl-inspector"


def _imported(log: InspectorLog, unjudged: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """run.json's ``imported``: each file read with its lines left out, each skipped with why, each
    communicator not judged with why (the report's ``import_incomplete``: never a PASS on them)."""
    out: list[dict[str, Any]] = [
        {"source": s, "tool": TOOL, "problems": [p.to_dict() for p in log.problems[s]]} for s in log.sources]
    out += [{"source": r.path, "tool": TOOL, "problems": [{"kind": "unread", "reason": f"not read: {r.why}"}]}
            for r in log.skipped]
    by_comm: dict[str, list[str]] = {}
    for comm, why in unjudged:
        by_comm.setdefault(comm, []).append(why)
    out += [{"source": f"communicator {comm}", "tool": TOOL,
             "problems": [{"kind": "not_judged", "reason": why} for why in whys]}
            for comm, whys in by_comm.items()]
    return out


def import_logs(
    paths: list[str | Path], out: str | Path | None = None
) -> tuple[Any, InspectorLog, list[SlowRank]]:
    """Parse the logs and write a run directory whose run.json carries the per-rank summary and the
    slow ranks (``telemetry.inspector``) for the report's ``telemetry`` rule, and what was left out
    or not judged (``imported[].problems``)."""
    from netbench import __version__
    from netbench.common.rundir import RunDir, utc_now

    log = read_logs(paths)
    slow, summary = slow_ranks(log)
    unjudged = not_judged(log)
    run = RunDir.create(out)
    with run.writer():
        pass
    run.write_run(
        started=utc_now(), finished=utc_now(), netbench_version=__version__, launcher="import",
        status="completed", sources=log.sources, hosts=sorted({r.host for r in log.records if r.host}),
        imported=_imported(log, unjudged),
        telemetry={"inspector": {
            "collectives": len(log.records), "p2p_left_aside": log.p2p, "lines_left_out": log.left_out,
            "files_skipped": len(log.skipped),
            "not_judged": [{"comm": c, "why": w} for c, w in unjudged],
            "ranks": [{"comm": c, "rank": r, **v} for (c, r), v in sorted(summary.items())],
            "slow_ranks": [s.to_dict() for s in slow]}},
    )
    return run, log, slow


def load(paths: list[str], out: str | None) -> Imported:
    """``netbench import inspector``: the logs into a run directory, and the ranks that arrived last."""
    run, log, slow = import_logs(list(paths), out)
    said = [f"imported {len(log.records)} collective record(s) from {len(log.sources)} Inspector log(s) "
            f"into {run.path}" + (f"; {log.left_out} line(s) left out" if log.left_out else "")
            + (f"; {len(log.skipped)} file(s) skipped" if log.skipped else "")]
    for s in slow:
        where = f"rank {s.rank}" + (f" on {s.host}" if s.host else "")
        said.append(f"slow rank: {where}, shortest kernel (arrived last) in {s.collectives_slow} of "
                    f"{s.collectives} collectives of communicator {s.comm}")
    unjudged = not_judged(log)
    said += [f"communicator {comm}: {why}" for comm, why in unjudged]
    if not slow and not unjudged:
        said.append("no rank arrived last more often than chance")
    warnings = [f"{r.path}: skipped: {r.why}" for r in log.skipped]
    warnings += [f"{src}: {p.count} line(s) left out: {p.reason} (line {', '.join(map(str, p.lines[:5]))})"
                 for src in log.sources for p in log.problems[src]]
    return Imported(run.path, tuple(said), tuple(warnings))


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
