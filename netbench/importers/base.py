"""What an importer is: a name, what it reads, its help with examples, and one function from files
to a run directory plus what to say about it. The machinery (``netbench.commands.import_``) makes a
sub-command of every registered importer, with the files argument, ``--out`` and
``--report/--no-report`` every import shares; prints what the importer says, its warnings (at most
``MAX_PROBLEM_LINES``) and runs the report. An importer does none of that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: a click decorator that adds one option (``click.option(...)``): an importer's own flags
OptionDecorator = Callable[[Callable[..., Any]], Callable[..., Any]]

DEFAULT_OUT_HELP = "Run directory to write (default: netbench-runs/<timestamp>-<id>)."
DEFAULT_REPORT_HELP = "Build findings.json and report.html after importing."


@dataclass(frozen=True)
class Imported:
    """What one import wrote and what to tell the user about it. Lines are the importer's words
    about untrusted files: the command prints them through ``terminal_safe``."""

    path: Path
    """The run directory written."""
    said: tuple[str, ...] = ()
    """stdout, one line each: what was imported and what it shows."""
    warnings: tuple[str, ...] = ()
    """stderr, one line each: what was not imported as it stands (run.json's ``imported[].problems``
    holds every one; the command prints the first ``MAX_PROBLEM_LINES`` and counts the rest)."""


@dataclass(frozen=True)
class Importer:
    name: str
    """The sub-command: ``netbench import NAME``."""
    reads: str
    """What it reads, a few words ("NCCL Inspector logs"): the ``import`` group's one line names them all."""
    summary: str
    """The sub-command's line in ``netbench import --help``."""
    help: str
    """Its ``--help`` text: the format and how it is read (examples apart, in ``examples``)."""
    examples: tuple[str, ...]
    """Command lines, each starting ``netbench import NAME``, optionally with a ``# comment``."""
    load: Callable[..., Imported]
    """``load(paths, out, **options)``: parse the files, write the run directory at ``out`` (None: a
    new one under netbench-runs/), return what was written. Bad input: ``UsageError`` (one line, exit 2)."""
    paths: str = "logs"
    """The files argument's name (its metavar in the usage line)."""
    folders: bool = True
    """Whether folders are accepted (read recursively) besides files."""
    options: tuple[OptionDecorator, ...] = ()
    """Its own flags beyond --out and --report, passed to ``load`` by name."""
    out_help: str = DEFAULT_OUT_HELP
    report_help: str = DEFAULT_REPORT_HELP
    unreported: Callable[[Path], list[str]] | None = None
    """With ``--no-report``: lines to print instead of the report (the headline busbw), from the run
    directory written."""
