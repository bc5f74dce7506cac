"""Text rendering of the inspection model: what repr() and the magics print."""
from __future__ import annotations

from ..ids import short


def node_text(node: dict) -> str:
    kind = node["kind"]
    if kind == "pointer":
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
    return node["type"]


def render_chain(nodes: list[dict]) -> str:
    text = ">".join(node_text(n) for n in nodes)
    head = nodes[0]
    if head.get("grad_fn"):
        text += f", grad_fn=<{head['grad_fn']}>"
    elif head.get("requires_grad") and head["kind"] != "tensor":
        text += ", requires_grad=True"
    return text


def chain_text(obj) -> str:
    from .model import chain_nodes

    return render_chain(chain_nodes(obj))


def render_world(world: dict) -> str:
    """A table of workers and their objects, for `%syft workers` and the world's repr."""
    lines = []
    for w in world["workers"]:
        state = f" [{w['state']}]" if w.get("state") not in (None, "local", "in-process") else ""
        lines.append(f"{w['id']} ({w['kind']}){state}: {len(w['objects'])} object(s)")
        for o in w["objects"]:
            names = f"  = {', '.join(o['names'])}" if o.get("names") else ""
            tags = f" {' '.join(o['tags'])}" if o.get("tags") else ""
            where = ""
            if o["kind"] == "pointer":
                where = f" -> {o['location']}:{short(o['id_at_location'])}"
                if o.get("owning") is False:
                    where += " (not owning)"
            if o.get("held"):
                where += " (held by the worker)"
            shape = f" {o['dtype']}{o['shape']}" if "shape" in o else ""
            lines.append(f"  {short(o['id'])} {o['type']}{shape}{where}{tags}{names}")
    return "\n".join(lines)
