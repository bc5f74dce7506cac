"""The inspection model: pure functions from runtime state to JSON-ready dicts.

Every view (text reprs, the widget, the lab sidebar, the magics) renders these dicts and
none recomputes them. The schema is in docs/inspection-model.md; bump SCHEMA_VERSION when
a field changes meaning or goes away.
"""
from __future__ import annotations

import html
import itertools
import weakref

import torch
from torch import nn

from ..dtypes import dtype_name
from ..ids import tensor_id
from ..notebook import notebook_namespace
from ..tensors import nodes as _nodes
from ..tensors.base import ChainLayer
from ..tensors.nodes import (LOCAL_OWNER, SCHEMA_VERSION, entry_actions, flatten, is_edge, live_edge, object_meta,
                             offered, tree_from_list)
from ..plans import Plan, PlanPointer
from ..tensors.pointer import PointerTensor, _live_refs, pointer_state
from ..tensors.registry import iter_chain
from ..workers.ledger import ledger_reply
from ..workers.registry import all_workers
from .explain import explain_dict
from .text import chain_lines, render_world

WORLD_VERSION = 1  # the world snapshot kept its shape (new fields are optional)
WORLD_HEADER = {"schema": "syft_lab.world", "version": WORLD_VERSION}  # every world description starts so


class Chain:
    """The inspection model of one chain: a tree from ``root`` (``to_dict()`` for the views);
    ``nodes`` is the tree depth first (for a plain chain: head first, down to the data)."""

    def __init__(self, root, subject=None):
        self.root = tree_from_list(root)
        try:  # the object it describes, weakly (a view of it may act on it; the model never keeps it)
            self._subject = weakref.ref(subject) if subject is not None else None
        except TypeError:
            self._subject = None

    @property
    def subject(self):
        """The object this chain was made from, while it is alive (else None)."""
        return self._subject() if self._subject is not None else None

    @property
    def nodes(self) -> list[dict]:
        return flatten(self.root)

    @property
    def head(self) -> dict:
        return self.root

    def to_dict(self) -> dict:
        return {"schema": "syft_lab.chain", "version": SCHEMA_VERSION, "root": self.root}

    def __repr__(self):
        return "\n".join(chain_lines(self.root))

    def _repr_html_(self):
        """The same tree in a notebook (and in an exported one): one layer a line."""
        text = html.escape("\n".join(chain_lines(self.root)))
        return f'<pre class="syft-chain-text" style="line-height:1.35">{text}</pre>'

    def __len__(self):
        return len(self.nodes)


def chain(obj) -> Chain:
    """The inspection model of ``obj``'s chain (a tensor, a layer, a pointer or a plan)."""
    if isinstance(obj, Chain):
        return obj
    return Chain(_nodes.chain_nodes(obj), obj)


# --- the world: every worker, its objects, and the pointers between them -------------------

CONTAINER_BUDGET = 5000  # items of notebook containers and modules a world snapshot looks into
CONTAINER_ITEMS = 1000  # items looked at in one container: a huge list leaves budget to the others
CONTAINER_DEPTH = 3  # fds['bob'].data, data["bob"][0], model.fc.weight at most
# IPython's own names: its output cache (Out[10][0] would name a pointer) and input history.
IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})


def public_name(name) -> bool:
    """A name a person gave: no ``_``, ``_5``, ``__``, ``_i3`` (IPython's cache) and no ``Out``."""
    return type(name) is str and not name.startswith("_") and name not in IPYTHON_NAMES


def is_named_target(value) -> bool:
    """A tensor, a plan or a pointer: what a notebook name can stand for in the views. By the
    value's type only (``isinstance`` would ask a dead weak proxy for its ``__class__``)."""
    t = type(value)
    return issubclass(t, (torch.Tensor, Plan, PlanPointer))


def _sub_items(value):
    """(path suffix, item) of a container, module or object a view may look into, read without
    calling its overridable methods (a dict subclass's ``items``, a list's ``__iter__``): a
    user's object never runs code because a view looked at it."""
    t = type(value)
    if issubclass(t, dict):
        return ((f"[{k!r}]", v) for k, v in dict.items(value) if type(k) in (str, int))
    if issubclass(t, (list, tuple)):
        return ((f"[{i}]", v) for i, v in enumerate((list if issubclass(t, list) else tuple).__iter__(value)))
    if issubclass(t, nn.Module):  # segment_1.0.weight: the module's qualified names
        return _module_items(value)
    if issubclass(t, torch.optim.Optimizer):  # the parameters it updates (shared ones too)
        return _optimizer_items(value)
    parts = getattr(t, "_inspection_items", None)  # a syft object saying what it holds (datasets)
    if callable(parts):
        return parts(value)
    return ()


