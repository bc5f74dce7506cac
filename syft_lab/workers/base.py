"""BaseWorker: what users call on a worker, the same for in-process and remote ones.

The worker is the primitive that sends: ``bob.send(x)`` returns a pointer and leaves ``x``
alone (``x.send(bob)`` is the same call). The client protocol (protocol.py, WorkerClient)
implements the underscored methods as requests to the worker's service.

``worker.datasets`` (the datasets it holds, by name) is added by the federated package
(federated/datasets.py), which sits above workers.

A worker is an identity, not a value: copying one (``copy.copy``, ``copy.deepcopy``, as
``copy.deepcopy(model)`` does to a module that names its location) gives the worker itself.

A closed worker (``worker.close()``, any kind) takes no more requests: a send, an op, a get, a
search, its ledger are refused with ``closed_error`` (one wording for every kind, nothing is
sent). Releases are not requests and still go: a pointer dropped after the close frees its
object (an in-process worker keeps its objects until then; a remote worker's session ended
with the close and released what it held for this client).
"""
from __future__ import annotations

import re

import torch

from ..dtypes import parse_dtype
from ..commands import all_workers, lookup
from ..errors import SyftError, SyftTypeError, UnknownWorkerError, WorkerUnavailableError
from ..plans.plan import Plan
from ..plans.pointer import PlanPointer
from ..tensors.pointer import PointerTensor, RemoteHandle, mark_left
from ..tensors.transfer import SendWithGrad

_ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")

def check_worker_id(worker_id) -> str:
    if not isinstance(worker_id, str) or not _ID_RE.match(worker_id):
        raise SyftError(f"a worker id is a short name such as 'bob' (letters, digits, _ . -), got {worker_id!r}")
    return worker_id


class WorkerClosedError(WorkerUnavailableError):
    """A request to a worker after its ``close()``: refused before anything is sent."""


def closed_error(worker_id: str) -> WorkerClosedError:
    """The refusal of every request to a closed worker, word for word the same for every kind
    (VirtualWorker, worker process, Ray worker): it names the worker and says it was closed."""
    return WorkerClosedError(f"worker {worker_id!r} was closed; make a new worker to reconnect")


