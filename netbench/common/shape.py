"""Does a decoded JSON value have the shape a dataclass promises? The check at the boundary of every
file netbench reads back (results.jsonl, inventory.jsonl, ...): a value that passes can be handed to
the analysis, which then never meets a string where it does arithmetic.

The shape is read from the dataclass's own type hints, so the contract is written once (``ResultRow``,
``NodeInventory``) and the check cannot drift from it. Supported hints: ``str``, ``int``, ``float``,
``bool``, ``Any``, ``X | None``, ``list[X]``, ``dict[str, X]`` and nested dataclasses (fields without
a default are required, unknown keys are allowed: readers tolerate newer files).

Numbers: ``bool`` is not a number (JSON ``true`` is not ``1``), floats must be finite, and every
number is bounded by 2**53 (the integers JSON round-trips exactly), so a ``bytes`` of 10**400 or a
busbw of 1e308 is a bad value, not an overflow three modules later.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

#: the largest magnitude accepted for any number
MAX_NUMBER = 2**53

#: checks one value; returns None when it fits, else why not (the path of the bad part included)
Check = Callable[[Any, str], "str | None"]


def problem(value: Any, shape: type) -> str | None:
    """Why ``value`` does not fit the dataclass ``shape`` (first problem found), or None."""
    return _checker(shape)(value, "")


@cache
def _checker(tp: Any) -> Check:
    if tp is Any:
        return lambda v, at: None
    if tp is type(None):
        return lambda v, at: None if v is None else _bad(at, "null", v)
    if tp is str:
        return lambda v, at: None if isinstance(v, str) else _bad(at, "a string", v)
    if tp is bool:
        return lambda v, at: None if isinstance(v, bool) else _bad(at, "true or false", v)
    if tp is int:
        return _check_int
    if tp is float:
        return _check_float
    if dataclasses.is_dataclass(tp):
        return _dataclass_checker(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _union_checker(args)
    if origin is list:
        return _list_checker(_checker(args[0]))
    if origin is dict:
        return _dict_checker(_checker(args[1]))
    raise TypeError(f"shape: unsupported type hint {tp!r}")


def _bad(at: str, expected: str, value: Any) -> str:
    where = f"field {at!r}: " if at else ""
    return f"{where}expected {expected}, got {_kind(value)}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number out of range" if not _in_range(value) else "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _in_range(value: float) -> bool:
    if isinstance(value, int):  # compared as an int: a 400-digit int does not fit in a float
        return -MAX_NUMBER <= value <= MAX_NUMBER
    return math.isfinite(value) and -MAX_NUMBER <= value <= MAX_NUMBER


def _check_int(v: Any, at: str) -> str | None:
    if isinstance(v, int) and not isinstance(v, bool) and -MAX_NUMBER <= v <= MAX_NUMBER:
        return None
    return _bad(at, "an integer", v)


def _check_float(v: Any, at: str) -> str | None:
    if isinstance(v, int | float) and not isinstance(v, bool) and _in_range(v):
        return None
    return _bad(at, "a finite number", v)


def _union_checker(args: tuple[Any, ...]) -> Check:
    checks = [_checker(a) for a in args]
    nullable = type(None) in args
    others = [c for a, c in zip(args, checks, strict=True) if a is not type(None)]

    def check(v: Any, at: str) -> str | None:
        if v is None:
            return None if nullable else _bad(at, "a value", v)
        first = None
        for c in others:
            why = c(v, at)
            if why is None:
                return None
            first = first or why
        return first

    return check


def _list_checker(item: Check) -> Check:
    def check(v: Any, at: str) -> str | None:
        if not isinstance(v, list):
            return _bad(at, "a list", v)
        for i, x in enumerate(v):
            why = item(x, f"{at}[{i}]")
            if why is not None:
                return why
        return None

    return check


def _dict_checker(value: Check) -> Check:
    def check(v: Any, at: str) -> str | None:
        if not isinstance(v, dict):
            return _bad(at, "an object", v)
        for k, x in v.items():
            why = value(x, f"{at}.{k}" if at else str(k))
            if why is not None:
                return why
        return None

    return check


def _dataclass_checker(cls: type) -> Check:
    hints = typing.get_type_hints(cls)
    fields = [
        (
            f.name,
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            _checker(hints[f.name]),
        )
        for f in dataclasses.fields(cls)
    ]

    def check(v: Any, at: str) -> str | None:
        if not isinstance(v, dict):
            return _bad(at, "an object", v)
        for name, required, field_check in fields:
            path = f"{at}.{name}" if at else name
            if name not in v:
                if required:
                    return f"missing field {path!r}"
                continue
            why = field_check(v[name], path)
            if why is not None:
                return why
        return None

    return check