def _module_items(module):
    for prefix, m in nn.Module.named_modules(module):
        for store in (m.__dict__.get("_parameters") or {}, m.__dict__.get("_buffers") or {}):
            for name, v in dict.items(store):
                if v is not None:
                    yield (f".{prefix}.{name}" if prefix else f".{name}"), v


def _optimizer_items(opt):
    for g, group in enumerate(opt.__dict__.get("param_groups") or ()):
        params = dict.get(group, "params") if issubclass(type(group), dict) else None
        for i, v in enumerate(params if issubclass(type(params), list) else ()):
            yield f".param_groups[{g}]['params'][{i}]", v


def container_items(namespace: dict | None):
    """(path, value) of the tensors, pointers and plans held inside the notebook's containers,
    modules and datasets (``data['bob']``, ``ptrs[0]``, ``segment_1.0.weight``,
    ``fds['bob'].data``): a pointer held there is named by its path. Bounded (CONTAINER_BUDGET
    items in all, CONTAINER_ITEMS of one container, CONTAINER_DEPTH levels, each container once: cycles end), and it never raises,
    whatever lives in the namespace (an object that fails to be read is skipped)."""
    budget = [CONTAINER_BUDGET]
    seen: set[int] = set()

    def walk(path, value, depth):
        if id(value) in seen:
            return
        seen.add(id(value))
        try:
            for suffix, v in itertools.islice(_sub_items(value), CONTAINER_ITEMS):
                budget[0] -= 1
                if budget[0] < 0:
                    return
                sub = path + suffix
                if is_named_target(v):
                    yield sub, v
                elif depth < CONTAINER_DEPTH:
                    yield from walk(sub, v, depth + 1)
        except Exception:  # a container changed while read, a broken object: what was read stays
            return

    for name, value in list((namespace or {}).items()):
        if public_name(name) and not is_named_target(value) and type(value) not in _OPAQUE:
            yield from walk(name, value, 1)
        if budget[0] < 0:
            return


_OPAQUE = frozenset(weakref.ProxyTypes) | {weakref.ref}


class Names:
    """Who in the notebook names what: variables bound to pointers (by pointer id), local
    tensors and plans (by id), and the container paths that hold pointers (``data["bob"]``)."""

    def __init__(self, namespace: dict | None):
        self.by_obj: dict[int, list[str]] = {}
        self.held_in: dict[int, list[str]] = {}  # pointer id -> container paths
        self.local: list = []  # (id, value) of local tensors and plans bound to a name
        # pointer id -> ((worker, id), what its layer tells it (child_fields), the layer's name):
        # the pointers below the layers the notebook holds (by a name, in a container, as a
        # parameter) that their layer marks, as a shared tensor marks its shares
        self.parts: dict = {}
        self._stored_parts: dict | None = None
        if not namespace:
            return
        for name, value in list(namespace.items()):
            if public_name(name) and is_named_target(value):
                try:
                    self._name(name, value)
                except Exception:  # an object that cannot be read is not named: the view still renders
                    continue
        for path, value in container_items(namespace):
            try:
                self._hold(path, value)
            except Exception:
                continue

    def _name(self, name: str, value) -> None:
        by_obj = self.by_obj
        t = type(value)
        if issubclass(t, Plan):
            if value.id not in by_obj:
                self.local.append((value.id, value))
            by_obj.setdefault(value.id, []).append(name)
        elif issubclass(t, (PointerTensor, PlanPointer)):
            by_obj.setdefault(value._ref.pointer_id, []).append(name)
        else:
            key = value.id if issubclass(t, ChainLayer) else tensor_id(value)
            if key not in by_obj:
                self.local.append((key, value))
                if issubclass(t, ChainLayer):
                    self._note_parts(value, name)
            by_obj.setdefault(key, []).append(name)

    def _hold(self, path: str, value) -> None:
        """A tensor, pointer or plan inside a container, module or dataset, at ``path``."""
        ref = value.__dict__.get("_ref") if issubclass(type(value), torch.Tensor) else getattr(value, "_ref", None)
        if ref is not None and hasattr(ref, "pointer_id"):
            self.held_in.setdefault(ref.pointer_id, []).append(path)
        elif issubclass(type(value), ChainLayer):  # a shared parameter, a shared tensor in a list
            self._note_parts(value, path)

    @property
    def stored_parts(self) -> dict:
        """(worker, id) -> the fields of the stored object a marked pointer points to (what its
        layer tells it, and ``secret``: the layer's name): a stored share is a plain tensor, only
        the layer above its pointer knows (computed on first use)."""
        if self._stored_parts is None:
            self._stored_parts = {}
            for (loc, obj_id), told, holder in self.parts.values():
                self._stored_parts.setdefault((loc, obj_id), {**told, "secret": holder})
        return self._stored_parts

    def _note_parts(self, layer, holder: str) -> None:
        """The pointers a layer in ``layer``'s chain tells something (``child_fields``: a shared
        tensor's shares, wherever it is held: a name, a list, a module's parameter): what they
        are told, and the name of the layer the notebook holds."""
        for t in iter_chain(layer):
            if not isinstance(t, ChainLayer):
                continue
            for i, c in enumerate(t.layer_children()):
                ref = c.__dict__.get("_ref")
                if ref is None or not hasattr(ref, "pointer_id") or ref.pointer_id in self.parts:
                    continue
                told = {k: v for k, v in t.child_fields(i).items() if k != "annotations"}  # chain nodes only
                if told:
                    self.parts[ref.pointer_id] = ((ref.location.id, ref.id), told, holder)

    def names(self, key) -> list[str]:
        return sorted(self.by_obj.get(key, ()))

    def bound(self, pointer_id: int) -> bool:
        """Whether a variable or a container still names this pointer."""
        return pointer_id in self.by_obj or pointer_id in self.held_in


