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
DOCUMENTED_LAZY = {("tensors/pointer.py", "syft_lab.workers.registry")}


def _imports(path: Path):
    """(imported syft_lab module or None, whether inside a function, line) for every import."""
    tree = ast.parse(path.read_text())
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


def test_the_checker_sees_relative_and_lazy_imports(tmp_path):
    pkg = SYFT / "tensors"
    got = {(n, inside) for n, inside, _ in _imports(pkg / "pointer.py")}
    assert ("syft_lab.commands", False) in got and ("syft_lab.tensors.base", False) in got
    assert ("syft_lab.workers.registry", True) in got
