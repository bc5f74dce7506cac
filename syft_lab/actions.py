"""Named actions that the views ask the kernel to run: send, get, move (and oplog, a read).

A view names an action and gives ids taken from the model it was shown. Every field of the
request, every id, worker and variable name is checked against that model and against the
runtime *before* anything changes; nothing from the browser is ever evaluated. A refused or
failed action returns an error reply and leaves the runtime and the namespace as they were.

    reply = perform(request, known=index.lookup, namespace=get_ipython().user_ns)

The model says which actions an object offers (every node and world entry carries
``actions``, computed once in Python by syft_lab/tensors/nodes.py from what its layer declares);
a request for an action the entry does not list is refused before anything else is checked.

A request (a JSON object from the browser)::

    {"type": "action", "req": 7, "action": "send",
     "target": {"worker": "me", "id": 123456789}, "worker": "bob", "name": "x_ptr"}

``target`` names an object of the model: ``worker`` is the lane it is in ("me" for this
process), ``id`` its id there. ``worker`` is the destination of send and move; ``name``, when
given, is the notebook variable the result is bound to (default: ``x_ptr`` for ``x`` on send,
``x`` for ``x_ptr`` on get, the pointer's own name on move).

Names: no action binds a builtin (``print``), a name IPython keeps in the notebook
(``get_ipython``, ``In``, ``Out``, ``exit``, ``display``...), a keyword or a name with a leading
underscore (``_``, ``_i3``, ``_oh`` are IPython's too).
A name the request gives is bound like an assignment. A default name never replaces a binding
to something else: when ``x_ptr`` holds another object, the result is bound to ``x_ptr_2``
(then ``x_ptr_3``...) and the reply's code line says why (``x_ptr_2 = x.send(bob)  # x_ptr is
taken by another PointerTensor``). A default may replace the object acted on (move rebinds the
pointer's name), a pointer that points to nothing any more, and, on get, the object the pointer
was sent from by a send action (the round trip ``x -> x_ptr -> x``) while ``x`` still holds
that very tensor, unchanged since (its version counter): after ``x.add_(10)``, get binds
``x_2`` and says why, so the round trip never destroys data.
"""
from __future__ import annotations

import builtins
import keyword
import re
import weakref
from typing import Callable, Iterable

import torch

from .errors import SyftError
from .commands import LOCAL_OWNER
from .ids import short as _short
from .ids import tensor_id
from .tensors.base import ChainLayer
from .tensors.logging import LoggingTensor
from .tensors.nodes import is_edge
from .tensors.pointer import PointerTensor, mark_left
from .workers.registry import all_workers

ACTIONS = ("send", "get", "move", "oplog")  # and the actions layers declare (node_actions)


def mutates(action) -> bool:
    """Whether an action may change the runtime (every one but the reads)."""
    return isinstance(action, str) and action != "oplog"
_MAX_ID = 2 ** 53
_WORKER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_REQ_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
# A layer's own action (``node_actions``: "float_precision", "refresh"): a method of the layer
# it declares, called with no argument; never any other name (checked against the class).
_LAYER_ACTION_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_KEYS = {"type", "req", "action", "target", "worker", "name"}
_DOWN_STATES = {"unreachable", "closed", "gone", "error", "stopped"}  # "disconnected" reconnects
OPLOG_LIMIT = 500  # the newest records an oplog reply carries

Lookup = Callable[[str, int], "dict | None"]


class ActionError(SyftError):
    """A request the kernel refuses: malformed, unknown id or worker, or not possible now."""


# --- parsing: the shape of the request, before anything is looked up ---------------------

def _req_of(msg):
    req = msg.get("req") if isinstance(msg, dict) else None
    if isinstance(req, bool):
        return None
    if isinstance(req, int) and 0 <= req < _MAX_ID:
        return req
    if isinstance(req, str) and _REQ_RE.match(req):
        return req
    return None


