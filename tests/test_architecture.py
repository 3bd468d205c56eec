"""The shape of the package (docs/architecture.md): layers that import one way, no
import cycle (imports inside functions counted), no private name used outside its
module, internal imports at module level."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "prefeval"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``from ... import`` statement of ``module`` names."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def test_layers_contract():
    """``lint-imports`` (import-linter) passes: pyproject.toml's layers contract, which
    counts every import statement, those inside functions too."""
    pytest.importorskip("importlinter", reason="import-linter is in the test extras")
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    args = [command] if command else [sys.executable, "-m", "importlinter.cli"]
    done = subprocess.run(
        [*args, "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_import_cycle():
    """No cycle among prefeval's modules, imports inside functions included (grimp's
    graph, import-linter's own); a package's ``__init__`` counts as a module."""
    grimp = pytest.importorskip("grimp", reason="import-linter (grimp) is in the test extras")
    graph = grimp.build_graph("prefeval", cache_dir=None)
    modules = sorted(graph.modules)
    # Tarjan's strongly connected components over the module graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in modules:
        if module not in index:
            visit(module)
    assert len(modules) > 30
    assert cycles == []


def test_no_private_name_crosses_modules():
    """A name starting with ``_`` is used only in its own module: neither imported
    (``from .x import _y``) nor reached through a module (``x._y``) elsewhere."""
    modules = _modules()
    found = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}  # local name -> internal module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(module, path, node)
                if not base.startswith("prefeval"):
                    continue
                for alias in node.names:
                    name = alias.name
                    if f"{base}.{name}" in modules:
                        aliases[alias.asname or name] = f"{base}.{name}"
                    elif name.startswith("_") and not name.startswith("__"):
                        found.append(f"{module}:{node.lineno} imports {base}.{name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{module}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert found == []


#: (module, the internal module it imports in a function): see the test below
LAZY_INTERNAL = {
    ("prefeval.cli", "group"),
    ("prefeval.options", "measures"),
    ("prefeval.engine.engines", "dask"),
}


def test_internal_imports_at_module_level():
    """Inside the library, an import in a function is of a heavy third-party module
    (numpy, pandas, pyarrow, scipy, ir_measures, matplotlib, dask...) or of the
    standard library, never of prefeval itself: the layers are visible at the top of
    each module.  Three exceptions: the console entry point (``prefeval.cli``), which
    imports its group (``.group``) once it has set the signals and resource limits that
    the imports need; the options' check of the measures named (``.measures``, which
    imports numpy), so that ``--help``, which builds the options' declarations, imports
    no library; and the choice of the engine (``prefeval.engine.engines``), which
    imports the Dask engine's module (pandas, the kernel's frames) when Dask is chosen."""
    found = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if (module, getattr(node, "module", None)) in LAZY_INTERNAL:
                    continue
                if isinstance(node, ast.ImportFrom) and (
                    node.level or (node.module or "").startswith("prefeval")
                ):
                    found.append(f"{module}:{node.lineno}")
                elif isinstance(node, ast.Import) and any(
                    a.name.startswith("prefeval") for a in node.names
                ):
                    found.append(f"{module}:{node.lineno}")
    assert found == []
