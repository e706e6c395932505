"""Dependencies point one way: no upward import between top-level packages, no import
cycle between files (imports under ``if TYPE_CHECKING:`` and inside functions count).

Two independent checks: the AST graph of scripts/import_graph.py (file level, the layers
it lists), and import-linter's contracts in pyproject.toml (layers, acyclic siblings).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_import_graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts/import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


graph = _load_import_graph()


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    return graph.graph()


def test_every_package_has_a_layer() -> None:
    packages = {graph.top_package(m) for m in graph.modules()} - {"moldau"}
    assert sorted(p for p in packages if graph.layer_of(p) is None) == []


def test_no_upward_or_sideways_import_between_packages(edges: dict[str, set[str]]) -> None:
    assert graph.upward_imports(edges) == []


def test_no_import_cycle_between_files(edges: dict[str, set[str]]) -> None:
    assert graph.cycles(edges) == []


def test_the_checker_sees_cycles_and_upward_imports(tmp_path: Path) -> None:
    """The checks above can fail: a package with a TYPE_CHECKING cycle, a cycle through a
    function-level import, and storage importing server."""
    files = {
        "moldau/__init__.py": "",
        "moldau/storage/__init__.py": "",
        "moldau/storage/a.py": "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from moldau.storage.b import B\n",
        "moldau/storage/b.py": "from moldau.storage import a\nfrom moldau.server import x\n",
        "moldau/server/__init__.py": "",
        "moldau/server/x.py": "def f():\n    from . import y\n",
        "moldau/server/y.py": "from .x import f\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    fake = graph.graph(tmp_path)
    assert graph.cycles(fake) == [
        ["moldau.server.x", "moldau.server.y"],
        ["moldau.storage.a", "moldau.storage.b"],
    ]
    assert graph.upward_imports(fake) == [("moldau.storage.b", "moldau.server.x")]


def test_import_linter_contracts_are_kept() -> None:
    # In a process of its own: import-linter configures logging, which disables every
    # logger created before it (later tests that read logs would see nothing).
    lint = (
        "from importlinter.cli import lint_imports; "
        f"raise SystemExit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, "
        "no_cache=True))"
    )
    result = subprocess.run([sys.executable, "-c", lint], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


MAX_FUNCTION_LINES = 80
SRC = ROOT / "src"


def _hand_written_modules() -> list[tuple[str, ast.Module]]:
    """Every module of moldau but the generated codecs (their first line says so)."""
    modules = []
    for path in sorted((SRC / "moldau").rglob("*.py")):
        text = path.read_text()
        if "Do not edit." in text.partition("\n")[0]:
            continue
        modules.append((str(path.relative_to(SRC)), ast.parse(text)))
    return modules


def long_functions(modules: list[tuple[str, ast.Module]]) -> list[str]:
    """Functions over MAX_FUNCTION_LINES lines (decorators and docstring included)."""
    found = []
    for name, tree in modules:
        if name.startswith("moldau/cli/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = (node.end_lineno or node.lineno) - start + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    return found


HIGH_WATERMARK_OWNERS = {"moldau/replication/partition.py", "moldau/raft/state.py"}


def high_watermark_assignments(modules: list[tuple[str, ast.Module]]) -> list[str]:
    """Assignments to an attribute ``high_watermark`` (or ``_high_watermark``) outside its
    owners: the leader's HW moves only inside Partition, Raft's only inside its state."""
    found = []
    for name, tree in modules:
        if name in HIGH_WATERMARK_OWNERS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found.extend(
                    f"{name}:{node.lineno}"
                    for target in targets
                    for t in ast.walk(target)
                    if isinstance(t, ast.Attribute) and t.attr.lstrip("_") == "high_watermark"
                )
    return found


@pytest.fixture(scope="module")
def modules() -> list[tuple[str, ast.Module]]:
    return _hand_written_modules()


def test_no_function_over_80_lines_outside_the_cli(
    modules: list[tuple[str, ast.Module]],
) -> None:
    assert long_functions(modules) == []


def test_only_partition_and_raft_state_assign_a_high_watermark(
    modules: list[tuple[str, ast.Module]],
) -> None:
    assert high_watermark_assignments(modules) == []


def test_the_size_and_owner_checks_can_fail() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = f"def long():\n{body}\n\ndef short():\n    p.high_watermark = 3\n"
    tree = ast.parse(source)
    assert long_functions([("moldau/server/x.py", tree)]) == [
        f"moldau/server/x.py:1 long ({MAX_FUNCTION_LINES + 1} lines)"
    ]
    assert long_functions([("moldau/cli/x.py", tree)]) == []
    assert high_watermark_assignments([("moldau/server/x.py", tree)]) == [
        f"moldau/server/x.py:{MAX_FUNCTION_LINES + 4}"
    ]
    assert high_watermark_assignments([("moldau/raft/state.py", tree)]) == []
