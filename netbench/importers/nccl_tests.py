"""Read NVIDIA nccl-tests output (stdout tables and ``-J`` JSON) into a netbench run directory.

Years of nccl-tests logs exist in tickets and wikis; importing them lets ``netbench compare`` and the
report judge them next to netbench's own runs. The stdout layouts seen in real logs differ by
version, and the parser reads the column header instead of assuming one:

- 2.0-2.10 (2018-2021): ``size count type [redop] [root] time algbw busbw error`` x2, where
  ``error`` is the largest *relative error* (``2e-07``), not a count, so ``wrong`` stays None and
  the value goes to ``extra["max_error"]``. ``Rank  0 Pid ...`` device lines have no ``Group``.
- 2.11+ (2022-): every table has ``redop`` and ``root`` and a ``#wrong`` count; ``N/A`` where the
  check did not run (``-c 0``, or in-place sendrecv). 2.17+ print ``# nccl-tests version``.
- 2.19+: ``-I 1`` adds ``i_min i_max i_p99 i_cv%`` per placement, ``-S 1`` a timestamp column,
  ``-C 1`` names the time column ``cputime``.
- Launchers prefix lines: ``[1,0]<stdout>:`` (Open MPI ``--tag-output``), `` 0: `` (``srun -l``).
  NCCL_DEBUG=INFO lines may be interleaved; ``NCCL version 2.21.5+cuda12.4`` is read from them.

The ``-J`` JSON (JSON_FILE_VERSION 1-3 in src/util.cu) writes booleans as the strings "true"/
"false", NaN as "nan", ``root`` as a padded string, and has no collective name except in
``args[0]``. A value that nccl-tests printed is stored as printed (the table rounds to 2 decimals).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbench.common.errors import UsageError
from netbench.common.rows import ResultRow

# -- what a log says --------------------------------------------------------------------------------
# numbers are at most 18 digits: a line of thousands of digits is not nccl-tests output, and int() of
# one raises ValueError (Python's limit on digits) where this parser expects a match or none

_PREFIX_RE = re.compile(r"^(?:\[\d{1,18},\d{1,18}\]<std(?:out|err)>:|\s*\d{1,18}: )")
_VERSION_RE = re.compile(
    r"#\s*nccl-tests version (?P<ver>\S+)(?:\s+\((?P<git>[0-9a-f]+)\))?"
    r"(?:\s+nccl-headers=(?P<hdr>\d{1,18}))?(?:\s+nccl-library=(?P<lib>\d{1,18}))?"
)
_STARTING_RE = re.compile(r"#\s*Collective test starting:\s*(?P<name>\S+)")
_NTHREAD_RE = re.compile(r"#?\s*nThread\s+(?P<nthread>\d{1,18})\s+nGpus\s+(?P<ngpus>\d{1,18})"
                         r"\s+minBytes\s+(?P<min>\d{1,18})\s+maxBytes\s+(?P<max>\d{1,18})(?P<rest>.*)")
_KV_RE = re.compile(r"(warmup iters|agg iters|iters|validation|graph|unalign):\s*(-?\d{1,18})")
_STEP_RE = re.compile(r"step:\s*(\d{1,18})\((factor|bytes)\)")
_RANK_RE = re.compile(
    r"#?\s*Rank\s+(?P<rank>\d{1,18})\s+(?:Group\s+(?P<group>\d{1,18})\s+)?Pid\s+(?P<pid>\d{1,18})\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d{1,18})\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)$"
)
_NCCL_VERSION_RE = re.compile(r"NCCL version (?P<ver>\d{1,9}\.\d{1,9}\.\d{1,9})(?:\+cuda(?P<cuda>[\d.]+))?")
_OOB_RE = re.compile(r"#\s*Out of bounds values\s*:\s*(?P<n>\d{1,18})\s*(?P<verdict>OK|FAILED)?")
_AVG_RE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<bw>[-+\d.eE]+|nan|inf)")
_PROGRAM_RE = re.compile(r"(?:^|[/\s])(?P<name>[a-z_]+)_perf(?:_mpi)?\b")
_DATA_RE = re.compile(r"^\s*\d{1,20}\s+\d{1,20}\s+\S+")  # bounded: int() of 5000 digits raises

_COLLECTIVES = {"alltoall": "all_to_all", "alltoallv": "all_to_allv"}
#: the largest log read (a full sweep of every collective and type is a few MB)
MAX_LOG_BYTES = 256 << 20
_TIME_COLS = ("time", "cputime")


def collective_name(program: str) -> str:
    """``all_reduce_perf`` / ``./build/alltoall_perf_mpi`` -> netbench's name (``all_to_all``)."""
    base = Path(program).name
    base = re.sub(r"_perf(_mpi)?$", "", base)
    return _COLLECTIVES.get(base, base)


