"""The house keeps its units small enough to read (issue 43): no function over 60 statements and no
module over 600 lines in the four packages, no module loose in ``netbench/`` but the entry points
and ``defaults.py``, and ``netbench/common`` (the bottom layer: what every layer needs) under 2,000
lines.

Statements are counted as the before-stop hook counts them: every ``ast.stmt`` nested in the function,
its own nested functions' too. Read from the source, nothing imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("netbench", "collectives", "inventory", "reports")
MAX_STATEMENTS = 60
MAX_LINES = 600
DATA_TABLES: frozenset[str] = frozenset()
"""Modules that are data (tables of constants), not code, where the line bar does not apply."""
LOOSE_OK = {"__init__.py", "__main__.py", "cli.py", "defaults.py"}
COMMON_MAX_LINES = 2000


def _sources() -> list[Path]:
    return sorted(p for top in PACKAGES for p in (ROOT / top).rglob("*.py"))


def _long_functions(path: Path) -> list[str]:
    out = []
    for f in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
            n = sum(isinstance(x, ast.stmt) for x in ast.walk(f)) - 1
            if n > MAX_STATEMENTS:
                out.append(f"{path.relative_to(ROOT)}:{f.lineno} {f.name}: {n} statements")
    return out


def test_no_function_is_over_60_statements() -> None:
    long = [line for p in _sources() for line in _long_functions(p)]
    assert not long, "split these (at most 60 statements a function):\n" + "\n".join(long)


def test_no_module_is_over_600_lines() -> None:
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in _sources()
           if str(p.relative_to(ROOT)) not in DATA_TABLES
           and (n := p.read_text(encoding="utf-8").count("\n")) > MAX_LINES]
    assert not big, "split these (at most 600 lines a module):\n" + "\n".join(big)


def test_the_counter_sees_a_long_function() -> None:
    """The walk above is not vacuous: a function of 61 statements is caught, one of 60 is not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    tree = ast.parse(f"def f():\n{body}\n")
    f = tree.body[0]
    assert sum(isinstance(x, ast.stmt) for x in ast.walk(f)) - 1 == 61


def test_no_module_is_loose_in_the_application() -> None:
    loose = sorted(p.name for p in (ROOT / "netbench").glob("*.py") if p.name not in LOOSE_OK)
    assert not loose, f"modules loose in netbench/ (put each in its package): {loose}"


def test_the_bottom_layer_holds_only_what_every_layer_needs() -> None:
    n = sum(p.read_text(encoding="utf-8").count("\n") for p in (ROOT / "netbench/common").rglob("*.py"))
    assert n < COMMON_MAX_LINES, f"netbench/common is {n} lines: keep only what every layer needs there"
