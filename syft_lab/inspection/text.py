"""Text rendering of the inspection model: what repr() and the magics print.

Importing this module registers ``chain_text`` as the repr of every chain layer
(``syft_lab.tensors.base.set_chain_repr``): layers never import a renderer.

A chain is a tree (docs/inspection-model.md): a plain chain prints as before, one node after
another joined by ``>`` (``LoggingTensor>tensor([1., 2.])``); a node with several children
prints them in parentheses, ``AdditiveSharingTensor>([PointerTensor | ...]>...; [PointerTensor | ...]>...)``;
annotations follow their node in parentheses (``(crypto provider: carol)``).
"""
from __future__ import annotations

from ..ids import short
from ..tensors import base as _base
from ..tensors.nodes import chain_nodes, is_edge, tree_from_list

MAX_CHILDREN = 8  # children printed per node; the rest are counted


def node_text(node: dict) -> str:
    kind = node["kind"]
    if is_edge(node) and "id_at_location" in node:  # a pointer
        state = "" if node.get("state", "ok") == "ok" else f" ({node['state']})"
        return (f"[{node['type']} | {node['owner']}:{short(node['id'])} -> "
                f"{node['location']}:{short(node['id_at_location'])}{state}]")
    if kind == "tensor":
        p = node.get("preview")
        if p is not None:
            return p["text"]
        return f"tensor<{node['dtype']} {node['shape']} on {node['owner']}>"
    if kind == "pending":
        return f"tensor<{node['dtype']} {node['shape']} on {node['owner']}, computed when the batch ends>"
    if kind == "unreachable":
        return f"({node['owner']} unreachable: {node.get('error', '')})"
    if kind == "plan":
        return f"Plan {node.get('name', '')}".rstrip()
    display = node.get("display") or {}
    text = display.get("label") or node["type"]
    if display.get("badge"):
        text += f" [{display['badge']}]"
    return text


def _annotations(node: dict) -> str:
    notes = [f"{a.get('label')}: {a.get('value')}" for a in node.get("annotations") or ()]
    return f"({', '.join(notes)})" if notes else ""


def tree_text(node: dict) -> str:
    """One node and everything below it."""
    text = node_text(node) + _annotations(node)
    children = node.get("children") or []
    if len(children) == 1:
        return f"{text}>{tree_text(children[0])}"
    if children:
        shown = [tree_text(c) for c in children[:MAX_CHILDREN]]
        if len(children) > MAX_CHILDREN:
            shown.append(f"... {len(children) - MAX_CHILDREN} more")
        return f"{text}>({'; '.join(shown)})"
    return text


def render_tree(root: dict) -> str:
    text = tree_text(root)
    if root.get("grad_fn"):
        text += f", grad_fn=<{root['grad_fn']}>"
    elif root.get("requires_grad") and root["kind"] != "tensor":
        text += ", requires_grad=True"
    return text


def _where(node: dict) -> str:
    """Where a layer lives, for ``chain_lines``: a shared value on no worker, data on its own."""
    if node.get("distributed"):
        return f"  · held by nobody (pieces on {', '.join(node['distributed'])})"
    if node["kind"] == "tensor" and node.get("preview") is None:
        return ""  # its text says where it is
    return f"  · on {node['owner']}" if node.get("owner") is not None else ""


def chain_lines(root: dict) -> list[str]:
    """The chain as a tree, one layer a line, each saying where it lives: what ``sy.chain(pp)``
    prints (a pointer to a pointer is three lines: me -> alice -> bob, not one run-on line)."""
    lines: list[str] = []

    def walk(node, lead, last, top):
        where = _where(node)
        branch = "" if top else ("└─ " if last else "├─ ")
        lines.append(f"{lead}{branch}{node_text(node)}{_annotations(node)}{where}")
        children = node.get("children") or []
        shown = children[:MAX_CHILDREN]
        lead_below = lead if top else lead + ("   " if last else "│  ")
        for i, child in enumerate(shown):
            walk(child, lead_below, i == len(shown) - 1 and len(children) <= MAX_CHILDREN, False)
        if len(children) > MAX_CHILDREN:
            lines.append(f"{lead_below}└─ ... {len(children) - MAX_CHILDREN} more")

    walk(root, "", True, True)
    return lines


def render_chain(nodes) -> str:
    """The text of a chain: a tree's root, or a version 1 list of nodes (head first)."""
    return render_tree(tree_from_list(nodes))


def chain_text(obj) -> str:
    return render_tree(chain_nodes(obj))


def ledger_line(view: dict) -> str:
    """A lane's ledger in one line: messages in and out by kind, a provider's material by item."""
    parts = {"in": [], "out": []}
    for key, (count, nbytes) in sorted(view["totals"].items()):
        kind, direction = key.rsplit(" ", 1)
        parts[direction].append(f"{count} {kind} ({fmt_size(nbytes)})")
    text = "; ".join(f"{d}: {', '.join(p)}" for d, p in parts.items() if p)
    if view.get("material"):
        text += "; material made: " + ", ".join(f"{n} {k}" for k, n in sorted(view["material"].items()))
    return text


def fmt_size(n: int) -> str:
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def render_world(world: dict) -> str:
    """A table of workers and their objects, for `%syft workers` and the world's repr."""
    lines = []
    for w in world["workers"]:
        state = f" [{w['state']}]" if w.get("state") not in (None, "local", "in-process") else ""
        lines.append(f"{w['id']} ({w['kind']}){state}: {len(w['objects'])} object(s)")
        if w.get("ledger") and w["ledger"]["seq"]:
            lines.append(f"  ledger: {ledger_line(w['ledger'])}")
        for o in w["objects"]:
            names = f"  = {', '.join(o['names'])}" if o.get("names") else ""
            if not names and o.get("held_in"):
                names = f"  in {', '.join(o['held_in'])}"
            if o.get("share") is not None:  # one share of a secret: never its value
                names += (f"  (share {o['share']['index'] + 1}/{o['share']['of']}"
                          f"{' of ' + o['secret'] if o.get('secret') else ''})")
            if o.get("state_of"):
                names += f"  (state of plan {o['state_of']})"
            tags = f" {' '.join(o['tags'])}" if o.get("tags") else ""
            where = ""
            if is_edge(o):
                where = f" -> {o['location']}:{short(o['id_at_location'])}"
                if o.get("owning") is False:
                    where += " (not owning)"
                if o.get("state") == "gone":
                    how = o.get("gone_how") or "gone"
                    where += f" ({how}{' to ' + o['gone_to'] if o.get('gone_to') else ''})"
                elif o.get("dangling"):
                    where += f" (dangling: {o['location']} is down)"
            if o.get("held"):
                where += " (held by the worker)"
            shape = f" {o['dtype']}{o['shape']}" if "shape" in o else ""
            lines.append(f"  {short(o['id'])} {o['type']}{shape}{where}{tags}{names}")
    return "\n".join(lines)


_register = getattr(_base, "set_chain_repr", None)
if _register is not None:
    _register(chain_text)
