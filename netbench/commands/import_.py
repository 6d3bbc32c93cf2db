"""``netbench import``: bring other tools' results into a run directory (nccl-tests logs and -J
JSON; a hung job's PyTorch Flight Recorder dumps; NCCL Inspector logs)."""

from __future__ import annotations

import click

#: what nccl-tests -I's per-iteration times are, said with every import of them (issue 27)
PER_ITER_NOTE = (
    "note: nccl-tests -I per-iteration times are per-process maxima (each process's slowest GPU, often "
    "one that waited for the straggler): they bound a straggler's delay but cannot name it; "
    "`netbench sweep` records who arrives last (arrivals.jsonl)"
)
#: problems of the logs said one a line on stderr; the rest are counted (all are in run.json)
MAX_PROBLEM_LINES = 20


@click.group(
    "import",
    short_help="Import nccl-tests logs/JSON, Flight Recorder dumps or NCCL Inspector logs.",
    epilog="""\b
Examples:
  netbench import nccl-tests all_reduce.log all_gather.log --out runs/nccl-2024-05
  netbench import flight-recorder dumps/ --out runs/hang-0412   # dumps/<host>/fr_trace_<rank>
  netbench import inspector inspector-logs/*.log --out runs/job-77
  netbench import nccl-tests h100-2node.log --nics 8x400   # judged against 8 x 400 Gb/s a node
  netbench import nccl-tests results.json --no-report
""",
)
def command() -> None:
    """Turn results measured by other tools into a netbench run directory, so report, compare and
    the exporters read them like netbench's own runs."""


@command.command(
    "nccl-tests",
    short_help="Import nccl-tests stdout logs or -J JSON files.",
    epilog="""\b
Reads every layout nccl-tests has printed since 2018 (old 'error' column, '#wrong', per-iteration
columns, mpirun/srun line prefixes) and its -J JSON. All files go into one run directory.
Nothing unread passes: a line that is not a row as nccl-tests prints it (1e30, glued ranks, a cut
row), a failure line, a table printed again or cut short, a file name the table contradicts: each
is a warning line here and a finding (import_incomplete, imported_run_failed), never a PASS.
Example:
  netbench import nccl-tests node*/all_reduce_perf.out --out runs/imported
""",
)
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False),
    default=None,
    help="Run directory to write (default: netbench-runs/<timestamp>-<id>); refused if it holds a run "
    "already; {id} in it becomes the run id.",
)
@click.option(
    "--nics",
    help="What the log cannot say: each node's data ports x Gb/s (8x400). The report then judges the "
    "busbw against that ceiling and the published references; without it the ceiling is unknown.",
)
@click.option(
    "--report/--no-report",
    default=True,
    show_default=True,
    help="Build findings.json and report.html after importing (needs `netbench report`).",
)
@click.pass_context
def nccl_tests(ctx: click.Context, logs: tuple[str, ...], out: str | None, nics: str | None,
               report: bool) -> None:
    from netbench.common.errors import UsageError
    from netbench.common.text import terminal_safe
    from netbench.importers.nccl_tests import NicSpec, import_logs
    from netbench.run.progress import Progress

    try:
        given = NicSpec.parse(nics) if nics else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    run, tests = import_logs(list(logs), out, given, Progress())
    rows = sum(len(t.rows) for t in tests)
    hosts = sorted({h for t in tests for h in t.hosts})
    click.echo(
        f"imported {rows} rows from {len(tests)} nccl-tests run(s) on {len(hosts)} host(s) into {run.path}"
    )
    if any("per_iter" in r for t in tests for r in t.rows):
        click.echo(PER_ITER_NOTE)
    for t in tests:  # the log did not name the collective: say what was concluded, and from what
        if t.collective_inferred:
            said = f"{t.source}: collective {t.collective or 'unknown'} {t.collective_inferred}"
            click.echo(terminal_safe(said))
    # what was not imported as it stands, one line each (the log's own text: escaped); the report's
    # import_incomplete / imported_run_failed findings say it again
    problems = [(t, p) for t in tests for p in t.problems]
    for t, p in problems[:MAX_PROBLEM_LINES]:
        click.echo(terminal_safe(f"netbench: warning: {t.source}: {p.summary()}"), err=True)
    if len(problems) > MAX_PROBLEM_LINES:
        click.echo(f"netbench: warning: {len(problems) - MAX_PROBLEM_LINES} more problem(s): see "
                   f"{run.path / 'run.json'} (imported[].problems)", err=True)
    if report:
        root = ctx.find_root()
        group = root.command
        report_cmd = group.get_command(root, "report") if isinstance(group, click.Group) else None
        if report_cmd is None:
            click.echo(f"(no `netbench report` command here; run it later on {run.path})", err=True)
        else:
            report_cmd.main(
                args=[str(run.path)], prog_name="netbench report", standalone_mode=False, obj=ctx.obj
            )
        return
    from netbench.reports.ceilings import TERMINAL_PATTERNS, headline_lines, headlines, references
    from netbench.reports.rowtable import read_rows_frame

    # the headline busbw, as the report would print it (the log's own hosts: escaped)
    # read back column by column (a 50 MB log's half million rows: seconds, not a minute of dicts)
    frame = read_rows_frame(run.results_path)
    rows = frame if frame is not None else run.read_rows()
    heads = headlines(rows, run.read_inventory(), references(), TERMINAL_PATTERNS)
    for line in headline_lines(heads, TERMINAL_PATTERNS):
        click.echo(terminal_safe(line))


