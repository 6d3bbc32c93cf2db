"""Every file and module the docs name exists (issue 43: docs/architecture.md named modules that had
moved, so a newcomer following it found nothing there).

Read from README.md and docs/*.md: each path under ``netbench/``, ``collectives/``, ``inventory/`` or
``reports/`` must be a file or folder of the tree (``*`` a pattern that matches one at least), and each
dotted name ``netbench.x.y`` must be a module, or a module and a name it defines at its top level (a
class's own attribute after that: ``netbench.run.stages.Opened.site``). Paths after a commit
(``5616ffe:netbench/engine.py``) name history and are left alone; ``benchmarks/README.md``, which is
history too, is not read. Static (``ast``): nothing is imported.

And the picture of docs/architecture.md is the code's: each row of the application names, in its
"imports" column, exactly the application packages that package imports (read as
tests/test_layers.py reads imports), so a module that moves makes the picture fail here, not lie.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# folder -> the import name it installs under (pyproject.toml's package-dir)
FOLDERS = {"netbench": "netbench", "collectives": "netbench.collectives", "inventory": "netbench.inventory",
           "reports": "netbench.reports"}

# not after a word, a path, a dot or a colon (``5616ffe:netbench/...``: a commit's file; ``x/netbench/``)
_BEFORE = r"(?<![\w./:@~$-])"
FILE_PATH = re.compile(_BEFORE + r"(?:netbench|collectives|inventory|reports)/[\w./*-]*")
# ``netbench.io/verdict`` (a Kubernetes label) is no module: a name followed by ``/`` is left out
MODULE_PATH = re.compile(_BEFORE + r"netbench(?:\.[A-Za-z_]\w*)+(?![\w/])")
# the same names without ``netbench.`` (``reports.verdict.exit_code``), file names (``inventory.jsonl``) aside
SHORT_MODULE_PATH = re.compile(
    _BEFORE + r"(?:common|collectives|inventory|reports)(?:\.(?!(?:jsonl?|toml|html|md|py|sh|gz|txt)\b)"
    r"[A-Za-z_]\w*)+(?![\w/])"
)


def _paths(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """(doc:line, the path as written) for every match in the docs."""
    found = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for m in pattern.finditer(line):
                found.append((f"{doc.relative_to(ROOT)}:{n}", m.group(0).rstrip(".")))
    return found


def _file(module: str) -> Path | None:
    """The source of a dotted module name (``netbench.reports.verdict`` -> reports/verdict.py)."""
    parts = module.split(".")
    if len(parts) > 1 and f"netbench.{parts[1]}" in FOLDERS.values() and parts[1] != "netbench":
        folder, rest = ROOT / parts[1], parts[2:]
    else:
        folder, rest = ROOT / "netbench", parts[1:]
    base = folder.joinpath(*rest)
    for path in (base.with_suffix(".py") if rest else None, base / "__init__.py"):
        if path is not None and path.is_file():
            return path
    return None


@cache
def _names(path: Path) -> dict[str, ast.AST | None]:
    """What a module defines at its top level (a class: with its body, for its own attributes)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: dict[str, ast.AST | None] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.setdefault(node.name, None)
        elif isinstance(node, ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update({n.id: None for n in ast.walk(t) if isinstance(n, ast.Name)})
    return names


def _class_names(node: ast.ClassDef) -> set[str]:
    own = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for n in node.body:
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            own.add(n.target.id)
        elif isinstance(n, ast.Assign):
            own |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    return own


def _module_path_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):  # the longest module prefix, then what it defines
        path = _file(".".join(parts[:cut]))
        if path is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        names = _names(path)
        if rest[0] not in names:
            return False
        node = names[rest[0]]
        if len(rest) == 1 or not isinstance(node, ast.ClassDef):
            return True  # deeper than a class's own attribute is not checked
        return rest[1] in _class_names(node)
    return False


def _file_path_exists(path: str) -> bool:
    """A file or folder of the tree, a pattern matching one, or ``folder/module.name`` (a name the
    module defines, as ``collectives/pairs.topology_rounds``)."""
    path = path.rstrip(".,;")
    if "*" in path:
        return any(ROOT.glob(path))
    if (ROOT / path).exists():
        return True
    folder, _, last = path.rpartition("/")
    stem, _, name = last.partition(".")
    source = ROOT / folder / f"{stem}.py"
    return bool(name) and "." not in name and source.is_file() and name in _names(source)


def test_the_docs_name_paths() -> None:
    """The check reads something: the docs name modules of every layer."""
    named = {p.split("/")[0] for _, p in _paths(FILE_PATH)}
    assert named == set(FOLDERS)
    assert len(_paths(MODULE_PATH)) > 10


def test_every_file_path_in_the_docs_exists() -> None:
    missing = [f"{where}: {path}" for where, path in _paths(FILE_PATH) if not _file_path_exists(path)]
    assert not missing, "paths the docs name that the tree lacks:\n" + "\n".join(missing)


def test_every_module_path_in_the_docs_exists() -> None:
    missing = [f"{where}: {name}" for where, name in _paths(MODULE_PATH) if not _module_path_exists(name)]
    assert not missing, "modules the docs name that the tree lacks:\n" + "\n".join(missing)


