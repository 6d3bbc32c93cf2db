"""The ``netbench`` command line.

Commands live one per file in ``netbench/commands/`` and are discovered here, so adding a command
never touches this file. Each command module exports ``command`` (a click.Command) and keeps heavy
imports (torch, pandas, plotly, paramiko) inside its body so ``netbench --help`` stays instant.
Errors are turned into one line at this boundary; ``NETBENCH_DEBUG=1`` or ``--debug`` shows the
traceback.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

import click

from netbench import __version__
from netbench.common.errors import NetbenchError

_COMMANDS_PKG = "netbench.commands"


def _command_modules() -> dict[str, str]:
    import netbench.commands as pkg

    names = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue
        names[info.name.rstrip("_").replace("_", "-")] = f"{_COMMANDS_PKG}.{info.name}"
    return names


class LazyGroup(click.Group):
    """A group whose sub-commands are the modules of netbench/commands, imported on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_command_modules()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None:
            return cmd
        module = _command_modules().get(cmd_name)
        if module is None:
            return None
        return importlib.import_module(module).command

    def invoke(self, ctx: click.Context):  # noqa: ANN201 - click's signature
        debug = bool(ctx.obj and ctx.obj.get("debug"))
        try:
            return super().invoke(ctx)
        except NetbenchError as exc:
            if debug:
                raise
            _said(ctx, f"netbench: error: {exc}")
            ctx.exit(_status(ctx.invoked_subcommand, exc))
        except OSError as exc:  # caught here, or click's own main would end an EPIPE as a silent 1
            if debug or not _refused(exc):
                raise
            _said(ctx, f"netbench: error: {refusal_line(exc)}")
            ctx.exit(_status(ctx.invoked_subcommand, exc))
        except KeyboardInterrupt as exc:
            ctx.exit(_interrupted(exc, ctx.invoked_subcommand))


