"""results.jsonl written column by column, for writers of millions of rows (``netbench simulate``).

A row is written as ``json.dumps(row.to_dict())``: at 4,096 nodes a pairwise sweep is 8.4M rows of
~850 bytes, 22 floats each, and Python's float repr alone (about 0.3 us a float) takes a minute. Here
a batch of rows is given as columns (numpy arrays, or each row's JSON text) and pyarrow assembles the
lines in C++, byte for byte what ``json.dumps`` of each ``ResultRow`` writes (same keys, order,
spacing and float spelling; ``tests/test_sim_scale.py`` compares them):

- a float as Python's ``repr``: pyarrow's shortest round-trip digits are the same digits, but it
  leaves out the ``.0`` of an integral value and uses an exponent at other magnitudes, so an
  integral value gets its ``.0`` back and values outside [1e-4, 1e9) are spelt by Python; a value
  with at most three decimals (the simulator's per-rank times) is written from its integer
  thousandths, a third of the cost;
- an integer as ``str``, a bool as ``true``/``false``;
- anything else the caller gives as JSON text per row (``Column(json=...)``), or as one value for
  every row (``json.dumps`` once).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from netbench.common.rows import ResultRow

if TYPE_CHECKING:
    import pyarrow as pa

ARROW_FLOATS = (1e-4, 1e9)
"""|x| in this range: pyarrow's spelling is Python's (but for an integral value's ``.0``)."""
MILLI_MAX = 1e12  # integer thousandths below this have at most 12 digits: the decimal is the shortest repr


@dataclass(frozen=True)
class Column:
    """One field's value in each row of a batch: ``numbers`` (a 1-D array of floats, ints or bools;
    2-D: a list of floats per row), or ``json`` (each row's value as JSON text)."""

    numbers: np.ndarray | None = None
    json: Sequence[str] | None = None


def rows_jsonl(n: int, values: Mapping[str, Any]) -> bytes:
    """``n`` rows as JSON lines, each ``json.dumps(ResultRow(...).to_dict()) + "\\n"``: ``values``
    gives each field of ``ResultRow`` as a ``Column`` or as one value for every row; a field left
    out takes its default."""
    import pyarrow.compute as pc

    parts: list[str | pa.Array] = []
    for k, f in enumerate(dataclasses.fields(ResultRow)):
        parts.append(("{" if k == 0 else ", ") + json.dumps(f.name) + ": ")
        if f.name not in values:
            if f.default is not dataclasses.MISSING:
                value: Any = f.default
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                raise ValueError(f"field {f.name!r} has no default: give it")
        else:
            value = values[f.name]
        if isinstance(value, Column):
            parts += _texts(n, value)
        else:
            parts.append(json.dumps(value))
    parts.append("}\n")
    merged: list[str | pa.Array] = []
    for part in parts:  # adjacent constants as one, fewer pieces to join
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        else:
            merged.append(part)
    if len(merged) == 1:
        return str(merged[0]).encode() * n
    lines = pc.binary_join_element_wise(*merged, "")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset : lines.offset + n + 1]
    return bytes(memoryview(lines.buffers()[2])[offsets[0] : offsets[-1]])