def local_pointer_entry(ref) -> dict:
    """The row of one of the notebook's pointers in the "me" lane. A pointer whose object was
    fetched or moved away (``state: "gone"``) says what became of it when its ref knows
    (``gone_how``: "fetched", "moved" or "deleted"; ``gone_to``: where a move took it)."""
    entry = {"id": ref.pointer_id, "kind": PointerTensor.kind,
             "type": "PlanPointer" if ref.target_kind == "plan" else "PointerTensor",
             "location": ref.location.id, "id_at_location": ref.id, "owning": ref.owning,
             "state": pointer_state(ref), "names": []}
    if ref.shape is not None:
        entry.update(shape=list(ref.shape), dtype=dtype_name(ref.dtype))
    if entry["state"] == "gone":
        how, to = getattr(ref, "gone_how", None), getattr(ref, "gone_to", None)
        if how:
            entry["gone_how"] = how
        if to:
            entry["gone_to"] = to
    return entry


def local_pointers(names: Names) -> list:
    """The notebook's pointers the "me" lane lists, by id: live ones, and those gone (fetched
    or moved away) while a variable or container still names them (a persistent "gone" row)."""
    return sorted((r for r in list(_live_refs) if r.owner_id == LOCAL_OWNER
                   and (not r.released or names.bound(r.pointer_id))), key=lambda r: r.pointer_id)


def finish_entry(lane_id: str, o: dict, names: Names) -> dict:
    """An entry with the names the notebook gives it and the actions a view offers on it."""
    edge = is_edge(o)
    key = o.get("pointer_id", o["id"]) if edge else o["id"]
    o["names"] = names.names(key)
    if lane_id == LOCAL_OWNER and edge and key in names.held_in:
        o["held_in"] = sorted(names.held_in[key])[:3]
    part = None  # what a layer the notebook holds tells this row's object (a share: its secret)
    if lane_id == LOCAL_OWNER and edge and key in names.parts:
        _loc, told, holder = names.parts[key]
        part = {**told, "secret": holder}  # the layer this pointer is part of, by its name
    elif lane_id != LOCAL_OWNER and names.parts:
        part = names.stored_parts.get((lane_id, o["id"]))
    if part is not None:  # its values never are in the world; it moves with its layer only
        for k, v in part.items():
            o.setdefault(k, v)
        o["actions"] = []
        return o
    o["actions"] = entry_actions(lane_id, o)
    return o


# --- a worker's ledger in its lane (syft_lab/workers/ledger.py) -----------------------------------
LEDGER_VIEW = 40  # the newest records a lane carries for its panel (worker.ledger() has every kept one)
_VIEW_FIELDS = ("seq", "kind", "direction", "peer", "peer_kind", "bytes", "cell", "id", "op", "items")
_IN_PROCESS = ("local", "virtual")
_ledger_views: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # worker -> (version, view)


