"""A run's rows read column by column (results.parquet's parts, an older run's results.jsonl), for
fleets whose runs hold millions of rows.

The line-by-line reader (``rundir.read_jsonl`` + ``rows.row_problem``) decodes every line into a
dict and checks it field by field: exact, and the only way to name a bad line, but at 1,024 nodes x
3 sizes (1.6 M rows, 1.1 GB) it takes two minutes and 8 GB. Here pyarrow's JSON reader parses the
file in C++ (both cores), typed by the row contract (``ResultRow``'s hints, the same source
``shape`` checks against), and keeps columns: strings as categoricals (``group``, one per pair, as
strings), hosts lists sharing one string per host and one list per pair, per-rank times only where
a rule reads them (RANK_TIMES_FOR: not for the millions of pair rows). Each column is allocated
once and filled as the file is parsed, so memory holds the frame and a few parsed blocks, never
the parsed table and the frame together.

It is a fast path, never a second judge: any line it cannot vouch for — not JSON, not UTF-8, a field
of the wrong type, a required field null, a number past the contract's bounds, a line longer than
``BLOCK_BYTES`` — makes it give up (None), and the caller reads the file line by line, which
names the line and why. The one leniency: a field the contract requires but allows to be null (say
``round``) that a line leaves out is read as null here, where the line reader would refuse the line.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.common.jsonread import RunDirError, open_regular
from netbench.common.rows import MEASURED, NON_NEGATIVE, STATUSES, ResultRow
from netbench.common.shape import MAX_NUMBER

if TYPE_CHECKING:
    import pandas as pd

#: per-rank times are kept for these patterns only: the stragglers rule reads them for world and ring
#: groups; a pair's two ranks sets add 100 B a row and nothing any rule or page reads
RANK_TIMES_FOR = ("world", "ring", "intra")


def _arrow_type(hint: Any) -> tuple[Any, bool] | None:
    """(arrow type, nullable) of a ResultRow field's hint; None for a field read only line by line.
    A field with a default left out of a line is null here, as it is NaN in ``pd.DataFrame(records)``."""
    import pyarrow as pa

    nullable = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(hint))
        if len(args) != 1:
            return None
        hint = args[0]
    simple = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
    if hint in simple:
        return simple[hint], nullable
    if typing.get_origin(hint) is list and typing.get_args(hint)[0] in simple:
        return pa.list_(simple[typing.get_args(hint)[0]]), nullable
    if typing.get_origin(hint) is dict:  # ``extra``: an object of anything; typed as one with no fields
        return pa.struct([]), nullable
    return None


def _contract() -> tuple[Any, set[str]]:
    """The arrow schema of a row and the fields that must not be null."""
    import pyarrow as pa

    hints = typing.get_type_hints(ResultRow)
    fields, required = [], set()
    for f in dataclasses.fields(ResultRow):
        typed = _arrow_type(hints[f.name])
        if typed is None:
            return None, set()
        tp, nullable = typed
        fields.append(pa.field(f.name, tp))
        no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if no_default and not nullable:  # null or missing: refused, the line reader names the line
            required.add(f.name)
    return pa.schema(fields), required


def contract_schema() -> Any:
    """The arrow schema of a row (``ResultRow``'s hints; ``extra`` an object of no fields)."""
    return _contract()[0]


def read_rows_frame(path: Path) -> pd.DataFrame | None:
    """The rows of one JSON-lines file as ``read_files_frame`` reads them."""
    return read_files_frame([path])


def read_files_frame(paths: list[Path]) -> pd.DataFrame | None:
    """The rows of ``paths`` (JSON lines, or Parquet parts: ``RunDir.row_files``), one after the
    other, as a DataFrame (the columns ``pd.DataFrame(records)`` would have, hosts as lists), or None
    when pyarrow is missing or any row is not plainly a good row.

    ``rank_time_us`` is None on rows whose pattern is not in RANK_TIMES_FOR."""
    got = _read(paths, None)
    return None if got is None else got[0]


def read_files_builder(paths: list[Path], builder: Callable[[int], Any]) -> tuple[pd.DataFrame, Any] | None:
    """The rows of ``paths`` as ``read_files_frame`` reads them, but each batch first offered to
    ``builder(capacity)``'s ``add``, which returns the mask of the rows it keeps for itself: the
    frame leaves them out (``reports.pairstore``). (the frame, the builder), or None as there."""
    got = _read(paths, builder)
    return None if got is None else (got[0], got[1])


def pair_row_batches(paths: list[Path], cols: list[str]) -> Iterator[pd.DataFrame]:
    """The pair rows of ``paths`` in order, a batch at a time, as frames of ``cols`` (hosts as lists),
    for what reads a few of them (the report's embedded rows) of files ``pairstore.read_split`` read
    already; a file that cannot be read so now (changed since) ends them."""
    import pyarrow.compute as pc

    schema, _ = _contract()
    for path in paths:
        for batch in _batches(path, schema):
            if batch is None:
                return
            mine = batch.filter(pc.equal(batch.column("pattern"), "pair").fill_null(False))
            if mine.num_rows:
                frame = mine.select([c for c in cols if c != "hosts"]).to_pandas()
                if "hosts" in cols:
                    frame.insert(cols.index("hosts"), "hosts", mine.column("hosts").to_pylist())
                yield frame


def _read(paths: list[Path], builder: Callable[[int], Any] | None) -> tuple[pd.DataFrame, Any] | None:
    try:
        import pyarrow as pa
    except ImportError:
        return None
    schema, required = _contract()
    if schema is None or not paths:
        return None
    # every column is allocated once for more rows than the files can hold and filled batch by
    # batch, each batch freed as soon as it is copied: holding the parsed table and converting it
    # at the end took twice the frame (the table, its unified dictionaries and the frame at once).
    # With a builder, the few rows it leaves are held as read and the frame made of them at the
    # end: columns for every row of 25 M would take 6 GB of address space for nothing
    try:
        capacity = sum(_most_rows(p, required) for p in paths)
        pairs = builder(capacity) if builder is not None else None
        filling = _Filling(schema, capacity) if pairs is None else None
        held: list[Any] = []
        seen = 0
        for path in paths:
            for batch in _batches(path, schema):
                if batch is None or not _plainly_good(batch, required) or seen + batch.num_rows > capacity:
                    return None
                seen += batch.num_rows
                if filling is not None:
                    filling.add(batch)
                    continue
                plain = pairs.add(batch)
                left = batch.filter(pa.array(~plain)) if plain.any() else batch
                if left.num_rows:
                    held.append(left)
                del batch, left
        if filling is None:
            filling = _Filling(schema, sum(b.num_rows for b in held))
            while held:
                filling.add(held.pop(0))
    except (pa.ArrowException, OSError, UnicodeError, ValueError, KeyError, RunDirError):
        return None
    if not seen:
        return None  # no rows: the line reader gives the empty frame
    return filling.frame(), pairs


class _Filling:
    """The frame's columns, each allocated once for ``capacity`` rows and filled batch by batch."""

    def __init__(self, schema: Any, capacity: int) -> None:
        self.schema = schema
        self.columns = {f.name: _column(f, capacity) for f in schema if f.name not in _NOT_COLUMNS}
        self.hosts = _Hosts()
        self.ranks = _RankTimes()
        self.n = 0

    def add(self, batch: Any) -> None:
        self.hosts.add(batch.column("hosts"), self.n)
        self.ranks.add(batch, self.n)
        for name, col in self.columns.items():
            col.add(batch.column(name), self.n)
        self.n += batch.num_rows

    def frame(self) -> pd.DataFrame:
        return _frame(self.schema, self.columns, self.hosts.column(self.n), self.ranks.column(self.n), self.n)


def _batches(path: Path, schema: Any) -> Iterator[Any]:
    """``path``'s rows a batch at a time, typed by ``schema``; a None batch: not to be vouched for
    (the line reader takes the run). A Parquet part is read column by column, only the columns
    the frame keeps, and must carry each with the contract's type."""
    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        with open_regular(path) as fh:
            # no read ahead on arrow's I/O threads: a read still in flight when the interpreter exits
            # frees a buffer of this Python file object on that thread, which cannot take the GIL then
            # and aborts the process ("terminate called without an active exception", 10 of 16
            # `netbench simulate --no-report` runs here)
            part = pq.ParquetFile(fh, pre_buffer=False)
            names = [f.name for f in schema if f.name != "extra"]
            stored = part.schema_arrow
            if any(stored.get_field_index(n) < 0 or stored.field(n).type != schema.field(n).type
                   for n in names):
                yield None
                return
            yield from part.iter_batches(batch_size=1 << 16, columns=names, use_threads=False)
        return
    if not _starts_with_an_object(path):
        yield None
        return
    read = pj.ReadOptions(use_threads=True, block_size=BLOCK_BYTES)  # a longer line fails its block
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    with pa.OSFile(str(path), "rb") as fh:
        yield from pj.open_json(fh, read_options=read, parse_options=parse)


_NOT_COLUMNS = ("hosts", "rank_time_us", "extra")
"""Fields not filled as columns: hosts and per-rank times are built apart (lists shared, times kept
only where read), ``extra`` is not kept."""


def _frame(schema: Any, columns: dict[str, Any], hosts: Any, ranks: Any, n_rows: int) -> pd.DataFrame:
    """The DataFrame in the contract's column order; each column its own block (pandas would
    otherwise copy same-typed columns into one 2-D block: the numbers twice over for a moment)."""
    import pandas as pd
    import pyarrow as pa

    built = {"hosts": hosts, "rank_time_us": ranks}
    out = {}
    for f in schema:
        if f.name in built:
            out[f.name] = built[f.name]
        elif f.name in columns:
            out[f.name] = columns.pop(f.name).finish(n_rows)
    pa.default_memory_pool().release_unused()  # the parse's blocks, kept by the allocator otherwise
    return pd.DataFrame(out, copy=False)


def _most_rows(path: Path, required: set[str]) -> int:
    """More rows than the file can hold: a Parquet part says its rows; a JSON line names every
    required field (``"name":`` and a value of at least one character, a comma), so it is at least
    that long. Columns are allocated for this many rows without touching their memory: the pages
    never written (past the real count) are never resident. Counting the lines instead would read
    the file twice (7 GB at 4,096 nodes)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        with open_regular(path) as fh:
            return pq.ParquetFile(fh).metadata.num_rows
    shortest = 2 + sum(len(name) + 5 for name in required)  # {"name":v,...}\n
    return path.stat().st_size // shortest + 1


def _starts_with_an_object(path: Path) -> bool:
    """Whether the file's first value opens an object. pyarrow 26's JSON reader crashes the process
    (SIGSEGV, not an exception) on a file whose first value is ``null``; anything but ``{`` there is
    no row anyway, so such a file goes to the line reader."""
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 16):
            body = chunk.lstrip()
            if body:
                return body.startswith(b"{")
    return False


BLOCK_BYTES = 4 << 20
"""Bytes parsed at a time: memory stays a few blocks whatever the file's size. A longer line (a
world ring of ~100k hosts) makes this reader give up and the line reader take the file."""


def _plainly_good(batch: Any, required: set[str]) -> bool:
    """No null where the contract requires a value, no null inside a list, every number finite and
    within the contract's bound (``shape.MAX_NUMBER``), and what ``rows.row_problem`` asks beyond
    the types: no negative count, size, time or bandwidth, a known status, an ``ok`` row with its
    time and busbw, a pair of two different hosts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for f in batch.schema:
        col = batch.column(f.name)
        if f.name in required and col.null_count:
            return False
        if pa.types.is_list(f.type):
            col = pc.list_flatten(col)
            if col.null_count:
                return False
        if pa.types.is_floating(col.type) and pc.all(pc.is_finite(col)).as_py() is False:
            return False
        if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
            big = pc.max(pc.abs(col)).as_py()
            if big is not None and big > MAX_NUMBER:
                return False
            if f.name in NON_NEGATIVE and (pc.min(col).as_py() or 0) < 0:
                return False
    status = batch.column("status")
    if status.null_count or not pc.all(pc.is_in(status, value_set=pa.array(STATUSES))).as_py():
        return False  # a line without a status reads null here
    ok = pc.equal(status, "ok")
    if any(pc.any(pc.and_(ok, pc.is_null(batch.column(name)))).as_py() for name in MEASURED):
        return False
    hosts = pc.filter(batch.column("hosts"), pc.equal(batch.column("pattern"), "pair"))
    if len(hosts):
        if not pc.all(pc.equal(pc.list_value_length(hosts), 2)).as_py():
            return False
        if pc.any(pc.equal(pc.list_element(hosts, 0), pc.list_element(hosts, 1))).as_py():
            return False
    return True


DISTINCT_STRINGS = ("group",)
"""String fields whose value differs from row to row (a group per pair): kept as strings, not
categoricals."""


def _column(field: Any, capacity: int) -> Any:
    import pyarrow as pa

    if pa.types.is_string(field.type):
        return _Strings(capacity, categorical=field.name not in DISTINCT_STRINGS)
    return _Numbers(field.type, capacity)


class _Numbers:
    """An integer, float or boolean column, filled in place. The frame gets what pyarrow's pandas
    conversion gives: integers with a null anywhere become floats (NaN), booleans with a null become
    objects (None); a null mask is kept only once a null is seen."""

    def __init__(self, arrow_type: Any, capacity: int) -> None:
        import numpy as np
        import pyarrow as pa

        self.kind = "float"
        if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
            self.kind = "int" if pa.types.is_integer(arrow_type) else "bool"
        dtype = {"int": np.int64, "bool": np.bool_, "float": np.float64}[self.kind]
        self.values = np.empty(capacity, dtype=dtype)  # pages never written are never resident
        self.nulls: Any = None

    def add(self, col: Any, first_row: int) -> None:
        import numpy as np

        rows = slice(first_row, first_row + len(col))
        if self.kind != "float" and col.null_count:
            if self.nulls is None:
                self.nulls = np.zeros(len(self.values), dtype=bool)
            self.nulls[rows] = col.is_null().to_numpy(zero_copy_only=False)
            col = col.fill_null(False if self.kind == "bool" else 0)
        self.values[rows] = col.to_numpy(zero_copy_only=False)  # floats: nulls are NaN

    def finish(self, n_rows: int) -> Any:
        import numpy as np

        values = self.values[:n_rows]
        if self.nulls is None:
            return values
        nulls = self.nulls[:n_rows]
        out = values.astype(np.float64 if self.kind == "int" else object)
        out[nulls] = np.nan if self.kind == "int" else None
        return out


class _Strings:
    """A string column as a categorical: codes filled in place (as narrow as the values' count
    allows) against one dictionary of the values in order of first appearance, as pyarrow unifies
    the batches' dictionaries; a run's rows repeat a handful of values (collective, backend, status
    ...) millions of times. A column whose values turn out mostly distinct keeps its batches'
    strings instead and is encoded once at the end, so no Python string is made per value.

    ``categorical=False`` (``group``, one value per pair: a dictionary as long as the column, which
    pandas would hash): the strings as they were read, a pandas ``str`` column backed by them."""

    def __init__(self, capacity: int, categorical: bool = True) -> None:
        import numpy as np

        self.codes = np.empty(capacity, dtype=np.int8)  # pages never written are never resident
        self.index: dict[str, int] = {}
        self.chunks: list[Any] | None = None if categorical else []  # the strings, kept as read
        self.categorical = categorical

    def add(self, col: Any, first_row: int) -> None:
        import numpy as np

        if self.chunks is None and len(col) >= 64 and len(self.index) > len(col) // 2:
            self.chunks = []  # most values distinct: from here on pyarrow encodes, at the end
        if self.chunks is not None:
            self.chunks.append(col)
            return
        enc = col.dictionary_encode()
        lut = np.array([self.index.setdefault(v, len(self.index)) for v in enc.dictionary.to_pylist()] or [0])
        if len(self.index) > np.iinfo(self.codes.dtype).max:  # more values than the codes can number
            wider = np.empty(len(self.codes), dtype=np.int16 if self.codes.dtype == np.int8 else np.int32)
            wider[:first_row] = self.codes[:first_row]
            self.codes = wider
        rows = slice(first_row, first_row + len(col))
        if not enc.indices.null_count:
            self.codes[rows] = lut[0] if len(lut) == 1 else lut[enc.indices.to_numpy()]
            return
        codes = enc.indices.fill_null(0).to_numpy(zero_copy_only=False)
        self.codes[rows] = np.where(enc.indices.is_null().to_numpy(zero_copy_only=False), -1, lut[codes])

    def finish(self, n_rows: int) -> Any:
        import pyarrow as pa

        if not self.categorical:
            return pa.chunked_array(self.chunks or [], type=pa.string()).to_pandas()
        dictionary = pa.array(list(self.index), type=pa.string())
        codes = self.codes[: n_rows - sum(len(c) for c in self.chunks or [])]
        head = pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), dictionary)
        if self.chunks is None:
            return head.to_pandas()
        # the strings read before the switch, then the rest, encoded as one column
        strings = pa.chunked_array([head.cast(pa.string()), *self.chunks], type=pa.string())
        self.chunks = None
        return strings.dictionary_encode().to_pandas()


