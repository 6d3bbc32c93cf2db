"""results.jsonl read column by column, for fleets whose runs hold millions of rows.

The line-by-line reader (``rundir.read_jsonl`` + ``rows.row_problem``) decodes every line into a
dict and checks it field by field: exact, and the only way to name a bad line, but at 1,024 nodes x
3 sizes (1.6 M rows, 1.1 GB) it takes two minutes and 8 GB. Here pyarrow's JSON reader parses the
file in C++ (both cores), typed by the row contract (``ResultRow``'s hints, the same source
``shape`` checks against), and keeps columns: strings as categoricals, hosts lists sharing one
string per host and one list per pair, per-rank times only where a rule reads them
(RANK_TIMES_FOR: not for the millions of pair rows).

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.common.rows import ResultRow
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


def read_rows_frame(path: Path) -> pd.DataFrame | None:
    """The rows of ``path`` as a DataFrame (the columns ``pd.DataFrame(records)`` would have, hosts
    as lists), or None when pyarrow is missing or any line is not plainly a good row.

    ``rank_time_us`` is None on rows whose pattern is not in RANK_TIMES_FOR."""
    try:
        import pyarrow as pa
        import pyarrow.json as pj
    except ImportError:
        return None
    schema, required = _contract()
    if schema is None or not _starts_with_an_object(path):
        return None
    read = pj.ReadOptions(use_threads=True, block_size=BLOCK_BYTES)  # a longer line fails its block
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    batches, hosts, ranks = [], [], []
    shared = _Shared()
    try:
        with pa.OSFile(str(path), "rb") as fh:
            for batch in pj.open_json(fh, read_options=read, parse_options=parse):
                if not _plainly_good(batch, required):
                    return None
                hosts += _host_lists(batch.column("hosts"), shared)
                ranks += _rank_times(batch)
                batches.append(_dictionary_strings(batch.drop_columns(["hosts", "rank_time_us", "extra"])))
    except (pa.ArrowException, OSError, UnicodeError, ValueError):
        return None
    if not batches:
        return None  # an empty file: the line reader gives the empty frame
    table = pa.Table.from_batches(batches)
    batches.clear()  # the table is then the arrays' only owner, and self_destruct frees each as converted
    df = table.to_pandas(split_blocks=True, self_destruct=True)
    del table
    pa.default_memory_pool().release_unused()  # the parse's blocks, kept by the allocator otherwise
    df.insert(df.columns.get_loc("ranks"), "hosts", hosts)
    df.insert(df.columns.get_loc("algbw_GBps"), "rank_time_us", ranks)
    return df


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
    within the contract's bound (``shape.MAX_NUMBER``)."""
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
    return True


@dataclasses.dataclass
class _Shared:
    """One string per host name, one list per pair, carried from batch to batch."""

    names: dict[str, str] = dataclasses.field(default_factory=dict)
    pairs: dict[tuple[str, str], list[str]] = dataclasses.field(default_factory=dict)


def _dictionary_strings(batch: Any) -> Any:
    """String columns as dictionaries (pandas categoricals): a run's rows repeat a handful of values
    (collective, backend, status ...) millions of times."""
    import pyarrow as pa

    cols = [c.dictionary_encode() if pa.types.is_string(c.type) else c for c in batch.columns]
    return pa.RecordBatch.from_arrays(cols, names=batch.schema.names)


def _rank_times(batch: Any) -> list[list[float] | None]:
    import numpy as np

    pattern = batch.column("pattern").to_numpy(zero_copy_only=False)
    out: list[list[float] | None] = [None] * len(pattern)
    keep = np.nonzero(np.isin(pattern, RANK_TIMES_FOR))[0]
    if keep.size:
        kept = batch.column("rank_time_us").take(keep).to_pylist()
        for i, v in zip(keep.tolist(), kept, strict=True):
            out[i] = v
    return out


def _host_lists(col: Any, shared: _Shared) -> list[list[str] | None]:
    """Each row's host list, built from one string object per distinct host (a fleet has a few
    thousand hosts and millions of rows naming them), and one list per distinct pair (a pair is
    measured at several sizes). Nothing mutates a
    row's hosts: they are read, never sorted in place."""
    import numpy as np

    flat = col.values.dictionary_encode()  # the offsets index the whole child array
    names = [shared.names.setdefault(h, h) for h in flat.dictionary.to_pylist()]
    idx = flat.indices.to_numpy()
    offsets = col.offsets.to_numpy()
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    lengths = np.diff(offsets)
    out: list[list[str] | None] = [None] * len(col)
    pairs = valid & (lengths == 2)
    if pairs.any():
        start = offsets[:-1][pairs]
        a = [names[k] for k in idx[start].tolist()]
        b = [names[k] for k in idx[start + 1].tolist()]
        lists = shared.pairs
        for i, x, y in zip(np.nonzero(pairs)[0].tolist(), a, b, strict=True):
            out[i] = lists.setdefault((x, y), [x, y])
    for i in np.nonzero(valid & ~pairs)[0].tolist():
        out[i] = [names[k] for k in idx[offsets[i] : offsets[i + 1]].tolist()]
    return out
