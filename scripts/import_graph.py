"""The import graph of src/moldau, read from the source with `ast` (nothing is imported).

Every import counts: module level, inside functions, and under `if TYPE_CHECKING:` (a cycle
of types is a cycle of concepts). Used by tests/unit/test_architecture.py (the layer rule
and the no-cycle rule) and by scripts/package_graph.py (the picture in docs/).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

# Generated codecs: many small modules importing only protocol primitives.
GENERATED = (
    "moldau.protocol.messages",
    "moldau.protocol.metadata_records",
    "moldau.protocol.coordinator_records",
)

# Top-level packages from the top down. A package may import only packages on a lower
# line; packages on one line are independent of each other.
LAYERS: list[tuple[str, ...]] = [
    ("moldau.__main__",),
    ("moldau.testing",),  # starts nodes and clusters the way a user does: through the CLI
    ("moldau.cli",),
    ("moldau.console", "moldau.spark"),
    ("moldau.admin",),  # admin operations the CLI and the console share
    ("moldau.metrics",),  # the Prometheus exporter, reading a whole node
    ("moldau.server",),
    ("moldau.coordinator", "moldau.controller", "moldau.registry"),
    ("moldau.raft",),
    ("moldau.replication",),
    ("moldau.security",),
    ("moldau.storage",),
    ("moldau.records",),
    ("moldau.metadata",),
    ("moldau.config", "moldau.stats"),
    ("moldau.protocol",),
    ("moldau.ids", "moldau.clock"),
]


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of the package but the generated codecs, by dotted name."""
    found = {}
    for path in sorted((src / "moldau").rglob("*.py")):
        name = module_name(path, src)
        if not name.startswith(GENERATED):
            found[name] = path
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The moldau modules `module` imports (a package stands for its __init__)."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # `from pkg import module` names the module; `from module import thing`, module.
            target = _resolve(module, is_package, node)
            names = [
                f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name.startswith("moldau.") and name != module:
                found.add(name)
    return found - _parents(module)


def _parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def graph(src: Path = SRC) -> dict[str, set[str]]:
    """module -> the moldau modules it imports."""
    found = modules(src)
    known = set(found) | set(GENERATED)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def top_package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def layer_of(package: str) -> int | None:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    return None


def upward_imports(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs that go up or sideways between top-level packages."""
    bad = []
    for source, targets in sorted(edges.items()):
        src_layer = layer_of(top_package(source))
        for target in sorted(targets):
            dst_layer = layer_of(top_package(target))
            if top_package(source) == top_package(target):
                continue
            if src_layer is None or dst_layer is None or dst_layer <= src_layer:
                bad.append((source, target))
    return bad


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Top-level package -> the top-level packages it imports."""
    packages: dict[str, set[str]] = {}
    for source, targets in edges.items():
        deps = packages.setdefault(top_package(source), set())
        deps.update(top_package(t) for t in targets if top_package(t) != top_package(source))
    return packages


if __name__ == "__main__":
    edges = graph()
    for source, target in upward_imports(edges):
        print(f"upward: {source} -> {target}")
    for component in cycles(edges):
        print("cycle:", " ".join(component))
