"""The package order of the architecture holds (read from the source, not by importing:
importing any syft_lab module runs syft_lab/__init__.py first).

Each package or top-level module of syft_lab has a rank; a module imports only syft_lab packages
of a lower rank (or its own package), so there is no import circle among them:

    0 leaf modules (errors, ids, dtypes, events, commands,    5 hook, ray, cli
      progress)
    1 tensors (layers, the layer registry, chain nodes)       6 smpc
    2 wire                                                    7 inspection
    3 plans                                                   8 federated, actions
    4 workers (service, client protocol, transports)          9 widget; 10 sidebar, magics

and no module imports inside a function, except an optional dependency (the line before or on
it says why in a comment); no syft_lab module is imported lazily.
"""
import ast
import re
from pathlib import Path

import pytest

SYFT = Path(__file__).resolve().parents[1] / "syft_lab"
LEAVES = {"errors", "ids", "dtypes", "events", "commands", "progress", "notebook"}
RANK = {**{leaf: 0 for leaf in LEAVES}, "tensors": 1, "wire": 2, "plans": 3, "workers": 4, "hook": 5, "ray": 5,
        "cli": 5, "smpc": 6, "inspection": 7, "federated": 8, "actions": 8, "widget": 9, "sidebar": 10,
        "magics": 10, "worker": 11, "labextension": 11}
# leaf modules import each other only in this order (errors first)
LEAF_ORDER = ["errors", "ids", "dtypes", "events", "commands", "progress", "notebook"]
OPTIONAL = ("IPython", "tqdm", "ray")  # optional dependencies, imported where they are used


def _unit(path: Path) -> str:
    """The package (or top-level module) a file belongs to."""
    rel = path.relative_to(SYFT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _sources():
    return [p for p in sorted(SYFT.rglob("*.py")) if p.name != "__init__.py" or p.parent != SYFT]


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


def _wrong_order(unit: str, name: str) -> bool:
    top = name.split(".")[1] if name.count(".") else None
    if top is None or top == unit or top not in RANK:
        return False
    if unit in LEAVES and top in LEAVES:
        return LEAF_ORDER.index(top) >= LEAF_ORDER.index(unit)
    return RANK[top] >= RANK[unit]


def test_every_package_has_a_rank():
    assert {_unit(p) for p in _sources()} - set(RANK) == set()


def test_packages_import_only_packages_below_them():
    wrong = []
    for path in _sources():
        unit = _unit(path)
        for name, inside, line in _imports(path):
            if name.startswith("syft_lab.") and not inside and _wrong_order(unit, name):
                wrong.append(f"{path.relative_to(SYFT)}:{line} imports {name}")
    assert wrong == []


def test_no_imports_inside_functions_but_optional_or_documented_ones():
    found = []
    for path in _sources():
        lines = path.read_text().splitlines()
        for name, inside, line in _imports(path):
            if not inside or name.split(".")[0] in OPTIONAL:
                continue
            said = "#" in lines[line - 1] or lines[line - 2].strip().startswith("#")
            if not said:
                found.append(f"{path.relative_to(SYFT)}:{line} imports {name} inside a function")
    assert found == []


def test_no_syft_lab_module_is_imported_lazily():
    found = [f"{p.relative_to(SYFT)} imports {name}" for p in _sources() for name, inside, line in _imports(p)
             if inside and name.startswith("syft_lab.")]
    assert found == []  # none: a lower package never reaches up, not even lazily


def test_the_checker_sees_relative_absolute_and_lazy_imports():
    got = {(n, inside) for n, inside, _ in _imports(SYFT / "tensors" / "pointer.py")}
    assert ("syft_lab.commands", False) in got and ("syft_lab.tensors.base", False) in got
    assert ("syft_lab.events", False) in got  # from .. import events
    src = "import syft_lab.workers\ndef f():\n    from ..inspection import model\n"
    got = sorted(_imports(SYFT / "plans" / "probe.py", src))  # a module of plans, read from text
    assert got == [("syft_lab.inspection", True, 3), ("syft_lab.workers", False, 1)]


def test_the_order_check_refuses_upward_and_circular_imports():
    assert _wrong_order("tensors", "syft_lab.workers.base")  # a layer reaching up into workers
    assert _wrong_order("workers", "syft_lab.inspection.model")  # the core building views
    assert _wrong_order("errors", "syft_lab.commands") and not _wrong_order("commands", "syft_lab.errors")
    assert not _wrong_order("workers", "syft_lab.tensors.registry") and not _wrong_order("wire", "syft_lab.wire.format")


def test_the_notebooks_own_worker_has_one_name():
    """"me" is written once (commands.LOCAL_OWNER); code says LOCAL_OWNER (docstrings may say "me")."""
    found = []
    for path in _sources():
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == "me" and id(node) not in docstrings:
                found.append(f"{path.relative_to(SYFT.parent)}:{node.lineno}")
    assert len(found) == 1 and found[0].startswith("syft_lab/commands.py:"), found


# --- a layer is one file: no module outside it names its kind (#25 item 1) -------------------------
# What the views know of a layer comes through the layer protocol (tensors/base.py: node_fields,
# child_fields, world_fields, display, node_actions), so no other module needs the layer's kind.
# The documented exceptions, by kind: the module (or package, ending in "/") and why.
KIND_EXCEPTIONS = {
    # the secret-sharing pair: a fixed precision tensor over a shared one says so by its badge;
    # the protocols of the sharing layers are their code (smpc/, docs/secure-computation.md)
    "shared": {"tensors/fixed_precision.py": "its 'shared' badge", "smpc/": "the sharing protocols"},
    "fixed_precision": {"smpc/": "the sharing protocols"},
    # pointers are the world's edges, but the views read edges by their ``location`` field
    # (tensors/nodes.py is_edge), not by kind; a plan pointer describes itself as one
    "pointer": {"plans/pointer.py": "a plan pointer's node"},
}


def _layer_kinds() -> dict:
    """kind -> the file of the layer class declaring it (``kind = "..."`` in syft_lab/tensors)."""
    kinds = {}
    for path in sorted((SYFT / "tensors").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
                            and [t.id for t in stmt.targets if isinstance(t, ast.Name)] == ["kind"]):
                        kinds[stmt.value.value] = path
    return kinds


def _kind_strings(source: str, kinds) -> list:
    """(kind, line) of every string constant equal to a kind (docstrings left out)."""
    tree = ast.parse(source)
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.value, n.lineno) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in kinds
            and id(n) not in docstrings]


