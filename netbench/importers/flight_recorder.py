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

Untrusted input: a pickle could run code when loaded, so it is read by an unpickler that refuses
every class and function (a dump holds only dicts, lists, tuples, strings and numbers); sizes,
nesting and every field used are checked, and anything else is a one-line UsageError.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from netbench.common.errors import UsageError
from netbench.importers.base import Imported, Importer

MAX_DUMP_BYTES = 256 << 20
MAX_DUMPS = 65536
_RANK_RE = re.compile(r"(\d{1,7})(?:\.json)?$")
_HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


class _NoGlobals(pickle.Unpickler):
    """Plain data only: any class or function a pickle names is refused, so loading runs nothing."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refers to {module[:60]}.{name[:60]}, not plain data")


@dataclass(frozen=True)
class Op:
    """One operation of one rank, as the dump recorded it."""

    seq: int  # collective_seq_id (0 for point-to-point)
    name: str  # profiling_name, e.g. nccl:all_reduce
    state: str
    sizes: str  # input_sizes as text


@dataclass
class Dump:
    rank: int
    host: str | None
    source: str
    version: str
    groups: dict[str, list[Op]] = field(default_factory=dict)  # process group name -> its collectives
    group_ranks: dict[str, list[int]] = field(default_factory=dict)  # pg_config: the group's ranks


@dataclass(frozen=True)
class NeverEntered:
    """A process group whose collective ``seq`` some members never entered."""

    group: str
    seq: int
    collective: str
    sizes: str
    entered: list[int]  # ranks that issued it
    missing: list[int]  # ranks whose dump stops before it
    missing_hosts: list[str | None]
    no_dump: list[int]  # ranks of the group without any dump
    last_seq: dict[int, int]  # every dumped rank's last collective in the group

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["last_seq"] = {str(k): v for k, v in self.last_seq.items()}
        return d


def _load(path: Path) -> Any:
    from netbench.common.rundir import open_regular

    with open_regular(path) as fh:
        raw = fh.read(MAX_DUMP_BYTES + 1)
    if len(raw) > MAX_DUMP_BYTES:
        raise UsageError(f"{path}: larger than {MAX_DUMP_BYTES >> 20} MiB: not a Flight Recorder dump")
    try:
        if raw.lstrip()[:1] == b"{":
            return json.loads(raw.decode("utf-8"))
        return _NoGlobals(io.BytesIO(raw)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, UnicodeDecodeError, RecursionError, MemoryError,
            IndexError, KeyError, TypeError, AttributeError) as exc:
        why = f"{type(exc).__name__}: {str(exc)[:120]}"
        raise UsageError(f"{path}: not a Flight Recorder dump ({why})") from None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and -(1 << 63) <= v < 1 << 63:
        return v
    if isinstance(v, str) and re.fullmatch(r"-?\d{1,18}", v):
        return int(v)
    return None


def _ranks(text: Any) -> list[int]:
    """pg_config's ranks: "[0, 1, 2]" (text) or a list; [] when neither."""
    if isinstance(text, str) and len(text) < 10_000_000:
        text = re.findall(r"\d{1,9}", text)
    if isinstance(text, list):
        out = [_int(x) for x in text]
        return [x for x in out if x is not None]
    return []


def parse_dump(path: str | Path, host: str | None = None) -> Dump:
    """One rank's dump; UsageError naming the file when it is not one."""
    path = Path(path)
    m = _RANK_RE.search(path.name)
    if not m:
        raise UsageError(f"{path}: a dump's name ends with its rank (as TORCH_FR_DUMP_TEMP_FILE<rank>)")
    data = _load(path)
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise UsageError(f"{path}: not a Flight Recorder dump (no 'entries' list)")
    dump = Dump(rank=int(m.group(1)), host=host, source=str(path), version=str(data.get("version", ""))[:20])
    cfg = data.get("pg_config")
    for name, pg in (cfg.items() if isinstance(cfg, dict) else ()):
        if isinstance(pg, dict):
            dump.group_ranks[str(name)[:200]] = _ranks(pg.get("ranks"))
    for i, e in enumerate(data["entries"]):
        if not isinstance(e, dict):
            raise UsageError(f"{path}: entries[{i}] is not an object")
        if e.get("is_p2p") is True:
            continue  # point-to-point ops have their own sequence; a hang names collectives
        seq = _int(e.get("collective_seq_id"))
        pg = e.get("process_group")
        pg_name = str(pg[0])[:200] if isinstance(pg, (list, tuple)) and pg else str(e.get("pg_id", ""))[:200]
        name = e.get("profiling_name")
        if seq is None or seq < 0 or not isinstance(name, str):
            raise UsageError(f"{path}: entries[{i}] has no collective_seq_id or profiling_name")
        sizes = e.get("input_sizes")
        shown = json.dumps(sizes)[:200] if sizes is not None else ""
        dump.groups.setdefault(pg_name, []).append(Op(seq, name[:100], str(e.get("state", ""))[:20], shown))
    return dump