def _check_id(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < _MAX_ID:
        raise ActionError(f"{what} must be a positive integer id below 2**53, got {value!r:.40}")
    return value


def _check_worker(value, what: str) -> str:
    if not isinstance(value, str) or not _WORKER_RE.match(value):
        raise ActionError(f"{what} must be a worker id such as 'bob', got {value!r:.40}")
    return value


def check_name(name, namespace=None) -> str:
    """A variable name the kernel may bind: an identifier, no keyword, no leading underscore
    (so no dunder), and no builtin (binding ``print`` would hide the builtin from the notebook)."""
    if (not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name)
            or name.startswith("_") or len(name) > 64 or not name.isascii()):
        raise ActionError(f"{name!r:.40} is not a name an action can bind: use a Python identifier "
                          f"without a leading underscore, such as x_ptr")
    if name in IPYTHON_NAMES:
        raise ActionError(f"{name!r} is a name IPython keeps in the notebook: binding it would break the "
                          f"notebook (its magics, its history); choose another name, such as my_{name}")
    if _is_builtin(name, namespace):
        raise ActionError(f"{name!r} is a Python builtin: binding it would hide the builtin from the "
                          f"notebook; choose another name, such as my_{name}")
    return name


# What IPython puts in a notebook's namespace or builtins without a leading underscore. Its
# builtins (get_ipython, display) exist only while a cell runs, so an action between cells
# would not see them as builtins; the underscore names (_, __, _i, _ih, _oh, _dh, _5) are
# refused with every private name.
IPYTHON_NAMES = frozenset({"get_ipython", "In", "Out", "exit", "quit", "display", "dreload"})


def _is_builtin(name: str, namespace=None) -> bool:
    # a namespace may carry its own __builtins__ (a module or a dict)
    extra = (namespace or {}).get("__builtins__")
    extra = vars(extra) if hasattr(extra, "__dict__") and not isinstance(extra, dict) else extra
    return hasattr(builtins, name) or (isinstance(extra, dict) and name in extra)


def parse(msg) -> dict:
    """The validated request: {action, req, worker, id, dest, name}. Raises ActionError."""
    if not isinstance(msg, dict):
        raise ActionError(f"an action request is a JSON object, got {type(msg).__name__}")
    extra = set(msg) - _KEYS
    if extra:
        raise ActionError(f"unknown field(s) in action request: {', '.join(sorted(map(str, extra)))[:80]}")
    if msg.get("type", "action") != "action":
        raise ActionError(f"not an action request (type {msg.get('type')!r:.40})")
    if "req" in msg and _req_of(msg) is None:
        raise ActionError(f"req must be a short string or a non-negative integer, got {msg['req']!r:.40}")
    action = msg.get("action")
    if action not in ACTIONS and not (isinstance(action, str) and _LAYER_ACTION_RE.match(action)):
        raise ActionError(f"unknown action {action!r:.40} (known: {', '.join(ACTIONS)}, and what a layer offers)")
    target = msg.get("target")
    if not isinstance(target, dict) or set(target) != {"worker", "id"}:
        raise ActionError("target must be an object with exactly the fields worker and id")
    out = {"action": action, "req": _req_of(msg),
           "worker": _check_worker(target["worker"], "target.worker"),
           "id": _check_id(target["id"], "target.id"), "dest": None, "name": None}
    dest = msg.get("worker")
    if action in ("send", "move"):
        out["dest"] = _check_worker(dest, f"the destination of {action}")
    elif dest is not None:
        raise ActionError(f"{action} takes no destination worker")
    name = msg.get("name")
    if name is not None:
        if action == "oplog":
            raise ActionError("oplog binds no name")
        out["name"] = check_name(name)
    return out


# --- finding the objects the model names --------------------------------------------------

def object_key(obj):
    """The id the inspection model gives ``obj`` (without assigning one to a plain tensor)."""
    keys = object_keys(obj)
    return keys[0] if keys else None


