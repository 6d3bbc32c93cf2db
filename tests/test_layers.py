"""The layers point down and no module imports itself through others.

    application   netbench/ (commands, launchers, coordinator, sweep, preflight, ...)
         |
    collectives/  inventory/  reports/      (installed as netbench.collectives, ...)
         |
    netbench/common/                         (hosts, SSH, topology, run-directory contract)

Read from the source with ``ast`` (nothing is imported or run), every import counted, the ones
inside functions too: a lazy import is still a dependency. ``if TYPE_CHECKING:`` blocks are left
out, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# folder -> the import name it installs under (pyproject.toml's package-dir)
FOLDERS = {
    "netbench": "netbench",
    "collectives": "netbench.collectives",
    "inventory": "netbench.inventory",
    "reports": "netbench.reports",
}
LIBRARIES = ("netbench.collectives", "netbench.inventory", "netbench.reports")
BOTTOM = "netbench.common"


def _modules() -> dict[str, Path]:
    out = {}
    for folder, name in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([name, *parts])] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    parts = name.split(".")
    while parts:
        key = ".".join(parts)
        if key in MODULES:
            return key
        parts.pop()
    return None


def _imports(module: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for sub in ast.walk(node)
    }
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in ("collectives", "inventory", "reports"):
                found.add(f"<plain {name.split('.')[0]}>")
            target = _resolve(name)
            if target and target != module:
                found.add(target)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _layer(module: str) -> str:
    if module == "netbench":
        return "root"
    if module == BOTTOM or module.startswith(BOTTOM + "."):
        return "bottom"
    if any(module == lib or module.startswith(lib + ".") for lib in LIBRARIES):
        return "library"
    return "application"


def test_the_source_tree_is_what_this_test_reads():
    assert len(MODULES) > 100
    assert {"netbench.cli", "netbench.collectives.harness", "netbench.reports.rules", BOTTOM} <= set(MODULES)


def test_nothing_imports_the_folders_under_their_bare_names():
    """``import reports`` would find any other module of that name first (or ours twice)."""
    bare = {m: sorted(d for d in deps if d.startswith("<plain")) for m, deps in GRAPH.items()}
    assert {m: d for m, d in bare.items() if d} == {}


def test_libraries_and_the_bottom_layer_never_import_the_application():
    allowed = {
        "root": {"root", "bottom"},
        "bottom": {"root", "bottom"},
        "library": {"root", "bottom", "library"},
    }
    bad = {
        m: sorted(d for d in deps if not d.startswith("<") and _layer(d) not in allowed[_layer(m)])
        for m, deps in GRAPH.items()
        if _layer(m) in allowed
    }
    assert {m: d for m, d in bad.items() if d} == {}


def test_no_import_cycles():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in MODULES:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in MODULES:
        if v not in index:
            visit(v)
    assert cycles == []


def test_every_package_folder_is_installed() -> None:
    """pyproject.toml lists the packages by name (the folders map to netbench.*): a new package that
    is not listed works in an editable install and is missing from a real one (netbench.sites was)."""
    import tomllib

    top = Path(__file__).resolve().parents[1]
    setup = tomllib.loads((top / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setup["packages"])
    where = {folder: name for name, folder in setup["package-dir"].items()}
    found = set()
    for folder, name in where.items():
        for init in (top / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(top / folder).parts
            found.add(".".join((name, *rel)))
    assert found - listed == set(), f"packages not in pyproject.toml: {sorted(found - listed)}"
