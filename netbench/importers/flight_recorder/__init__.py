"""Read PyTorch Flight Recorder dumps of a hung job: which rank(s) never entered collective N.

The format (torch/csrc/distributed/c10d/FlightRecorder*.cpp, version "2.x"; read by torch's own
``torch/distributed/flight_recorder/components/loader.py``): one dump per rank, a dict
``{version, pg_config, pg_status, entries, comm_lib_version, nccl_comm_state?}``, pickled
(``_dump_fr_trace``; what the NCCL watchdog writes on a timeout to ``TORCH_FR_DUMP_TEMP_FILE<rank>``)
or JSON (``_dump_fr_trace_json``). Each entry is one operation the rank issued: ``pg_id``,
``process_group`` (name, desc), ``collective_seq_id`` (1, 2, ... per process group, counting
collectives), ``p2p_seq_id``, ``profiling_name`` (``nccl:all_reduce``, ``gloo:all_reduce``),
``input_sizes``, ``state`` (scheduled | started | completed), ``time_created_ns``. The ring buffer
keeps the last ``TORCH_FR_BUFFER_SIZE`` entries. Backends that record: NCCL (and its kin), and gloo
since torch 2.7 (made here with gloo, torch 2.13: tests/data/flight_recorder/SOURCES.md).

A dump holds neither host name nor rank: the rank is the number the file name ends with (torch's
loader does the same), the host the folder a dump sits in when the dumps were collected a folder per
host (``<host>/<prefix><rank>``), else unknown.

Untrusted input: a pickle could run code when loaded, so it is read as plain data only, with
bounds on bytes, time, objects, shared references, nesting and integers
(``netbench.importers.plainpickle``, ``netbench.importers.bounded``); every field used is checked. A
file that is not a usable dump is skipped with one line saying why, the rest are read; with none
left, one error line (exit 2). What could not be judged (no collective in any dump, a rank's dump
unread) is said, in run.json's ``imported[].problems`` too, so the report never passes on it.

Modules: ``dump`` (one file), ``gather`` (which files, duplicates, what was skipped), ``judge`` (who
never entered collective N; nothing to judge).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from netbench.importers.base import Imported, Importer
from netbench.importers.flight_recorder.gather import Gathered, collect
from netbench.importers.flight_recorder.judge import NeverEntered, listed, never_entered, not_judged

__all__ = ["IMPORTER", "Gathered", "NeverEntered", "collect", "import_dumps", "never_entered"]

TOOL = "flight-recorder"


def _imported(paths: list[str | Path], got: Gathered, unjudged: str | None) -> list[dict[str, Any]]:
    """run.json's ``imported``: each dump read, each skipped with its reason, and what was not judged
    (the report's ``import_incomplete``: never a PASS on them)."""
    out: list[dict[str, Any]] = [
        {"source": d.source, "tool": TOOL, "rank": d.rank, "host": d.host, "version": d.version,
         "problems": []} for d in got.dumps]
    out += [{"source": s.source, "tool": TOOL, "rank": s.rank,
             "problems": [{"kind": "unread", "reason": f"not read: {s.why}"}]} for s in got.skipped]
    if unjudged:
        out.append({"source": " ".join(map(str, paths))[:300], "tool": TOOL,
                    "problems": [{"kind": "not_judged", "reason": unjudged}]})
    return out


def import_dumps(
    paths: list[str | Path], out: str | Path | None = None
) -> tuple[Any, Gathered, list[NeverEntered]]:
    """Parse every dump and write a run directory whose run.json carries the verdict
    (``telemetry.flight_recorder``: one NeverEntered a process group that hung) for the report's
    ``telemetry`` rule, and what was skipped or not judged (``imported[].problems``)."""
    from netbench import __version__
    from netbench.common.rundir import RunDir, utc_now

    got = collect(paths)
    dumps = got.dumps
    verdicts = never_entered(dumps, got.unreadable)
    unjudged = not_judged(dumps)
    run = RunDir.create(out)
    with run.writer():  # no measurements: the run directory's results are empty, its verdict in run.json
        pass
    hosts = sorted({d.host for d in dumps if d.host})
    run.write_run(
        started=utc_now(), finished=utc_now(), netbench_version=__version__, launcher="import",
        status="completed",
        sources=[str(p) for p in paths], hosts=hosts,
        imported=_imported(paths, got, unjudged),
        telemetry={"flight_recorder": {"ranks": [d.rank for d in dumps],
                                       "hosts": {str(d.rank): d.host for d in dumps},
                                       "unreadable": got.unreadable,
                                       "not_judged": [unjudged] if unjudged else [],
                                       "never_entered": [v.to_dict() for v in verdicts]}},
    )
    return run, got, verdicts


def _verdict_line(v: NeverEntered) -> str:
    who = ", ".join(f"rank {r}" + (f" on {h}" if h else "")
                    for r, h in zip(v.missing[:20], v.missing_hosts[:20], strict=True))
    if len(v.missing) > 20:
        who += f" and {len(v.missing) - 20} more"
    line = (f"process group {v.group!r}: collective {v.seq} ({v.collective}) entered by "
            f"{len(v.entered)} rank(s); ")
    line += f"never entered by {who}" if who else "every rank whose dump was read entered it"
    if v.no_dump:
        line += f"; no dump from rank(s) {listed(v.no_dump)}"
    if v.unreadable:
        line += f"; rank(s) {listed(v.unreadable)}: dump not read, not judged"
    return line


def load(paths: list[str], out: str | None) -> Imported:
    """``netbench import flight-recorder``: the dumps into a run directory, and which rank(s) of each
    process group never entered its last collective."""
    run, got, verdicts = import_dumps(list(paths), out)
    said = [f"imported {len(got.dumps)} Flight Recorder dump(s) into {run.path}"
            + (f"; {len(got.skipped)} file(s) skipped" if got.skipped else ""), *got.said]
    said += [_verdict_line(v) for v in verdicts]
    unjudged = not_judged(got.dumps)
    if unjudged:
        said.append(unjudged)
    elif not verdicts:
        said.append("every dumped rank entered the same last collective of each process group")
    warnings = [f"{s.source}: skipped: {s.why}" for s in got.skipped]
    return Imported(run.path, tuple(said), tuple(warnings))


IMPORTER = Importer(
    name="flight-recorder",
    reads="Flight Recorder dumps",
    summary="Import a hung job's PyTorch Flight Recorder dumps: who never entered collective N.",
    help="""\
One dump per rank, pickled (what the NCCL watchdog writes to TORCH_FR_DUMP_TEMP_FILE<rank> on a
timeout) or JSON (_dump_fr_trace_json); the file name ends with the rank. Dumps gathered a folder
per host (DIR/<host>/<prefix><rank>) name each rank's host; the dumps themselves do not.
Pickles are read as plain data only (nothing in them is run).""",
    examples=(
        "netbench import flight-recorder dumps/ --out runs/hang-0412   # dumps/<host>/fr_trace_<rank>",
        "netbench import flight-recorder node1/fr_trace_0 node2/fr_trace_1 --no-report",
    ),
    load=load,
    paths="dumps",
)