def nccl_version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE -> "2.28.3": 2.9+ use X*10000+Y*100+Z, older X*1000+Y*100+Z (nccl.h)."""
    if code >= 20900:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


@dataclass
class RankLine:
    rank: int
    host: str
    device: int
    bus_id: str
    device_name: str
    group: int | None = None
    pid: int | None = None


@dataclass
class NcclTest:
    """One nccl-tests invocation (one ``*_perf`` run) as read from a log or JSON file."""

    source: str
    collective: str | None = None
    nccl_tests_version: str | None = None
    nccl_version: str | None = None
    nccl_headers_version: str | None = None
    cuda_version: str | None = None
    config: dict[str, Any] = field(default_factory=dict)  # nthread, ngpus, iters, warmup_iters ...
    ranks: list[RankLine] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per size x placement, parsed values
    out_of_bounds: int | None = None
    avg_busbw_GBps: float | None = None
    env: dict[str, str] = field(default_factory=dict)  # NCCL_* variables (JSON only)
    errors: list[str] = field(default_factory=list)
    collective_inferred: str | None = None  # how the collective was inferred when the log does not name it

    @property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(r.host for r in self.ranks))

    @property
    def nranks(self) -> int:
        if self.ranks:
            return len(self.ranks)
        return int(self.config.get("nthread", 1)) * int(self.config.get("ngpus", 1))


# -- text ---------------------------------------------------------------------------------------------

def _number(token: str) -> float | None:
    """A table cell: ``N/A`` -> None; ``1e+06`` and ``24745`` as printed."""
    if token in ("N/A", "-", ""):
        return None
    try:
        value = float(token)
    except ValueError:
        return None
    return None if math.isnan(value) else value


@dataclass
class _Layout:
    """Where each value sits in a data line, derived from the ``#  size count type ...`` header."""

    prefix: list[str]  # size count type [redop] [root]
    blocks: list[list[str]]  # [out-of-place columns, in-place columns]

    @classmethod
    def from_header(cls, tokens: list[str]) -> _Layout | None:
        starts = [i for i, t in enumerate(tokens) if t in _TIME_COLS]
        if len(starts) != 2 or tokens[:2] != ["size", "count"]:
            return None
        first = tokens[starts[0]:starts[1]]
        second = [t for t in tokens[starts[1]:] if t != "timestamp"][: len(first)]
        return cls(prefix=tokens[: starts[0]], blocks=[first, second])

    @property
    def width(self) -> int:
        return len(self.prefix) + sum(len(b) for b in self.blocks)


def _strip_prefix(line: str) -> str:
    return _PREFIX_RE.sub("", line, count=1).rstrip("\r\n")


def _parse_data(tokens: list[str], layout: _Layout, test: NcclTest, line_no: int) -> None:
    cells = dict(zip(layout.prefix, tokens, strict=False))
    base = {
        "bytes": int(cells["size"]), "count": int(cells["count"]), "dtype": cells.get("type", ""),
        "op": cells.get("redop"), "root": cells.get("root"), "line": line_no,
    }
    pos = len(layout.prefix)
    for placement, cols in zip(("out_of_place", "in_place"), layout.blocks, strict=True):
        values = dict(zip(cols, tokens[pos:pos + len(cols)], strict=False))
        pos += len(cols)
        row = dict(base, in_place=placement == "in_place")
        row["time_us"] = _number(values.get("time", values.get("cputime", "")))
        row["algbw_GBps"] = _number(values.get("algbw", ""))
        row["busbw_GBps"] = _number(values.get("busbw", ""))
        if "#wrong" in values:
            wrong = _number(values["#wrong"])
            row["wrong"] = int(wrong) if wrong is not None else None
        elif "error" in values:  # old layout: the largest relative error, not a count
            row["wrong"] = None
            row["max_error"] = _number(values["error"])
        per_iter = {k[2:]: _number(v) for k, v in values.items() if k.startswith("i_")}
        if per_iter:
            row["per_iter"] = per_iter
        if "cputime" in values:
            row["cpu_time"] = True
        test.rows.append(row)