def _excepted(kind: str, rel: str) -> bool:
    return any(rel == where or (where.endswith("/") and rel.startswith(where))
               for where in KIND_EXCEPTIONS.get(kind, {}))


def test_no_module_outside_a_layers_file_names_its_kind():
    kinds = _layer_kinds()
    assert {"shared", "fixed_precision", "pointer", "logging"} <= set(kinds)
    found = []
    for path in _sources():
        rel = str(path.relative_to(SYFT))
        for kind, line in _kind_strings(path.read_text(), kinds):
            if path != kinds[kind] and not _excepted(kind, rel):
                found.append(f"syft_lab/{rel}:{line} names the {kind!r} layer")
    assert found == []


# the sharing layers' own files (a layer may span several: fixed_precision_views.py) and their
# protocols (smpc/) are the only modules that import them
SHARING_LAYER = re.compile(r"(additive_sharing|fixed_precision)(_\w+)?")


def _is_sharing_module(name: str) -> bool:
    parts = name.split(".")
    return parts[:2] == ["syft_lab", "tensors"] and len(parts) > 2 and bool(SHARING_LAYER.fullmatch(parts[2]))


def test_only_smpc_imports_the_sharing_layers():
    found = []
    for path in _sources():
        rel = str(path.relative_to(SYFT))
        if rel.startswith("smpc/") or (rel.startswith("tensors/") and SHARING_LAYER.fullmatch(path.stem)):
            continue
        for name, line in _imported_modules(path.read_text(), path):
            if _is_sharing_module(name):
                found.append(f"syft_lab/{rel}:{line} imports {name}")
    assert found == []


def _imported_modules(source: str, path: Path):
    """(module, line) of every import, ``from ..tensors import additive_sharing`` as the module."""
    for name, _inside, line in _imports(path, source):
        yield name, line
    package = ["syft_lab"] + list(path.relative_to(SYFT).parent.parts)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            base = package[:len(package) - node.level + 1] if node.level else []
            for a in node.names:
                yield ".".join(base + [node.module, a.name]), node.lineno


