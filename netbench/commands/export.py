"""``netbench export RUN_DIR``: a run in another tool's format. The formats are the exporter
registry's (``netbench.reports.export.EXPORTERS``), read when click asks, so adding one never touches
this file; every file is written through ``netbench.common.files.write_files``."""

from __future__ import annotations

from typing import Any

import click

DEFAULT_FORMAT = "nccl-tests-json"


def _registry() -> dict[str, Any]:
    from netbench.reports.export import EXPORTERS  # numpy, through findings: only when export runs

    return EXPORTERS


class ExportCommand(click.Command):
    """``--format``'s choices and the help's list of formats and examples, from the registry."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        for p in params:
            if p.name == "fmt":
                p.type = click.Choice(list(_registry()))
        return params

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        exporters = list(_registry().values())
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text("Formats (--format NAME), and the files each writes into --out:")
            with formatter.indentation():
                formatter.write_dl([(e.name, f"{e.files}. {e.help}") for e in exporters])
            formatter.write_paragraph()
            formatter.write_text("Each file is written whole (a temporary file, renamed over it). A name in "
                                 "--out that is a symbolic link is refused (exit 2), never written through; "
                                 "so is an --out the OS will not let it write (read-only), and a full one "
                                 "stops it (exit 3). A run that ended early, has unreadable lines or rows of "
                                 "several runs is exported with a warning that says so (the files carry no "
                                 "verdict). Names that would be alike get a short hash or -2, never one "
                                 "file over another.")
            formatter.write_paragraph()
            formatter.write_text("Examples:")
            with formatter.indentation():
                for e in exporters:  # as written: click would rewrap a command line and its comment
                    formatter.write(f"{' ' * formatter.current_indent}{e.example}\n")


@click.command(
    cls=ExportCommand,
    short_help="Write a run as nccl-tests -J JSON, CSV, a JSON report, JUnit or Prometheus text.",
)
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--out", "out", type=click.Path(file_okay=False), required=True,
              help="Folder to write the files into (made if missing).")
@click.option("--format", "fmt", type=click.Choice([DEFAULT_FORMAT]), default=DEFAULT_FORMAT,
              show_default=True, help="What to write (see Formats below).")
def command(run_dir: str, out: str, fmt: str) -> None:
    """Write RUN_DIR (``latest``: the newest run under netbench-runs/) in another tool's format; by
    default nccl-tests -J JSON files, one per group, collective and engine."""
    from netbench.common.errors import UsageError
    from netbench.common.files import write_files
    from netbench.common.rundir import RunDir, resolve_run
    from netbench.common.text import terminal_safe
    from netbench.reports.export.base import RunData, unique_names

    try:
        run = RunDir.open(resolve_run(run_dir))
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    data = RunData(run)
    files = unique_names(_registry()[fmt].render(data))
    if not files:
        raise UsageError(f"{run_dir}: no measured rows to export")
    for problem in data.problems:  # the files carry no verdict: what is wrong with the run is said here
        click.echo(terminal_safe(f"netbench: warning: {problem}", keep_newlines=False), err=True)
    about = {f.name: f.about for f in files}
    for path in write_files(out, {f.name: f.text for f in files}):
        click.echo(f"{path}: {about[path.name]}" if about[path.name] else str(path))
