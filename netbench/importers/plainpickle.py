"""Loading an untrusted pickle as plain data, with bounds (``load``).

Loading a pickle can run code (a class's ``__reduce__`` names any function with its arguments), so
before anything is built its opcodes are read through (``pickletools.genops``: the stream is
decoded, nothing is built) and the pickle is refused when it:

- names a class or function, or asks for anything but plain data (GLOBAL, STACK_GLOBAL, REDUCE,
  BUILD, INST, OBJ, NEWOBJ(_EX), the extension registry, persistent ids, out-of-band buffers);
- builds more than ``Limits.objects`` objects and references (each opcode builds one at most);
- nests tuples or containers deeper than ``Limits.depth`` (a deep tuple used as a dict key or set
  item would be hashed by recursion in C, past any recursion guard, while loading);
- holds an integer of more than ``Limits.int_bits`` bits, or a memo index beyond the entries made
  so far (the C unpickler would allocate a memo table that large).

Then the C unpickler builds it, refusing every class and function again, and
``Reading.check_plain`` measures what was built: shared references expanded, containers inside
themselves, depth.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any

from netbench.importers.bounded import Reading

_CODE = frozenset({"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "EXT1",
                   "EXT2", "EXT4", "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER"})
_ATOMS = frozenset({"INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "STRING", "BINSTRING",
                    "SHORT_BINSTRING", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8", "UNICODE",
                    "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "NONE", "NEWTRUE", "NEWFALSE", "FLOAT",
                    "BINFLOAT"})
_EMPTY = frozenset({"EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET", "EMPTY_TUPLE"})
_FROM_MARK = frozenset({"LIST", "DICT", "TUPLE", "FROZENSET"})
_TUPLE_N = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}
_INTO_TOP = {"APPEND": 1, "SETITEM": 2}  # items popped into the container below them
_INTO_TOP_FROM_MARK = frozenset({"APPENDS", "SETITEMS", "ADDITEMS"})
_PUT = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"})
_GET = frozenset({"GET", "BINGET", "LONG_BINGET"})
_NOTHING = frozenset({"PROTO", "FRAME", "STOP"})

#: each opcode's class above (the sets themselves, compared by identity)
_KIND: dict[str, Any] = {name: kind for kind in (_CODE, _ATOMS, _EMPTY, _FROM_MARK, _TUPLE_N, _INTO_TOP,
                                                 _INTO_TOP_FROM_MARK, _GET, _PUT) for name in kind}

_ATOM = [0]  # the nesting depth of a number or text: every atom shares this cell, never changed


class _Malformed(Exception):
    pass


class _NoGlobals(pickle.Unpickler):
    """Plain data only: any class or function a pickle names is refused, so loading runs nothing."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refers to {module[:60]}.{name[:60]}, not plain data")


def load(raw: bytes, reading: Reading) -> Any:
    """The plain data ``raw`` pickles, or ``reading.refuse(why)``."""
    try:
        _scan(raw, reading)
    except _Malformed as exc:
        raise reading.refuse(f"not a readable pickle ({exc})") from None
    except (ValueError, EOFError) as exc:  # what genops says of a stream cut short or not a pickle
        raise reading.refuse(f"not a readable pickle ({str(exc).split(';')[0][:120]})") from None
    try:
        data = _NoGlobals(io.BytesIO(raw)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
            MemoryError, RecursionError) as exc:
        raise reading.refuse(f"not a readable pickle ({type(exc).__name__}: {str(exc)[:120]})") from None
    reading.check_plain(data)
    return data


class _Stack(list):  # type: ignore[type-arg]
    """The unpickler's stack of depth cells; its marks kept apart, as stack positions."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[int] = []

    def to_mark(self) -> list[Any]:
        if not self.marks:
            raise _Malformed("an opcode needs a mark the stream never set")
        start = self.marks.pop()
        items = self[start:]
        del self[start:]
        return items

    def top(self) -> Any:
        if len(self) <= (self.marks[-1] if self.marks else 0):
            raise _Malformed("an opcode needs an item the stream never pushed")
        return self[-1]

    def take(self, n: int) -> list[Any]:
        if len(self) - n < (self.marks[-1] if self.marks else 0):
            raise _Malformed("an opcode needs more items than the stream pushed")
        items = self[len(self) - n:]
        del self[len(self) - n:]
        return items


def _scan(raw: bytes, reading: Reading) -> None:
    """Refuse what ``load`` must not build (module docstring), reading the opcodes only. The stack holds
    a depth cell per item (a one-item list, shared with the memo for a container: a list filled
    after it was memoized deepens every reference to it)."""
    limits = reading.limits
    stack = _Stack()
    memo: dict[int, list[int]] = {}
    count = 0
    for op, arg, _pos in pickletools.genops(raw):
        count += 1
        if count & 0xFFFF == 0:
            reading.tick()
            if count > limits.objects:
                raise reading.refuse(f"builds more than {limits.objects:,} objects")
        kind = _KIND.get(op.name)
        if kind is _ATOMS:
            if type(arg) is int and not -(1 << 63) <= arg < 1 << 63:
                reading.check_int(arg)
            stack.append(_ATOM)
        elif kind is _PUT:  # as common as the objects themselves: every one is memoized
            index = len(memo) if op.name == "MEMOIZE" else arg
            if not isinstance(index, int) or not 0 <= index <= count:
                raise _Malformed(f"memo index {str(index)[:20]} out of range")
            memo[index] = stack.top()
        elif kind is _GET:
            if arg not in memo:
                raise _Malformed(f"memo index {str(arg)[:20]} never set")
            stack.append(memo[arg])
        elif kind is _EMPTY:
            stack.append([1])
        elif kind is _FROM_MARK or kind is _TUPLE_N:
            items = stack.to_mark() if kind is _FROM_MARK else stack.take(_TUPLE_N[op.name])
            stack.append([_deeper(items, reading)])
        elif kind is _INTO_TOP or kind is _INTO_TOP_FROM_MARK:
            items = stack.to_mark() if kind is _INTO_TOP_FROM_MARK else stack.take(_INTO_TOP[op.name])
            [container] = stack.take(1)
            if container is _ATOM:
                raise _Malformed(f"{op.name} into a number or text")
            container[0] = max(container[0], _deeper(items, reading))
            stack.append(container)
        elif kind is _CODE:
            what = f" ({str(arg)[:100]})" if isinstance(arg, str) else ""
            raise reading.refuse(f"names a class or function ({op.name}{what}): not plain data, not loaded")
        else:
            _stack_op(op.name, stack)
    if count > limits.objects:
        raise reading.refuse(f"builds more than {limits.objects:,} objects")


def _stack_op(name: str, stack: _Stack) -> None:
    """MARK, POP, POP_MARK, DUP and framing; anything else is malformed."""
    if name == "MARK":
        stack.marks.append(len(stack))
    elif name == "POP":  # the item on top, or the mark when none was pushed since (as the C unpickler)
        if stack.marks and stack.marks[-1] == len(stack):
            stack.marks.pop()
        elif stack:
            stack.pop()
        else:
            raise _Malformed("POP on an empty stack")
    elif name == "POP_MARK":
        stack.to_mark()
    elif name == "DUP":
        stack.extend(stack.take(1) * 2)
    elif name not in _NOTHING:
        raise _Malformed(f"opcode {name}")


def _deeper(items: list[Any], reading: Reading) -> int:
    """The depth of a container holding ``items``; refused past ``Limits.depth``."""
    depth = 1 + max((cell[0] for cell in items), default=0)
    if depth > reading.limits.depth:
        raise reading.refuse(f"nested more than {reading.limits.depth} levels deep")
    return depth