def _header_config(m: re.Match[str]) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "nthread": int(m["nthread"]), "ngpus": int(m["ngpus"]),
        "min_bytes": int(m["min"]), "max_bytes": int(m["max"]),
    }
    rest = m["rest"]
    step = _STEP_RE.search(rest)
    if step:
        cfg["step_factor" if step[2] == "factor" else "step_bytes"] = int(step[1])
    keys = {"warmup iters": "warmup_iters", "agg iters": "agg_iters", "iters": "iters",
            "validation": "validation", "graph": "graph", "unalign": "unalign"}
    for key, value in _KV_RE.findall(rest):
        cfg[keys[key]] = int(value)
    return cfg


def parse_text(text: str, source: str = "<text>") -> list[NcclTest]:
    """Every nccl-tests run found in ``text`` (several runs may be concatenated in one log)."""
    tests: list[NcclTest] = []
    cur: NcclTest | None = None
    layout: _Layout | None = None
    pending_program: str | None = None
    nccl_version: tuple[str, str | None] | None = None

    def start() -> NcclTest:
        nonlocal cur, layout
        name = collective_name(pending_program) if pending_program else None
        cur = NcclTest(source=source, collective=name)
        layout = None
        tests.append(cur)
        return cur

    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = _strip_prefix(raw)
        stripped = line.strip()
        if not stripped:
            continue
        if (m := _NCCL_VERSION_RE.search(line)) and not stripped.startswith("#"):
            nccl_version = (m["ver"], m["cuda"])
            if cur is not None and cur.nccl_version is None:
                cur.nccl_version, cur.cuda_version = nccl_version
            continue
        if (m := _VERSION_RE.match(stripped)):
            t = start()
            t.nccl_tests_version = m["ver"]
            if m["hdr"]:
                t.nccl_headers_version = nccl_version_from_code(int(m["hdr"]))
            if m["lib"]:
                t.nccl_version = nccl_version_from_code(int(m["lib"]))
            continue
        if (m := _STARTING_RE.match(stripped)):
            t = cur if cur is not None and not cur.rows and cur.collective is None else start()
            t.collective = collective_name(m["name"])
            continue
        if (m := _NTHREAD_RE.match(stripped)):
            t = cur if cur is not None and not cur.rows and not cur.config else start()
            t.config.update(_header_config(m))
            continue
        rank = _RANK_RE.match(stripped)
        tokens = stripped.lstrip("#").split()
        is_header = tokens[:2] == ["size", "count"]
        if not stripped.startswith("#") and not _DATA_RE.match(line) and not rank and not is_header:
            prog = _PROGRAM_RE.search(stripped)  # "Running: ./build/all_gather_perf -b 8", "$ mpirun ..."
            if prog:
                pending_program = prog["name"] + "_perf"
            continue
        if cur is None:
            if not is_header:
                continue
            start()  # a table pasted without its preamble: the column header opens a run
        if (m := rank):
            cur.ranks.append(RankLine(
                rank=int(m["rank"]), host=m["host"], device=int(m["device"]), bus_id=m["bus"],
                device_name=m["name"].strip(), group=int(m["group"]) if m["group"] else None,
                pid=int(m["pid"]),
            ))
            continue
        if is_header:
            layout = _Layout.from_header(tokens)
            continue
        if stripped.startswith("#"):
            if (m := _OOB_RE.match(stripped)):
                cur.out_of_bounds = int(m["n"])
            elif (m := _AVG_RE.match(stripped)):
                cur.avg_busbw_GBps = _number(m["bw"])
            continue
        if layout is not None:
            tokens = stripped.split()
            if len(tokens) >= layout.width:
                _parse_data(tokens, layout, cur, line_no)
    found = [t for t in tests if t.rows]
    for t in found:
        if t.nccl_version is None and nccl_version:
            t.nccl_version, t.cuda_version = nccl_version
        if t.collective is None:
            t.collective = _collective_from_filename(source)
            if t.collective is not None:
                t.collective_inferred = f"from the file name {Path(source).name!r}"
        if t.collective is None:
            t.collective, t.collective_inferred = infer_collective(t)
    return found


