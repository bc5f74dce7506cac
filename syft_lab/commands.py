"""The command types every package shares: what a command names and what it returns.

A leaf module (stdlib only), so tensors, wire, plans and workers can all import it without an
import circle: tensors build ``Ref`` arguments and read ``NewObject``/``SameAsArg`` results,
the wire format encodes them, the worker service produces them.

- ``Ref(id)``: an argument that names an object in the worker's store;
- ``NewObject(id, shape, dtype)``: a result the worker stored, with what a pointer needs;
- ``SameAsArg(index)``: a result that is one of the command's own arguments (in-place, out=);
- ``current_holder`` / ``held_by(worker_id)``: which worker is running code right now.
  Pointers created meanwhile are held by it: a pointer made by an op that a worker runs on a
  pointer it stores (``x.send(bob).send(alice)``, then ``y = p + p``) lives in that worker's
  store, not in this process, and the views draw it in that worker's lane.
- the worker registry (``register``, ``unregister``, ``lookup``, ``get_worker``,
  ``all_workers``): every known worker by id, what worker ids in commands and pointers resolve
  to (``syft_lab.workers.registry`` is the same functions).
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar

from .errors import SyftError, UnknownWorkerError

__all__ = ["LOCAL_OWNER", "NewObject", "Ref", "SameAsArg", "all_workers", "current_holder", "get_worker", "held_by",
           "lookup", "register", "unregister"]


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

    def __repr__(self):
        return f"NewObject({self.id}, {tuple(self.shape)}, {self.dtype})"


class SameAsArg:
    """A command result that is one of the command's own arguments (in-place and out= ops)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self):
        return f"SameAsArg({self.index})"


LOCAL_OWNER = "me"  # the one name of the notebook's own worker: the holder of pointers made outside any worker

current_holder: ContextVar[str] = ContextVar("syft_lab_current_holder", default=LOCAL_OWNER)


@contextlib.contextmanager
def held_by(worker_id: str):
    """Pointers created inside this block are held by ``worker_id``."""
    token = current_holder.set(worker_id)
    try:
        yield
    finally:
        current_holder.reset(token)


# --- the worker registry ----------------------------------------------------------------------

_workers: dict = {}


def register(worker) -> None:
    """Make ``worker`` known under its id (a new worker with an id in use takes its place)."""
    _workers[worker.id] = worker


def unregister(worker) -> None:
    if _workers.get(worker.id) is worker:
        del _workers[worker.id]


def lookup(worker_id: str):
    """The worker known under ``worker_id``, or None."""
    return _workers.get(worker_id)


def get_worker(worker_id: str):
    try:
        return _workers[worker_id]
    except KeyError:
        known = ", ".join(sorted(_workers)) or "none"
        raise UnknownWorkerError(f"no worker named {worker_id!r} (known workers: {known})") from None


def all_workers() -> list:
    return list(_workers.values())
