"""``netbench import``: bring other tools' results into a run directory. Its sub-commands are the
importer registry's (``netbench.importers.IMPORTERS``), made here, read from the registry each time
click asks, so adding an importer never touches this file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from netbench.importers.base import Importer

if TYPE_CHECKING:
    from netbench.history.hook import HistoryStage

#: problems of the logs said one a line on stderr; the rest are counted (all are in run.json)
MAX_PROBLEM_LINES = 20


def _registry() -> dict[str, Importer]:
    from netbench.importers import IMPORTERS

    return IMPORTERS


class ImportGroup(click.Group):
    """``netbench import``: one sub-command per registered importer, its one line and examples
    from the registry."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_registry())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        imp = _registry().get(cmd_name)
        return _command(imp) if imp is not None else None

    def get_short_help_str(self, limit: int = 45) -> str:
        reads = [imp.reads for imp in _registry().values()]
        listed = ", ".join(reads[:-1]) + " or " + reads[-1] if len(reads) > 1 else "".join(reads)
        return f"Import {listed}."

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text(_epilog("", [e for imp in _registry().values() for e in imp.examples]))


def _epilog(text: str, examples: list[str] | tuple[str, ...]) -> str:
    """A help epilog kept as written (click's ``\\b``: a command line and its comment stay one line)."""
    head = f"{text}\n" if text else ""
    return "\b\n" + head + "Examples:\n" + "".join(f"  {e}\n" for e in examples)


@click.group("import", cls=ImportGroup)
def command() -> None:
    """Turn results measured by other tools into a netbench run directory, so report, compare and
    the exporters read them like netbench's own runs."""


def _command(imp: Importer) -> click.Command:
    """The sub-command of ``imp``: its files, ``--out``, its own options, ``--report/--no-report``."""

    def run(**kwargs: Any) -> None:
        paths, out, report = kwargs.pop(imp.paths), kwargs.pop("out"), kwargs.pop("report")
        from netbench.history.hook import HistoryStage

        done = imp.load(list(paths), out, **kwargs)
        _say(done.said, done.warnings, done.path)
        stage = HistoryStage()  # the report hands it its tables, as a sweep's does
        try:
            if report:
                _report(click.get_current_context(), done.path, stage)
            elif imp.unreported is not None:
                _say(imp.unreported(done.path), (), done.path)
        finally:  # after the report's findings (its verdict exits): the fleet history, a warning at worst
            stage.add(done.path)

    params = [
        click.argument(imp.paths, nargs=-1, required=True, type=click.Path(dir_okay=imp.folders)),
        click.option("--out", type=click.Path(file_okay=False), default=None, help=imp.out_help),
        *imp.options,
        click.option("--report/--no-report", default=True, show_default=True, help=imp.report_help),
    ]
    for param in reversed(params):  # as decorators: the last applies first
        run = param(run)
    return click.command(imp.name, short_help=imp.summary, epilog=_epilog(imp.help, imp.examples))(run)


def _say(said: tuple[str, ...] | list[str], warnings: tuple[str, ...], path: object) -> None:
    """What the importer said (stdout) and its warnings (stderr, the first ``MAX_PROBLEM_LINES``),
    each through ``terminal_safe``: the files' own text is untrusted."""
    from netbench.common.text import terminal_safe

    for line in said:
        click.echo(terminal_safe(line))
    for line in warnings[:MAX_PROBLEM_LINES]:
        click.echo(terminal_safe(f"netbench: warning: {line}"), err=True)
    if len(warnings) > MAX_PROBLEM_LINES:
        click.echo(terminal_safe(f"netbench: warning: {len(warnings) - MAX_PROBLEM_LINES} more problem(s): "
                                 f"see {path}/run.json (imported[].problems)"), err=True)


def _report(ctx: click.Context, path: object, stage: HistoryStage) -> None:
    """``netbench report PATH``, its history section made by ``stage``, which keeps the run's tables
    (``history.hook.META_KEY``): the run is added from the report's own analysis."""
    from netbench.history.hook import META_KEY

    root = ctx.find_root()
    group = root.command
    report_cmd = group.get_command(root, "report") if isinstance(group, click.Group) else None
    if report_cmd is None:
        click.echo(f"(no `netbench report` command here; run it later on {path})", err=True)
        return
    with report_cmd.make_context("report", [str(path)], parent=ctx) as sub:  # not main(): it makes a
        sub.meta[META_KEY] = stage
        report_cmd.invoke(sub)  # full disk (a KeyboardInterrupt) click's Abort, a Ctrl-C's status