def object_keys(obj) -> list:
    """Every id a model may know ``obj`` by: a pointer's pointer id (world view) and its
    layer id (chain view), a tensor's syft id, a plan's id. Assigns no id to a plain tensor."""
    keys = []
    ref = getattr(obj, "__dict__", {}).get("_ref") if isinstance(obj, torch.Tensor) else getattr(obj, "_ref", None)
    if ref is not None and hasattr(ref, "pointer_id"):
        keys.append(ref.pointer_id)
    d = getattr(obj, "__dict__", None)
    if isinstance(obj, torch.Tensor):
        if d is not None and d.get("_syft_id") is not None:
            keys.append(d["_syft_id"])
    elif hasattr(obj, "_inspection_nodes"):
        i = getattr(obj, "id", None)
        if isinstance(i, int):
            keys.append(i)
    return keys


def _candidates(namespace, held):
    """Values the views may act on: public names first, then private ones and what the views
    hold; never the weak proxies that ``_``/``Out`` keep of a shown object (not the object)."""
    items = sorted((namespace or {}).items(), key=lambda kv: kv[0].startswith("_"))
    seen = set()
    for value in [v for _k, v in items] + list(held or ()):
        if type(value) in weakref.ProxyTypes:
            continue
        if id(value) not in seen:
            seen.add(id(value))
            yield value


def find_local(obj_id: int, namespace, held=()):
    """The local object (tensor, layer, pointer) whose model id is ``obj_id``, if any."""
    for value in _candidates(namespace, held):
        if isinstance(value, torch.Tensor) or hasattr(value, "_inspection_nodes"):
            try:
                if obj_id in object_keys(value):
                    return value
            except Exception:
                continue
    return None


def names_of(obj, namespace) -> list[str]:
    """The public notebook variables bound to exactly this object."""
    return sorted(k for k, v in list((namespace or {}).items()) if v is obj and not k.startswith("_"))


def _find_pointer_to(worker_id: str, obj_id: int, namespace, held=()):
    """A live local pointer (to a tensor or a plan) to object ``obj_id`` on ``worker_id``."""
    for value in _candidates(namespace, held):
        ref = value.__dict__.get("_ref") if isinstance(value, torch.Tensor) else getattr(value, "_ref", None)
        if ref is None or not hasattr(ref, "location") or not hasattr(value, "get"):
            continue
        if not ref.released and ref.location.id == worker_id and ref.id == obj_id:
            return value
    return None


def _live_worker(worker_id: str, what: str):
    for w in all_workers():
        if w.id == worker_id:
            try:
                state = w.state
            except Exception as e:
                raise ActionError(f"worker {worker_id!r} is unreachable: {e}") from None
            if state in _DOWN_STATES:
                raise ActionError(f"worker {worker_id!r} is {state}: {what} is not possible now")
            return w
    raise ActionError(f"no worker named {worker_id!r} (it was closed, or never existed)")


def _still_stored(worker, obj_id: int) -> bool:
    objects = getattr(worker, "objects", None)
    if isinstance(objects, dict):
        return obj_id in objects
    try:
        worker.describe(obj_id)
        return True
    except Exception:
        return False


def _worker_expr(worker, namespace) -> str:
    for k, v in list((namespace or {}).items()):
        if v is worker and not k.startswith("_"):
            return k
    return f"sy.get_worker({worker.id!r})"


_SENT_FROM = "_syft_sent_from"  # on a pointer a send action made: its source, as a _Source


class _Source:
    """The tensor a send action sent (weakly) and its version counter then: get may rebind its
    name only while the name still holds that very tensor, unchanged (no in-place op since)."""

    __slots__ = ("ref", "version")

    def __init__(self, tensor: torch.Tensor):
        self.ref = weakref.ref(tensor)
        self.version = tensor._version

    def is_unchanged(self, value) -> bool:
        return value is self.ref() and value._version == self.version

    def changed(self, value) -> bool:
        """``value`` is the tensor that was sent, changed in place since."""
        return value is self.ref() and value._version != self.version


def _ref_of(value):
    return value.__dict__.get("_ref") if isinstance(value, torch.Tensor) else getattr(value, "_ref", None)


