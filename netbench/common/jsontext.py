"""JSON text for many records at once, built column by column with numpy and pyarrow.

``json.dumps`` of a record costs microseconds, a float's repr alone about 0.3 us: at 4,096 nodes a
simulated pairwise sweep is 8.4M result rows of 22 floats and 8.4M plan groups. Here each field of a
batch of records is spelt for the whole batch at once and the pieces are joined per record in C++
(``join``), byte for byte what ``json.dumps`` writes (``tests/test_sim_scale.py`` compares them):

- a float as Python's ``repr``: pyarrow's shortest round-trip digits are the same digits, but it
  leaves out the ``.0`` of an integral value and uses an exponent at other magnitudes, so an
  integral value gets its ``.0`` back and values outside [1e-4, 1e9) are spelt by Python; values
  with at most three decimals (the simulator's per-rank times) are written from their integer
  thousandths as a byte matrix, a third of the cost;
- an integer as ``str``, a bool as ``true``/``false``; strings and anything else as JSON text the
  caller made (each host's name once, say, then taken per record).

Nothing here, and no file netbench writes, holds ``NaN`` or ``Infinity``: they are not JSON, and
strict readers (jq, browsers, netbench's own) refuse the whole file. ``dumps`` is the one
``json.dumps`` of every writer: a non-finite float is written as ``null`` (not a number), as in
``number_texts``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

ARROW_FLOATS = (1e-4, 1e9)
"""|x| in this range: pyarrow's spelling is Python's (but for an integral value's ``.0``)."""
MILLI_MAX = 1e12  # integer thousandths below this have at most 12 digits: the decimal is the shortest repr


def dumps(obj: Any, **kw: Any) -> str:
    """``json.dumps(obj, **kw)`` as standard JSON: a float that is NaN or infinite becomes ``null``
    (the first try costs nothing more when there is none, which is always but for a bug)."""
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError:
        return json.dumps(finite(obj), allow_nan=False, **kw)


def finite(obj: Any) -> Any:
    """``obj`` with every non-finite float as None (dicts, lists and tuples walked)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


def strings(texts: Sequence[str] | pa.Array) -> pa.Array:
    """Texts (JSON already) as an arrow array, to ``take`` per record or ``join``."""
    import pyarrow as pa

    return texts if isinstance(texts, pa.Array) else pa.array(texts, type=pa.string())


def join(parts: Sequence[str | pa.Array], n: int) -> pa.Array:
    """Each record's text: the pieces concatenated, a ``str`` the same in every record, an array one
    text per record."""
    import pyarrow as pa
    import pyarrow.compute as pc

    merged: list[str | pa.Array] = []
    for part in parts:  # adjacent constants as one, fewer pieces to join
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        elif not isinstance(part, str) and len(part) != n:
            raise ValueError(f"a column of {len(part)} texts for {n} records")
        else:
            merged.append(part)
    if all(isinstance(p, str) for p in merged):
        return pa.array(["".join(merged)] * n, type=pa.string())  # type: ignore[arg-type]
    return pc.binary_join_element_wise(*merged, "")


def text_of(texts: pa.Array) -> bytes:
    """Every text of the array, one after another."""
    if not len(texts):
        return b""
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset : texts.offset + len(texts) + 1]
    return bytes(memoryview(texts.buffers()[2])[offsets[0] : offsets[-1]])


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
    other = ~(milli | arrow)  # tiny, huge, -0.0: Python spells them; nan, inf: null (``dumps``)
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
        pieces.append(pa.array([dumps(x) for x in v[other].tolist()], type=pa.string()))
        where.append(np.flatnonzero(other))
    if len(pieces) == 1:
        return pieces[0]
    order = np.empty(len(v), dtype=np.int64)
    order[np.concatenate(where)] = np.arange(len(v))
    return pa.concat_arrays(pieces).take(pa.array(order))