class BaseWorker:
    kind = "worker"
    _batch = None  # a sy.batch recorder while a batch block is open

    def __init__(self, worker_id: str):
        self.id = check_worker_id(worker_id)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    # --- what users call --------------------------------------------------------------
    def send(self, obj, *, requires_grad: bool | None = None):
        """Copy ``obj`` (a tensor, a chain or a pointer) to this worker; returns a pointer to it."""
        if not isinstance(obj, torch.Tensor):
            sender = getattr(obj, "_send_to", None)  # plans and modules know how to send themselves
            if sender is not None:
                return sender(self)
            raise SyftTypeError(f"{self.id}.send expects a tensor, a chain, a plan or an nn.Module, "
                            f"got {type(obj).__name__}")
        if isinstance(obj, PointerTensor):
            obj._check_alive()
        elif obj.grad_fn is not None and requires_grad is None:
            # a result with history: the pointer stays in its graph (backward fetches the gradient)
            return SendWithGrad.apply(obj, self)
        rg = obj.requires_grad if requires_grad is None else requires_grad
        ptr = self._send_copy(obj, requires_grad=rg)
        if obj.grad is not None and not isinstance(obj, PointerTensor) and rg:
            ptr.grad = self._send_copy(obj.grad, requires_grad=False)  # as .to() keeps a leaf's grad
        return ptr

    def _send_copy(self, obj, requires_grad: bool):
        obj_id = self._store_copy(obj)
        return PointerTensor(self, obj_id, obj.shape, obj.dtype, requires_grad=requires_grad)

    def load(self, obj, *, tags=(), description: str | None = None):
        """Leave data on this worker, held by the worker itself, as a data owner does.

        Unlike ``send``, no pointer owns the copy: it stays when every pointer is gone, and
        ``search`` finds it by its tags (PySyft's ``x.tag("#boston").send(bob)`` without
        keeping the pointer). Returns a pointer that does not own it; ``unload`` removes it.
        A built plan is left the same way: ``bob.load(plan)`` is ``plan.send(bob, keep=True)``."""
        if isinstance(obj, Plan):
            return obj.send(self, keep=True)
        if not isinstance(obj, torch.Tensor) or isinstance(obj, PointerTensor):
            raise SyftError(f"{self.id}.load takes a tensor or a LoggingTensor, got {type(obj).__name__}")
        if isinstance(tags, str):
            tags = (tags,)
        if not all(isinstance(t, str) and t for t in tags):
            raise SyftError(f"tags are non-empty strings such as '#data', got {tags!r}")
        if description is not None and not isinstance(description, str):
            raise SyftError(f"a description is a string, got {type(description).__name__}")
        d = obj.__dict__
        all_tags = sorted(set(d.get("tags", ())) | set(tags))
        obj_id = self._load(obj, all_tags, description if description is not None else d.get("description"))
        return PointerTensor(self, obj_id, obj.shape, obj.dtype, owning=False)

    def unload(self, pointer) -> None:
        """Remove an object this worker holds (see ``load``); every pointer to it turns stale."""
        if not isinstance(pointer, RemoteHandle) or pointer.location is not self:
            raise SyftError(f"{self.id}.unload takes a pointer to an object on {self.id}")
        pointer._check_alive()
        self._discard(pointer.id_at_location)
        mark_left(self, pointer.id_at_location)

    def search(self, *query: str) -> list:
        """Pointers to the objects whose tags contain every query term (e.g. ``"#data"``).

        These pointers do not own the objects: dropping them deletes nothing. PySyft's
        ``search(["#a", "#b"])`` (a list of tags) means the same as ``search("#a", "#b")``."""
        if len(query) == 1 and isinstance(query[0], (list, tuple)):
            query = tuple(query[0])
        if not query or not all(isinstance(q, str) for q in query):
            raise SyftError(f"search takes one or more tags such as '#data', got {query!r}")
        return [self._pointer_to(obj_id, meta, owning=False) for obj_id, meta in self._search(query)]

    def _pointer_to(self, obj_id, meta, owning):
        kind = meta.get("kind")
        if kind == "plan":
            return PlanPointer(self, obj_id, meta, owning=owning)
        ptr = PointerTensor(self, obj_id, meta["shape"], parse_dtype(meta["dtype"]), owning=owning)
        # what the worker says about the data, as PySyft's search results told it
        ptr.tags = set(meta.get("tags") or ())
        ptr.description = meta.get("description")
        return ptr

    # --- what the client protocol implements (protocol.py) ---------------------------------
    def _store_copy(self, obj) -> int: ...
    def _receive_from(self, source, obj_id: int, requires_grad: bool, keep_source: bool = False): ...
    def _copy_out(self, obj_id: int): ...
    def _load(self, obj, tags: list, description: str | None) -> int: ...
    def _discard(self, obj_id: int) -> None: ...
    def _run(self, func, args, kwargs): ...
    def _fetch(self, obj_id: int): ...
    def _release(self, obj_id: int) -> None: ...
    def _incref(self, obj_id: int) -> None: ...
    def _search(self, query) -> list: ...
    def describe(self, obj_id: int) -> dict: ...


def resolve_worker(worker, what: str = "a worker") -> BaseWorker:
    """``worker`` itself, or the known worker with that id (PySyft code names workers by id:
    ``model.send("alice")``); an unknown id is an UnknownWorkerError naming the known ones."""
    if isinstance(worker, BaseWorker):
        return worker
    if isinstance(worker, str):
        found = lookup(worker)
        if found is None:
            known = ", ".join(sorted(w.id for w in all_workers())) or "none yet: sy.VirtualWorker('bob') makes one"
            raise UnknownWorkerError(f"no worker named {worker!r} (known workers: {known})")
        return found
    raise SyftTypeError(f"{what} is a worker (sy.VirtualWorker, sy.WebSocketWorker, sy.RayWorker) or its id, "
                        f"got {type(worker).__name__}")