def _may_take(value, res: "_Resolved", action: str) -> bool:
    """Whether a default name may be rebound from ``value``: the object acted on, a pointer
    that points to nothing any more, or (get) the object the pointer was sent from."""
    if value is res.obj:
        return True
    ref = _ref_of(value)
    if ref is not None and getattr(ref, "released", False):
        return True
    if action == "get":
        plan = getattr(res.obj, "plan", None)  # a PlanPointer knows the Plan it was sent from
        if plan is not None and value is plan:
            return True
        source = _source_of(res.obj)
        if source is not None and source.is_unchanged(value):
            return True
    return False


def _source_of(obj) -> "_Source | None":
    source = obj.__dict__.get(_SENT_FROM) if isinstance(obj, torch.Tensor) else None
    return source if isinstance(source, _Source) else None


def _free_default(base: str, res: "_Resolved", action: str, namespace) -> tuple[str, str | None]:
    """``base``, or base_2, base_3... when base is a builtin or bound to something else; and
    the reason when it is not base."""
    if base in IPYTHON_NAMES:
        why = f"{base} is IPython's"
    elif _is_builtin(base, namespace):
        why = f"{base} is a Python builtin"
    elif base in namespace and not _may_take(namespace[base], res, action):
        source = _source_of(res.obj) if action == "get" else None
        if source is not None and source.changed(namespace[base]):  # the round trip must not lose data
            why = f"{base} changed since it was sent (an in-place op): kept as it is"
        else:
            why = f"{base} is taken by another {type(namespace[base]).__name__}"
    else:
        return base, None
    for n in range(2, 10_000):
        name = f"{base}_{n}"
        if name not in namespace or _may_take(namespace[name], res, action):
            return name, why
    raise ActionError(f"no free name like {base}_2: give the action a name")


class _Resolved:
    """What an action works on: the object (or pointer to it) and how to name it."""

    def __init__(self, obj, expr: str, names: list[str], stored_at=None):
        self.obj = obj
        self.expr = expr  # how the code line refers to it
        self.names = names
        self.stored_at = stored_at  # (worker, id) when the target is an object in a worker's store


def _resolve(p: dict, entry: dict, namespace, held) -> _Resolved:
    worker_id, obj_id = p["worker"], p["id"]
    stored = worker_id != LOCAL_OWNER or "refcount" in entry
    if not stored:
        obj = find_local(obj_id, namespace, held)
        if obj is None:
            raise ActionError(f"object {_short(obj_id)} is no longer bound in the notebook "
                              f"(it was deleted or rebound); run the cell again")
        if isinstance(obj, PointerTensor) and obj._ref.released:
            raise ActionError(f"pointer {_short(obj_id)} is stale: its object left "
                              f"{obj.location.id!r} (fetched or moved)")
        names = names_of(obj, namespace)
        return _Resolved(obj, names[0] if names else f"<{type(obj).__name__} {_short(obj_id)}>", names)
    # an object in a worker's store: act through a pointer to it
    worker = _live_worker(worker_id, p["action"])
    if not _still_stored(worker, obj_id):
        raise ActionError(f"worker {worker_id!r} no longer holds object {_short(obj_id)} "
                          f"(it was fetched, moved or deleted meanwhile)")
    ptr = _find_pointer_to(worker_id, obj_id, namespace, held)
    if ptr is not None:
        names = names_of(ptr, namespace)
        return _Resolved(ptr, names[0] if names else f"<pointer to {worker_id}:{_short(obj_id)}>", names,
                         stored_at=(worker, obj_id))
    meta = {k: entry[k] for k in ("kind", "shape", "dtype", "name") if k in entry}
    if meta.get("kind") not in ("plan",) and ("shape" not in meta or "dtype" not in meta):
        raise ActionError(f"object {_short(obj_id)} on {worker_id!r} has no shape or dtype in the model")
    try:
        ptr = worker._pointer_to(obj_id, meta, owning=False)
    except Exception as e:
        raise ActionError(f"cannot reach object {_short(obj_id)} on {worker_id!r}: {e}") from None
    return _Resolved(ptr, f"<object {_short(obj_id)} on {worker_id}>", [], stored_at=(worker, obj_id))


