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
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from netbench.common.errors import UsageError
from netbench.common.rows import ResultRow
from netbench.importers.base import Imported, Importer
from netbench.importers.nccl_tests.copies import drop_copies
from netbench.importers.nccl_tests.headline import deciding, headline_busbw, keep
from netbench.importers.nccl_tests.infer import infer_collective
from netbench.importers.nccl_tests.jsonfile import parse_json
from netbench.importers.nccl_tests.model import (
    DTYPE_BYTES,
    MAX_LINES_LISTED,
    MAX_LOG_BYTES,
    MAX_LOG_LINES,
    REDOPS,
    NcclTest,
    Problem,
    RankLine,
    collective_name,
    nccl_version_from_code,
    to_int,
)
from netbench.importers.nccl_tests.table import check_sizes
from netbench.importers.nccl_tests.text import parse_text

if TYPE_CHECKING:
    from netbench.run.progress import Progress

__all__ = [
    "DTYPE_BYTES", "IMPORTER", "MAX_LINES_LISTED", "MAX_LOG_BYTES", "NICS_UNKNOWN", "PER_ITER_NOTE", "REDOPS",
    "NcclTest", "NicSpec", "Problem", "RankLine", "check_sizes", "collective_name", "env_hosts",
    "import_logs", "infer_collective", "inventory_nodes", "nccl_version_from_code", "parse_file",
    "parse_json", "parse_text", "to_rows",
]

# -- files and run directories ---------------------------------------------------------------------------

def parse_file(path: str | Path, progress: Callable[[int, int], None] | None = None) -> list[NcclTest]:
    """The runs in one file, text or JSON; UsageError (exit 2) when there are none."""
    from netbench.common.rundir import open_regular

    path = Path(path)
    with open_regular(path) as fh:  # a FIFO or a device is refused, not read forever
        raw = fh.read(MAX_LOG_BYTES + 1)
    if len(raw) > MAX_LOG_BYTES:
        raise UsageError(f"{path}: larger than {MAX_LOG_BYTES >> 20} MiB; split the log per run")
    if raw.count(b"\n") > MAX_LOG_LINES:  # counted in the bytes: no list of millions of strings first
        raise UsageError(f"{path}: more than {MAX_LOG_LINES:,} lines (an nccl-tests log of "
                         f"{MAX_LOG_BYTES >> 20} MiB has fewer than 3 M); split the log per run")
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
        tests = parse_text(text, str(path), progress)
    tests = [t for t in tests if t.rows]
    if not tests:
        raise UsageError(
            f"{path}: no nccl-tests results found (expected the size/count/type table of *_perf, or -J JSON)"
        )
    return tests


def to_rows(test: NcclTest, run_id: str, group: str | None = None,
            rows: list[dict[str, Any]] | None = None) -> Iterator[ResultRow]:
    """ResultRows (the results.jsonl contract) for one parsed run, one at a time (a table of a
    million rows is not held twice); ``group`` keeps it apart from the other runs imported with it
    (two logs' rows of one collective are two measurements, not one); ``rows``: only these of its
    parsed rows."""
    hosts, ranks, collective = test.hosts, test.nranks, test.collective or "unknown"
    iters = to_int(test.config.get("iters")) or 0
    warmup = to_int(test.config.get("warmup_iters")) or 0
    graph = (to_int(test.config.get("graph")) or 0) > 0
    every: dict[str, Any] = {}  # what every row's extra says after the row's own keys
    if test.config.get("agg_iters"):
        every["agg_iters"] = test.config["agg_iters"]
    if test.collective_inferred:
        every["collective_inferred"] = test.collective_inferred
    roots: dict[Any, int | None] = {}  # a table has a few distinct roots: each converted once
    for r in test.rows if rows is None else rows:
        op, root = r["op"], r["root"]
        if root not in roots:
            number = to_int(root)
            roots[root] = number if number is not None and number >= 0 else None
        extra: dict[str, Any] = {"source": test.source, "line": r["line"], "imported_from": "nccl-tests"}
        for key in _EXTRA_KEYS:
            if key in r:
                extra[key] = r[key]
        extra.update(every)
        missing = "time" if r["time_us"] is None else "bus bandwidth" if r["busbw_GBps"] is None else None
        yield ResultRow(
            run_id=run_id, collective=collective, backend="nccl", pattern="world",
            hosts=hosts, ranks=ranks, round=None, bytes=r["bytes"], count=r["count"], dtype=r["dtype"],
            op=None if op in (None, "none") else op, in_place=r["in_place"], iters=iters, warmup=warmup,
            time_us=r["time_us"], time_us_min=None, time_us_max=None, rank_time_us=None,
            algbw_GBps=r["algbw_GBps"], busbw_GBps=r["busbw_GBps"], wrong=r.get("wrong"),
            status="error" if missing else "ok",  # an ok row has its time and busbw (rows.MEASURED)
            error=f"nccl-tests printed no {missing}" if missing else None,
            root=roots[root], device="cuda", cuda_graph=graph,
            group=group, engine="nccl",  # nccl-tests calls NCCL directly, as netbench's NCCL engine does
            extra=extra,
        )


