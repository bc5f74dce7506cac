"""What the plan view draws beyond ``PlanGraph.graph_dict``'s data flow: the scalar constants of
ops (the 2 of ``2 * x``) as nodes, the other arguments of each op, in-place writes, and the
forward / backward / optimizer-update regions of a training step.

Regions are read from the graph alone (a plan keeps no autograd record): backward is what
descends from a gradient seed, the ``ones_like`` of a 0-dim value that ``torch.autograd.grad``
or ``backward()`` issues; update is the in-place writes of inputs downstream of it, with the
scalar scaling of their operands (``p.sub_(0.1 * g)``); forward is every other op. A graph
without a seed has no regions.
"""
from __future__ import annotations

from .graph import Node, PlanGraph, Value, _refs, _written_args

_SEED_OP = "aten.ones_like.default"
# a Python number given for one of these is an operand (``x * 2``), not a dim or a size
_OPERAND_TYPES = {"number", "Optional[number]", "Tensor", "Optional[Tensor]"}
_MAX_ARG_TEXT = 60


def _arg_text(a) -> str:
    if isinstance(a, Value):
        return repr(a)
    if isinstance(a, list):
        return "[" + ", ".join(_arg_text(b) for b in a) + "]"
    return repr(a).replace("torch.", "")[:_MAX_ARG_TEXT]


def _is_number(a) -> bool:
    return isinstance(a, (int, float)) and not isinstance(a, bool)


def _named_args(node: Node) -> list[tuple[str, object, bool]]:
    """(name, value, whether a number there is an operand) for every argument of an op node, positional first."""
    schema = node.op._schema.arguments if node.is_op else None
    out = []
    for i, a in enumerate(node.args):
        arg = schema[i] if schema is not None and i < len(schema) else None
        out.append((arg.name if arg is not None else f"arg{i}", a,
                    arg is not None and str(arg.type) in _OPERAND_TYPES))
    types = {a.name: str(a.type) for a in schema} if schema is not None else {}
    for k, v in node.kwargs.items():
        out.append((k, v, types.get(k) in _OPERAND_TYPES))
    return out


def regions(graph: PlanGraph) -> list[str | None]:
    """Per op node: "forward", "backward" or "update"; all None when the graph has no backward."""
    nodes = graph.nodes
    seeds = set()
    for i, n in enumerate(nodes):
        if n.name == _SEED_OP and n.args and isinstance(n.args[0], Value):
            ref = n.args[0]
            shape = (graph.inputs[ref.index]["shape"] if ref.kind == "input"
                     else nodes[ref.index].outputs[0][0] if ref.kind == "node" and nodes[ref.index].outputs else None)
            if shape is not None and len(shape) == 0:
                seeds.add(i)
    if not seeds:
        return [None] * len(nodes)
    backward = set(seeds)
    consumers: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):  # nodes only reference earlier nodes: one pass in order
        for r in _refs(n):
            if r.kind == "node":
                consumers[r.index].append(i)
                if r.index in backward:
                    backward.add(i)
    first = min(seeds)
    for i in range(len(nodes) - 1, first, -1):  # what backward alone reads, made after the seed (x ** 1.0 of pow's grad)
        if i not in backward and consumers[i] and all(c in backward for c in consumers[i]):
            backward.add(i)
    update = {i for i in backward if any(isinstance(v, Value) and v.kind == "input" for v in _written_args(nodes[i]))}
    for i in sorted(backward, reverse=True):  # the scaling of an update's operand (lr * g) is update too
        if i not in update and consumers[i] and all(c in update for c in consumers[i]) and any(
                scalar and _is_number(a) for _, a, scalar in _named_args(nodes[i])):
            update.add(i)
    return ["update" if i in update else "backward" if i in backward else "forward" for i in range(len(nodes))]


def view_graph(graph: PlanGraph) -> dict:
    """``graph.graph_dict()`` with, per op node: ``region``, ``args`` (the non-value arguments as
    ``name=value`` text), ``inplace`` and ``writes`` (ids of the inputs or values it overwrites),
    ``consumers``; and one node of role "constant" (``scalar: true``) per Scalar operand, with an
    edge into its op."""
    d = graph.graph_dict()
    by_id = {n["id"]: n for n in d["nodes"]}
    region = regions(graph)
    scalars: dict[str, list] = {}  # op id -> its scalar constant nodes
    scalar_edges = []
    for i, node in enumerate(graph.nodes):
        vid = f"v{i}"
        entry = by_id[vid]
        args = []
        for k, (name, a, scalar) in enumerate(_named_args(node)):
            if isinstance(a, Value) or (isinstance(a, list) and any(isinstance(b, Value) for b in a)):
                continue
            if scalar and _is_number(a):
                sid = f"s{i}.{k}"
                scalars.setdefault(vid, []).append({
                    "id": sid, "role": "constant", "scalar": True, "label": _arg_text(a), "op": None,
                    "shape": None, "dtype": type(a).__name__, "arg": name, "region": region[i]})
                scalar_edges.append({"from": sid, "to": vid, "shape": None, "dtype": type(a).__name__})
                entry["inputs"].append(sid)
            else:
                args.append(f"{name}={_arg_text(a)}")
        written = [repr(v) for v in _written_args(node) if isinstance(v, Value)]
        entry.update(region=region[i], args=args, inplace=bool(written), writes=written, consumers=[])
        source = getattr(node, "source", None)  # where the traced op came from, when the trace knows
        if source:
            entry["source"] = source
    for e in d["edges"]:
        src = by_id.get(e["from"])
        if src is not None and src.get("role") == "op":
            src["consumers"].append(e["to"])
    nodes = []  # a scalar constant comes right before its op, where a reader meets it
    for n in d["nodes"]:
        nodes.extend(scalars.get(n["id"], ()))
        nodes.append(n)
    return {"nodes": nodes, "edges": d["edges"] + scalar_edges,
            "regions": sorted({r for r in region if r is not None}, key=("forward", "backward", "update").index)}