def _default_name(action: str, res: _Resolved, p: dict, namespace) -> tuple[str, str | None]:
    if res.names:
        base = res.names[0]
    elif res.stored_at is not None:
        base = f"obj_{_short(p['id'])}"
    else:
        base = f"t_{_short(p['id'])}"
    if action == "send":
        base = f"{base}_ptr"
    elif action == "get":
        base = base.removesuffix("_ptr") or base
    return _free_default(base, res, action, namespace)


def result_ref(obj) -> dict:
    """Where the result of an action is, as model ids (for the view to highlight it)."""
    if isinstance(obj, PointerTensor):
        ref = obj._ref
        return {"worker": LOCAL_OWNER, "id": ref.pointer_id, "kind": PointerTensor.kind,
                "location": ref.location.id, "id_at_location": ref.id}
    key = object_key(obj)
    if key is None and isinstance(obj, torch.Tensor):
        key = tensor_id(obj)
    kind = obj.kind if isinstance(obj, ChainLayer) else "tensor" if isinstance(obj, torch.Tensor) \
        else getattr(obj, "kind", type(obj).__name__.lower())
    return {"worker": LOCAL_OWNER, "id": key, "kind": kind}


# --- running ---------------------------------------------------------------------------------

def perform(msg, *, known: Lookup, namespace: dict | None, held: Iterable = ()) -> dict:
    """Validate and run one action request; always returns a reply dict (never raises)."""
    req = _req_of(msg)
    try:
        p = parse(msg)
        entry = known(p["worker"], p["id"])
        if entry is None:
            raise ActionError(f"unknown object {p['id']} on {p['worker']!r}: it is not in this view's "
                              f"model (the view may be out of date)")
        offered = entry.get("actions") or []  # an entry that lists none offers nothing
        if p["action"] not in offered:  # the kernel's model says what it offers
            what = entry.get("type", entry.get("kind"))
            if entry.get("dangling"):
                raise ActionError(f"{what} {_short(p['id'])} points to {entry.get('location')!r}, which is closed "
                                  f"or down: {p['action']} is not possible now")
            if p["worker"] != LOCAL_OWNER:  # a row of a closed worker's lane (it lists what it still holds)
                _live_worker(p["worker"], p["action"])
            if p["action"] in ("get", "move") and p["worker"] == LOCAL_OWNER and "refcount" not in entry and not is_edge(entry):
                why = f"{p['action']} works on a pointer or on an object on a worker, not on a local {what}"
            else:
                why = f"{p['action']} is not offered on {what} {_short(p['id'])}"
            raise ActionError(f"{why} (it offers: {', '.join(offered) or 'nothing'})")
        ns = namespace if namespace is not None else {}
        reply = _run(p, entry, ns, list(held))
        reply.update(ok=True, req=req, action=p["action"])
        return reply
    except SyftError as e:  # an ActionError, or the runtime refused (e.g. the worker went away)
        return {"ok": False, "req": req, "error": str(e)}
    except Exception as e:  # an unexpected failure is still only an error reply
        return {"ok": False, "req": req, "error": f"{type(e).__name__}: {e}"}


