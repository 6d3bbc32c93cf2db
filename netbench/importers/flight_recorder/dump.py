"""One rank's Flight Recorder dump, read with bounds (``parse_dump``): its rank from the file name, its
collectives per process group, its process groups' ranks.

A dump is untrusted: a pickle is read as plain data only (``netbench.importers.plainpickle``: no
class or function, objects, nesting, integers and shared references bounded), a JSON dump likewise
(``Reading.check_plain``), and every field used is checked and cut to a short text. Anything else
is ``Refused``: one line naming the file and why; the import skips the file.
"""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbench.common.jsonread import decode_json
from netbench.importers.bounded import Limits, Reading, Refused
from netbench.importers.plainpickle import load as load_pickle

MAX_RANK = 9_999_999
MAX_GROUP_RANKS = 1 << 20  # far above any job's world size; run.json lists a group's ranks missing
#: the rank a dump's name ends with (``<prefix><rank>``, ``.json`` allowed); a "-" right after a
#: separator or at the start makes it negative (``fr_trace_-1``), one after a letter is the prefix's
_RANK_RE = re.compile(r"(?:(^|[^A-Za-z0-9])(-))?(?<!\d)(\d+)(?:\.json)?$")
LIMITS = Limits()

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict, _SHORT.maxstring = 4, 16, 16, 8, 60
_SHORT.maxother = 60


@dataclass(frozen=True)
class Op:
    """One operation of one rank, as the dump recorded it."""

    seq: int  # collective_seq_id (0 for point-to-point)
    name: str  # profiling_name, e.g. nccl:all_reduce
    state: str
    sizes: str  # input_sizes as text


@dataclass
class Dump:
    rank: int
    host: str | None
    source: str
    version: str
    groups: dict[str, list[Op]] = field(default_factory=dict)  # process group name -> its collectives
    group_ranks: dict[str, list[int]] = field(default_factory=dict)  # pg_config: the group's ranks
    p2p: int = 0  # point-to-point operations (not judged: a hang names collectives)

    def same_as(self, other: Dump) -> bool:
        """Whether two files of one rank say the same (a copy, a link): then one of them is read."""
        return (self.version, self.groups, self.group_ranks, self.p2p) == (
            other.version, other.groups, other.group_ranks, other.p2p)


def rank_of(name: str) -> int | None | str:
    """The rank a dump's file name ends with; None when it ends with none; a reason (text) when the
    number cannot be a rank (negative, too large)."""
    m = _RANK_RE.search(name)
    if not m:
        return None
    digits = m.group(3)
    if m.group(2):
        return f"its name ends with rank -{digits[:12]}: a rank is never negative"
    if len(digits) > len(str(MAX_RANK)) or int(digits) > MAX_RANK:
        cut = "..." if len(digits) > 12 else ""
        return f"its name ends with rank {digits[:12]}{cut}: beyond {MAX_RANK:,}"
    return int(digits)


def short(value: Any, n: int = 200) -> str:
    """A field as a short text: a string cut to ``n``, anything else its bounded repr."""
    return value[:n] if isinstance(value, str) else _SHORT.repr(value)[:n]


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and -(1 << 63) <= v < 1 << 63:
        return v
    if isinstance(v, str) and re.fullmatch(r"-?\d{1,18}", v):
        return int(v)
    return None


def _ranks(text: Any) -> list[int]:
    """pg_config's ranks: "[0, 1, 2]" (text) or a list; [] when neither."""
    if isinstance(text, str) and len(text) < 10_000_000:
        text = re.findall(r"\d{1,9}", text)
    if isinstance(text, (list, tuple)):
        out = [_int(x) for x in text]
        return [x for x in out if x is not None and 0 <= x <= MAX_RANK]
    return []


def _load(reading: Reading) -> Any:
    raw = reading.read_bytes()
    try:
        if raw.lstrip()[:1] != b"{":
            return load_pickle(raw, reading)
        try:
            data = decode_json(raw)
        except ValueError as exc:
            raise reading.refuse(str(exc)) from None
        reading.check_plain(data)
        return data
    except Refused as exc:
        raise reading.refuse(f"not a Flight Recorder dump: {exc.why}") from None


def parse_dump(path: str | Path, host: str | None, rank: int) -> Dump:
    """One rank's dump (``rank``: the one its name ends with, ``rank_of``); ``Refused`` naming the
    file when it is not one."""
    reading = Reading(path, LIMITS)
    data = _load(reading)
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise reading.refuse("not a Flight Recorder dump (no 'entries' list)")
    dump = Dump(rank=rank, host=host, source=str(path), version=short(data.get("version", ""), 20))
    cfg = data.get("pg_config")
    for name, pg in (cfg.items() if isinstance(cfg, dict) else ()):
        if isinstance(pg, dict):
            ranks = _ranks(pg.get("ranks"))
            if len(ranks) > MAX_GROUP_RANKS:
                raise reading.refuse(f"pg_config names a group of more than {MAX_GROUP_RANKS:,} ranks")
            dump.group_ranks[short(name)] = ranks
    for i, e in enumerate(data["entries"]):
        if not isinstance(e, dict):
            raise reading.refuse(f"entries[{i}] is not an object")
        if e.get("is_p2p") is True:
            dump.p2p += 1  # point-to-point ops have their own sequence; a hang names collectives
            continue
        seq = _int(e.get("collective_seq_id"))
        pg = e.get("process_group")
        pg_name = short(pg[0]) if isinstance(pg, (list, tuple)) and pg else short(e.get("pg_id", ""))
        name = e.get("profiling_name")
        if seq is None or seq < 0 or not isinstance(name, str):
            raise reading.refuse(f"entries[{i}] has no collective_seq_id or profiling_name")
        sizes = e.get("input_sizes")
        shown = short(sizes) if sizes is not None else ""
        state = e.get("state")
        dump.groups.setdefault(pg_name, []).append(
            Op(seq, name[:100], state[:20] if isinstance(state, str) else "", shown))
    return dump
