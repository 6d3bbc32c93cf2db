"""What an exporter is: a format name, the file(s) it writes, a line of help with an example, and one
function from a run's data to the files' text. The machinery (``netbench export``) reads the run,
asks the exporter for its files and writes every one through ``netbench.common.files.write_files``
(atomic, never through a link), so no exporter touches the disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy, through findings and arrivals: loaded only when an export runs
    import numpy as np
    from netbench.collectives.arrivals import ArrivalRecord

    from netbench.common.findings import Finding
    from netbench.common.rundir import RunDir


@dataclass(frozen=True)
class ExportFile:
    name: str
    """A file name inside the export folder (no directory part)."""
    text: str
    about: str = ""
    """What the file holds, a few words for the command's line about it ("3 size(s)")."""


class RunData:
    """What exporters read from one run directory, each part read when an exporter first asks for it
    (a CSV export never reads per_iter.jsonl.gz)."""

    def __init__(self, run: RunDir):
        self.run = run

    @cached_property
    def rows(self) -> list[dict[str, Any]]:
        return self.run.read_rows()

    @cached_property
    def meta(self) -> dict[str, Any]:
        """run.json."""
        return self.run.read_run()

    @cached_property
    def hosts(self) -> list[str] | None:
        """run.json's hosts: the fleet the verdict's drain rule weighs (as ``reports.summary``)."""
        hosts = self.meta.get("hosts")
        return hosts if isinstance(hosts, list) else None

    @cached_property
    def findings(self) -> list[Finding]:
        """findings.json's findings; a run never analysed is bad input (one line, exit 2), not an
        empty list that would export as a PASS."""
        from netbench.common.errors import UsageError
        from netbench.common.findings import FILE_NAME, read_findings

        if not os.path.lexists(self.run.path / FILE_NAME):
            raise UsageError(f"{self.run.path}: no {FILE_NAME}; run `netbench report {self.run.path}` first")
        try:  # one that is not a regular file: RunDirError, one line already
            return list(read_findings(self.run.path).findings)
        except ValueError as exc:
            raise UsageError(f"{self.run.path / FILE_NAME}: {exc}") from None

    @cached_property
    def arrivals(self) -> list[ArrivalRecord]:
        from netbench.collectives.arrivals import ArrivalRecord, load_arrivals

        return [ArrivalRecord.from_dict(r) for r in load_arrivals(self.run).records]

    @cached_property
    def samples(self) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
        """per_iter.jsonl.gz's points by their ArrivalRecord key -> (arrive, done) [iters, ranks]."""
        from netbench.collectives.arrivals import read_samples

        from netbench.common.rundir import PER_ITER_GZ

        out = {}
        for key, arrive, done in read_samples(self.run.path / PER_ITER_GZ):
            out[(key.get("group"), key.get("collective"), key.get("bytes"), key.get("in_place"),
                 key.get("engine"))] = (arrive, done)
        return out


@dataclass(frozen=True)
class Exporter:
    name: str
    """``netbench export RUN --format NAME``."""
    files: str
    """The file name(s) it writes into --out, in words for --help."""
    help: str
    """What the format is for, one line."""
    example: str
    """A command line, ``netbench export ... --format NAME ...``, optionally with a ``# comment``."""
    render: Callable[[RunData], list[ExportFile]]
    """The files' text from the run's data; [] when the run holds nothing this format shows."""


def file_name(*parts: str, suffix: str) -> str:
    """A file name from untrusted parts (group names, collectives): anything but letters, digits and
    ``_.-`` becomes ``_`` (no ``/``, no ``..`` path), at most 120 characters before ``suffix``."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))[:120] + suffix
