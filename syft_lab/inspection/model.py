"""The inspection model: pure functions from runtime state to JSON-ready dicts.

Every view (text reprs, the widget, the lab sidebar, the magics) renders these dicts and
none recomputes them. The schema is in docs/inspection-model.md; bump SCHEMA_VERSION when
a field changes meaning or goes away.
"""
from __future__ import annotations

import math

import torch

from ..dtypes import dtype_name

SCHEMA_VERSION = 1
PREVIEW_VALUES = 6  # how many leading values a leaf's preview carries
PREVIEW_THRESHOLD = 64  # above this many elements, the preview text is summarised

LOCAL_OWNER = "me"


def _number(x):
    """A JSON-safe number (NaN and infinities become strings JSON can carry)."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def tensor_meta(t: torch.Tensor) -> dict:
    """Fields every tensor-like node has."""
    fn = t.grad_fn
    return {
        "shape": list(t.shape),
        "dtype": dtype_name(t.dtype),
        "requires_grad": bool(t.requires_grad),
        "grad_fn": type(fn).__name__ if fn is not None else None,
        "tags": sorted(t.__dict__.get("tags", ())),
        "description": t.__dict__.get("description"),
    }


def preview(t: torch.Tensor) -> dict:
    """A bounded look at a plain tensor's values: never a dump of a large tensor."""
    t = t.detach()
    flat = t.reshape(-1)
    n = flat.numel()
    head = flat[:PREVIEW_VALUES]
    out = {
        "numel": n,
        "values": [_number(v) for v in (head.tolist() if not t.is_complex() else [str(v) for v in head.tolist()])],
        "truncated": n > PREVIEW_VALUES,
    }
    with torch._tensor_str.printoptions(threshold=PREVIEW_THRESHOLD, edgeitems=3):
        out["text"] = torch.Tensor.__repr__(t)
    if t.is_floating_point() and n > 0:
        f = flat.float()
        out.update(min=_number(f.min().item()), max=_number(f.max().item()), mean=_number(f.mean().item()))
    return out


def tensor_node(t: torch.Tensor, owner: str, with_values: bool) -> dict:
    from ..ids import tensor_id

    node = {"kind": "tensor", "type": type(t).__name__, "id": tensor_id(t), "owner": owner}
    node.update(tensor_meta(t))
    # Values are shown only where they already are: a worker never shows its data to a
    # client that merely inspects it (that would be an implicit .get()).
    node["preview"] = preview(t) if with_values else None
    return node


def chain_nodes(obj, owner: str = LOCAL_OWNER, with_values: bool = True) -> list[dict]:
    """The nodes of obj's chain, head first, down to the data (across workers for pointers)."""
    from ..tensors.base import ChainLayer

    if isinstance(obj, ChainLayer):
        node = {"kind": obj.kind, "type": type(obj).__name__, "id": obj.id, "owner": owner}
        node.update(tensor_meta(obj))
        node.update(obj._node_fields())
        return [node] + obj._chain_rest(owner, with_values)
    if isinstance(obj, torch.Tensor):
        return [tensor_node(obj, owner, with_values)]
    describe = getattr(obj, "_inspection_nodes", None)  # plans and other syft objects
    if describe is not None:
        return describe(owner, with_values)
    raise TypeError(f"sy.chain expects a tensor or a syft object, got {type(obj).__name__}")


class Chain:
    """The inspection model of one chain: ``nodes`` head first, ``to_dict()`` for the views."""

    def __init__(self, nodes: list[dict]):
        self.nodes = nodes

    @property
    def head(self) -> dict:
        return self.nodes[0]

    def to_dict(self) -> dict:
        return {"schema": "syft_lab.chain", "version": SCHEMA_VERSION, "nodes": self.nodes}

    def __repr__(self):
        from .text import render_chain

        return render_chain(self.nodes)

    def __len__(self):
        return len(self.nodes)


def chain(obj) -> Chain:
    """The inspection model of ``obj``'s chain (a tensor, a layer, a pointer or a plan)."""
    if isinstance(obj, Chain):
        return obj
    return Chain(chain_nodes(obj))


# --- the world: every worker, its objects, and the pointers between them -------------------

# A part of a federated dataset (syft_lab/federated) is a tensor a worker holds with the tags
# DATASET_TAG, "#<name>" and one of DATASET_PARTS: search finds it PySyft's way
# (bob.search("#digits", "#data")) and the views show it as a dataset row.
DATASET_TAG = "#dataset"
DATASET_PARTS = {"#data": "data", "#target": "targets"}


def dataset_of(tags, shape) -> dict | None:
    """The dataset a tensor with these tags is part of: name, part, samples, sample shape."""
    tags = set(tags)
    if DATASET_TAG not in tags:
        return None
    parts = [DATASET_PARTS[t] for t in tags if t in DATASET_PARTS]
    names = [t[1:] for t in tags - {DATASET_TAG} - set(DATASET_PARTS)]
    if len(parts) != 1 or len(names) != 1 or not shape:
        return None
    return {"name": names[0], "part": parts[0], "samples": shape[0], "sample_shape": list(shape[1:])}


def object_meta(obj) -> dict:
    """What a worker tells about one stored object without revealing its values."""
    describe = getattr(obj, "_object_meta", None)
    if describe is not None:  # plans
        return describe()
    from ..workers.core import object_kind

    meta = {"kind": object_kind(obj), "type": type(obj).__name__}
    if isinstance(obj, torch.Tensor):
        m = tensor_meta(obj)
        del m["grad_fn"]
        meta.update(m)
        dataset = dataset_of(m["tags"], m["shape"])
        if dataset is not None:
            meta["dataset"] = dataset
    return meta