def _run(p: dict, entry: dict, ns: dict, held: list) -> dict:
    action = p["action"]
    kind = entry.get("kind")
    if action == "oplog":
        return _oplog(p, entry, ns, held)
    if action not in ACTIONS or (action == "get" and p["worker"] == LOCAL_OWNER and "refcount" not in entry
                                 and not is_edge(entry)):
        return _layer_action(p, entry, ns, held)

    if action == "send":
        if p["worker"] != LOCAL_OWNER or "refcount" in entry:
            raise ActionError("send copies a local object to a worker; an object on a worker moves with "
                              "'move' or comes back with 'get'")
        if p["dest"] == LOCAL_OWNER:
            raise ActionError("send needs another worker than 'me'")
        dest = _live_worker(p["dest"], "send")
    elif action == "move":
        if p["dest"] == LOCAL_OWNER:
            raise ActionError("move sends an object between workers; use 'get' to bring it here")
        dest = _live_worker(p["dest"], "move")
    else:
        dest = None
    if action in ("get", "move") and p["worker"] == LOCAL_OWNER and "refcount" not in entry and not is_edge(entry):
        raise ActionError(f"{action} works on a pointer or on an object on a worker, "
                          f"not on a local {entry.get('type', kind)}")

    # everything is checked before anything changes: the name too
    res = _resolve(p, entry, ns, held)
    name, note = p["name"], None
    if name is not None:
        check_name(name, ns)  # the request's own name: rebound like an assignment
    else:
        name, note = _default_name(action, res, p, ns)
    obj = res.obj

    if action == "send":
        if getattr(getattr(obj, "_ref", None), "location", None) is dest:
            raise ActionError(f"{res.expr} already points to {dest.id!r}")
        result = dest.send(obj)
        if isinstance(result, torch.Tensor) and not isinstance(obj, PointerTensor):
            result.__dict__[_SENT_FROM] = _Source(obj)  # so that get may bring it back to its name
        code = f"{name} = {res.expr}.send({_worker_expr(dest, ns)})"
    elif action == "get":
        if not hasattr(obj, "get"):
            raise ActionError(f"a {type(obj).__name__} cannot be fetched")
        where = (obj.location, obj.id_at_location) if hasattr(obj, "location") else None
        result = obj.get()
        if where is not None:
            mark_left(*where, how="fetched")
        code = f"{name} = {res.expr}.get()"
    else:  # move
        if not isinstance(obj, PointerTensor):
            raise ActionError(f"a {type(obj).__name__} cannot be moved from a view")
        if obj.location is dest:
            raise ActionError(f"the object is on {dest.id!r} already")
        where = (obj.location, obj.id_at_location)
        result = obj.move(dest)
        mark_left(*where, how="moved", to=dest.id)
        if _SENT_FROM in obj.__dict__:  # still the pointer x was sent to
            result.__dict__[_SENT_FROM] = obj.__dict__[_SENT_FROM]
        code = f"{name} = {res.expr}.move({_worker_expr(dest, ns)})"
    ns[name] = result
    reply = {"name": name, "code": code if note is None else f"{code}  # {note}", "result": result_ref(result)}
    if note is not None:
        reply["note"] = note
    return reply


def _layer_action(p: dict, entry: dict, ns: dict, held: list) -> dict:
    """An action a layer declares in ``node_actions`` (``fx.float_precision()``, ``sx.refresh()``,
    ``sx.get()`` of a shared tensor): its method, called with no argument on the object held
    here; the result is bound like any action's (``x`` for get, else ``<name>_<action>``)."""
    action = p["action"]
    if p["worker"] != LOCAL_OWNER or "refcount" in entry:
        raise ActionError(f"{action} acts on an object held in this notebook")
    if p["dest"] is not None:
        raise ActionError(f"{action} takes no destination worker")
    if action not in (entry.get("actions") or ()):
        raise ActionError(f"{action} is not offered on {entry.get('type', entry.get('kind'))} {_short(p['id'])}")
    obj = find_local(p["id"], ns, held)
    if obj is None:
        raise ActionError(f"object {_short(p['id'])} is no longer bound in the notebook "
                          f"(it was deleted or rebound); run the cell again")
    if action not in getattr(type(obj), "node_actions", ()) or not callable(getattr(type(obj), action, None)):
        raise ActionError(f"a {type(obj).__name__} offers no {action}")
    names = names_of(obj, ns)
    part_of = _module_path_of(obj, ns) if action == "get" and not names else None
    expr = names[0] if names else part_of or f"<{type(obj).__name__} {_short(p['id'])}>"
    res = _Resolved(obj, expr, names)
    name, note = p["name"], None
    if name is not None:
        check_name(name, ns)
    else:
        base = names[0] if names else _path_name(part_of) if part_of else f"t_{_short(p['id'])}"
        base = (base.removesuffix("_ptr") or base) if action == "get" else f"{base}_{action}"
        name, note = _free_default(base, res, action, ns)
    if part_of is not None:
        # a parameter (or buffer) of a model the notebook holds: getting it would take its shares
        # (or its data) from the workers and leave the model unable to run. Reconstruct a copy:
        # each party copies its share (a local op), the copies are sent; the model keeps its own.
        if not hasattr(obj, "detach") or not hasattr(obj, "clone"):
            raise ActionError(f"{part_of} is part of a model: fetching it would break the model, and a "
                              f"{type(obj).__name__} cannot be copied first")
        result = obj.detach().clone().get()
        call = ".detach().clone().get()"
        note = (note + "; " if note else "") + f"a copy: {part_of.split('.')[0].split('[')[0]} keeps its own"
    else:
        result = getattr(obj, action)()
        call = f".{action}()"
    ns[name] = result
    code = f"{name} = {res.expr}{call}"
    reply = {"name": name, "code": code if note is None else f"{code}  # {note}", "result": result_ref(result)}
    if note is not None:
        reply["note"] = note
    return reply


