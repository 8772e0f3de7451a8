"""Layering: no import cycle among worksurface's modules, and the layer contract CI checks is the map's.

The import graph is read from the source (ast), so the test imports nothing heavy. A cycle closed
by an import inside a function still counts: it only hides the loop from import time.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import TypeGuard

REPO = Path(__file__).resolve().parents[1]
# setuptools' package-dir mapping (pyproject.toml): where each package's source lives.
ROOTS = {"worksurface": REPO / "pipeline", "worksurface.stages": REPO / "stages",
         "worksurface.reinjectors": REPO / "reinjectors"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, root in ROOTS.items():
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _targets(module: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The worksurface modules an import statement loads (a `from x import y` naming a submodule
    loads it; otherwise it loads `x`)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in modules}
    base = module if modules[module].name == "__init__.py" else module.rpartition(".")[0]
    if node.level:
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        source = f"{base}.{node.module}" if node.module else base
    else:
        source = node.module or ""
    out = set()
    for alias in node.names:
        if f"{source}.{alias.name}" in modules:
            out.add(f"{source}.{alias.name}")
        elif source in modules:
            out.add(source)
    return out


def _is_type_checking(node: ast.AST) -> TypeGuard[ast.If]:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _runtime_imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> modules it imports when run (at import time or inside a function), leaving out
    imports under `if TYPE_CHECKING:` (they never execute)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, set())
        stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
        while stack:
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                if _is_type_checking(child):
                    stack.extend(child.orelse)
                elif isinstance(child, (ast.Import, ast.ImportFrom)):
                    edges |= _targets(module, child, modules) - {module}
                else:
                    stack.append(child)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles():
    assert _cycles(_runtime_imports(_modules())) == []


def test_the_cycle_finder_finds_a_cycle_closed_inside_a_function(tmp_path):
    # The status reducer once imported the snapshot module, which imported the reducer back inside
    # `reduce`: the shape this test must catch.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import thing\n")
    (package / "b.py").write_text("thing = 1\n\ndef later():\n    from .a import thing\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import thing\n")
    modules = {"pkg": package / "__init__.py", "pkg.a": package / "a.py", "pkg.b": package / "b.py",
               "pkg.c": package / "c.py"}
    graph = _runtime_imports(modules)
    assert graph["pkg.c"] == set()
    assert _cycles(graph) == [["pkg.a", "pkg.b"]]


def _floors_of_the_map() -> list[str]:
    """The Floors diagram of ARCHITECTURE.md as import-linter layers, top to bottom (`a > b`: a above b;
    `a | b`: siblings on one floor that do not import each other)."""
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = text.split("## Floors", 1)[1].split("```", 2)[1]
    layers = []
    for line in block.strip().splitlines():
        names = line.split("  ", 1)[0].strip()
        layers.extend(part.strip() for part in names.split(">"))
    return layers


def _contract(contract_id: str) -> dict[str, object]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == contract_id)


def test_the_layer_contract_is_the_map_s_floors():
    """CI checks the floors with `lint-imports`; the contract and the map must say the same."""
    assert _contract("floors")["layers"] == _floors_of_the_map()


def test_every_subpackage_has_a_floor():
    """A new subpackage (gateway/, hooks/ ...) is placed on a floor, or the contract could not see it."""
    placed = {name.strip() for layer in _contract("floors")["layers"] for name in layer.split("|")}
    packages = {path.parent.name for path in (REPO / "pipeline").glob("*/__init__.py")}
    mapped = {name.rpartition(".")[2] for name in ROOTS if name != "worksurface"}  # stages, reinjectors
    assert placed == packages | mapped
    assert _contract("floors")["exhaustive"] is True