def _report(ctx: click.Context, path: object) -> None:
    root = ctx.find_root()
    group = root.command
    report_cmd = group.get_command(root, "report") if isinstance(group, click.Group) else None
    if report_cmd is None:
        click.echo(f"(no `netbench report` command here; run it later on {path})", err=True)
        return
    report_cmd.main(args=[str(path)], prog_name="netbench report", standalone_mode=False, obj=ctx.obj)


@command.command(
    "flight-recorder",
    short_help="Import a hung job's PyTorch Flight Recorder dumps: who never entered collective N.",
    epilog="""\b
One dump per rank, pickled (what the NCCL watchdog writes to TORCH_FR_DUMP_TEMP_FILE<rank> on a
timeout) or JSON (_dump_fr_trace_json); the file name ends with the rank. Dumps gathered a folder
per host (DIR/<host>/<prefix><rank>) name each rank's host; the dumps themselves do not.
Pickles are read as plain data only (nothing in them is run).
Examples:
  netbench import flight-recorder /shared/fr-dumps --out runs/hang
  netbench import flight-recorder node1/fr_trace_0 node2/fr_trace_1 --no-report
""",
)
@click.argument("dumps", nargs=-1, required=True, type=click.Path())
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory to write (default: netbench-runs/<timestamp>-<id>).")
@click.option("--report/--no-report", default=True, show_default=True,
              help="Build findings.json and report.html after importing.")
@click.pass_context
def flight_recorder(ctx: click.Context, dumps: tuple[str, ...], out: str | None, report: bool) -> None:
    from netbench.common.text import terminal_safe
    from netbench.importers.flight_recorder import import_dumps

    run, read, verdicts = import_dumps(list(dumps), out)
    click.echo(f"imported {len(read)} Flight Recorder dump(s) into {run.path}")
    for v in verdicts:
        who = ", ".join(f"rank {r}" + (f" on {h}" if h else "") for r, h in zip(v.missing, v.missing_hosts,
                                                                               strict=True))
        line = (f"process group {v.group!r}: collective {v.seq} ({v.collective}) entered by "
                f"{len(v.entered)} rank(s); never entered by {who or 'no dumped rank'}")
        if v.no_dump:
            line += f"; no dump from rank(s) {', '.join(map(str, v.no_dump[:20]))}"
        click.echo(terminal_safe(line))
    if not verdicts:
        click.echo("every dumped rank entered the same last collective of each process group")
    if report:
        _report(ctx, run.path)


@command.command(
    "inspector",
    short_help="Import NCCL Inspector logs: per-rank duration and busbw, the rank the others wait for.",
    epilog="""\b
The JSON lines the NCCL Inspector profiler plugin writes (NVIDIA/nccl plugins/profiler/inspector,
NCCL_INSPECTOR_DUMP_DIR): one line per rank and collective. Files or folders (read recursively).
The rank whose kernel is the shortest again and again arrived last: the others' kernels were waiting.
Examples:
  netbench import inspector /logs/nccl-inspector-4711/ --out runs/job-4711
  netbench import inspector node*.log --no-report
""",
)
@click.argument("logs", nargs=-1, required=True, type=click.Path())
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory to write (default: netbench-runs/<timestamp>-<id>).")
@click.option("--report/--no-report", default=True, show_default=True,
              help="Build findings.json and report.html after importing.")
@click.pass_context
def inspector(ctx: click.Context, logs: tuple[str, ...], out: str | None, report: bool) -> None:
    from netbench.common.text import terminal_safe
    from netbench.importers.inspector import import_logs

    run, log, slow = import_logs(list(logs), out)
    click.echo(f"imported {len(log.records)} collective record(s) from {len(log.sources)} Inspector log(s) "
               f"into {run.path}" + (f"; {log.left_out} line(s) left out" if log.left_out else ""))
    for s in slow:
        where = f"rank {s.rank}" + (f" on {s.host}" if s.host else "")
        click.echo(terminal_safe(f"slow rank: {where}, shortest kernel (arrived last) in "
                                 f"{s.collectives_slow} of {s.collectives} collectives of communicator "
                                 f"{s.comm}"))
    if not slow:
        click.echo("no rank arrived last more often than chance")
    if report:
        _report(ctx, run.path)