def test_the_sharing_import_check_sees_a_module_imported_from_its_package():
    src = "from ..tensors import additive_sharing\nfrom ..tensors.fixed_precision import FPT\n"
    got = {n for n, _ in _imported_modules(src, SYFT / "inspection" / "probe.py")}
    assert "syft_lab.tensors.additive_sharing" in got and "syft_lab.tensors.fixed_precision" in got
    assert all(map(_is_sharing_module, ("syft_lab.tensors.fixed_precision_views", "syft_lab.tensors.additive_sharing.X")))
    assert not any(map(_is_sharing_module, ("syft_lab.tensors.pointer", "syft_lab.smpc.fixed_precision")))


def test_the_kind_check_sees_a_kind_in_code_not_in_a_docstring():
    src = '"""a "shared" layer."""\ndef f(node):\n    """shared"""\n    return node["kind"] == "shared"\n'
    assert _kind_strings(src, {"shared": None}) == [("shared", 4)]
    assert _excepted("shared", "smpc/engine.py") and not _excepted("shared", "inspection/model.py")
    assert not _excepted("fixed_precision", "tensors/nodes.py")
    assert not _excepted("pointer", "widget/diff.py") and not _excepted("logging", "actions.py")


# --- one place answers messages (#38 item 1) -----------------------------------------------------
# The hosts are drivers: they move bytes and call their session's ServiceConnection
# (workers/connection.py), which alone calls the command table and owns error replies and the
# after-send hooks (``Then``).
DRIVERS = ["workers/server.py", "ray/host.py", "workers/virtual.py"]
ANSWERING = {"call", "handle", "encoded_reply", "handle_bytes", "run_op", "in_process_ops", "error_reply", "reply_done"}


def _answering_sites(source: str, where: str) -> list:
    found = []
    for node in ast.walk(ast.parse(source)):
        value = node.value if isinstance(node, ast.Attribute) else None
        if (isinstance(value, ast.Name) and value.id == "then") or (isinstance(value, ast.Attribute) and value.attr == "then"):
            found.append(f"{where}:{node.lineno} then.{node.attr}")
        elif (isinstance(node, ast.Attribute) and node.attr in ANSWERING) or (isinstance(node, ast.Name) and node.id in ANSWERING):
            found.append(f"{where}:{node.lineno}")
    return found


def test_hosts_answer_messages_only_through_their_service_connection():
    found = [site for driver in DRIVERS for site in _answering_sites((SYFT / driver).read_text(), driver)]
    assert found == []


def test_the_answering_check_sees_a_driver_that_answers_itself():
    src = "def on(msg, service, then):\n    reply = service.call(msg)\n    then.run()\n"
    assert _answering_sites(src, "x.py") == ["x.py:2", "x.py:3 then.run"]


# --- size: no file in syft_lab over 800 lines, no function over 80 (#38 item 4) -------------------
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 80  # a function's lines from its ``def`` (decorators aside) to its last line


def _long_functions(source: str, where: str) -> list:
    return [f"{where}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def _long_file(source: str, where: str) -> list:
    lines = len(source.splitlines())
    return [f"{where} ({lines} lines)"] if lines > MAX_FILE_LINES else []


def test_no_file_over_800_lines_and_no_function_over_80():
    files, functions = [], []
    for path in sorted(SYFT.rglob("*.py")):
        source, where = path.read_text(), str(path.relative_to(SYFT.parent))
        files += _long_file(source, where)
        functions += _long_functions(source, where)
    assert (files, functions) == ([], [])


def test_the_size_check_sees_a_long_function_a_nested_one_and_a_long_file():
    body = "".join(f"    x{k} = {k}\n" for k in range(80))  # with its def: 81 lines
    nested = body.replace("    x", "        x")
    src = "def short():\n    pass\n\n\ndef long():\n" + body + "\n\nclass C:\n    def method(self):\n" + nested
    assert _long_functions(src, "x.py") == ["x.py:5 long (81 lines)", "x.py:89 method (81 lines)"]
    assert _long_functions("def f():\n" + "    pass\n" * 79, "x.py") == []  # 80 lines: the limit itself
    assert _long_file("\n" * 800, "x.py") == [] and _long_file("\n" * 801, "x.py") == ["x.py (801 lines)"]