#: a parsed row's keys kept in its ResultRow's extra, where present
_EXTRA_KEYS = ("max_error", "per_iter", "cpu_time")


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
    paths: list[str | Path], out: str | Path | None = None, nics: NicSpec | None = None,
    progress: Progress | None = None,
) -> tuple[Any, list[NcclTest]]:
    """Parse every file (all must be nccl-tests output) and write one run directory (``nics``: the
    nodes' data ports, which the user gave: ``NicSpec``; ``progress``: a bar on a terminal).

    Returns ``(RunDir, tests)``. Nothing is written when any file fails to parse, so a typo in one
    path never leaves a half-imported run behind; run.json says ``completed`` only once every row
    is written (before that ``starting``: an import that broke off is ``run_incomplete``). Rows left
    out or repeated, failure lines and tables cut short are each test's ``problems``, in run.json;
    a run given twice (a log concatenated with itself) is imported once, its copies a problem.
    """
    from netbench import __version__
    from netbench.common.rundir import RunDir, utc_now

    if not paths:
        raise UsageError("no nccl-tests log given")
    tests: list[NcclTest] = []
    for path in paths:
        def reading(done: int, total: int, name: str = Path(path).name) -> None:
            if progress is not None:
                progress.update(done, total, f"reading {name}")
        tests += parse_file(path, reading)
    tests = drop_copies(tests)
    run = RunDir.create(out)
    started = utc_now()
    total = sum(len(t.rows) for t in tests)

    def records() -> Iterator[dict[str, Any]]:
        done = 0
        for k, t in enumerate(tests, 1):
            for row in to_rows(t, run.run_id, f"log{k}"):
                # its fields as they are, in their order: no copy (asdict's deep one, or a new dict
                # of 40 fields, cost seconds on a 50 MB log's 800k rows)
                yield vars(row)
            done += len(t.rows)
            if progress is not None:
                progress.update(done, total, "writing rows")

    with run.writer() as writer:
        writer.write_many(records())
    if progress is not None:
        progress.clear()
    run.write_env(env_hosts(tests))
    run.write_inventory(inventory_nodes(tests, nics))
    run.write_run(
        started=started, finished=utc_now(), netbench_version=__version__, launcher="import",
        status="completed", sources=[str(Path(p)) for p in paths],
        imported=[{
            "source": t.source, "tool": "nccl-tests", "collective": t.collective,
            "collective_inferred": t.collective_inferred,
            "nccl_tests_version": t.nccl_tests_version, "nccl_version": t.nccl_version, "config": t.config,
            "hosts": t.hosts, "ranks": t.nranks, "rows": len(t.rows), "out_of_bounds": t.out_of_bounds,
            "avg_busbw_GBps": t.avg_busbw_GBps, "errors": t.errors,
            "per_iter": "per-process maxima: bound a straggler, cannot name it"
            if any("per_iter" in r for r in t.rows) else None,
            "problems": [p.to_dict() for p in t.problems],
        } for t in tests],
    )
    return run, tests


