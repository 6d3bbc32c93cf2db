"""A run's pair rows as columns, and the pairs a run has met: what the re-test loop reads.

The re-test loop (``netbench.confirm``) reads a run's pair rows after every launch: which pairs were
measured, which failed, and each pair's busbw against the controls of its class and load. As one
dict per row that was 5 GB and most of a core-minute at 4,096 nodes (8.4M pair rows); here a row is
its hosts' codes and four numbers, and the pairs met are a boolean matrix over the hosts (16 MB at
4,096 hosts, where a set of 8.4M frozensets held 2 GB).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from netbench.common.rows import blamed_hosts, never_ran

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from netbench.common.rundir import RunDir

NO_ROUND = -1
"""``round`` of a pair row that has none (a pair measured outside the pairwise rounds)."""
NOT_RECORDED = -1
"""``load`` or hop class code of a pair row that does not carry one (an older run, an imported log)."""


@dataclass(frozen=True)
class Failure:
    """A failed pair row: ``why`` as the sweep prints it ("status: error"), the hosts it blames and
    whether its group ran at all (the row's ``blame`` and ``ran``, read by ``rows.blamed_hosts``)."""

    why: str
    blame: frozenset[str] = frozenset()
    ran: bool = True

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Failure:
        why = _why(row.get("status"), row.get("error"))
        return cls(why, frozenset(blamed_hosts(row)), not never_ran(row))


@dataclass
class PairRows:
    """Rows of pattern ``pair`` naming two hosts, as columns: ``a``/``b`` each row's hosts as codes
    into ``names`` (in the row's order), ``round`` (NO_ROUND where null), ``nbytes``, ``busbw`` (NaN
    where null), ``ok`` (status ok), and the plan's facts the row carries: ``load`` (NOT_RECORDED
    where null) and ``hop`` (its ``hop_class`` as a code into ``classes``, NOT_RECORDED where null);
    ``facts`` gives them for every row."""

    names: list[str]
    a: np.ndarray
    b: np.ndarray
    round: np.ndarray
    nbytes: np.ndarray
    busbw: np.ndarray
    ok: np.ndarray
    load: np.ndarray
    hop: np.ndarray
    classes: list[str] = field(default_factory=list)
    failed: dict[int, Failure] = field(default_factory=dict)
    """Why each row that is not ok failed, by row."""
    engine: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Each row's ``engine`` as a code into ``engines`` (NOT_RECORDED where null)."""
    engines: list[str] = field(default_factory=list)
    collective: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Each row's ``collective`` as a code into ``collectives`` (NOT_RECORDED where null)."""
    collectives: list[str] = field(default_factory=list)
    plain: int = 0
    """Rows that are only here (ok, nothing wrong): the analysis' frame leaves them out (``pairstore``)."""

    @classmethod
    def empty(cls) -> PairRows:
        ints = np.zeros(0, dtype=np.int64)
        return cls([], ints, ints, ints, ints, np.zeros(0), np.zeros(0, dtype=bool), ints, ints, [], {},
                   ints, [], ints, [])

    def engine_is(self, name: str) -> np.ndarray:
        """Whether each row was measured by engine ``name``."""
        return self.engine == (self.engines.index(name) if name in self.engines else -2)

    def collective_is(self, name: str) -> np.ndarray:
        """Whether each row measured collective ``name``."""
        return self.collective == (self.collectives.index(name) if name in self.collectives else -2)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> PairRows:
        """From rows as the line reader gives them (dicts); rows of other patterns are left out."""
        names: dict[str, int] = {}
        coded: tuple[dict[str, int], ...] = ({}, {}, {})  # hop classes, engines, collectives
        cols: tuple[list[Any], ...] = ([], [], [], [], [], [], [], [], [], [])
        failed: dict[int, Failure] = {}

        def code(k: int, value: Any) -> int:
            return NOT_RECORDED if value is None else coded[k].setdefault(value, len(coded[k]))

        for r in records:
            hosts = r.get("hosts")
            if r.get("pattern") != "pair" or not isinstance(hosts, list) or len(hosts) != 2:
                continue
            if r.get("status") != "ok":
                failed[len(cols[0])] = Failure.of(r)
            for col, v in zip(cols, (
                names.setdefault(hosts[0], len(names)),
                names.setdefault(hosts[1], len(names)),
                NO_ROUND if r.get("round") is None else r["round"],
                r.get("bytes") or 0,
                np.nan if r.get("busbw_GBps") is None else r["busbw_GBps"],
                r.get("status") == "ok",
                NOT_RECORDED if r.get("load") is None else r["load"],
                code(0, r.get("hop_class")), code(1, r.get("engine", "torch")), code(2, r.get("collective")),
            ), strict=True):
                col.append(v)
        a, b, rnd, nbytes, busbw, ok, load, hop, engine, coll = cols
        ints = (np.array(c, dtype=np.int64) for c in (a, b, rnd, nbytes))
        return cls(list(names), *ints, np.array(busbw, dtype=np.float64), np.array(ok, dtype=bool),
                   np.array(load, dtype=np.int64), np.array(hop, dtype=np.int64), list(coded[0]), failed,
                   np.array(engine, dtype=np.int64), list(coded[1]), np.array(coll, dtype=np.int64),
                   list(coded[2]))

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> PairRows:
        """From the frame ``common.rowtable.read_rows_frame`` reads (hosts as lists)."""
        from netbench.reports.rowtable import listed_hosts

        if frame.empty or "hosts" not in frame.columns:
            return cls.empty()
        names, rows, codes = listed_hosts(frame["hosts"], length=2)
        pattern = frame["pattern"].to_numpy(dtype=object)[rows]
        keep = pattern == "pair"
        rows, codes = rows[keep], codes.reshape(-1, 2)[keep]

        def coded(name: str) -> tuple[np.ndarray, list[str]]:
            if name not in frame.columns:
                return np.full(len(rows), NOT_RECORDED, dtype=np.int64), []
            return codes_of(frame[name], rows)

        def column(name: str, fill: float) -> np.ndarray:
            if name not in frame.columns:
                return np.full(len(rows), fill)
            values = frame[name].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
            return np.where(np.isnan(values), fill, values)

        hop, classes = coded("hop_class")
        engine, engines = coded("engine")
        coll, collectives = coded("collective")
        status = frame["status"].to_numpy(dtype=object)[rows] if "status" in frame.columns else None
        ok = np.zeros(len(rows), dtype=bool) if status is None else status == "ok"
        bad = np.flatnonzero(~ok)
        failed_cols = [c for c in ("hosts", "status", "error", "blame", "ran") if c in frame.columns]
        failed = frame.iloc[rows[bad]][failed_cols].to_dict("records")  # the failed rows: few
        return cls(
            names,
            codes[:, 0].astype(np.int64),
            codes[:, 1].astype(np.int64),
            column("round", NO_ROUND).astype(np.int64),
            column("bytes", 0).astype(np.int64),
            column("busbw_GBps", np.nan),
            ok,
            column("load", NOT_RECORDED).astype(np.int64),
            hop,
            classes,
            {int(i): Failure.of(r) for i, r in zip(bad.tolist(), failed, strict=True)},
            engine, engines, coll, collectives,
        )

    def __len__(self) -> int:
        return len(self.a)

    @classmethod
    def joined(cls, parts: Sequence[PairRows], consume: bool = False) -> PairRows:
        """The rows of ``parts`` one after the other, hosts and codes renumbered as met (the first
        part's numbering kept); a part alone is returned itself. Each column is one array of the
        type its parts have (int32 codes, int8 classes: the reader's), wider only where the names
        no longer fit it: at 4,096 nodes the rows are 25 M, and int64 throughout took 73 B a row.
        ``consume``: the parts are the caller's temporaries, each column let go once joined."""
        parts = [p for p in parts if len(p)]
        if len(parts) <= 1:
            return parts[0] if parts else cls.empty()
        hosts: dict[str, int] = {}
        a, b, failed, at = [], [], {}, 0
        for p in parts:
            lut = _renumber(hosts, p.names)
            a.append(p.a if lut is None else lut[p.a])
            b.append(p.b if lut is None else lut[p.b])
            failed |= {at + i: failure for i, failure in p.failed.items()}
            at += len(p)
        out: dict[str, Any] = {"names": list(hosts), "failed": failed, "plain": sum(p.plain for p in parts)}
        for name, column in (("a", a), ("b", b)):
            out[name] = _joined(column, parts, name, len(hosts), consume)
        for codes, names in (("hop", "classes"), ("engine", "engines"), ("collective", "collectives")):
            known: dict[str, int] = {}
            coded = []
            for p in parts:
                lut, theirs = _renumber(known, getattr(p, names)), getattr(p, codes)
                coded.append(theirs if lut is None else np.where(theirs >= 0, lut[np.maximum(theirs, 0)],
                                                                 NOT_RECORDED))
            out[names] = list(known)
            out[codes] = _joined(coded, parts, codes, len(known), consume)
        for name in ("round", "nbytes", "busbw", "ok", "load"):
            out[name] = _joined([getattr(p, name) for p in parts], parts, name, 0, consume)
        return cls(**out)

    def subset(self, keep: np.ndarray) -> PairRows:
        """The rows ``keep`` (a mask) in order, named and coded as here (``plain``: 0, not counted)."""
        at = np.flatnonzero(keep)
        failed = np.array(sorted(self.failed), dtype=np.int64)
        kept = failed[np.isin(failed, at)]
        columns = ("a", "b", "round", "nbytes", "busbw", "ok", "load", "hop", "engine", "collective")
        moved = zip(np.searchsorted(at, kept).tolist(), kept.tolist(), strict=True)
        return replace(self, **{c: getattr(self, c)[at] for c in columns}, plain=0,
                       failed={new: self.failed[old] for new, old in moved})

    def facts(
        self, switches: Mapping[str, str], usable: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Each row's load and hop class (a code into the names returned): the ones the row carries,
        else ``pair_facts``' (``usable``: the rows whose pairs a round's load counts)."""
        return pair_facts(self.names, self.a, self.b, self.round, self.load, self.hop, self.classes,
                          switches, usable)

    def mask_of(self, hosts: Iterable[str]) -> np.ndarray:
        """Whether each of ``names`` is one of ``hosts`` (a mask to index with ``a`` and ``b``)."""
        wanted = set(hosts)
        return np.array([h in wanted for h in self.names], dtype=bool)

    def pairs(self, rows: np.ndarray | None = None) -> list[tuple[str, str]]:
        """The (a, b) names of the rows (``rows``: a mask or positions; all by default)."""
        a, b = (self.a, self.b) if rows is None else (self.a[rows], self.b[rows])
        return [(self.names[x], self.names[y]) for x, y in zip(a.tolist(), b.tolist(), strict=True)]


_PAIR_COLUMNS = ("hosts", "status", "wrong", "round", "bytes", "busbw_GBps", "load", "hop_class", "engine",
                 "collective", "error", "blame", "ran")
"""What a pair row is kept of (and what a failed one says of why)."""


class PairBuilder:
    """``PairRows`` filled from arrow batches of rows (the stored schema's columns), each column
    allocated once for at most ``capacity`` rows (pages never written are never resident): 30 B a
    row (sizes int32 where they fit, codes int8). ``plain`` counts the rows that are ok with nothing
    wrong (``reports.pairstore``)."""

    def __init__(self, capacity: int) -> None:
        from netbench.reports.rowtable import HostCodes  # the reader's module (imported lazily there too)

        self.n = 0
        self.cols = {
            "a": np.empty(capacity, np.int32), "b": np.empty(capacity, np.int32),
            "round": np.empty(capacity, np.int32), "nbytes": np.empty(capacity, np.int64),
            "busbw": np.empty(capacity, np.float64), "ok": np.empty(capacity, bool),
            "load": np.empty(capacity, np.int16), "hop": np.empty(capacity, np.int8),
            "engine": np.empty(capacity, np.int8), "collective": np.empty(capacity, np.int8),
        }
        self.hosts = HostCodes()
        self.coded: dict[str, dict[str, int]] = {"hop": {}, "engine": {}, "collective": {}}
        self.failed: dict[int, Failure] = {}
        self.plain = 0

    def add(self, batch: Any) -> Any:
        """Take the batch's pair rows; return the mask (a numpy bool array) of its plain rows."""
        import pyarrow as pa
        import pyarrow.compute as pc

        hosts = batch.column("hosts")
        listed = pc.equal(pc.list_value_length(hosts), 2).fill_null(False)
        # the names of every row of two hosts, in order, as ``rowtable.listed_hosts`` numbers them
        codes = self.hosts.codes(pc.list_flatten(hosts.filter(listed))).reshape(-1, 2)
        two = pc.equal(batch.column("pattern"), "pair").fill_null(False)
        two = pc.and_(two, listed).to_numpy(zero_copy_only=False)
        at = np.flatnonzero(two)
        plain = np.zeros(len(two), dtype=bool)
        if not at.size:
            return plain
        codes = codes[two[listed.to_numpy(zero_copy_only=False)]]
        rows = batch.select(_PAIR_COLUMNS)
        rows = rows if at.size == len(two) else rows.take(pa.array(at))
        status = rows.column("status")
        ok = pc.equal(status, "ok").fill_null(False).to_numpy(zero_copy_only=False)
        wrong = pc.greater(rows.column("wrong").fill_null(0), 0).to_numpy(zero_copy_only=False)
        mine = ok & ~wrong
        plain[at] = mine
        self.plain += int(mine.sum())
        lo, hi = self.n, self.n + len(at)
        c = self.cols
        c["a"][lo:hi] = codes[:, 0]
        c["b"][lo:hi] = codes[:, 1]
        c["round"][lo:hi] = rows.column("round").fill_null(NO_ROUND).to_numpy(zero_copy_only=False)
        c["nbytes"][lo:hi] = rows.column("bytes").fill_null(0).to_numpy(zero_copy_only=False)
        c["busbw"][lo:hi] = rows.column("busbw_GBps").to_numpy(zero_copy_only=False)  # null: NaN
        c["ok"][lo:hi] = ok
        load = rows.column("load").fill_null(NOT_RECORDED).to_numpy(zero_copy_only=False)
        if load.size and load.max() > np.iinfo(np.int16).max:  # pairs through one uplink: a few thousand
            raise ValueError("a load past int16")  # the line reader takes the run
        c["load"][lo:hi] = load
        for name, column in (("hop", "hop_class"), ("engine", "engine"), ("collective", "collective")):
            values = rows.column(column)
            if name == "engine":  # rows from before engines were torch's (``context.rows_frame``)
                values = values.fill_null("torch")
            c[name][lo:hi] = self._code(name, values)
        for i in np.flatnonzero(~ok).tolist():  # the failed rows: few
            row = {k: rows.column(k)[i].as_py() for k in ("hosts", "status", "error", "blame", "ran")}
            self.failed[lo + i] = Failure.of(row)
        self.n = hi
        return plain


    def _code(self, name: str, values: Any) -> np.ndarray:
        """A string column's values as codes (NOT_RECORDED where null), numbered as first seen."""
        enc = values.dictionary_encode()
        index = self.coded[name]
        lut = np.array([index.setdefault(v, len(index)) for v in enc.dictionary.to_pylist()] or [0])
        if len(index) > np.iinfo(np.int8).max:  # hop classes, engines, collectives: a handful
            raise ValueError(f"more than {np.iinfo(np.int8).max} values of {name}")  # the line reader's
        if not enc.indices.null_count:
            return lut[enc.indices.to_numpy()]
        codes = enc.indices.fill_null(0).to_numpy(zero_copy_only=False)
        return np.where(enc.indices.is_null().to_numpy(zero_copy_only=False), NOT_RECORDED, lut[codes])

    def finish(self) -> PairRows:
        n, c = self.n, self.cols
        names = {k: list(v) for k, v in self.coded.items()}
        if not n or c["nbytes"][:n].max() <= np.iinfo(np.int32).max:  # sizes up to 2 GB: 4 bytes a row
            c["nbytes"] = c["nbytes"][:n].astype(np.int32)
        # views of the columns as allocated: the pages past ``n`` were never written, never resident
        out = PairRows(self.hosts.names, c["a"][:n], c["b"][:n], c["round"][:n], c["nbytes"][:n],
                       c["busbw"][:n], c["ok"][:n], c["load"][:n], c["hop"][:n], names["hop"], self.failed,
                       c["engine"][:n], names["engine"], c["collective"][:n], names["collective"], self.plain)
        self.cols = {}
        return out


def codes_of(column: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """A string column's values at ``rows`` as codes into the names returned (NOT_RECORDED where
    null), through its categories when it has them (the column reader's strings are categoricals)."""
    import pandas as pd

    values = column.iloc[rows] if len(rows) != len(column) else column
    cat = values.astype("category") if not isinstance(values.dtype, pd.CategoricalDtype) else values
    codes = cat.cat.codes.to_numpy(dtype=np.int64)
    return np.where(codes >= 0, codes, NOT_RECORDED), [str(c) for c in cat.cat.categories]


def _renumber(known: dict[str, int], names: Sequence[str]) -> np.ndarray | None:
    """The codes of ``names`` in ``known`` (added as met) as a lookup table; None where each keeps
    its own (no copy of a part's codes to make)."""
    lut = [known.setdefault(name, len(known)) for name in names]
    return None if lut == list(range(len(lut))) else np.array(lut or [0], dtype=np.int64)


def _joined(arrays: list, parts: Sequence[PairRows], name: str, codes: int, drop: bool = False) -> np.ndarray:
    """``arrays`` (each part's column ``name``) as one, of the type the parts' columns have, wider
    where it does not hold ``codes`` values; ``arrays`` emptied, ``drop``: the parts' let go."""
    dtype = np.result_type(*(getattr(p, name).dtype for p in parts))
    if dtype.kind == "i" and codes > np.iinfo(dtype).max:
        dtype = np.dtype(np.int64)
    out = np.concatenate(arrays, dtype=dtype, casting="unsafe")  # each value fits ``dtype``: checked above
    arrays.clear()
    for p in parts if drop else ():
        setattr(p, name, None)  # the caller's temporaries (``PairRows.joined``)
    return out


def pair_facts(
    names: Sequence[str],
    a: np.ndarray,
    b: np.ndarray,
    rounds: np.ndarray,
    load: np.ndarray,
    hop: np.ndarray,
    classes: Sequence[str],
    switches: Mapping[str, str],
    usable: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each pair row's load and hop class, as the plan recorded them where the row carries them
    (``load``/``hop`` >= 0; ``hop`` codes into ``classes``); the others worked out from ``switches``
    as the planner does (``common.topology.RoundLoad``): the one fallback, for rows of older runs and
    imported logs. Rows are ``a``/``b`` codes into ``names`` and their ``rounds`` (NO_ROUND: none).

    A row's worked-out load counts the distinct pairs of its round among the ``usable`` rows (a
    pair measured at several sizes is one pair): 0 for a row without a round, or not usable. Its
    hop class: ``common.topology.hop_class``, ``unknown`` where the switches do not place a host.
    Returns (loads, hop class codes, the class names); numpy throughout (8.4M rows at 4,096 nodes).
    Where every row carries both, the returned arrays are ``load`` and ``hop`` themselves: read
    them, never change them."""
    from netbench.inventory.topology import UNKNOWN, RoundLoad, tier_name

    out_classes = list(classes)
    no_load, no_hop = load < 0, hop < 0
    if switches and UNKNOWN in out_classes:  # the plan placed no host; the switches now do (learned)
        no_hop |= hop == out_classes.index(UNKNOWN)
    if not (no_load.any() or no_hop.any()):
        return load, hop, out_classes
    load = load.astype(np.int64, copy=True)
    hop = hop.astype(np.int64, copy=True)
    fabric = RoundLoad(switches)
    leaves = fabric.leaves(names)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    if no_load.any():
        load[no_load] = 0
        counted = usable & (rounds != NO_ROUND)
        wanted = no_load & counted
        if wanted.any():
            # every usable row of a round that has a row to work out counts, recorded or not
            mine = counted & np.isin(rounds, np.unique(rounds[wanted]))
            n = len(names)
            rnd = rounds[mine].astype(np.int64)  # a key of round and pair passes 2**31 at 4,096 hosts
            keys, inverse = np.unique((rnd * n + lo[mine]) * n + hi[mine], return_inverse=True)
            pairs = np.stack([(keys // n) % n, keys % n], axis=1)
            loads = fabric.indexed(leaves, pairs, keys // (n * n))[inverse.ravel()]
            load[mine & no_load] = loads[no_load[mine]]
    if no_hop.any():
        rows = np.flatnonzero(no_hop)
        tiers = fabric.tiers(leaves, np.stack([lo[rows], hi[rows]], axis=1))
        found = np.unique(tiers)
        code = {c: i for i, c in enumerate(out_classes)}
        named = [tier_name(t) if t >= 1 else UNKNOWN for t in found.tolist()]
        lut = np.array([code.setdefault(name, len(code)) for name in named], dtype=np.int64)
        out_classes = list(code)
        hop[rows] = lut[np.searchsorted(found, tiers)]
    return load, hop, out_classes


def _why(status: Any, error: Any) -> str:
    """A failed row's status and error, as the sweep prints them."""
    return f"{status}: {error}" if isinstance(error, str) and error else str(status)


MET_BLOCK = 1 << 20
"""Rows ``MetPairs.add_rows`` takes at a time."""


class MetPairs:
    """Pairs of hosts measured together, over a fixed list of hosts (a pair naming another host is
    not kept, and is never met): a symmetric boolean matrix."""

    def __init__(self, hosts: Sequence[str], pairs: Iterable[Iterable[str]] = ()) -> None:
        self.hosts = list(dict.fromkeys(hosts))
        self.pos = {h: i for i, h in enumerate(self.hosts)}
        self.met = np.zeros((len(self.hosts), len(self.hosts)), dtype=bool)
        self.add(pairs)

    def add(self, pairs: Iterable[Iterable[str]]) -> None:
        for pair in pairs:
            a, b = (self.pos.get(h, -1) for h in pair)
            if a >= 0 and b >= 0:
                self.met[a, b] = self.met[b, a] = True

    def add_rows(self, rows: PairRows, keep: np.ndarray | None = None) -> None:
        """The pairs of ``rows`` (``keep``: a mask of them)."""
        lut = np.array([self.pos.get(h, -1) for h in rows.names] or [-1], dtype=np.int64)
        for lo in range(0, len(rows), MET_BLOCK):  # a block at a time: 25 M rows' int64 codes are 400 MB
            at = slice(lo, lo + MET_BLOCK)
            a, b = (rows.a[at], rows.b[at]) if keep is None else (rows.a[at][keep[at]], rows.b[at][keep[at]])
            a, b = lut[a], lut[b]
            known = (a >= 0) & (b >= 0)
            self.met[a[known], b[known]] = True
            self.met[b[known], a[known]] = True

    def copy(self) -> MetPairs:
        out = MetPairs([])
        out.hosts, out.pos, out.met = self.hosts, self.pos, self.met.copy()
        return out

    def __contains__(self, pair: Iterable[str]) -> bool:
        a, b = (self.pos.get(h, -1) for h in pair)
        return a >= 0 and b >= 0 and bool(self.met[a, b])

    def partners(self, host: str) -> int:
        """How many hosts ``host`` has met."""
        i = self.pos.get(host)
        return 0 if i is None else int(self.met[i].sum())


class GrowingRows:
    """A run's pair rows as they grow (``PairRows``): each call reads only what was written since
    the last and returns all of them (the same table while nothing was added; not to be changed by
    the caller). The re-test loop reads the run after each launch. results.parquet's parts are
    whole once named, so each is read once, column by column (``reports.rowtable``; a part it
    cannot vouch for, and the tail of the part being filled, line by line); an older run's
    results.jsonl from where the last read ended. The first read may be the analysis' own
    (``take``).

    What was read is held as the first read and the parts added since (``pieces``), joined only
    when the whole is asked for, once after each addition, the previous join let go first: at
    4,096 nodes the first read is 25 M rows (760 MB), the analysis' own, and a re-test launch adds
    a few thousand (each part appended to the whole as it was read held 73 B a row, and each
    concatenation beside the one before: 5.8 GB with the analysis, issue 48)."""

    def __init__(self, rundir: RunDir):
        self.rundir = rundir
        self.first = PairRows.empty()
        self.added: list[PairRows] = []
        self.rows = self.first  # the first read and ``added`` joined (``PairRows.joined``), once asked for
        self.read: set[str] = set()  # the parts (and tails of finished parts) read into ``rows``
        self.end = 0
        self.lines = 0

    def __call__(self) -> PairRows:
        pieces = self.pieces()
        if len(pieces) > 1 + len(self.added):  # the tail being filled: read again each time, never kept
            return PairRows.joined([self._joined(), pieces[-1]])
        return self._joined()

    def pieces(self) -> list[PairRows]:
        """What was written until now as read, without joining it: the first read, each part read
        since, and the tail of the part being filled (read again each time). What weighs a few
        of the rows takes them from each (``PairRows.subset``) instead of from the join, which at
        4,096 nodes is 760 MB."""
        files = self.rundir.row_files()
        if files == [self.rundir.results_path]:
            self._jsonl()
            return [self.first, *self.added]
        last = files[-1].suffix != ".parquet" if files else False  # the tail being filled
        for path in files[:-1] if last else files:
            if path.name not in self.read:
                self._add(_pair_rows(path))
                self.read.add(path.name)
        return [self.first, *self.added, *([_pair_rows(files[-1])] if last else [])]

    def _add(self, new: PairRows) -> None:
        if len(new):
            self.added.append(new)
            self.rows = self.first  # the previous join let go before the next is made

    def _joined(self) -> PairRows:
        if self.added and self.rows is self.first:
            self.rows = PairRows.joined([self.first, *self.added])
        return self.rows

    def _jsonl(self) -> None:
        if not self.lines and self.rundir.results_path.is_file() and self._columns():
            return
        from netbench.common.jsonread import read_jsonl
        from netbench.common.rows import row_problem

        got = read_jsonl(self.rundir.results_path, row_problem, self.end, self.lines)
        self._add(PairRows.from_records(got.records))
        self.end, self.lines = got.end, got.lines

    def files_now(self) -> list[tuple[str, int]]:
        """The row files and their sizes now: ``take`` compares them after the analysis read them."""
        out = []
        for path in self.rundir.row_files():
            try:
                out.append((path.name, path.stat().st_size))
            except OSError:
                out.append((path.name, -1))
        return out

    def take(self, rows: PairRows, lines: int, before: list[tuple[str, int]]) -> None:
        """Take ``rows``, the pair rows the analysis read (``lines`` rows in all) of the row files
        that were ``before`` (``files_now`` before it read them), as the first read, where they are
        still so: at 4,096 nodes a read of them is a minute, and a copy 760 MB. Not where the tail
        of a part being filled was among them (it is read again each time) or before anything was
        read; later calls read what was added after them."""
        if not before or self.read or self.lines or before != self.files_now():
            return
        names = [name for name, _ in before]
        jsonl = names == [self.rundir.results_path.name]
        if not jsonl and not all(name.endswith(".parquet") for name in names):
            return
        self.first = self.rows = replace(rows, failed=dict(rows.failed))  # never the analysis' own dict
        self.added = []
        if jsonl:
            self.end, self.lines = before[0][1], lines
        else:
            self.read = set(names)

    def _columns(self) -> bool:
        from netbench.reports.rowtable import read_files_builder

        path = self.rundir.results_path
        size = path.stat().st_size
        got = read_files_builder([path], PairBuilder)  # the pair rows only, as columns
        if got is None or path.stat().st_size != size:
            return False
        rest, built = got
        self.first = self.rows = built.finish()
        self.end, self.lines = size, len(rest) + built.plain
        return True


def _pair_rows(path: Path) -> PairRows:
    """One file's pair rows: column by column when it is plainly good, else line by line."""
    from netbench.reports.rowtable import read_files_builder

    from netbench.common.rows import row_problem
    from netbench.common.rundir import read_jsonl, read_part

    got = read_files_builder([path], PairBuilder) if path.is_file() and not path.is_symlink() else None
    if got is not None:  # column by column, only the pair rows kept (30 B a row, not a frame's 220)
        return got[1].finish()
    got = read_part(path, row_problem) if path.suffix == ".parquet" else read_jsonl(path, row_problem)
    return PairRows.from_records(got.records)
