"""What an exporter is: a format name, the file(s) it writes, a line of help with an example, and one
function from a run's data to the files' text. The machinery (``netbench export``) reads the run,
asks the exporter for its files and writes every one through ``netbench.common.files.write_files``
(atomic, never through a link), so no exporter touches the disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy, through findings and arrivals: loaded only when an export runs
    import numpy as np
    from netbench.collectives.arrivals import ArrivalRecord
    from netbench.reports.pairstore import Split

    from netbench.common.findings import Finding
    from netbench.common.jsonread import JsonlRead, JsonRead
    from netbench.common.rundir import RunDir

MAX_SAID = 5
"""Unreadable lines or files named one by one in the warnings; the rest are counted."""


@dataclass(frozen=True)
class ExportFile:
    name: str
    """A file name inside the export folder (no directory part)."""
    text: str | Iterable[str]
    """The file's text, or its pieces in order, made as it is written (``RunData.row_batches``)."""
    about: str = ""
    """What the file holds, a few words for the command's line about it ("3 size(s)")."""


class RunData:
    """What exporters read from one run directory, each part read when an exporter first asks for it
    (a CSV export never reads per_iter.jsonl.gz)."""

    def __init__(self, run: RunDir):
        self.run = run

    @cached_property
    def _loaded(self) -> JsonlRead:
        return self.run.load_rows()

    @cached_property
    def rows(self) -> list[dict[str, Any]]:
        """results.jsonl's usable rows (``problems`` names the lines left out)."""
        return self._loaded.records

    @cached_property
    def _split(self) -> Split | None:
        """The rows read column by column, as the report reads them (``reports.pairstore``), where
        every one is plainly good; None for the line reader's turn (``rows``)."""
        from netbench.reports.pairstore import read_split

        files = self.run.row_files()
        return read_split(files) if files and all(p.is_file() and not p.is_symlink() for p in files) else None

    @cached_property
    def row_count(self) -> int:
        """How many usable rows, without holding them as records where the columns say so."""
        split = self._split
        return len(split.rest) + split.pairs.plain if split is not None else len(self.rows)

    def row_batches(self) -> Iterator[list[dict[str, Any]]]:
        """``rows``, a batch at a time and in their order (``reports.rowstore.iter_rows``): what a
        format of one line a row writes, in memory bounded by a batch, not by the run."""
        from netbench.reports.rowstore import iter_rows

        if self._split is None:
            yield self.rows
            return
        for got in iter_rows(self.run):
            yield got.records

    @cached_property
    def _run_json(self) -> JsonRead:
        return self.run.load_run()

    @cached_property
    def meta(self) -> dict[str, Any]:
        """run.json."""
        return self._run_json.data

    @cached_property
    def problems(self) -> list[str]:
        """What is wrong with the run, one line each, for the export's warnings: an export carries no
        verdict, so a file made from a damaged run (lines or files left out), a mixed one (rows of
        several runs, judged as one) or a killed one (it ended early or never recorded its end) must
        not read as a whole run's. The checks are the report's (``reports.runcheck``)."""
        import pandas as pd
        from netbench.reports.pairstore import split_frame
        from netbench.reports.rowtable import listed_hosts
        from netbench.reports.runcheck import ENDED_EARLY, run_doubts

        said = []
        status = self.meta.get("status")
        if status in ENDED_EARLY:
            why = self.meta.get("error") or self.meta.get("signal")
            said.append(f"{self.run.path / 'run.json'}: the run is {status}{f' ({why})' if why else ''}: it "
                        "ended early or never recorded its end; exported what it measured")
        # the columns where every row is good, unless an exporter read the rows as records already
        split = None if "rows" in self.__dict__ else self._split
        left = (self._loaded.unreadable if split is None else []) + self._run_json.unreadable
        for u in left[:MAX_SAID]:
            said.append(f"{u.file}{f':{u.line}' if u.line else ''}: {u.reason}; left out")
        if len(left) > MAX_SAID:
            said.append(f"{len(left) - MAX_SAID} more unreadable line(s) or file(s) left out")
        if split is None:
            named = frozenset(h for r in self.rows for h in (r.get("hosts") or ()) if isinstance(h, str))
            frame = pd.DataFrame(self.rows, columns=["run_id", "ranks"]) if self.rows else pd.DataFrame()
            split = split_frame(frame)  # no plain pair rows: the frame holds every row here
        else:
            named = frozenset(listed_hosts(split.rest["hosts"])[0] if len(split.rest) else ()) | frozenset(
                split.pairs.names)
        lines_out = len(left) - len(self._run_json.unreadable)
        for d in run_doubts(self.run.path, self.meta, split, lines_out, named):
            said.append(f"{d.file}: {d.reason} ({d.kind})")
        return said

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


MAX_NAME = 120
"""Characters of a file name before its suffix: far under a file system's 255 bytes."""


def file_name(*parts: str, suffix: str) -> str:
    """A file name from untrusted parts (group names, collectives): anything but letters, digits and
    ``_.-`` becomes ``_`` (no ``/``, no ``..`` path), at most ``MAX_NAME`` characters before ``suffix``.
    A name that had to be cut ends in a short hash of the parts as they were, so two groups of long
    host names never share one file (cut to one prefix, 5 of 6 pairs' files were overwritten)."""
    import hashlib
    import re

    joined = "-".join(parts)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", joined)
    if len(safe) <= MAX_NAME:
        return safe + suffix
    digest = hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{safe[:MAX_NAME - len(digest) - 1]}-{digest}{suffix}"


def unique_names(files: list[ExportFile]) -> list[ExportFile]:
    """``files`` with no two of one name: a later file whose name an earlier one has (two groups that
    ``file_name`` makes alike, ``a:b`` and ``a|b``) gets ``-2``, ``-3`` ... before its suffix, so an
    export never writes one of its files over another."""
    import dataclasses

    taken = {f.name for f in files}
    seen: set[str] = set()
    out = []
    for f in files:
        name = f.name
        if name in seen:
            stem, dot, ext = name.rpartition(".") if "." in name.lstrip(".") else (name, "", "")
            k = 2
            while (name := f"{stem}-{k}{dot}{ext}") in taken:
                k += 1
            taken.add(name)
        seen.add(name)
        out.append(dataclasses.replace(f, name=name))
    return out