@dataclass(frozen=True)
class _Shape:
    """What a collective's table looks like: a reduction op printed or not, a root or -1, and the
    busbw/algbw factor for n ranks (nccl-tests' PERFORMANCE.md; DESIGN.md's table)."""

    name: str
    redop: bool | None  # True: a reduction op; False: "none"; None: either (sendrecv prints "sum")
    rooted: bool
    factor: Callable[[int], float]


# in the order an ambiguous table is resolved: the collective run most often first
_SHAPES = (
    _Shape("all_reduce", True, False, lambda n: 2 * (n - 1) / n),
    _Shape("all_gather", False, False, lambda n: (n - 1) / n),
    _Shape("reduce_scatter", True, False, lambda n: (n - 1) / n),
    _Shape("broadcast", False, True, lambda n: 1.0),
    _Shape("reduce", True, True, lambda n: 1.0),
    _Shape("sendrecv", None, False, lambda n: 1.0),
    _Shape("all_to_all", False, False, lambda n: (n - 1) / n),
    _Shape("gather", False, True, lambda n: (n - 1) / n),
    _Shape("scatter", False, True, lambda n: (n - 1) / n),
)


def infer_collective(test: NcclTest) -> tuple[str | None, str | None]:
    """The collective of a table whose log does not name it (no "Collective test" lines, no
    program name): from the redop and root columns and the busbw/algbw factor, which depends on
    the collective and the rank count. Returns (name or None, how it was inferred)."""
    rows = test.rows
    ops = {str(r.get("op")) for r in rows if r.get("op") is not None}
    roots = {_to_int(r.get("root")) for r in rows if r.get("root") is not None}
    ratios = sorted(
        r["busbw_GBps"] / r["algbw_GBps"]
        for r in rows
        if r.get("algbw_GBps") and r["algbw_GBps"] >= 1 and r.get("busbw_GBps") is not None
    )
    factor = ratios[len(ratios) // 2] if ratios else None
    n = test.nranks if test.ranks or test.config else None
    fits = [s for s in _SHAPES if _shape_fits(s, ops, roots, factor, n)]
    if not fits:
        return None, "the table fits no known collective"
    root_text = "/".join(sorted({str(r) for r in roots})) or "not printed"
    seen = [f"redop {'/'.join(sorted(ops)) or 'not printed'}", f"root {root_text}"]
    if factor is not None:
        seen.append(f"busbw/algbw {factor:.3g}" + (f" on {n} ranks" if n else ""))
    how = "inferred from " + ", ".join(seen)
    if len(fits) > 1:
        how += f" (could also be {', '.join(s.name for s in fits[1:])})"
    return fits[0].name, how


def _shape_fits(
    shape: _Shape, ops: set[str], roots: set[int | None], factor: float | None, n: int | None
) -> bool:
    if ops and shape.redop is not None and (ops != {"none"}) != shape.redop:
        return False
    if roots and roots != {None} and (max(r or -1 for r in roots) >= 0) != shape.rooted:
        return False
    if factor is None:
        return True
    ranks = [n] if n else range(1, 4097)  # a pasted table does not say how many ranks
    return any(abs(shape.factor(k) - factor) <= 0.02 * max(1.0, factor) + 0.01 for k in ranks)


def _collective_from_filename(source: str) -> str | None:
    stem = Path(source).stem.lower()
    for name in ("all_reduce", "all_gather", "reduce_scatter", "alltoallv", "alltoall", "broadcast",
                 "sendrecv", "hypercube", "scatter", "gather", "reduce"):
        if name in stem:
            return _COLLECTIVES.get(name, name)
    return None


# -- JSON (-J) ----------------------------------------------------------------------------------------

def _json_bool(value: Any) -> bool | None:
    """nccl-tests writes booleans as the strings "true"/"false" (jsonBool in src/util.cu)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    return None


def _json_num(value: Any) -> float | None:
    """A finite number, else None ("nan", null, Infinity and 1e999 are not measurements)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer of hundreds of digits
            return None
        return number if math.isfinite(number) else None
    return None


def parse_json(data: dict[str, Any], source: str = "<json>") -> NcclTest:
    """One ``-J`` file: one run of one ``*_perf`` binary. A value of the wrong type anywhere (a
    string size, a list where an object belongs) is the user's input: UsageError naming the file."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise UsageError(f"{source}: JSON without a 'results' list is not nccl-tests -J output")
    try:
        return _parse_json(data, source)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError) as exc:
        what = f"missing key {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise UsageError(f"{source}: not nccl-tests -J output as expected ({what})") from None


def _parse_json(data: dict[str, Any], source: str) -> NcclTest:
    args = data.get("args") or []
    name = collective_name(args[0]) if args else _collective_from_filename(source)
    test = NcclTest(source=source, collective=name)
    code = data.get("nccl_version")
    if isinstance(code, int):
        test.nccl_version = nccl_version_from_code(code)
    cfg = data.get("config") or {}
    test.config = {
        "nthread": cfg.get("nthreads", 1), "ngpus": cfg.get("ngpus", 1),
        "min_bytes": cfg.get("minimum_bytes"), "max_bytes": cfg.get("maximum_bytes"),
        "warmup_iters": cfg.get("warmup_iters"), "iters": cfg.get("iterations"),
        "agg_iters": cfg.get("aggregated_iterations"), "validation": cfg.get("validation"),
        "graph": cfg.get("graph"), "json_version": data.get("version"),
    }
    for key in ("step_factor", "step_bytes"):
        if key in cfg:
            test.config[key] = cfg[key]
    for d in cfg.get("devices") or []:
        test.ranks.append(RankLine(
            rank=int(d.get("rank", len(test.ranks))), host=str(d.get("hostname", "")),
            device=int(d.get("device", 0)),
            bus_id=str(d.get("device_hex", "")), device_name=str(d.get("device_info", "")),
            group=d.get("group"), pid=d.get("pid"),
        ))
    for entry in data.get("env") or []:
        if isinstance(entry, str) and entry.startswith("NCCL_") and "=" in entry:
            k, v = entry.split("=", 1)
            test.env[k] = v
    for i, res in enumerate(data["results"]):
        root = str(res.get("root", "")).strip()
        base = {"bytes": int(res["size"]), "count": int(res["count"]), "dtype": res.get("type", ""),
                "op": res.get("redop"), "root": root or None, "line": i}
        for placement in ("out_of_place", "in_place"):
            body = res.get(placement)
            if not isinstance(body, dict):
                continue
            row = dict(base, in_place=placement == "in_place")
            row["time_us"] = _json_num(body.get("time", body.get("cpu_time")))
            row["algbw_GBps"] = _json_num(body.get("alg_bw"))
            row["busbw_GBps"] = _json_num(body.get("bus_bw"))
            wrong = _json_num(body.get("nwrong"))
            row["wrong"] = int(wrong) if wrong is not None else None
            if "cpu_time" in body:
                row["cpu_time"] = True
            per_iter = res.get(f"{placement}_per_iter")
            if isinstance(per_iter, dict):
                row["per_iter"] = {k: v for k, v in per_iter.items() if k != "per_process_max_times_us"}
            test.rows.append(row)
    oob = data.get("out_of_bounds") or {}
    if isinstance(oob.get("count"), int):
        test.out_of_bounds = oob["count"]
    avg = data.get("average_bus_bandwidth") or data.get("average_bus_bandwidith") or {}  # typo before 2026-02
    test.avg_busbw_GBps = _json_num(avg.get("bandwidth", avg.get("bandwidith")))
    test.errors = [e for e in data.get("errors") or [] if e]
    return test


# -- files and run directories ---------------------------------------------------------------------------

def parse_file(path: str | Path) -> list[NcclTest]:
    """The runs in one file, text or JSON; UsageError (exit 2) when there are none."""
    from netbench.common.rundir import open_regular

    path = Path(path)
    with open_regular(path) as fh:  # a FIFO or a device is refused, not read forever
        raw = fh.read(MAX_LOG_BYTES + 1)
    if len(raw) > MAX_LOG_BYTES:
        raise UsageError(f"{path}: larger than {MAX_LOG_BYTES >> 20} MiB; split the log per run")
    text = raw.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, deep nesting
            raise UsageError(f"{path}: not nccl-tests -J output ({type(exc).__name__})") from exc
        tests = [parse_json(data, str(path))]
    else:
        tests = parse_text(text, str(path))
    tests = [t for t in tests if t.rows]
    if not tests:
        raise UsageError(
            f"{path}: no nccl-tests results found (expected the size/count/type table of *_perf, or -J JSON)"
        )
    return tests


def _to_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def to_rows(test: NcclTest, run_id: str, group: str | None = None) -> list[ResultRow]:
    """ResultRows (the results.jsonl contract) for one parsed run; ``group`` keeps it apart from the
    other runs imported with it (two logs' rows of one collective are two measurements, not one)."""
    hosts, ranks = test.hosts, test.nranks
    iters = _to_int(test.config.get("iters")) or 0
    warmup = _to_int(test.config.get("warmup_iters")) or 0
    graph = (_to_int(test.config.get("graph")) or 0) > 0
    out = []
    for r in test.rows:
        op = r.get("op")
        root = _to_int(r.get("root"))
        extra: dict[str, Any] = {"source": test.source, "line": r["line"], "imported_from": "nccl-tests"}
        for key in ("max_error", "per_iter", "cpu_time"):
            if key in r:
                extra[key] = r[key]
        if test.config.get("agg_iters"):
            extra["agg_iters"] = test.config["agg_iters"]
        if test.collective_inferred:
            extra["collective_inferred"] = test.collective_inferred
        missing = "time" if r["time_us"] is None else "bus bandwidth" if r["busbw_GBps"] is None else None
        out.append(ResultRow(
            run_id=run_id, collective=test.collective or "unknown", backend="nccl", pattern="world",
            hosts=hosts, ranks=ranks, round=None, bytes=r["bytes"], count=r["count"], dtype=r["dtype"],
            op=None if op in (None, "none") else op, in_place=r["in_place"], iters=iters, warmup=warmup,
            time_us=r["time_us"], time_us_min=None, time_us_max=None, rank_time_us=None,
            algbw_GBps=r["algbw_GBps"], busbw_GBps=r["busbw_GBps"], wrong=r.get("wrong"),
            status="error" if missing else "ok",  # an ok row has its time and busbw (rows.MEASURED)
            error=f"nccl-tests printed no {missing}" if missing else None,
            root=root if root is not None and root >= 0 else None, device="cuda", cuda_graph=graph,
            group=group, engine="nccl",  # nccl-tests calls NCCL directly, as netbench's NCCL engine does
            extra=extra,
        ))
    return out


def env_hosts(tests: list[NcclTest]) -> dict[str, dict[str, Any]]:
    """env.json's per-host entries from what the logs say (versions, NCCL_* of -J runs)."""
    hosts: dict[str, dict[str, Any]] = {}
    for t in tests:
        for host in t.hosts or ["unknown"]:
            entry = hosts.setdefault(host, {"source": "nccl-tests log"})
            for key, value in (("nccl_tests_version", t.nccl_tests_version), ("nccl", t.nccl_version),
                               ("nccl_headers", t.nccl_headers_version), ("cuda", t.cuda_version)):
                if value:
                    entry.setdefault(key, value)
            if t.env:
                entry.setdefault("env", {}).update(t.env)
    return hosts


@dataclass(frozen=True)
class NicSpec:
    """``import --nics 8x400``: what a log never says, the data ports of every node and their rate
    (Gb/s), from the user; the report then has a ceiling and the published references to judge by."""

    count: int
    gbps: float

    _RE = re.compile(r"^\s*(\d{1,3})\s*[xX*]\s*(\d{1,5}(?:\.\d+)?)\s*(?:[gG](?:b/?s|bps)?)?\s*$")

    @classmethod
    def parse(cls, text: str) -> NicSpec:
        m = cls._RE.match(text)
        if not m or not 1 <= int(m.group(1)) <= 64 or not 1 <= float(m.group(2)) <= 3200:
            raise ValueError(f"--nics {text!r}: give ports x Gb/s a port, e.g. 8x400 "
                             "(1-64 ports, 1-3200 Gb/s)")
        return cls(int(m.group(1)), float(m.group(2)))


NICS_UNKNOWN = "an nccl-tests log names no NIC: import it with --nics PORTSxGBPS (e.g. 8x400) to judge it"


def inventory_nodes(tests: list[NcclTest], nics: NicSpec | None = None) -> list[dict[str, Any]]:
    """Partial NodeInventory records: the GPUs each host's rank lines name (no probe was run), and
    ``nics`` when the user gave them (named ``given-K``, so nobody takes them for inventoried)."""
    from netbench.inventory.model import GPU, NIC, NodeInventory

    missing = {"probe": "imported from an nccl-tests log"}
    if nics is None:
        missing["nics"] = NICS_UNKNOWN
    nodes: dict[str, NodeInventory] = {}
    for t in tests:
        for r in t.ranks:
            node = nodes.setdefault(r.host, NodeInventory(
                host=r.host, status="partial", missing=dict(missing),
                nics=[NIC(name=f"given-{k}", state="Active", rate_gbps=nics.gbps) for k in range(nics.count)]
                if nics else [],
            ))
            if all(g.index != r.device for g in node.gpus):
                bus = r.bus_id.lower() or None
                node.gpus.append(GPU(index=r.device, name=r.device_name or None, pci_bus_id=bus))
    return [n.to_dict() for n in nodes.values()]


def import_logs(
    paths: list[str | Path], out: str | Path | None = None, nics: NicSpec | None = None
) -> tuple[Any, list[NcclTest]]:
    """Parse every file (all must be nccl-tests output) and write one run directory (``nics``: the
    nodes' data ports, which the user gave: ``NicSpec``).

    Returns ``(RunDir, tests)``. Nothing is written when any file fails to parse, so a typo in one
    path never leaves a half-imported run behind.
    """
    from netbench import __version__
    from netbench.common.rundir import RunDir, utc_now

    if not paths:
        raise UsageError("no nccl-tests log given")
    from netbench.common.rows import row_problem

    tests = [t for p in paths for t in parse_file(p)]
    rows = [(t, to_rows(t, "import", f"log{k}")) for k, t in enumerate(tests, 1)]
    for t, test_rows in rows:  # checked before anything is written: the reader would leave them out
        for row in test_rows:
            if (why := row_problem(row.to_dict())) is not None:
                raise UsageError(f"{t.source}: entry {row.extra['line']}: {why}")
    run = RunDir.create(out)
    started = utc_now()
    with run.writer() as writer:
        for k, t in enumerate(tests, 1):
            for row in to_rows(t, run.run_id, f"log{k}"):
                writer.write(row)
    run.write_env(env_hosts(tests))
    run.write_inventory(inventory_nodes(tests, nics))
    run.write_run(
        started=started, finished=utc_now(), netbench_version=__version__, launcher="import", status="ok",
        sources=[str(Path(p)) for p in paths],
        imported=[{
            "source": t.source, "tool": "nccl-tests", "collective": t.collective,
            "collective_inferred": t.collective_inferred,
            "nccl_tests_version": t.nccl_tests_version, "nccl_version": t.nccl_version, "config": t.config,
            "hosts": t.hosts, "ranks": t.nranks, "rows": len(t.rows), "out_of_bounds": t.out_of_bounds,
            "avg_busbw_GBps": t.avg_busbw_GBps, "errors": t.errors,
        } for t in tests],
    )
    return run, tests
