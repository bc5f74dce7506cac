"""The inspection nodes of an object: the chain tree every view renders, built from the layers.

Why this is here and not in syft_lab/inspection: a worker describes what it stores (``describe``,
``summary``) and a worker must not import the inspection package (which enumerates workers). So
building the node dicts of a chain is part of the layer protocol: this module reads what each
layer declares (``kind``, ``layer_children()``, ``node_fields()``, ``child_fields(i)``,
``world_fields()``, ``display()``, ``node_actions``) and knows no layer type by name: what a
shared tensor tells its shares (their index, their secret's group) it says through
``child_fields``. A new layer type needs nothing here.

A chain is a tree (docs/inspection-model.md, version 2): every node has ``children``; a plain
chain is the one-child case, a pointer's child is the root its worker describes, a shared tensor
has one child per share. Values appear only in a ``tensor`` leaf the caller may see
(``with_values``); a worker never shows its values to a client that merely inspects them.

Objects that are not layers describe themselves (plans: ``_inspection_nodes()``, a head-first
list), and older workers describe stored objects as such lists: lists become one-child trees
(``tree_from_list``).
"""
from __future__ import annotations

import math

import torch

from ..commands import LOCAL_OWNER  # the notebook's own worker (views import it from here)
from ..dtypes import dtype_name
from ..ids import short, tensor_id
from .base import ChainLayer

SCHEMA_VERSION = 2
PREVIEW_VALUES = 6  # how many leading values a leaf's preview carries
PREVIEW_THRESHOLD = 64  # above this many elements, the preview text is summarised
MAX_DEPTH = 64  # nodes deeper than this are cut (a pointer cycle between in-process workers)

# Actions a node may offer wherever it is (reads); every other action is offered only on an
# object the notebook holds: the root of a chain owned by "me" whose pointer is not gone.
READ_ACTIONS = ("oplog",)
# What plain tensors and the objects that are no layer (plans, plan pointers) offer.
DEFAULT_ACTIONS = {"tensor": ("send",), "plan": ("send",), "plan_pointer": ("get",)}
# World entries: what a view may do with an object in a worker's store, and with a row of "me"
# (a local layer's row offers what its layer declares: inspection/model.py local_entry).
STORED_ACTIONS = {"plan": ("get",)}
STORED_DEFAULT = ("get", "move")
SENDABLE = ("tensor", "layer", "plan")


def target_of(entry: dict):
    """(worker id, id there) of what a world row or a chain node refers to, or None.

    The world's edges are the rows (and nodes) that carry a ``location``, the worker of their
    target (docs/inspection-model.md): a pointer, a plan pointer, a pointer a worker holds. Views
    read edges by this field, never by a layer's kind, so a new layer that refers elsewhere is
    drawn as an edge too."""
    loc = entry.get("location")
    return (loc, entry.get("id_at_location")) if isinstance(loc, str) else None


def is_edge(entry: dict) -> bool:
    """Whether a world row or chain node refers to an object elsewhere (see ``target_of``)."""
    return isinstance(entry.get("location"), str)


def live_edge(entry: dict) -> bool:
    """An edge whose target is still there (not fetched, moved or deleted: ``state`` "gone")."""
    return isinstance(entry.get("location"), str) and entry.get("state") != "gone"


def _number(x):
    """A JSON-safe number (NaN and infinities become strings JSON can carry)."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def tensor_meta(t: torch.Tensor) -> dict:
    """Fields every tensor-like node has."""
    fn = t.grad_fn
    d = t.__dict__
    return {
        "shape": list(t.shape),
        "dtype": dtype_name(t.dtype),
        "requires_grad": bool(t.requires_grad),
        "grad_fn": type(fn).__name__ if fn is not None else None,
        "tags": sorted(d.get("tags", ())),
        "description": d.get("description"),
    }


def preview(t: torch.Tensor) -> dict:
    """A bounded look at a plain tensor's values: never a dump of a large tensor."""
    t = t.detach()
    flat = t.reshape(-1)
    n = flat.numel()
    head = flat[:PREVIEW_VALUES]
    values = head.tolist() if not t.is_complex() else [str(v) for v in head.tolist()]
    out = {"numel": n, "values": [_number(v) for v in values], "truncated": n > PREVIEW_VALUES}
    with torch._tensor_str.printoptions(threshold=PREVIEW_THRESHOLD, edgeitems=3):
        out["text"] = torch.Tensor.__repr__(t)
    if t.is_floating_point() and n > 0:
        f = flat.float()
        out.update(min=_number(f.min().item()), max=_number(f.max().item()), mean=_number(f.mean().item()))
    return out