def test_every_short_module_path_in_the_docs_exists() -> None:
    """``reports.pairrows.pair_facts`` is ``netbench.reports.pairrows.pair_facts``; ``common.x`` is
    ``netbench.common.x``."""
    missing = [f"{where}: {name}" for where, name in _paths(SHORT_MODULE_PATH)
               if not _module_path_exists(f"netbench.{name}")]
    assert not missing, "modules the docs name that the tree lacks:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    ("text", "exists"),
    [
        ("netbench.reports.verdict", True),
        ("netbench.reports.verdict.exit_code", True),
        ("netbench.run.stages.Opened.site", True),
        ("netbench.run.stages.Opened.nowhere", False),
        ("netbench.engine", False),
        ("netbench.engine.exit_status", False),
        ("netbench.collectives.harness.measure", True),
        ("netbench.load_results", True),
        ("netbench.run.pipeline.no_such_stage", False),
    ],
)
def test_the_module_check_is_not_blind(text: str, exists: bool) -> None:
    assert _module_path_exists(text) is exists


def test_the_patterns_skip_history_and_labels() -> None:
    line = "5616ffe:netbench/engine.py, netbench.io/verdict, ~/x/netbench/y, `netbench/run/stages.py:29`."
    assert [m.group(0) for m in FILE_PATH.finditer(line)] == ["netbench/run/stages.py"]
    assert not MODULE_PATH.findall(line)
    assert SHORT_MODULE_PATH.findall("`inventory.jsonl`, reports.verdict.judge, run.json") == [
        "reports.verdict.judge"
    ]
    assert _file_path_exists("reports/rules/*.py") and not _file_path_exists("netbench/engine.py")
    assert _file_path_exists("collectives/pairs.topology_rounds")
    assert not _file_path_exists("collectives/pairs.no_such_rounds")


# -- the picture of docs/architecture.md: each application package and what of the application it imports
ARCHITECTURE = ROOT / "docs" / "architecture.md"
IMPORTS_HEADER = "imports (of the application)"
UNIT = re.compile(r"(?<![\w./])(?:[a-z_]+/(?:[a-z_]+\.py)?|__[a-z]+__\.py|[a-z_]+\.py)(?=\s|$|,)")


def _unit(module: str) -> str | None:
    """The picture's row of an application module: its package (``run/``), or its own file where the
    picture names one (``cli.py``, ``run/planner.py``); None for a library or ``netbench/common``."""
    parts = module.split(".")
    if parts[0] != "netbench" or (len(parts) > 1 and parts[1] in ("collectives", "inventory", "reports",
                                                                  "common")):
        return None
    if len(parts) == 1:
        return "__init__.py"
    if parts[1] == "run" and len(parts) > 2 and parts[2] in ("options", "planner"):
        return f"run/{parts[2]}.py"
    path = _file(".".join(parts[:2]))
    return f"{parts[1]}.py" if path is not None and path.name != "__init__.py" else f"{parts[1]}/"


def _code_graph() -> dict[str, set[str]]:
    """Row -> the rows it imports: tests/test_layers.py's module graph (lazy imports too, ``if
    TYPE_CHECKING:`` blocks left out), read per row of the picture."""
    from test_layers import GRAPH

    graph: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        mine = _unit(module)
        if mine is None:
            continue
        rows = graph.setdefault(mine, set())
        rows |= {row for t in targets if not t.startswith("<") and (row := _unit(t)) not in (None, mine)}
    return graph


def _picture_graph() -> dict[str, set[str]]:
    """Row -> the rows its "imports" column names, read from the picture's code block."""
    lines = ARCHITECTURE.read_text(encoding="utf-8").splitlines()
    top = next(i for i, line in enumerate(lines) if IMPORTS_HEADER in line)
    column = lines[top].index(IMPORTS_HEADER)
    graph: dict[str, set[str]] = {}
    row = None
    for line in lines[top + 1:]:
        if "libraries" in line and line.lstrip().startswith("─"):
            break
        left, right = line[:column], line[column:]
        names = UNIT.findall(left.split("  ", 2)[1] if left.startswith("  ") and left[2:3].strip() else "")
        if names:
            row = names[-1]  # "__main__.py ──► cli.py": the row is cli.py's
            graph[row] = set()
        if row is not None and right.strip() and not right.lstrip().startswith("(none"):
            graph[row] |= set(UNIT.findall(right))
    return graph


def test_the_architecture_picture_lists_what_each_package_imports() -> None:
    """docs/architecture.md's picture: a row for every package of the application, and its "imports"
    column is what that package imports of the application, no more and no less."""
    code, picture = _code_graph(), _picture_graph()
    code.pop("__main__.py", None)  # drawn as its arrow to cli.py
    wrong = [f"{row}: the code imports {sorted(code.get(row, set()))}, the picture says "
             f"{sorted(picture.get(row, set()))}"
             for row in sorted(set(code) | set(picture)) if code.get(row) != picture.get(row)]
    assert not wrong, "docs/architecture.md's picture is not the code's:\n" + "\n".join(wrong)
