"""results.jsonl written column by column, for writers of millions of rows (``netbench simulate``).

A batch of rows given as columns (numpy arrays, or each row's JSON text) becomes their lines in one
go (``netbench.common.jsontext``), each exactly ``json.dumps(row.to_dict())`` of its ``ResultRow``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from netbench.common.jsontext import join, list_texts, number_texts, text_of
from netbench.common.rows import ResultRow

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Column:
    """One field's value in each row of a batch: ``numbers`` (a 1-D array of floats, ints or bools;
    2-D: a list of numbers per row), or ``json`` (each row's value as JSON text, in pieces for
    ``jsontext.join``: a ``str`` the same in every row, an array one text per row)."""

    numbers: np.ndarray | None = None
    json: Sequence[str | pa.Array] | None = None


def rows_jsonl(n: int, values: Mapping[str, Any]) -> bytes:
    """``n`` rows as JSON lines, each ``json.dumps(ResultRow(...).to_dict()) + "\n"``: ``values``
    gives each field of ``ResultRow`` as a ``Column`` or as one value for every row; a field left
    out takes its default."""
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
        if not isinstance(value, Column):
            parts.append(json.dumps(value))
        elif value.json is not None:
            parts += value.json
        elif np.ndim(value.numbers) == 2:
            parts += ["[", list_texts(np.asarray(value.numbers)), "]"]
        else:
            parts.append(number_texts(np.asarray(value.numbers)))
    parts.append("}\n")
    return text_of(join(parts, n)) if n else b""
