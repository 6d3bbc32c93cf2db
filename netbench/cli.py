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
        try:
            return super().invoke(ctx)
        except NetbenchError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"netbench: error: {exc}", err=True)
            ctx.exit(_status(ctx.invoked_subcommand, exc))
        except KeyboardInterrupt as exc:
            ctx.exit(_interrupted(exc, ctx.invoked_subcommand))


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
    SIGTERM and SIGHUP stop a command as Ctrl-C does (``netbench.common.interrupts``)."""
    from netbench.common.interrupts import handling

    with handling(restore=False):
        _main(argv)


def _main(argv: list[str] | None) -> None:
    command = _command(argv)
    try:
        rv = cli.main(args=argv, prog_name="netbench", standalone_mode=False)
    except click.UsageError as exc:  # bad option value, unknown option: bad input, one line
        where = f" {exc.ctx.info_name}" if exc.ctx and exc.ctx.parent else ""
        click.echo(f"netbench{where}: error: {exc.format_message()}{_instead(exc)} (see --help)", err=True)
        sys.exit(_status(command, exc))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:  # click's own prompt, Ctrl-C'd
        sys.exit(_interrupted(KeyboardInterrupt(), command))
    except NetbenchError as exc:  # raised outside a command's invoke
        click.echo(f"netbench: error: {exc}", err=True)
        sys.exit(_status(command, exc))
    except KeyboardInterrupt as exc:
        sys.exit(_interrupted(exc, command))
    except Exception as exc:  # a bug: still one line, unless the user asked for the traceback
        if os.environ.get("NETBENCH_DEBUG") or "--debug" in (argv or sys.argv):
            raise
        click.echo(
            f"netbench: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
            err=True,
        )
        sys.exit(_status(command, exc))
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
