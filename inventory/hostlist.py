"""Slurm hostlist expressions: ``node[01-16,20]``, ``gpu-[1-3]``, ``rack[1-2]-n[1-4]``.

Why our own: hosts files and Slurm's topology.conf use this syntax, and pulling in Slurm's tools
(``scontrol show hostnames``) is not possible on a laptop. Semantics follow Slurm:

* commas outside brackets separate expressions, commas inside separate ranges;
* a range keeps the width of its low end: ``[08-10]`` -> 08 09 10, ``[8-10]`` -> 8 9 10;
* several bracket groups in one name expand as a cartesian product, left to right.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_HOSTS = 100_000  # an expression like node[0-999999999] is a typo, not a cluster
_TRAILING_NUM = re.compile(r"^(.*?)(\d+)(\D*)$")


def _split_top(expr: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, cur = [], 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested '[' in {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in {expr!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"unbalanced '[' in {expr!r}")
    parts.append("".join(cur))
    return parts


def _expand_ranges(body: str, expr: str) -> list[str]:
    out: list[str] = []
    for rng in body.split(","):
        rng = rng.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", rng)
        if not m:
            raise ValueError(f"bad range {rng!r} in {expr!r} (want N or N-M)")
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise ValueError(f"range {rng!r} in {expr!r} goes backwards")
        if hi - lo + 1 + len(out) > MAX_HOSTS:
            raise ValueError(f"{expr!r} expands to more than {MAX_HOSTS} hosts")
        width = len(lo_s)
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def _expand_one(expr: str) -> list[str]:
    names = [""]
    pos = 0
    for m in re.finditer(r"\[([^\]]*)\]", expr):
        literal = expr[pos : m.start()]
        values = _expand_ranges(m.group(1), expr)
        names = [n + literal + v for n in names for v in values]
        if len(names) > MAX_HOSTS:
            raise ValueError(f"{expr!r} expands to more than {MAX_HOSTS} hosts")
        pos = m.end()
    tail = expr[pos:]
    if "[" in tail or "]" in tail:
        raise ValueError(f"unbalanced brackets in {expr!r}")
    return [n + tail for n in names]


def expand_hostlist(expr: str) -> list[str]:
    """``"node[01-03,10],gpu1"`` -> ``["node01", "node02", "node03", "node10", "gpu1"]`` (order kept).

    Raises ValueError on malformed expressions (unbalanced brackets, bad or backwards ranges, empty).
    """
    expr = expr.strip()
    if not expr:
        raise ValueError("empty host list")
    out: list[str] = []
    for part in _split_top(expr):
        part = part.strip()
        if not part:
            raise ValueError(f"empty name in host list {expr!r}")
        out.extend(_expand_one(part))
        if len(out) > MAX_HOSTS:
            raise ValueError(f"{expr!r} expands to more than {MAX_HOSTS} hosts")
    return out


def compress_hostlist(names: Iterable[str]) -> str:
    """The inverse: ``["node01", "node02", "node03", "gpu1"]`` -> ``"node[01-03],gpu1"``.

    Names are de-duplicated and grouped by (prefix, suffix) around their last number; zero-padded
    numbers keep their width, so ``expand_hostlist(compress_hostlist(x))`` gives back every name.
    Groups appear in order of first appearance, numbers sorted within a group.
    """
    names = list(dict.fromkeys(names))
    padded_widths: dict[tuple[str, str], set[int]] = {}
    parsed: list[tuple[str, str, str] | None] = []
    for n in names:
        m = _TRAILING_NUM.match(n)
        if not m or "[" in n or "]" in n or "," in n:
            parsed.append(None)
            continue
        pre, digits, suf = m.groups()
        parsed.append((pre, digits, suf))
        if len(digits) > 1 and digits.startswith("0"):
            padded_widths.setdefault((pre, suf), set()).add(len(digits))
    groups: dict[tuple[str, str, int], list[int]] = {}
    order: list[tuple[str, str, int] | str] = []
    for n, p in zip(names, parsed, strict=True):
        if p is None:
            order.append(n)
            continue
        pre, digits, suf = p
        width = len(digits) if len(digits) in padded_widths.get((pre, suf), set()) else 1
        key = (pre, suf, width)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    out: list[str] = []
    for item in order:
        if isinstance(item, str):
            out.append(item)
            continue
        pre, suf, width = item
        nums = sorted(set(groups[item]))
        if len(nums) == 1:
            out.append(f"{pre}{str(nums[0]).zfill(width)}{suf}")
            continue
        ranges: list[str] = []
        start = prev = nums[0]
        for x in nums[1:] + [None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            lo, hi = str(start).zfill(width), str(prev).zfill(width)
            ranges.append(lo if start == prev else f"{lo}-{hi}")
            if x is not None:
                start = prev = x
        out.append(f"{pre}[{','.join(ranges)}]{suf}")
    return ",".join(out)