# --- what a node shows and offers -----------------------------------------------------------

def default_display(node: dict) -> dict:
    """The renderer entry of a node whose layer declares no ``display()``: a label and lines
    of text that text, SVG and JS renderers draw for any kind."""
    kind = node.get("kind")
    lines: list[str] = []
    badge = None
    if is_edge(node):  # a pointer
        lines.append(f"-> {node.get('location')}:{short(node['id_at_location'])}"
                     if isinstance(node.get("id_at_location"), int) else f"-> {node.get('location')}")
        if node.get("state", "ok") != "ok":
            badge = node["state"]
        elif node.get("owning") is False:
            badge = "not owning"
    elif "log_length" in node:  # an op log
        tail = node.get("log_tail") or []
        n = node.get("log_length", 0)
        lines.append(f"log: {n} op{'' if n == 1 else 's'}" + (f", last {tail[-1]}" if tail else ""))
    elif kind == "tensor":
        p = node.get("preview")
        if p is None:
            lines.append(f"values stay on {node.get('owner')}")
        else:
            text = p.get("text", "").splitlines()
            lines.extend(text[:4] + (["..."] if len(text) > 4 else []))
    elif kind == "plan":
        lines.append(f"plan {node.get('name', '')}: {node.get('n_nodes', 0)} op(s)")
    elif kind in ("unreachable", "pending"):
        lines.append(str(node.get("error", "computed when the batch ends" if kind == "pending" else ""))[:80])
    return {"label": node.get("type", kind), "lines": lines, "badge": badge}


def offered(declared, node: dict, *, held: bool) -> list[str]:
    """The actions a view offers on ``node``: the layer's declared ones, filtered by context.
    ``held``: the node is the root of a chain the notebook holds (owner "me")."""
    if node.get("state", "ok") == "gone" or node.get("dangling"):
        return []
    if held and node.get("owner", LOCAL_OWNER) == LOCAL_OWNER:
        return list(declared)
    return [a for a in declared if a in READ_ACTIONS]


def entry_actions(worker_id: str, entry: dict) -> list[str]:
    """The actions of one world entry (a row of a lane): get and move for an object in a
    worker's store, get and move for a pointer in "me", send for local data; none for a
    pointer that is gone or dangling (nor, by the inspection model, for a part of a layer the
    notebook holds: a share of a secret). syft_lab/actions.py refuses any other."""
    if entry.get("state", "ok") == "gone" or entry.get("dangling"):
        return []
    kind = entry.get("kind")
    if worker_id != LOCAL_OWNER or "refcount" in entry:
        return list(STORED_ACTIONS.get(kind, STORED_DEFAULT))
    if is_edge(entry):  # a pointer in "me"
        return ["get"] if entry.get("type") == "PlanPointer" else ["get", "move"]
    if kind in SENDABLE or entry.get("layer"):
        return ["send"]
    return []


# --- nodes -------------------------------------------------------------------------------------

def _finish(node: dict, declared, held: bool, children: list[dict], display: dict | None = None) -> dict:
    node["display"] = display if display is not None else default_display(node)
    node.setdefault("annotations", [])
    node["children"] = children
    parties = distributed_over(children)
    if parties:  # the value exists only as pieces on these workers: no one holds it
        node["distributed"] = parties
    node["actions"] = offered(declared, node, held=held)
    return node


def distributed_over(children: list[dict]) -> list[str]:
    """The workers a node's value is spread over: its children point to two or more workers
    (the shares of a secret), or its one child's value is spread so (a fixed precision tensor
    over a shared one); [] when some worker holds the value."""
    if len(children) == 1:
        return list(children[0].get("distributed") or [])
    where = [c["location"] for c in children if is_edge(c)]
    if len(children) > 1 and len(where) == len(children) and len(set(where)) > 1:
        return where
    return []


