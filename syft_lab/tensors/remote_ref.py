"""References to remote objects: what a pointer holds, and every one alive in this process.

A RemoteRef is a pointer's hold on one object on a worker (its id there, where it is, whether
dropping it releases the object); ``mark_left`` makes every ref to an object that left its worker
(``.get()``, ``.move()``) stale at once; ``pointer_state`` says what a view shows for one. Split from
pointer.py, which makes and dispatches the pointers that hold these.
"""
from __future__ import annotations

import functools
import weakref

from .. import events
from ..commands import Ref, current_holder
from ..ids import ID_BITS
from ..ids import _rand as _id_random

# id(ref) -> weakref of every live RemoteRef; a ref leaves in its own __del__. (A WeakSet ran
# Python code in its add and in a removal callback: ~0.5 us of every pointer op.)
_live: dict[int, weakref.ref] = {}
_weakref = weakref.ref
_new_id = functools.partial(_id_random.getrandbits, ID_BITS)  # ids.new_id without its frame (``or 1``)
_holder = current_holder.get


class RemoteRef(Ref):
    """A pointer's hold on one remote object. Dropping the last owning one releases the object."""

    __slots__ = ("location", "owning", "released", "pointer_id", "owner_id", "target_kind", "shape", "dtype",
                 "meta", "helper", "gone_how", "gone_to", "__weakref__")

    def __init__(self, location, obj_id: int, owning: bool, target_kind: str = "tensor", shape=None, dtype=None,
                 meta: int = -1):
        self.id = obj_id
        self.target_kind = target_kind
        self.shape, self.dtype = shape, dtype  # known for tensor targets; sy.batch needs them
        self.meta = meta  # the interned (shape, stride, offset, dtype) of the remote tensor (strides.py)
        self.helper = False  # made by a composite op from no user data (composite.py)
        self.location = location
        self.owning = owning
        self.released = False
        self.gone_how = self.gone_to = None  # once released by mark_left: "fetched"/"moved", where to
        self.pointer_id = _new_id() or 1  # the id of the pointer holding this ref, for the views
        self.owner_id = _holder()  # the worker holding that pointer
        _live[id(self)] = _weakref(self)

    def __del__(self, _forget=_live.pop, _events=events):
        # (bound as defaults: a ref collected while the interpreter shuts down, after this
        # module's globals are cleared, would raise here and print "Exception ignored")
        _forget(id(self), None)
        if _events._subscribers:
            try:
                _events.emit("pointer_dropped", self.owner_id, self.pointer_id,
                            location=self.location.id, id_at_location=self.id)
            except Exception:
                pass
        if self.owning and not self.released:
            self.released = True
            try:
                self.location._release(self.id)
            except Exception:  # the worker may be gone, or the interpreter shutting down
                pass


class _LiveRefs:
    """Every live RemoteRef (iterate it); held weakly in ``_live``, by ``id``."""

    __slots__ = ()

    def __iter__(self):
        for w in list(_live.values()):
            ref = w()
            if ref is not None:
                yield ref

    def __len__(self):
        return len(_live)


_live_refs = _LiveRefs()


def newest_live_refs():
    """Every live RemoteRef, newest first (the order they were made, reversed): a scan for the
    refs made since some known one stops at it (widget/tracker.py)."""
    for w in reversed(list(_live.values())):
        ref = w()
        if ref is not None:
            yield ref


def mark_left(location, obj_id: int, how: str | None = None, to: str | None = None) -> None:
    """The object left ``location`` (get or move): every pointer to it is stale now, not only
    the one that was used, and none of them may release it again. ``how`` ("fetched",
    "moved", "deleted") and ``to`` (the worker it moved to) are kept on the refs for the views."""
    for ref in list(_live_refs):
        if ref.id == obj_id and ref.location is location:
            ref.released = True
            ref.gone_how, ref.gone_to = how, to


def pointer_state(ref) -> str:
    """'ok', 'gone' (the object was fetched or moved away) or the worker's state when it is down."""
    if ref.released:
        return "gone"
    try:
        state = ref.location.state
    except Exception:
        return "unreachable"
    return "closed" if state == "closed" else "ok"