def _texts(n: int, col: Column) -> list[str | pa.Array]:
    """The pieces of one column's text (with the brackets of a list)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if col.json is not None:
        if len(col.json) != n:
            raise ValueError(f"a column of {len(col.json)} values for {n} rows")
        return [pa.array(col.json, type=pa.string())]
    v = np.asarray(col.numbers)
    if len(v) != n:
        raise ValueError(f"a column of {len(v)} values for {n} rows")
    if v.ndim == 1:
        return [number_texts(v)]
    if v.shape[1] == 0:
        return ["[]"]
    thousandths = _thousandths(v)
    if thousandths is not None:
        return ["[", _milli_lists(thousandths), "]"]
    width = v.shape[1]
    items = number_texts(v.ravel())
    lists = pa.ListArray.from_arrays(pa.array(np.arange(0, n * width + 1, width, dtype=np.int32)), items)
    return ["[", pc.binary_join(lists, ", "), "]"]


def _thousandths(v: np.ndarray) -> np.ndarray | None:
    """``v`` in integer thousandths when every value is a non-negative float with at most three
    decimals (below ``MILLI_MAX``); else None."""
    if v.dtype.kind != "f" or not v.size:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        k = np.rint(v * 1000)
        if not ((k / 1000 == v) & (k < MILLI_MAX) & ~np.signbit(v)).all():
            return None
    return k.astype(np.int64)


def _milli_lists(k: np.ndarray) -> pa.Array:
    """Each row of thousandths (rows, items) as its floats' JSON list items ("11274.33, 11270.028"),
    built as a byte matrix, one plane per character position (numpy writes a plane at once):
    the integer digits, ".", three decimals, ", ", then every NUL byte (a leading zero, a trailing
    zero decimal, the last item's separator) squeezed out."""
    import pyarrow as pa

    rows, items = k.shape
    whole, frac = np.divmod(k.ravel(), 1000)
    digits = len(str(int(whole.max())))
    planes = np.empty((digits + 6, whole.size), dtype=np.uint8)
    x = whole
    for j in range(digits - 1, -1, -1):
        x, d = np.divmod(x, 10)
        planes[j] = d + 48
    for j in range(digits - 1):  # leading zeros (never the units digit)
        planes[j] *= whole >= 10 ** (digits - 1 - j)
    planes[digits] = ord(".")
    d1, rest = np.divmod(frac, 100)
    d2, d3 = np.divmod(rest, 10)
    planes[digits + 1] = d1 + 48  # "0" when the decimals are all zero, as repr writes 5.0
    planes[digits + 2] = (d2 + 48) * ((d2 | d3) != 0)
    planes[digits + 3] = (d3 + 48) * (d3 != 0)
    last = (np.arange(whole.size) % items) == items - 1
    planes[digits + 4] = np.where(last, 0, ord(","))
    planes[digits + 5] = np.where(last, 0, ord(" "))
    text = np.ascontiguousarray(planes.T).reshape(rows, -1)
    keep = text != 0
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(keep.sum(axis=1), out=offsets[1:])
    return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(text[keep]))


def number_texts(v: np.ndarray) -> pa.Array:
    """Each number as ``json.dumps`` writes it (see the module docstring for floats)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if v.dtype == np.bool_:
        return pa.array(["false", "true"]).take(pa.array(v.astype(np.int8)))
    if np.issubdtype(v.dtype, np.integer):
        return pa.array(v.astype(np.int64)).cast(pa.string())
    v = np.ascontiguousarray(v, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        k = np.rint(v * 1000)
        milli = (k / 1000 == v) & (k < MILLI_MAX) & ~np.signbit(v)
    size = np.abs(v)
    arrow = ~milli & (size >= ARROW_FLOATS[0]) & (size < ARROW_FLOATS[1])
    other = ~(milli | arrow)  # tiny, huge, -0.0, nan, inf: Python spells them
    pieces, where = [], []
    if milli.any():
        pieces.append(_milli_lists(k[milli].astype(np.int64)[:, None]))
        where.append(np.flatnonzero(milli))
    if arrow.any():
        x = v[arrow]
        text = pa.array(x).cast(pa.string())
        integral = x == np.floor(x)
        if integral.any():
            text = pc.if_else(pa.array(integral), pc.binary_join_element_wise(text, ".0", ""), text)
        pieces.append(text)
        where.append(np.flatnonzero(arrow))
    if other.any():
        pieces.append(pa.array([json.dumps(x) for x in v[other].tolist()], type=pa.string()))
        where.append(np.flatnonzero(other))
    if len(pieces) == 1:
        return pieces[0]
    order = np.empty(len(v), dtype=np.int64)
    order[np.concatenate(where)] = np.arange(len(v))
    return pa.concat_arrays(pieces).take(pa.array(order))