def tensor_node(t: torch.Tensor, owner: str, with_values: bool, held: bool = True) -> dict:
    node = {"kind": "tensor", "type": type(t).__name__, "id": tensor_id(t), "owner": owner}
    node.update(tensor_meta(t))
    # Values are shown only where they already are: a worker never shows its data to a
    # client that merely inspects it (that would be an implicit .get()).
    node["preview"] = preview(t) if with_values else None
    return _finish(node, DEFAULT_ACTIONS["tensor"], held, [])


def _layer_display(layer, node: dict) -> dict:
    """The layer's ``display()``, its lines as text; a kind the views know gets default lines
    when its layer gives none."""
    try:
        d = layer.display()
    except Exception as e:  # a broken layer must not break every view
        d = {"label": node.get("type"), "lines": [f"display failed: {type(e).__name__}"]}
    if not isinstance(d, dict):
        return default_display(node)
    base = default_display(node)
    return {"label": str(d.get("label") or base["label"]),
            "lines": [str(x) for x in (d.get("lines") or base["lines"])],
            "badge": d.get("badge", base["badge"])}


def _remote_root(layer) -> dict | None:
    """The root of the part of a chain that lives on a pointer's worker (as that worker
    describes it: a v2 tree, or a v1 list from an older worker), a node saying why it cannot
    be described, or None for a layer that is no pointer or whose object is gone."""
    ref = getattr(layer, "_ref", None)
    location = getattr(ref, "location", None)
    if location is None or ref.released:
        return None
    try:
        got = location.describe(ref.id)
    except Exception as e:  # a view must still render when the worker is gone
        return _normalise({"kind": "unreachable", "type": type(e).__name__, "id": ref.id,
                           "owner": location.id, "error": str(e)})
    return tree_from_list(got) if got else None


def _layer_node(obj: ChainLayer, owner: str, with_values: bool, held: bool, depth: int) -> dict:
    node = {"kind": obj.kind, "type": type(obj).__name__, "id": obj.id, "owner": owner}
    node.update(tensor_meta(obj))
    fields = dict(obj.node_fields())
    annotations = fields.pop("annotations", None)
    node.update(fields)
    if annotations:
        node["annotations"] = [dict(a) for a in annotations]
    children: list[dict] = []
    if depth < MAX_DEPTH:
        children = [_node(c, owner, with_values, False, depth + 1) for c in obj.layer_children()]
        for i, child in enumerate(children):
            _tell(child, obj.child_fields(i), type(obj).child_fields_below)
        if not children:  # a pointer: the rest of its chain is on its worker
            remote = _remote_root(obj)
            children = [remote] if remote is not None else []
    return _finish(node, type(obj).node_actions, held, children, _layer_display(obj, node))


def _tell(child: dict, told: dict, below: tuple) -> None:
    """What a layer tells one child (``child_fields``) onto that child's node (its
    ``annotations`` after the child's own), and the keys in ``below`` onto every node under it
    too; a node's own fields win."""
    if not told:
        return
    for k, v in told.items():
        if k == "annotations":  # drawn under the child's own, in every view
            child["annotations"] = list(child.get("annotations") or ()) + [dict(x) for x in v]
        else:
            child.setdefault(k, v)
    passed = {k: told[k] for k in below if k in told}
    if passed:
        for n in walk(child):
            if n is not child:
                for k, v in passed.items():
                    n.setdefault(k, v)


def _node(obj, owner: str, with_values: bool, held: bool, depth: int = 0) -> dict:
    if isinstance(obj, ChainLayer):
        return _layer_node(obj, owner, with_values, held, depth)
    if isinstance(obj, torch.Tensor):
        return tensor_node(obj, owner, with_values, held)
    describe = getattr(obj, "_inspection_nodes", None)  # plans and other syft objects
    if describe is not None:
        root = tree_from_list(describe(owner, with_values))
        if held and root.get("owner", LOCAL_OWNER) == LOCAL_OWNER:
            kind = "plan_pointer" if root.get("type") == "PlanPointer" else root.get("kind")
            root["actions"] = offered(DEFAULT_ACTIONS.get(kind, ()), root, held=True)
        return root
    raise TypeError(f"sy.chain expects a tensor or a syft object, got {type(obj).__name__}")


