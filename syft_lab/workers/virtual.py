"""VirtualWorker: a worker in this process, used exactly like a remote one.

It is the same client (protocol.py) and the same service (service.py) as a worker process;
only the transport differs: ``InProcessTransport`` hands the service the client's message
dicts directly, with no byte encoding, but with everything else a remote worker does (the
allow-list and argument checks, the store rule, sessions, paging). Pointer ops and releases,
the hot path, skip even the message dict: the worker's ``_run``/``_release`` are the service's
lean path (``FastPaths.lean_ops``, fastpath.py: the same checks, errors, session references, ledger records and events as
a ``run`` message; tests/workers/test_in_process_path.py). What the wire format would
do to a message, it does by hand: a payload the client still owns is copied into the worker's
store (``stored_copy``), and a reply that would share memory with the store is copied out.

Differences a user can see, on purpose: an in-process worker has no quotas (it shares the
notebook's memory), releases apply at once (a dropped pointer frees its object now, not with
the next request), and ``close()`` forgets the worker but leaves its objects to the pointers
that still own them (the client cannot drop off, so there is no session to end). It reaches
the other workers of this process, so it may hold pointers to their objects
(``x.send(bob).send(alice)``).

Closed, it takes no request, as every closed worker (base.py, ``closed_error``): the closed
transport refuses every message, and the in-process shortcuts past the message (the pointers'
lean op path, reading the service's ledger) go at the close, so nothing reaches the service
but releases. Its lane still lists what it holds (``world_entries``: read in process, no request).
"""
from __future__ import annotations

import functools

import torch

from ..commands import current_holder
from ..tensors.base import ChainLayer
from ..tensors.nodes import object_entry
from ..tensors.pointer import PointerTensor
from ..tensors.registry import iter_chain, stored_copy
from . import registry
from .base import BaseWorker, check_worker_id, closed_error
from .protocol import Transport, WorkerClient
from .connection import ServiceConnection
from .service import Session, WorkerService


_set_holder, _reset_holder = current_holder.set, current_holder.reset


def _contiguous(obj):
    """``obj`` as the wire would deliver it: every tensor in its chain contiguous (a pointer's
    wrapper describes an object that arrived by send or move as contiguous). A copy only where
    one is not contiguous already."""
    if type(obj) is torch.Tensor:
        return obj if obj.layout is not torch.strided or obj.is_contiguous() else obj.contiguous()
    if isinstance(obj, ChainLayer) and not isinstance(obj, PointerTensor) and any(
            not t.is_contiguous() for t in iter_chain(obj) if type(t) is torch.Tensor and t.layout is torch.strided):
        new = obj.stored_copy(_contiguous)
        d = obj.__dict__
        if "tags" in d:
            new.tags = set(d["tags"])
        if "description" in d:
            new.description = d["description"]
        return new
    return obj


def reachable_in_process(location) -> bool:
    """The ``reach`` of an in-process worker: any live worker registered in this process."""
    return (isinstance(location, BaseWorker) and registry.lookup(location.id) is location
            and location.state != "closed")


