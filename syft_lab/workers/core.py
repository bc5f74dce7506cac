"""WorkerCore: one worker's object store, reference counts and command handling, free of I/O.

A VirtualWorker calls it directly; the websocket server decodes messages and calls the same
methods, so the semantics cannot drift between in-process and remote workers.
"""
from __future__ import annotations

import torch

from .. import events
from ..errors import ObjectNotFoundError, RemoteError, SyftError
from ..ids import new_id

_Tensor = torch.Tensor
_seq = (list, tuple)


class Ref:
    """A reference to an object in a worker's store, as it appears in command arguments."""

    __slots__ = ("id",)

    def __init__(self, obj_id: int):
        self.id = obj_id

    def __repr__(self):
        return f"Ref({self.id})"


class NewObject:
    """A command result that the worker stored: its id and the metadata a pointer needs."""

    __slots__ = ("id", "shape", "dtype")

    def __init__(self, obj_id, shape, dtype):
        self.id, self.shape, self.dtype = obj_id, shape, dtype


class SameAsArg:
    """A command result that is one of the command's own arguments (in-place and out= ops)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def object_kind(obj) -> str:
    from ..tensors.base import ChainLayer

    if isinstance(obj, ChainLayer):
        return obj.kind
    if isinstance(obj, _Tensor):
        return "tensor"
    return getattr(obj, "kind", type(obj).__name__.lower())


class WorkerCore:
    def __init__(self, worker_id: str):
        self.id = worker_id
        self.objects: dict[int, object] = {}
        self.refcounts: dict[int, int] = {}

    # --- store -------------------------------------------------------------------------
    def store(self, obj, obj_id: int | None = None, refcount: int = 1) -> int:
        if obj_id is None:
            obj_id = new_id()
        elif obj_id in self.objects:
            raise SyftError(f"worker {self.id!r} already holds an object with id {obj_id}")
        self.objects[obj_id] = obj
        self.refcounts[obj_id] = refcount
        from ..tensors.pointer import PointerTensor

        if isinstance(obj, PointerTensor):
            obj._ref.owner_id = self.id
        events.emit("stored", self.id, obj_id)
        return obj_id

    def lookup(self, obj_id: int):
        try:
            return self.objects[obj_id]
        except KeyError:
            raise ObjectNotFoundError(self.id, obj_id) from None

    def fetch(self, obj_id: int):
        """Remove an object and hand it over (get and move): its pointers are now stale."""
        obj = self.lookup(obj_id)
        del self.objects[obj_id]
        self.refcounts.pop(obj_id, None)
        events.emit("deleted", self.id, obj_id, reason="fetched")
        return obj

    def incref(self, obj_id: int) -> None:
        self.lookup(obj_id)
        self.refcounts[obj_id] += 1

    def decref(self, obj_id: int) -> None:
        """One owning pointer is gone; the last one deletes the object. Unknown ids are ignored:
        the object was fetched or moved already, and that is not the dropping pointer's fault."""
        n = self.refcounts.get(obj_id)
        if n is None:
            return
        if n > 1:
            self.refcounts[obj_id] = n - 1
            return
        del self.refcounts[obj_id]
        obj = self.objects.pop(obj_id)
        events.emit("deleted", self.id, obj_id, reason="released")
        del obj  # a stored pointer releases its own target here

    # --- commands ----------------------------------------------------------------------
    def _resolve(self, a):
        if isinstance(a, Ref):
            try:
                return self.objects[a.id]
            except KeyError:
                raise ObjectNotFoundError(self.id, a.id) from None
        if type(a) in _seq:
            return [self._resolve(b) for b in a]
        return a

    def run(self, op, args, kwargs):
        """Run ``op`` (an aten OpOverload) on stored objects; store and describe its results."""
        objects = self.objects
        resolved = []
        for a in args:
            if isinstance(a, Ref):
                try:
                    resolved.append(objects[a.id])
                except KeyError:
                    raise ObjectNotFoundError(self.id, a.id) from None
            elif type(a) in _seq:
                resolved.append(self._resolve(a))
            else:
                resolved.append(a)
        try:
            if kwargs:
                out = op(*resolved, **{k: self._resolve(v) for k, v in kwargs.items()})
            else:
                out = op(*resolved)
        except SyftError:
            raise
        except Exception as e:  # the op's own error, reported without a traceback
            raise RemoteError(self.id, type(e).__name__, str(e)) from None
        if isinstance(out, _Tensor):
            return self._result(out, resolved)
        if type(out) in _seq:
            return type(out)(self._result(o, resolved) if isinstance(o, _Tensor) else o for o in out)
        return out

    def _result(self, out, resolved):
        for i, a in enumerate(resolved):
            if out is a:
                return SameAsArg(i)
        obj_id = new_id()
        self.objects[obj_id] = out
        self.refcounts[obj_id] = 1
        if events._subscribers:
            events.emit("stored", self.id, obj_id)
        return NewObject(obj_id, out.shape, out.dtype)

    def search(self, query: tuple[str, ...]) -> list[int]:
        """Ids of objects whose tags (or description words) contain every query term."""
        terms = [q for q in query if q]
        found = []
        for obj_id, obj in self.objects.items():
            d = getattr(obj, "__dict__", {})
            tags = set(d.get("tags", ()))
            desc = (d.get("description") or "").lower()
            if all(t in tags or (not t.startswith("#") and t.lower() in desc) for t in terms):
                found.append(obj_id)
        return found

    def describe(self, obj_id: int) -> list[dict]:
        """The inspection-model nodes of a stored object's chain. Values stay private."""
        from ..inspect.model import chain_nodes

        nodes = chain_nodes(self.lookup(obj_id), owner=self.id, with_values=False)
        nodes[0]["id"] = obj_id  # a stored object is known by its id in the store
        return nodes

    def summary(self) -> list[dict]:
        """One entry per stored object, for the world view."""
        from ..inspect.model import object_entry

        return [object_entry(obj_id, obj, self.id, self.refcounts.get(obj_id, 0))
                for obj_id, obj in list(self.objects.items())]
