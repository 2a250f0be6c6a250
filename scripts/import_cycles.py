"""Import cycles among rag's modules: strongly connected components of the import graph.

    python scripts/import_cycles.py [ROOT] [--all]

By default the graph holds the imports a module runs when it is imported (top level, and inside
`if`/`try`/`with` there), not those under `if TYPE_CHECKING:`. With --all it also holds imports
inside functions and classes and the type-only ones: a circle closed only by a lazy or type-only
import shows up there. Prints each cycle; exits 1 when there is one (docs/architecture.md).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in (root / "rag").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(node: ast.Import | ast.ImportFrom, here: str) -> list[str]:
    """The dotted names an import statement may load (a `from` import: the module and module.name)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = here.split(".")
        target = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [f"{target}.{alias.name}" for alias in node.names]


def _bodies(node: ast.stmt, everything: bool) -> list[list[ast.stmt]]:
    """The statement lists below `node` whose imports count."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.body] if everything else []
    if isinstance(node, ast.If):
        return [node.body, node.orelse] if everything or not _type_checking(node.test) else [node.orelse]
    if isinstance(node, ast.Try):
        return [node.body, node.orelse, node.finalbody, *(handler.body for handler in node.handlers)]
    if isinstance(node, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)):
        return [node.body, getattr(node, "orelse", [])]
    return []


def graph(root: Path, everything: bool) -> dict[str, set[str]]:
    known = modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for name, (path, package) in known.items():
        here = name if package else name.rpartition(".")[0]
        deps: set[str] = set()
        pending = [ast.parse(path.read_text()).body]
        while pending:
            for node in pending.pop():
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    deps.update(filter(None, map(resolve, _imported(node, here))))
                else:
                    pending.extend(_bodies(node, everything))
        edges[name] = deps - {name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            strong(v)
    return found


def main(argv: list[str]) -> int:
    paths = [a for a in argv if not a.startswith("--")]
    edges = graph(Path(paths[0] if paths else "."), "--all" in argv)
    found = cycles(edges)
    for component in found:
        print("cycle:", " <-> ".join(component))
    print(f"{len(edges)} modules, {len(found)} cycle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