class InProcessTransport(Transport):
    """Calls one in-process WorkerService with the message dicts themselves (no encoding):
    ``exchange`` only (its client sends nothing ahead; a submitted request runs at once).

    Requests run while the worker's id is the current holder (``syft_lab.commands.held_by``):
    a pointer made by an op the worker runs on a pointer it stores is held by the worker."""

    in_process = True

    def __init__(self, service: WorkerService):
        self.service = service
        self.session = Session()  # this process is the service's one client
        self.connection = ServiceConnection(service, self.session)  # answers every request (connection.py)
        self.holder = service.core.id
        self._result = self.connection.result
        self._closed = False
        # a dropped pointer frees its object now (a release may come inside another command:
        # the core's decref is safe there, as a pointer's __del__ always was)
        self.release_now = functools.partial(service.release_one, self.session)

    def open(self) -> dict:
        return self.connection.result({"c": "hello"})

    def exchange(self, msg: dict, *, detach: bool = False, label=None):
        if self._closed:  # every request of a closed in-process worker comes here (VirtualWorker.close)
            raise closed_error(self.holder)
        o = msg.get("o")
        if detach or (o is not None and isinstance(o, torch.Tensor)):
            token = _set_holder(self.holder)
            try:
                if detach:  # the payload is still the caller's: the store gets its own copy
                    if o is not None:
                        msg["o"] = _contiguous(stored_copy(o))
                    s = msg.get("s")
                    if s:
                        msg["s"] = [stored_copy(t) for t in s]
                else:  # a move between in-process workers
                    msg["o"] = _contiguous(o)
            finally:
                _reset_holder(token)
        return self._result(msg, self.holder)

    def close(self, done: bool = True) -> None:
        self._closed = True  # the objects stay: the pointers that own them release them

    @property
    def state(self) -> str:
        return "closed" if self._closed else "in-process"


class VirtualWorker(WorkerClient):
    """An in-process worker: its own object store, used exactly like a remote one."""

    kind = "virtual"

    def __init__(self, worker_id: str, *, data=()):
        """``data``: tensors the worker holds from the start (PySyft's ``VirtualWorker(data=...)``),
        as ``load`` does: found by their tags, kept when no pointer names them."""
        check_worker_id(worker_id)
        self._service = WorkerService(worker_id, unlimited=True, reach=reachable_in_process)
        super().__init__(worker_id, InProcessTransport(self._service))
        # the lean in-process path of every pointer op and every dropped pointer: the service's
        # (FastPaths.lean_ops, a fast-path policy), called by the pointers as the worker's own methods
        self._run, self._release = self._service.policy.lean_ops(self.transport.session, self)
        for t in (data,) if isinstance(data, torch.Tensor) else data:
            self.load(t)

    @property
    def service(self) -> WorkerService | None:
        """The worker's service, which in-process readers (its ledger, the views) call directly;
        None once the worker is closed: then nothing reaches it but through a request, refused."""
        return None if self.transport.state == "closed" else self._service

    def close(self) -> None:
        """Forget this worker and refuse every later request to it (``closed_error``); its
        objects stay until the pointers that own them are dropped (releases still go)."""
        super().close()
        # the lean op path goes: a pointer op takes the request path, which the closed transport
        # refuses (releases keep theirs: a dropped pointer still frees its object)
        self.__dict__.pop("_run", None)

    def _receive_from(self, source, obj_id, requires_grad, keep_source=False):
        # refused before the source is asked: an in-process move takes the object out of the
        # source's store first, and it would be lost with the refusal
        if self.transport.state == "closed":
            raise closed_error(self.id)
        return super()._receive_from(source, obj_id, requires_grad, keep_source)

    @property
    def core(self):
        """The worker's WorkerCore (its store, reference counts and held data)."""
        return self._service.core

    @property
    def objects(self) -> dict:
        """The store: object id -> object (read in process, closed or not)."""
        return self._service.core.objects

    def world_entries(self) -> list[dict]:
        """The world view's rows of every stored object, read in process (no request): what
        the lane of a closed in-process worker lists, since it keeps its objects until their
        pointers are dropped."""
        return self._service.core.summary()

    def world_entry(self, obj_id: int) -> dict | None:
        """The world view's row of one stored object (what a summary page says of it), or
        None if the worker does not store it: read in process, as its events arrive."""
        core = self._service.core
        obj = core.objects.get(obj_id)
        if obj is None:
            return None
        return object_entry(obj_id, obj, core.id, core.refcounts.get(obj_id, 0), obj_id in core.held)

    def __repr__(self):
        return f"<{type(self).__name__} {self.id!r}: {len(self.objects)} object(s)>"


class LocalWorker(VirtualWorker):
    """``sy.local_worker`` ("me"): the notebook's own worker, owner of local pointers."""

    kind = "local"