def object_entry(obj_id: int, obj, worker_id: str, refcount: int, held: bool = False) -> dict:
    entry = {"id": obj_id, **object_meta(obj), "refcount": refcount, "names": []}
    if held:  # the worker keeps it itself (worker.load): it outlives every pointer
        entry["held"] = True
    ref = getattr(obj, "__dict__", {}).get("_ref")
    if ref is not None and hasattr(ref, "location"):  # a pointer held by this worker
        entry.update(location=ref.location.id, id_at_location=ref.id, owning=ref.owning,
                     pointer_id=ref.pointer_id)
    return entry


def _local_pointer_entry(ref) -> dict:
    from ..tensors.pointer import pointer_state

    entry = {"id": ref.pointer_id, "kind": "pointer",
             "type": "PlanPointer" if ref.target_kind == "plan" else "PointerTensor",
             "location": ref.location.id, "id_at_location": ref.id, "owning": ref.owning,
             "state": pointer_state(ref), "names": []}
    if ref.shape is not None:
        entry.update(shape=list(ref.shape), dtype=dtype_name(ref.dtype))
    return entry


CONTAINER_BUDGET = 5000  # items of notebook lists/dicts a world snapshot looks into for pointers
CONTAINER_DEPTH = 2  # data["bob"][0] at most


def container_items(namespace: dict | None):
    """(path, value) for the tensors and pointers held inside the notebook's lists, tuples
    and dicts (``data["bob"]``, ``ptrs[0]``): a pointer held there is named by its path.
    Bounded: CONTAINER_BUDGET items in all, CONTAINER_DEPTH levels."""
    budget = [CONTAINER_BUDGET]

    def walk(path, value, depth):
        if isinstance(value, dict):
            items = ((f"{path}[{k!r}]", v) for k, v in list(value.items()) if isinstance(k, (str, int)))
        elif isinstance(value, (list, tuple)):
            items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
        else:
            return
        for sub, v in items:
            budget[0] -= 1
            if budget[0] < 0:
                return
            if isinstance(v, torch.Tensor) or hasattr(v, "_ref"):
                yield sub, v
            elif depth < CONTAINER_DEPTH:
                yield from walk(sub, v, depth + 1)

    for name, value in list((namespace or {}).items()):
        if not name.startswith("_") and isinstance(value, (dict, list, tuple)):
            yield from walk(name, value, 1)


def world_dict(namespace: dict | None = None) -> dict:
    """One JSON-ready snapshot of every known worker, its objects and the local pointers.

    With ``namespace`` (a notebook's globals), objects gain the variable names bound to them
    and local tensors bound to a name are listed in the "me" lane.
    """
    from ..tensors.base import ChainLayer
    from ..tensors.pointer import PointerTensor, _live_refs
    from ..workers.registry import all_workers

    names_by_obj: dict[int, list[str]] = {}
    held_in: dict[int, list[str]] = {}  # pointer id -> container paths (data["bob"])
    local_named: list = []
    if namespace:
        from ..plans import Plan, PlanPointer

        for name, value in list(namespace.items()):
            if name.startswith("_"):
                continue
            if isinstance(value, Plan):
                if value.id not in names_by_obj:
                    local_named.append((value.id, value))
                names_by_obj.setdefault(value.id, []).append(name)
                continue
            if isinstance(value, PlanPointer):
                names_by_obj.setdefault(value._ref.pointer_id, []).append(name)
                continue
            if not isinstance(value, torch.Tensor):
                continue
            if isinstance(value, PointerTensor):
                names_by_obj.setdefault(value._ref.pointer_id, []).append(name)
            else:
                key = value.id if isinstance(value, ChainLayer) else None
                if key is None:
                    from ..ids import tensor_id

                    key = tensor_id(value)
                if key not in names_by_obj:
                    local_named.append((key, value))
                names_by_obj.setdefault(key, []).append(name)
        for path, value in container_items(namespace):
            ref = value.__dict__.get("_ref") if isinstance(value, torch.Tensor) else getattr(value, "_ref", None)
            if ref is not None and hasattr(ref, "pointer_id"):
                held_in.setdefault(ref.pointer_id, []).append(path)

    workers = []
    for w in all_workers():
        try:
            objects = w.summary()
            state = w.state
            error = None
        except Exception as e:  # an unreachable worker still gets its lane
            objects, state, error = [], "unreachable", str(e)
        lane = {"id": w.id, "kind": w.kind, "state": state, "objects": objects}
        if error:
            lane["error"] = error
        if w.id == LOCAL_OWNER:
            refs = sorted((r for r in list(_live_refs) if r.owner_id == LOCAL_OWNER and not r.released),
                          key=lambda r: r.pointer_id)
            lane["objects"] = ([_local_pointer_entry(r) for r in refs] + objects
                               + [{"id": key, **object_meta(t), "names": []} for key, t in local_named])
        for o in lane["objects"]:
            key = o.get("pointer_id", o["id"]) if o.get("kind") == "pointer" else o["id"]
            o["names"] = sorted(names_by_obj.get(key, ()))
            if o.get("kind") == "pointer" and key in held_in and w.id == LOCAL_OWNER:
                o["held_in"] = sorted(held_in[key])[:3]
        workers.append(lane)
    return {"schema": "syft_lab.world", "version": SCHEMA_VERSION, "workers": workers}


class World(dict):
    """The value of ``sy.world()``: the snapshot dict, printed as a table."""

    def __repr__(self):
        from .text import render_world

        return render_world(self)

    def to_dict(self) -> dict:
        return dict(self)


def world(namespace: dict | None = None) -> World:
    if namespace is None:
        namespace = _notebook_namespace()
    return World(world_dict(namespace))


def _notebook_namespace():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    ip = get_ipython()
    return ip.user_ns if ip is not None else None