def _said(ctx: click.Context, line: str) -> None:
    """The one error line of a command, and the mark that it ended on it (``_ending``)."""
    click.echo(line, err=True)
    if isinstance(ctx.obj, dict):
        ctx.obj["error"] = True


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="""\b
Examples:
  netbench sweep                          # local GPUs (NCCL) or CPU ranks (gloo)
  netbench sweep --hosts hosts.txt        # every node pair + the whole ring, with a report
  netbench inventory --hosts hosts.txt    # drivers, firmware, topology of every node
  netbench preflight --hosts hosts.txt    # yes/no before a large job, nodes to drain
  netbench report netbench-runs/<id>      # rebuild findings.json and report.html
""",
)
@click.version_option(__version__, prog_name="netbench")
@click.option("--debug", is_flag=True, envvar="NETBENCH_DEBUG", help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Collective-communication benchmark and diagnostics for GPU clusters."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _status(command: str | None, exc: BaseException) -> int:
    """The exit status ``exc`` ends ``command`` with: the one table (``reports.verdict``,
    docs/exit-status.md); a command it does not list (a typo'd name) has the judging commands'."""
    from netbench.reports.verdict import BAD_INPUT, TABLE, error_situation, exit_code

    situation = BAD_INPUT if isinstance(exc, click.UsageError) else error_situation(exc)
    return exit_code(command if command in TABLE else "sweep", situation)


def _command(argv: list[str] | None) -> str | None:
    """The command named on the command line: the first word after the group's own options."""
    words = [w for w in (sys.argv[1:] if argv is None else argv) if not w.startswith("-")]
    return words[0] if words else None


def _interrupted(exc: KeyboardInterrupt, command: str | None) -> int:
    """The one line of a stopped command and its exit status: 128 + the signal (130 Ctrl-C, 143
    SIGTERM, 129 SIGHUP), 3 for a full disk (docs/exit-status.md)."""
    from netbench.common.interrupts import DiskFull, as_interrupted

    stop = as_interrupted(exc)
    click.echo(f"netbench: {'error: ' if isinstance(stop, DiskFull) else ''}{stop.what}", err=True)
    return _status(command, stop)


def _instead(exc: click.UsageError) -> str:
    """For an nccl-tests flag netbench lacks (``-g 8``, ``-z 1``), what netbench does instead."""
    if not isinstance(exc, click.NoSuchOption):
        return ""
    from netbench.commands._options import NCCL_TESTS_INSTEAD

    why = NCCL_TESTS_INSTEAD.get(exc.option_name)
    return f" nccl-tests' {exc.option_name} has no counterpart: {why}." if why else ""


def main(argv: list[str] | None = None) -> None:
    """Entry point. Every error the user can cause ends as ONE line on stderr and an exit code.
    SIGTERM and SIGHUP stop a command as Ctrl-C does (``netbench.common.interrupts``); a standard
    stream its reader closed never does (``netbench.commands._streams``)."""
    from netbench.commands._streams import guarded
    from netbench.common.interrupts import handling

    with handling(restore=False), guarded():
        _main(argv)


def _main(argv: list[str] | None) -> None:
    command = _command(argv)
    state: dict[str, object] = {}
    try:
        rv = cli.main(args=argv, prog_name="netbench", standalone_mode=False, obj=state)
    except click.UsageError as exc:  # bad option value, unknown option: bad input, one line
        where = f" {exc.ctx.info_name}" if exc.ctx and exc.ctx.parent else ""
        click.echo(f"netbench{where}: error: {exc.format_message()}{_instead(exc)} (see --help)", err=True)
        sys.exit(_status(command, exc))
    except click.exceptions.Exit as exc:
        rv = exc.exit_code
    except SystemExit as exc:  # a command's own status: its verdict
        rv = exc.code
        if isinstance(rv, str):  # sys.exit("message"), as the interpreter ends it
            click.echo(rv, err=True)
            rv = 1
    except click.Abort as exc:  # click's own prompt, Ctrl-C'd; or what click made of an exception
        cause = exc.__cause__
        if cause is None or isinstance(cause, KeyboardInterrupt):  # a DiskFull in a nested command
            sys.exit(_interrupted(cause or KeyboardInterrupt(), command))
        _bug(cause, argv, command)
    except NetbenchError as exc:  # raised outside a command's invoke
        click.echo(f"netbench: error: {exc}", err=True)
        sys.exit(_status(command, exc))
    except KeyboardInterrupt as exc:
        sys.exit(_interrupted(exc, command))
    except Exception as exc:  # a bug: still one line, unless the user asked for the traceback
        if _refused(exc) and not _debug(argv):
            click.echo(f"netbench: error: {refusal_line(exc)}", err=True)
            sys.exit(_status(command, exc))
        _bug(exc, argv, command)
    sys.exit(_ending(command, rv if isinstance(rv, int) or rv is None else 1, state))


def _refused(exc: BaseException) -> bool:
    from netbench.reports.verdict import refused

    return refused(exc)


def refusal_line(exc: OSError) -> str:
    """The OS's refusal in one line: the path(s) it names (made safe for a terminal: a path is the
    user's or a file's text) and the OS's words."""
    from netbench.common.text import terminal_safe

    paths = [terminal_safe(str(p), keep_newlines=False) for p in (exc.filename, exc.filename2)
             if p is not None]
    what = exc.strerror or os.strerror(exc.errno or 0)
    return f"{' -> '.join(paths)}: {what}" if paths else f"{what} (errno {exc.errno})"


def _debug(argv: list[str] | None) -> bool:
    return bool(os.environ.get("NETBENCH_DEBUG") or "--debug" in (argv or sys.argv))


def _bug(exc: BaseException, argv: list[str] | None, command: str | None) -> None:
    """A bug: one ``internal error`` line, or the traceback when the user asked for it."""
    if _debug(argv):
        raise exc
    click.echo(
        f"netbench: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
        err=True,
    )
    sys.exit(_status(command, exc))


def _ending(command: str | None, code: int | None, state: dict[str, object]) -> int:
    """The status a command that ran to its end exits with: its own, unless its standard output was
    lost for another reason than a reader that went away (a full disk under ``> log``, a dead
    terminal without its SIGHUP): what a script reads is gone, so that is said in one line with its
    status (docs/exit-status.md). A command stopped, or ended on an error it said, keeps its own."""
    from netbench.commands._streams import lost_stdout
    from netbench.common.interrupts import stopped

    lost = lost_stdout()
    if lost is None or lost.reader_left or state.get("error") or stopped() is not None:
        return code or 0
    click.echo(f"netbench: error: {lost.line}", err=True)
    return _status(command, OSError(lost.errno, os.strerror(lost.errno), lost.path))


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