class _RankTimes:
    """Per-rank times of the rows whose pattern is in RANK_TIMES_FOR (None elsewhere), by row."""

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.values: list[list[float]] = []

    def add(self, batch: Any, first_row: int) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        wanted = pc.is_in(batch.column("pattern"), value_set=pa.array(RANK_TIMES_FOR))
        keep = np.nonzero(wanted.to_numpy(zero_copy_only=False))[0]
        if keep.size:
            self.rows.append(keep + first_row)
            self.values += batch.column("rank_time_us").take(keep).to_pylist()

    def column(self, n_rows: int) -> Any:
        import numpy as np

        out = np.full(n_rows, None, dtype=object)
        if self.rows:
            rows = np.concatenate(self.rows)
            for i, v in zip(rows.tolist(), self.values, strict=True):
                out[i] = v
        return out


LIST_BLOCK = 1 << 16
"""Pairs whose host lists are made at a time."""


class HostCodes:
    """Host names as codes, a new name numbered in order of first appearance, looked up by pyarrow
    (a batch names thousands of hosts ten thousand times)."""

    def __init__(self) -> None:
        import pyarrow as pa

        self.names: list[str] = []  # by code
        self.known = pa.array([], type=pa.string())  # the same names, for pyarrow's lookups

    def codes(self, values: Any) -> Any:
        """Each of ``values``' (an arrow string array) code, as int64."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        codes = pc.index_in(values, value_set=self.known)
        if codes.null_count:
            new = pc.unique(values.filter(codes.is_null()))
            self.names += new.to_pylist()
            self.known = pa.concat_arrays([self.known, new])
            codes = pc.index_in(values, value_set=self.known)
        return codes.to_numpy(zero_copy_only=False).astype(np.int64)


class _Hosts(HostCodes):
    """Each row's host list: one string object per distinct host (a fleet has a few thousand hosts
    and millions of rows naming them) and one list per distinct pair (a pair is measured at several
    sizes). While reading, a pair row is only a number (its two hosts' codes), so no Python object
    is made per row; the lists are made at the end, once per distinct pair. Nothing mutates a row's
    hosts: they are read, never sorted in place."""

    def __init__(self) -> None:
        super().__init__()
        self.pair_rows: list[Any] = []  # row numbers of two-host rows, per batch
        self.pair_keys: list[Any] = []  # their hosts' codes: first << 32 | second
        self.other: dict[int, list[str]] = {}  # rows with another number of hosts (rings, worlds)


    def add(self, col: Any, first_row: int) -> None:
        import numpy as np

        codes = self.codes(col.values)  # the offsets index the whole child array
        offsets = col.offsets.to_numpy()
        valid = col.is_valid().to_numpy(zero_copy_only=False)
        pairs = valid & (np.diff(offsets) == 2)
        if pairs.any():
            start = offsets[:-1][pairs]
            self.pair_rows.append(np.nonzero(pairs)[0] + first_row)
            self.pair_keys.append((codes[start] << 32) | codes[start + 1])
        for i in np.nonzero(valid & ~pairs)[0].tolist():
            self.other[first_row + i] = [self.names[k] for k in codes[offsets[i] : offsets[i + 1]].tolist()]

    def column(self, n_rows: int) -> Any:
        """The hosts column: an object array of lists (None where a row has no hosts)."""
        import numpy as np

        out = np.full(n_rows, None, dtype=object)
        if self.pair_rows:
            keys = np.concatenate(self.pair_keys)
            rows = np.concatenate(self.pair_rows)
            self.pair_keys.clear()
            self.pair_rows.clear()
            order = np.argsort(keys, kind="stable")  # the rows of each pair side by side
            keys, rows = keys[order], rows[order]
            del order
            starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
            lists = np.empty(len(starts), dtype=object)
            names = np.array(self.names, dtype=object)
            for lo in range(0, len(starts), LIST_BLOCK):  # a block at a time: no transient per pair
                ks = keys[starts[lo : lo + LIST_BLOCK]]
                made = map(list, zip(names[ks >> 32], names[ks & 0xFFFFFFFF], strict=True))
                lists[lo : lo + len(ks)] = np.fromiter(made, dtype=object, count=len(ks))
            del keys
            out[rows] = np.repeat(lists, np.diff(np.r_[starts, len(rows)]))
        for i, hosts in self.other.items():
            out[i] = hosts
        return out


ROWS_BLOCK = 1 << 20
"""Rows whose host lists are numbered at a time."""


def listed_hosts(col: pd.Series | Any, length: int | None = None) -> tuple[list[str], Any, Any]:
    """The host lists of a frame's ``hosts`` column (or of its object array) as numbers, for work
    over millions of rows without a Python step per host: (the host names, in order of first
    appearance; the positions of the rows whose hosts are a list, of ``length`` hosts if given;
    every host of those rows, row after row, as its index among the names). The lists are walked in
    C and their names hashed once each (a string keeps its hash), a block of rows at a time."""
    import itertools

    import numpy as np
    import pandas as pd

    objs = np.asarray(col, dtype=object)
    rows = np.flatnonzero(np.fromiter((isinstance(h, list) for h in objs), dtype=bool, count=len(objs)))
    lengths = np.fromiter(map(len, objs[rows]), dtype=np.int64, count=len(rows))
    if length is not None:
        rows, lengths = rows[lengths == length], lengths[lengths == length]
    code: dict[str, int] = {}
    codes = np.empty(int(lengths.sum()), dtype=np.int32)
    at = 0
    for lo in range(0, len(rows), ROWS_BLOCK):
        block = objs[rows[lo : lo + ROWS_BLOCK]]
        n_hosts = int(lengths[lo : lo + ROWS_BLOCK].sum())
        flat = np.fromiter(itertools.chain.from_iterable(block), dtype=object, count=n_hosts)
        local, names = pd.factorize(flat)
        lut = np.array([code.setdefault(h, len(code)) for h in names], dtype=np.int32)
        codes[at : at + len(flat)] = lut[local]
        at += len(flat)
    return list(code), rows, codes
