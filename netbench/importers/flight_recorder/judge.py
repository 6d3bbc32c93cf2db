"""What the dumps show: for each process group, the ranks that never entered its last collective
(``never_entered``), and what could not be judged at all (``not_judged``): no collective in any
dump, so nothing to compare."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from netbench.importers.flight_recorder.dump import Dump, Op

#: ranks named in one line; the rest are counted ("and N more")
MAX_LISTED = 20


def listed(ranks: list[int], limit: int = MAX_LISTED) -> str:
    """``0, 1, 2`` or ``0, 1, ... 19 and 5 more``."""
    shown = ", ".join(map(str, ranks[:limit]))
    return shown + (f" and {len(ranks) - limit} more" if len(ranks) > limit else "")


@dataclass(frozen=True)
class NeverEntered:
    """A process group whose collective ``seq`` some members never entered."""

    group: str
    seq: int
    collective: str
    sizes: str
    entered: list[int]  # ranks that issued it
    missing: list[int]  # ranks whose dump stops before it
    missing_hosts: list[str | None]
    no_dump: list[int]  # ranks of the group without any dump
    last_seq: dict[int, int]  # every dumped rank's last collective in the group
    unreadable: list[int] = field(default_factory=list)  # ranks of the group whose dump was not read

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["last_seq"] = {str(k): v for k, v in self.last_seq.items()}
        return d


def _members(
    dumps: list[Dump],
) -> tuple[dict[str, set[int]], dict[str, dict[int, int]], dict[tuple[str, int], Op]]:
    """Each group's members (its config, and every rank with entries in it), each dumped rank's last
    collective in it, and the first record of each collective."""
    members: dict[str, set[int]] = defaultdict(set)
    last: dict[str, dict[int, int]] = defaultdict(dict)
    first_op: dict[tuple[str, int], Op] = {}
    for d in dumps:
        cfg = dict(d.group_ranks)
        if len(cfg) == 1 and len(d.groups) == 1 and next(iter(cfg)) not in d.groups:
            # torch 2.13's gloo dumps key the default group's config "" and its entries "0": one of each
            cfg = {next(iter(d.groups)): next(iter(cfg.values()))}
        for pg, ranks in cfg.items():
            members[pg].update(ranks)
        for pg, ops in d.groups.items():
            last[pg][d.rank] = max(op.seq for op in ops)
            members[pg].add(d.rank)
            for op in ops:
                first_op.setdefault((pg, op.seq), op)
    return members, last, first_op


def never_entered(dumps: list[Dump], unreadable: list[int] | tuple[int, ...] = ()) -> list[NeverEntered]:
    """For each process group: the highest collective any member entered (N) and the members whose
    dump stops before it, with their hosts; a member of the group with no dump is named apart (it
    may be the one that hung hardest: dead, or never dumped), and one whose dump could not be read
    (``unreadable``) apart again: whether it entered is not known."""
    members, last, first_op = _members(dumps)
    hosts = {d.rank: d.host for d in dumps}
    out = []
    for pg, seqs in last.items():
        n = max(seqs.values())
        missing = sorted(r for r, s in seqs.items() if s < n)
        unread = sorted(members[pg] & set(unreadable))
        no_dump = sorted(members[pg] - set(hosts) - set(unreadable))
        if not missing and not no_dump and not unread:
            continue
        op = first_op[(pg, n)]
        out.append(NeverEntered(
            group=pg, seq=n, collective=op.name, sizes=op.sizes,
            entered=sorted(r for r, s in seqs.items() if s >= n), missing=missing,
            missing_hosts=[hosts.get(r) for r in missing], no_dump=no_dump,
            last_seq=dict(sorted(seqs.items())), unreadable=unread,
        ))
    return out


def not_judged(dumps: list[Dump]) -> str | None:
    """Why nothing could be judged, or None: a hang is judged on collectives, and no dump has one; or
    on ranks compared, and no process group has two known members."""
    if not any(d.groups for d in dumps):
        p2p = sum(d.p2p for d in dumps)
        what = f"only {p2p} point-to-point operation(s)" if p2p else "no operation at all"
        return (f"no collective in any of the {len(dumps)} dump(s) ({what}): no collective to judge, so "
                "nothing was judged")
    members, _, _ = _members(dumps)
    if all(len(ranks) < 2 for ranks in members.values()):
        return (f"one rank's dump only (rank {listed([d.rank for d in dumps])}) and no process group naming "
                "other ranks: nobody to compare it with, so nothing was judged")
    return None