def ledger_view(reply: dict) -> dict:
    """The ``ledger`` entry of a lane from a ledger reply: its newest records (no times), totals
    by kind and direction, a crypto provider's material by item. Sizes and names, never a value."""
    records = []
    for r in reply["records"][-LEDGER_VIEW:]:
        v = {k: r[k] for k in _VIEW_FIELDS if r.get(k) is not None}
        if r.get("mine") and r.get("peer_kind") == "client":
            v["peer"] = LOCAL_OWNER
        records.append(v)
    totals = {}
    for kind, direction, count, nbytes in reply["totals"]:
        totals[f"{kind} {direction}"] = [count, nbytes]
    return {"records": records, "seq": reply["seq"], "dropped": reply["dropped"], "cap": reply["cap"],
            "totals": totals, "material": dict(reply.get("material") or {}), "scope": reply.get("scope", "all")}


def _ledger_of(w, read: bool):
    """A lane's ledger view: an in-process worker's read now (cached while it is unchanged); a
    remote worker's read when its lane is (``read``, one round trip), else the last one read."""
    service = getattr(w, "service", None) if getattr(w, "kind", None) in _IN_PROCESS else None
    if service is not None:
        cached = _ledger_views.get(w)
        if cached is not None and cached[0] == service.ledger.version:
            return cached[1]
        view = ledger_view(ledger_reply(w, limit=LEDGER_VIEW))
        _ledger_views[w] = (service.ledger.version, view)
        return view
    if read:
        try:
            view = ledger_view(ledger_reply(w, limit=LEDGER_VIEW))
        except Exception:  # a worker without a ledger (an older one), or one that is down
            view = None
        _ledger_views[w] = (None, view)
        return view
    cached = _ledger_views.get(w)
    return cached[1] if cached is not None else None


def lane_header(w, read_ledger: bool = False) -> dict:
    """A worker's lane without its objects: id, kind, state, where a Ray worker runs, and its
    ledger (``read_ledger``: a remote worker's is read again, else the last one read)."""
    try:
        state = w.state
    except Exception:
        state = "unreachable"
    lane = {"id": w.id, "kind": w.kind, "state": state}
    node = getattr(w, "node", None)
    if isinstance(node, str) and node:
        lane["node"] = node
    if state not in ("closed", "dead", "unreachable"):
        try:
            view = _ledger_of(w, read_ledger)
        except Exception:  # a view never fails for a worker's record
            view = None
        if view is not None:
            lane["ledger"] = view
    return lane


def lane_of(w, names: Names, namespace_objects: bool = True) -> dict:
    """One worker's lane: its header and every object it holds (one summary: one round trip
    for a remote worker); for "me", the notebook's pointers and named local objects first."""
    lane = lane_header(w, read_ledger=True)
    try:
        objects = w.summary()
    except Exception as e:  # an unreachable worker still gets its lane
        objects = []
        state = getattr(w, "state", None)  # read after the failure: a killed Ray actor is "dead" now
        lane["state"] = state if state in ("dead", "restarting", "closed") else "unreachable"
        lane["error"] = str(e)
    local = []
    if w.id == LOCAL_OWNER:
        objects = [local_pointer_entry(r) for r in local_pointers(names)] + objects
        local = [e for e in (_safe_local_entry(key, t, names) for key, t in names.local) if e is not None]
    mark_plan_state(objects)
    lane["objects"] = [finish_entry(w.id, o, names) for o in objects] + local
    return lane


def mark_plan_state(objects: list) -> None:
    """The tensors a stored plan runs on (its state, sent with it) say so: ``state_of`` is the
    plan's name and ``state_of_id`` its id, so a view shows "state of train_step", not a
    tensor nobody named (which reads as leaked model weights)."""
    plans = {i: o for o in objects if o.get("kind") == "plan" for i in o.get("state_ids") or ()}
    if not plans:
        return
    for o in objects:
        plan = plans.get(o.get("id"))
        if plan is not None and o is not plan:
            o["state_of"] = plan.get("name") or "a plan"
            o["state_of_id"] = plan["id"]