def collect(paths: list[str | Path]) -> list[Dump]:
    """Every dump named: files, or folders (a folder of dumps, or of host folders of dumps)."""
    files: list[tuple[Path, str | None]] = []
    for p in map(Path, paths):
        if p.is_dir():
            for child in sorted(p.iterdir()):
                if child.is_dir() and _HOST_RE.match(child.name):
                    files += [(f, child.name) for f in sorted(child.iterdir()) if f.is_file()]
                elif child.is_file():
                    files.append((child, None))
        elif p.exists():
            host = p.parent.name if _HOST_RE.match(p.parent.name) and p.parent.name not in (".", "") else None
            files.append((p, host))
        else:
            raise UsageError(f"{p}: no such file or folder")
    files = [(f, h) for f, h in files if _RANK_RE.search(f.name)]
    if not files:
        raise UsageError("no Flight Recorder dumps found (file names end with the rank)")
    if len(files) > MAX_DUMPS:
        raise UsageError(f"more than {MAX_DUMPS} dumps")
    dumps = [parse_dump(f, h) for f, h in files]
    by_rank: dict[int, Dump] = {}
    for d in dumps:
        if d.rank in by_rank and by_rank[d.rank].source != d.source:
            raise UsageError(f"rank {d.rank} has two dumps: {by_rank[d.rank].source} and {d.source}")
        by_rank[d.rank] = d
    return sorted(by_rank.values(), key=lambda d: d.rank)


def never_entered(dumps: list[Dump]) -> list[NeverEntered]:
    """For each process group: the highest collective any member entered (N) and the members whose
    dump stops before it, with their hosts; a member of the group with no dump is named apart (it
    may be the one that hung hardest: dead, or never dumped)."""
    members: dict[str, set[int]] = defaultdict(set)
    last: dict[str, dict[int, int]] = defaultdict(dict)
    first_op: dict[tuple[str, int], Op] = {}
    for d in dumps:
        cfg = dict(d.group_ranks)
        if len(cfg) == 1 and len(d.groups) == 1 and next(iter(cfg)) not in d.groups:
            # torch 2.13's gloo dumps key the default group's config "" and its entries "0": one of each
            cfg = {next(iter(d.groups)): next(iter(cfg.values()))}
        for pg, ranks in cfg.items():
            members[pg].update(ranks)
        for pg, ops in d.groups.items():
            top = max(op.seq for op in ops)
            last[pg][d.rank] = top
            members[pg].add(d.rank)
            for op in ops:
                first_op.setdefault((pg, op.seq), op)
    hosts = {d.rank: d.host for d in dumps}
    out = []
    for pg, seqs in last.items():
        n = max(seqs.values())
        missing = sorted(r for r, s in seqs.items() if s < n)
        no_dump = sorted(members[pg] - set(hosts))
        if not missing and not no_dump:
            continue
        op = first_op[(pg, n)]
        out.append(NeverEntered(
            group=pg, seq=n, collective=op.name, sizes=op.sizes,
            entered=sorted(r for r, s in seqs.items() if s >= n), missing=missing,
            missing_hosts=[hosts.get(r) for r in missing], no_dump=no_dump,
            last_seq=dict(sorted(seqs.items())),
        ))
    return out


def import_dumps(
    paths: list[str | Path], out: str | Path | None = None
) -> tuple[Any, list[Dump], list[NeverEntered]]:
    """Parse every dump and write a run directory whose run.json carries the verdict
    (``telemetry.flight_recorder``: one NeverEntered a process group that hung) for the report's
    ``telemetry`` rule."""
    from netbench import __version__
    from netbench.common.rundir import RunDir, utc_now

    dumps = collect(paths)
    verdicts = never_entered(dumps)
    run = RunDir.create(out)
    with run.writer():  # no measurements: the run directory's results are empty, its verdict in run.json
        pass
    hosts = sorted({d.host for d in dumps if d.host})
    run.write_run(
        started=utc_now(), finished=utc_now(), netbench_version=__version__, launcher="import",
        status="completed",
        sources=[str(p) for p in paths], hosts=hosts,
        imported=[{"source": d.source, "tool": "flight-recorder", "rank": d.rank, "host": d.host,
                   "version": d.version, "problems": []} for d in dumps],
        telemetry={"flight_recorder": {"ranks": [d.rank for d in dumps],
                                       "hosts": {str(d.rank): d.host for d in dumps},
                         "never_entered": [v.to_dict() for v in verdicts]}},
    )
    return run, dumps, verdicts


def load(paths: list[str], out: str | None) -> Imported:
    """``netbench import flight-recorder``: the dumps into a run directory, and which rank(s) of each
    process group never entered its last collective."""
    run, read, verdicts = import_dumps(list(paths), out)
    said = [f"imported {len(read)} Flight Recorder dump(s) into {run.path}"]
    for v in verdicts:
        who = ", ".join(f"rank {r}" + (f" on {h}" if h else "")
                        for r, h in zip(v.missing, v.missing_hosts, strict=True))
        line = (f"process group {v.group!r}: collective {v.seq} ({v.collective}) entered by "
                f"{len(v.entered)} rank(s); never entered by {who or 'no dumped rank'}")
        if v.no_dump:
            line += f"; no dump from rank(s) {', '.join(map(str, v.no_dump[:20]))}"
        said.append(line)
    if not verdicts:
        said.append("every dumped rank entered the same last collective of each process group")
    return Imported(run.path, tuple(said))


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