_MODULE_DEPTH = 8  # submodules deep a model's path is looked for


def _module_path_of(obj, ns) -> str | None:
    """The Python path of ``obj`` as a parameter or buffer of a module bound in the notebook
    (``cnn[0].weight``), or None. Reads the modules' own dicts (``_modules``, ``_parameters``,
    ``_buffers``): runs no code of theirs."""
    def walk(module, path, depth):
        d = getattr(module, "__dict__", {})
        for table in ("_parameters", "_buffers"):
            for k, v in (d.get(table) or {}).items():
                if v is obj:
                    return f"{path}.{k}"
        if depth >= _MODULE_DEPTH:
            return None
        for k, sub in (d.get("_modules") or {}).items():
            if isinstance(sub, torch.nn.Module):
                found = walk(sub, f"{path}[{k}]" if k.isdigit() else f"{path}.{k}", depth + 1)
                if found:
                    return found
        return None

    for k, v in list((ns or {}).items()):
        if not k.startswith("_") and isinstance(v, torch.nn.Module):
            found = walk(v, k, 0)
            if found:
                return found
    return None


def _path_name(path: str) -> str:
    """A variable name from a module path: ``cnn[0].weight`` -> ``cnn_0_weight``."""
    return re.sub(r"_+", "_", re.sub(r"[^0-9A-Za-z_]", "_", path)).strip("_")


def _oplog(p: dict, entry: dict, ns: dict, held: list) -> dict:
    obj = None
    if p["worker"] == LOCAL_OWNER and "refcount" not in entry:
        obj = find_local(p["id"], ns, held)
        if obj is None:  # a layer inside a displayed chain: search the held chains
            obj = _find_layer(p["id"], ns, held)
    else:
        worker = _live_worker(p["worker"], "oplog")
        core = getattr(worker, "core", None)  # only in-process workers show their logs
        if core is None:
            raise ActionError(f"the op log of an object on {worker.id!r} stays there; "
                              f"the view shows its last ops")
        obj = core.objects.get(p["id"])
    if obj is None:
        raise ActionError(f"LoggingTensor {_short(p['id'])} is no longer here")
    if not isinstance(obj, LoggingTensor):
        raise ActionError(f"oplog reads the op log of a LoggingTensor, not of a {type(obj).__name__}")
    records = list(obj.log)
    return {"total": len(records), "log": [r.to_dict() for r in records[-OPLOG_LIMIT:]]}


def _find_layer(obj_id: int, ns, held):
    for value in _candidates(ns, held):
        layer = value
        depth = 0
        while isinstance(layer, ChainLayer) and depth < 32:
            if layer.__dict__.get("_syft_id") == obj_id:
                return layer
            layer = layer.__dict__.get("child")
            depth += 1
    return None