# -- the command's importer (netbench import nccl-tests) ----------------------------------------------------

#: what nccl-tests -I's per-iteration times are, said with every import of them (issue 27)
PER_ITER_NOTE = (
    "note: nccl-tests -I per-iteration times are per-process maxima (each process's slowest GPU, often "
    "one that waited for the straggler): they bound a straggler's delay but cannot name it; "
    "`netbench sweep` records who arrives last (arrivals.jsonl)"
)


def load(paths: list[str], out: str | None, nics: str | None = None) -> Imported:
    """``netbench import nccl-tests``: every file into one run directory, and what to say about it."""
    from netbench.run.progress import Progress

    try:
        given = NicSpec.parse(nics) if nics else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    run, tests = import_logs(list(paths), out, given, Progress())
    keep(run.path, tests, lambda t, group: to_rows(t, run.run_id, group, deciding(t)))
    rows = sum(len(t.rows) for t in tests)
    hosts = sorted({h for t in tests for h in t.hosts})
    said = [f"imported {rows} rows from {len(tests)} nccl-tests run(s) on {len(hosts)} host(s) "
            f"into {run.path}"]
    if any("per_iter" in r for t in tests for r in t.rows):
        said.append(PER_ITER_NOTE)
    # the log did not name the collective: say what was concluded, and from what (once for the runs
    # of a log concluded alike: a log of 9,000 jobs is not 9,000 lines)
    inferred = Counter((t.source, t.collective or "unknown", t.collective_inferred)
                       for t in tests if t.collective_inferred)
    said += [f"{source}: collective {name} {how}" + (f" ({n} runs)" if n > 1 else "")
             for (source, name, how), n in inferred.items()]
    # the report's import_incomplete / imported_run_failed findings say these again
    warnings = [f"{t.source}: {p.summary()}" for t in tests for p in t.problems]
    return Imported(run.path, tuple(said), tuple(warnings))


IMPORTER = Importer(
    name="nccl-tests",
    reads="nccl-tests logs/JSON",
    summary="Import nccl-tests stdout logs or -J JSON files.",
    help="""\
Reads every layout nccl-tests has printed since 2018 (old 'error' column, '#wrong', per-iteration
columns, mpirun/srun line prefixes) and its -J JSON. All files go into one run directory.
Nothing unread passes: a line that is not a row as nccl-tests prints it (1e30, 1e400, glued ranks, a
cut row, a size no GPU holds), a failure line, a table printed again or cut short, a whole run given
twice (imported once), a table under a header naming no nccl-tests collective, a file name the table
contradicts, a run whose collective or rank count the log does not say: each is a warning line here
and a finding (import_incomplete, imported_run_failed), never a PASS.""",
    examples=(
        "netbench import nccl-tests all_reduce.log all_gather.log --out runs/nccl-2024-05",
        "netbench import nccl-tests node*/all_reduce_perf.out --out runs/imported",
        "netbench import nccl-tests h100-2node.log --nics 8x400   # judged against 8 x 400 Gb/s a node",
        "netbench import nccl-tests results.json --no-report",
    ),
    load=load,
    folders=False,
    options=(click.option(
        "--nics",
        help="What the log cannot say: each node's data ports x Gb/s (8x400). The report then judges the "
        "busbw against that ceiling and the published references; without it the ceiling is unknown.",
    ),),
    out_help="Run directory to write (default: netbench-runs/<timestamp>-<id>); refused if it holds a run "
    "already; {id} in it becomes the run id.",
    report_help="Build findings.json and report.html after importing (needs `netbench report`).",
    unreported=headline_busbw,
)
