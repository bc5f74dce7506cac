"""The package order of the shared design holds for tensors, wire and plans (read from the
source, not by importing: importing any syft_lab module runs syft_lab/__init__.py first).

    leaf modules (errors, ids, dtypes, events, commands)
    syft_lab/tensors -> leaf modules only
    syft_lab/wire    -> leaf, tensors
    syft_lab/plans   -> leaf, tensors, wire

and no module of these packages imports inside a function, except the documented lazy imports
listed here (each says why in a comment on its line).
"""
import ast
from pathlib import Path

import pytest

SYFT = Path(__file__).resolve().parents[2] / "syft_lab"
LEAVES = {"errors", "ids", "dtypes", "events", "commands"}
ALLOWED = {"tensors": LEAVES | {"tensors"}, "wire": LEAVES | {"tensors", "wire"},
           "plans": LEAVES | {"tensors", "wire", "plans"}}
# (file, imported module) of the lazy imports that stay, each with its reason in the source
DOCUMENTED_LAZY: set = set()


def _imports(path: Path, source: str | None = None):
    """(imported module, whether inside a function, line) for every import of a module of syft_lab."""
    tree = ast.parse(path.read_text() if source is None else source)
    package = ["syft_lab"] + list(path.relative_to(SYFT).parent.parts)
    inside = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                names = [".".join(base + ([node.module] if node.module else []))]
                if not node.module:  # from . import events
                    names = [".".join(base + [a.name]) for a in node.names]
            else:
                names = [node.module]
        else:
            continue
        for name in names:
            yield name, id(node) in inside, node.lineno


@pytest.mark.parametrize("pkg", sorted(ALLOWED))
def test_packages_import_only_what_comes_before_them(pkg):
    wrong = []
    for path in sorted((SYFT / pkg).glob("*.py")):
        for name, _, line in _imports(path):
            if name.startswith("syft_lab."):
                top = name.split(".")[1]
                if top not in ALLOWED[pkg] and (str(path.relative_to(SYFT)), name) not in DOCUMENTED_LAZY:
                    wrong.append(f"{path.relative_to(SYFT)}:{line} imports {name}")
    assert wrong == []


@pytest.mark.parametrize("pkg", sorted(ALLOWED))
def test_no_imports_inside_functions_but_the_documented_lazy_ones(pkg):
    found = []
    for path in sorted((SYFT / pkg).glob("*.py")):
        rel = str(path.relative_to(SYFT))
        for name, inside, line in _imports(path):
            if inside and (rel, name) not in DOCUMENTED_LAZY:
                found.append(f"{rel}:{line} imports {name} inside a function")
    assert found == []


def test_the_checker_sees_relative_absolute_and_lazy_imports():
    got = {(n, inside) for n, inside, _ in _imports(SYFT / "tensors" / "pointer.py")}
    assert ("syft_lab.commands", False) in got and ("syft_lab.tensors.base", False) in got
    assert ("syft_lab.events", False) in got  # from .. import events
    src = "import syft_lab.workers\ndef f():\n    from ..inspection import model\n"
    got = sorted(_imports(SYFT / "plans" / "probe.py", src))  # a module of plans, read from text
    assert got == [("syft_lab.inspection", True, 3), ("syft_lab.workers", False, 1)]
