"""Which files are dumps, from where, and which of them can be used (``collect``).

Dumps are named on the command line as files, or folders: a folder of dumps, or of host folders of
dumps (``DIR/<host>/<prefix><rank>``). A dump in a folder whose name is not a host name is still
read (its host unknown) and said so; a file whose name ends with no rank is named as not read. A
dump that cannot be used (``Refused``: not a dump, past a bound, a negative rank) is skipped with
its reason and the rest are read. Two files of one rank: the same content is read once (said);
different contents are both left out (said), since neither can be told to be the rank's.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from netbench.common.errors import UsageError
from netbench.importers.bounded import Refused
from netbench.importers.flight_recorder.dump import Dump, parse_dump, rank_of
from netbench.importers.flight_recorder.judge import listed

MAX_DUMPS = 65536
_HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


@dataclass(frozen=True)
class Skipped:
    """A dump not read, and why; its rank when its name says one."""

    source: str
    why: str
    rank: int | None = None


@dataclass
class Gathered:
    dumps: list[Dump]
    """One per rank, by rank."""
    skipped: list[Skipped] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    """Where dumps were read from when no host folder says it, files not read as dumps, copies."""

    @property
    def unreadable(self) -> list[int]:
        """Ranks whose dump exists but could not be used."""
        read = {d.rank for d in self.dumps}
        return sorted({s.rank for s in self.skipped if s.rank is not None} - read)


def _host(name: str) -> str | None:
    return name if _HOST_RE.match(name) and name not in (".", "..") else None


def _listed_folder(folder: Path) -> list[Path]:
    """A folder's entries, sorted; UsageError naming it when it cannot be listed."""
    try:
        return sorted(folder.iterdir())
    except OSError as exc:
        raise UsageError(f"{folder}: cannot list the folder: {exc.strerror or exc}") from None


def _candidates(paths: list[str | Path], got: Gathered) -> list[tuple[Path, str | None]]:
    """(file, host) of every file named, or in a folder named, or in its sub-folders one level down."""
    files: list[tuple[Path, str | None]] = []
    for p in map(Path, paths):
        if p.is_dir():
            for child in _listed_folder(p):
                if child.is_dir():
                    try:
                        inner = _listed_folder(child)
                    except UsageError as exc:  # one host's folder unreadable: skipped, the others read
                        got.skipped.append(Skipped(str(child), str(exc).removeprefix(f"{child}: ")))
                        continue
                    files += [(f, _host(child.name)) for f in inner if not f.is_dir()]
                    deeper = [f.name for f in inner if f.is_dir()]
                    if deeper:
                        got.said.append(f"{child}: {len(deeper)} folder(s) inside not read (dumps sit at "
                                        f"most one folder down): {', '.join(deeper[:5])}")
                else:
                    files.append((child, None))
                if len(files) > MAX_DUMPS:
                    raise UsageError(f"more than {MAX_DUMPS} files in {p}: not a folder of Flight Recorder "
                                     "dumps")
        elif p.exists() or p.is_symlink():
            files.append((p, _host(p.parent.name)))
        else:
            raise UsageError(f"{p}: no such file or folder")
    return list(dict.fromkeys(files))  # a file named twice (a folder and a file in it) is one


def _read(files: list[tuple[Path, str | None]], got: Gathered) -> list[Dump]:
    dumps, no_rank = [], []
    for f, host in files:
        rank = rank_of(f.name)
        if rank is None:
            no_rank.append(str(f))
            continue
        if isinstance(rank, str):
            got.skipped.append(Skipped(str(f), rank))
            continue
        try:
            dumps.append(parse_dump(f, host, rank))
        except Refused as exc:
            got.skipped.append(Skipped(exc.path, exc.why, rank))
    if no_rank:
        got.said.append(f"{len(no_rank)} file(s) not read: their names end with no rank (as "
                        f"TORCH_FR_DUMP_TEMP_FILE<rank>): {', '.join(no_rank[:5])}"
                        + (f" and {len(no_rank) - 5} more" if len(no_rank) > 5 else ""))
    return dumps


def _one_per_rank(dumps: list[Dump], got: Gathered) -> None:
    by_rank: dict[int, list[Dump]] = defaultdict(list)
    for d in dumps:
        by_rank[d.rank].append(d)
    for rank, same in sorted(by_rank.items()):
        names = ", ".join(d.source for d in same[:4]) + (f" and {len(same) - 4} more" * (len(same) > 4))
        if all(d.same_as(same[0]) for d in same[1:]):
            got.dumps.append(same[0])
            if len(same) > 1:
                got.said.append(f"rank {rank}: {len(same)} files hold the same dump ({names}): read once")
            continue
        for d in same:
            why = f"rank {rank} has {len(same)} dumps that disagree ({names}): none of them is read"
            got.skipped.append(Skipped(d.source, why, rank))


def _unknown_hosts(dumps: list[Dump]) -> list[str]:
    """Where the dumps whose host is unknown were read from, one line a folder."""
    by_folder: dict[str, list[int]] = defaultdict(list)
    for d in dumps:
        if d.host is None:
            by_folder[str(Path(d.source).parent)].append(d.rank)
    return [f"{folder}: {len(ranks)} dump(s) read (rank {listed(ranks)}); their host is unknown (not in a "
            "folder named like a host)" for folder, ranks in sorted(by_folder.items())]


def collect(paths: list[str | Path]) -> Gathered:
    """Every dump named: files, or folders (a folder of dumps, or of host folders of dumps); the ones
    skipped and why. UsageError (exit 2) when no dump is left to read."""
    got = Gathered(dumps=[])
    files = _candidates(paths, got)
    _one_per_rank(_read(files, got), got)
    got.said += _unknown_hosts(got.dumps)
    if not got.dumps:
        if got.skipped:
            first = got.skipped[0]
            more = f" (and {len(got.skipped) - 1} more file(s) refused)" if len(got.skipped) > 1 else ""
            raise UsageError(f"no readable Flight Recorder dump: {first.source}: {first.why}{more}")
        raise UsageError("no Flight Recorder dumps found (file names end with the rank)")
    return got
