"""The collective and rank count of a table whose log does not say them, from what the table shows:
the redop and root columns and the busbw/algbw factor (nccl-tests' PERFORMANCE.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from netbench.importers.nccl_tests.model import NcclTest, Problem, to_int


def ranks_of(t: NcclTest) -> int | None:
    """The rank count of a table pasted without its rank lines, from its collective's busbw/algbw
    factor (2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter, alltoall): a README's
    2-node table is 16 ranks, not 1. None where the factor does not say (1 for sendrecv, broadcast)."""
    shape = next((s for s in _SHAPES if s.name == t.collective), None)
    factor = _Traits.of(t).factor if shape is not None else None
    if shape is None or factor is None or shape.factor(2) == shape.factor(3):
        return None
    top = shape.factor(1 << 20)
    if not 0 <= factor < top:
        return None
    n = round(top / (top - factor))  # factor(n) = top * (n-1)/n
    return n if abs(shape.factor(n) - factor) <= 0.005 * top else None


def collective_of_unnamed(t: NcclTest, named: str | None, source: str) -> None:
    """The collective of a run whose log does not name it: the file name's when the table fits it,
    else the table's own (and a problem that says the file name was overruled)."""
    shape = next((s for s in _SHAPES if s.name == named), None)
    traits = _Traits.of(t)
    if shape is not None and _shape_fits(shape, traits.ops, traits.roots, traits.factor, traits.ranks):
        t.collective = named
        t.collective_inferred = f"from the file name {Path(source).name!r}"
        return
    t.collective, t.collective_inferred = infer_collective(t, traits)
    if named is not None:
        t.problems.append(Problem(
            "collective", f"the file name {Path(source).name!r} says {named}, but the table is not "
            f"{named}'s: imported as {t.collective or 'unknown'} ({t.collective_inferred})"))


@dataclass(frozen=True)
class _Shape:
    """What a collective's table looks like: a reduction op printed or not, a root or -1, and the
    busbw/algbw factor for n ranks (nccl-tests' PERFORMANCE.md; DESIGN.md's table)."""

    name: str
    redop: bool | None  # True: a reduction op; False: "none"; None: either (sendrecv prints "sum")
    rooted: bool
    factor: Callable[[int], float]


# in the order an ambiguous table is resolved: the collective run most often first
_SHAPES = (
    _Shape("all_reduce", True, False, lambda n: 2 * (n - 1) / n),
    _Shape("all_gather", False, False, lambda n: (n - 1) / n),
    _Shape("reduce_scatter", True, False, lambda n: (n - 1) / n),
    _Shape("broadcast", False, True, lambda n: 1.0),
    _Shape("reduce", True, True, lambda n: 1.0),
    _Shape("sendrecv", None, False, lambda n: 1.0),
    _Shape("all_to_all", False, False, lambda n: (n - 1) / n),
    _Shape("gather", False, True, lambda n: (n - 1) / n),
    _Shape("scatter", False, True, lambda n: (n - 1) / n),
)


@dataclass(frozen=True)
class _Traits:
    """What a table shows of its collective: the redops, the roots and the median busbw/algbw."""

    ops: set[str]
    roots: set[int | None]
    factor: float | None
    ranks: int | None  # None: the log does not say (a pasted table)

    @classmethod
    def of(cls, test: NcclTest) -> _Traits:
        """One pass a trait over the rows (a 50 MB table's 800k: the distinct values first, each
        converted once)."""
        rows = test.rows
        ratios = sorted(
            r["busbw_GBps"] / r["algbw_GBps"]
            for r in rows
            if r.get("algbw_GBps") and r["algbw_GBps"] >= 1 and r.get("busbw_GBps") is not None
        )
        ops = {r.get("op") for r in rows}
        roots = {r.get("root") for r in rows}
        return cls(
            ops={str(op) for op in ops if op is not None},
            roots={to_int(root) for root in roots if root is not None},
            factor=ratios[len(ratios) // 2] if ratios else None,
            ranks=test.nranks if test.ranks or test.config else None,
        )


def infer_collective(test: NcclTest, traits: _Traits | None = None) -> tuple[str | None, str | None]:
    """The collective of a table whose log does not name it (no "Collective test" lines, no
    program name): from the redop and root columns and the busbw/algbw factor, which depends on
    the collective and the rank count. Returns (name or None, how it was inferred)."""
    t = traits or _Traits.of(test)
    ops, roots, factor, n = t.ops, t.roots, t.factor, t.ranks
    fits = [s for s in _SHAPES if _shape_fits(s, ops, roots, factor, n)]
    if not fits:
        return None, "the table fits no known collective"
    root_text = "/".join(sorted({str(r) for r in roots})) or "not printed"
    seen = [f"redop {'/'.join(sorted(ops)) or 'not printed'}", f"root {root_text}"]
    if factor is not None:
        seen.append(f"busbw/algbw {factor:.3g}" + (f" on {n} ranks" if n else ""))
    how = "inferred from " + ", ".join(seen)
    if len(fits) > 1:
        how += f" (could also be {', '.join(s.name for s in fits[1:])})"
    return fits[0].name, how


def _shape_fits(
    shape: _Shape, ops: set[str], roots: set[int | None], factor: float | None, n: int | None
) -> bool:
    if ops and shape.redop is not None and (ops != {"none"}) != shape.redop:
        return False
    if roots and roots != {None} and (max(-1 if r is None else r for r in roots) >= 0) != shape.rooted:
        return False
    if factor is None:
        return True
    ranks = [n] if n else range(1, 4097)  # a pasted table does not say how many ranks
    return any(abs(shape.factor(k) - factor) <= 0.02 * max(1.0, factor) + 0.01 for k in ranks)