def local_entry(key: int, t, names: Names) -> dict:
    """A local tensor, layer or plan bound to a notebook name: a layer offers what it declares."""
    o = finish_entry(LOCAL_OWNER, {"id": key, **object_meta(t), "names": []}, names)
    if isinstance(t, ChainLayer):
        for layer in iter_chain(t):  # what the layers below say of themselves (a fixed precision
            if isinstance(layer, ChainLayer) and layer is not t:  # tensor over a shared one)
                for k, v in layer.world_fields().items():
                    o.setdefault(k, v)
        if o.get("distributed"):  # a value held by nobody, in pieces on these workers
            try:  # what reconstructing it takes (the world view's "Explain"): names and ids only
                label = (o.get("names") or o.get("held_in") or [None])[0]
                o["explain"] = explain_dict(t, label)
            except Exception:  # a view never fails for a value it cannot explain
                pass
        o["actions"] = offered(type(t).node_actions, o, held=True)
    return o


def _safe_local_entry(key: int, t, names: Names) -> dict | None:
    """A named local object's row, or None when the object cannot be read (a tensor subclass
    of the user's whose metadata raises): a view never fails for what a notebook holds."""
    try:
        return local_entry(key, t, names)
    except Exception:
        return None


# --- workers that went away: one rule for every view (the tracker applies it per change) ---------
DOWN_STATES = ("closed", "unreachable", "gone", "error", "stopped")


def gone_lane(worker_id: str, kind) -> dict:
    """The header of the lane of a worker that went away (closed, whatever its kind) while
    pointers still point to it: greyed; it goes once no pointer does. Its objects:
    ``gone_lane_objects``."""
    return {"id": worker_id, "kind": kind, "state": "closed", "gone": True}


def gone_lane_objects(worker, names: Names) -> list[dict]:
    """The rows of a worker that went away: what it still holds, when this process can tell
    without a request (a closed worker takes none): an in-process worker's store, which keeps
    its objects until the pointers that own them are dropped, so the lane's count is true. A
    remote worker's: none (its session ended with the close and released what it held for this
    client). No row offers an action: every request to a closed worker is refused."""
    read = getattr(worker, "world_entries", None)
    if read is None:
        return []
    try:
        entries = read()
    except Exception:  # a view never fails for a worker that went away
        return []
    mark_plan_state(entries)
    rows = [finish_entry(worker.id, o, names) for o in entries]
    for o in rows:
        o["actions"] = []
    return rows


def lane_is_down(header: dict) -> bool:
    return bool(header.get("gone")) or header.get("state") in DOWN_STATES


def pointer_targets(lanes) -> set:
    """The workers the pointer rows of ``lanes`` (lane dicts) point to."""
    return {o.get("location") for lane in lanes for o in lane.get("objects", ())
            if live_edge(o)}


def mark_dangling(entry: dict, down: set, names: Names, lane_id: str) -> dict:
    """``entry`` (a row) with ``dangling`` and no actions if it is a pointer to a worker in
    ``down``, without them otherwise; the same dict if nothing changes."""
    if not live_edge(entry):
        return entry
    dangling = entry.get("location") in down
    if dangling == bool(entry.get("dangling")):
        return entry
    new = dict(entry)
    if dangling:
        new["dangling"], new["actions"] = True, []
        return new
    new.pop("dangling", None)
    return finish_entry(lane_id, new, names)


def world_dict(namespace: dict | None = None) -> dict:
    """One JSON-ready snapshot of every known worker, its objects and the local pointers.

    With ``namespace`` (a notebook's globals), objects gain the variable names bound to them
    and local tensors bound to a name are listed in the "me" lane. A worker that went away while
    pointers point to it keeps a gone lane, and those pointers dangle (``gone_lane``).
    """
    names = Names(namespace)
    workers = all_workers()
    lanes = [lane_of(w, names) for w in workers]
    present = {w.id for w in workers}
    gone = {r.location.id: r.location for r in local_pointers(names) if r.location.id not in present}
    lanes += [{**gone_lane(lid, getattr(gone.get(lid), "kind", None)),
               "objects": gone_lane_objects(gone.get(lid), names)} for lid in sorted(pointer_targets(lanes) - present)]
    down = {lane["id"] for lane in lanes if lane_is_down(lane)}
    for lane in lanes:
        lane["objects"] = [mark_dangling(o, down, names, lane["id"]) for o in lane["objects"]]
    return {**WORLD_HEADER, "workers": lanes}


class World(dict):
    """The value of ``sy.world()``: the snapshot dict, printed as a table."""

    def __repr__(self):
        return render_world(self)

    def to_dict(self) -> dict:
        return dict(self)


def world(namespace: dict | None = None) -> World:
    if namespace is None:
        namespace = notebook_namespace()
    return World(world_dict(namespace))