def chain_nodes(obj, owner: str = LOCAL_OWNER, with_values: bool = True) -> dict:
    """The root node of ``obj``'s chain tree (across workers for pointers). ``owner`` is the
    worker that holds ``obj``; its actions are offered only when that is the notebook ("me")."""
    return _node(obj, owner, with_values, held=True)


def stored_root(obj, obj_id: int, owner: str) -> dict:
    """The tree a worker tells about object ``obj_id`` of its store: no values, no actions
    (the client decides what it offers), the root known by its store id."""
    root = _node(obj, owner, False, held=False)
    root["id"] = obj_id
    return root


def _normalise(node: dict) -> dict:
    """A node from a worker or a layer of before v2, given every field a v2 node has."""
    node.setdefault("annotations", [])
    node.setdefault("actions", [])
    if "display" not in node:
        node["display"] = default_display(node)
    node.setdefault("children", [])
    return node


def tree_from_list(nodes) -> dict:
    """A version 1 chain (a list, head first) as a version 2 tree: each node the one child of
    the one before. A dict (already a tree) is returned as it is, its fields completed."""
    if isinstance(nodes, dict):
        return _normalise(nodes)
    nodes = [dict(n) for n in nodes]
    if not nodes:
        raise ValueError("an empty chain has no root")
    for parent, child in zip(nodes, nodes[1:]):
        if parent.get("children"):  # a tree in a list (a worker's describe of v2 in a v1 list)
            break
        parent["children"] = [child]
    for n in nodes:
        _normalise(n)
    return nodes[0]


def walk(root: dict):
    """Every node of a tree, depth first, parents before children (a chain's head first)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.get("children") or ()))


def flatten(root: dict) -> list[dict]:
    """The nodes of a tree depth first: for a plain chain, the version 1 list (head first)."""
    return list(walk(root))


# --- world entries: what a worker tells about each stored object --------------------------------

# What a package above the layers marks on the world entry of a stored tensor from its metadata
# (tags, shape): syft_lab/federated registers the part of a federated dataset a tensor is.
_ENTRY_MARKERS: list = []


def register_entry_marker(fn) -> None:
    """Register ``fn(meta) -> dict | None``: fields the world entry of a stored tensor carries,
    read from its ``tensor_meta`` (no values). Registered once per function."""
    if fn not in _ENTRY_MARKERS:
        _ENTRY_MARKERS.append(fn)


def object_kind(obj) -> str:
    if isinstance(obj, ChainLayer):
        return obj.kind
    if isinstance(obj, torch.Tensor):
        return "tensor"
    return getattr(obj, "kind", type(obj).__name__.lower())


def object_meta(obj) -> dict:
    """What a worker tells about one stored object without revealing its values."""
    describe = getattr(obj, "_object_meta", None)
    if describe is not None:  # plans
        return describe()
    meta = {"kind": object_kind(obj), "type": type(obj).__name__}
    if isinstance(obj, torch.Tensor):
        m = tensor_meta(obj)
        del m["grad_fn"]
        meta.update(m)
        for mark in _ENTRY_MARKERS:  # a part of a federated dataset
            extra = mark(m)
            if extra:
                meta.update(extra)
        if isinstance(obj, ChainLayer):  # what the layer says of itself (a shared tensor: its group)
            meta.update(obj.world_fields())
    return meta


def object_entry(obj_id: int, obj, worker_id: str, refcount: int, held: bool = False) -> dict:
    """One row of a worker's lane in the world view."""
    entry = {"id": obj_id, **object_meta(obj), "refcount": refcount, "names": []}
    if held:  # the worker keeps it itself (worker.load): it outlives every pointer
        entry["held"] = True
    state_ids = getattr(obj, "state_ids", None)  # a stored plan: the copies of its state it runs on
    if isinstance(state_ids, (list, tuple)) and state_ids:
        entry["state_ids"] = [int(i) for i in state_ids]
    ref = getattr(obj, "__dict__", {}).get("_ref")
    if ref is not None and hasattr(ref, "location"):  # a pointer held by this worker
        entry.update(location=ref.location.id, id_at_location=ref.id, owning=ref.owning,
                     pointer_id=ref.pointer_id)
    return entry
