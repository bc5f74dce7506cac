"""VirtualWorker: a worker in this process. Commands go straight to its WorkerCore."""
from __future__ import annotations

import torch

from ..errors import SyftError
from . import registry
from .base import BaseWorker
from .core import WorkerCore
from ..commands import current_holder, held_by


def plan_state_to_send(state: list, worker) -> list:
    """The state tensors a plan carries to ``worker``: none when the module was sent there
    already (calls then use its pointers), else local copies."""
    from ..tensors.pointer import PointerTensor

    pointers = [t for t in state if isinstance(t, PointerTensor)]
    if not pointers:
        return state
    if len(pointers) == len(state) and all(p.location is worker for p in pointers):
        return []
    raise SyftError(f"a plan's state must be local, or sent to worker {worker.id!r} as a whole")


def detached_copy(obj):
    """What a worker stores when it is sent ``obj``: an independent copy of the whole chain,
    outside any autograd graph, with the tags and description the object carried."""
    from ..tensors.logging import LoggingTensor, OpLog
    from ..tensors.pointer import PointerTensor

    if isinstance(obj, PointerTensor):
        # a pointer to a pointer: the copy is a new owning reference to the same remote object
        obj.location._incref(obj.id_at_location)
        new = PointerTensor(obj.location, obj.id_at_location, obj.shape, obj.dtype)
    elif isinstance(obj, LoggingTensor):
        new = LoggingTensor(detached_copy(obj.child), OpLog(obj.log))
    elif type(obj) is torch.Tensor or type(obj) is torch.nn.Parameter:
        if obj.device.type != "cpu":  # a meta tensor has no data: storing one would hide a bug
            raise SyftError(f"cannot send a tensor on the {obj.device.type} device: workers hold CPU tensors")
        new = obj.detach().clone()
    elif isinstance(obj, torch.Tensor):
        raise SyftError(f"cannot send a {type(obj).__name__}: syft_lab sends plain tensors, "
                        f"LoggingTensors and pointers")
    else:
        raise TypeError(f"cannot send a {type(obj).__name__}")
    d = obj.__dict__
    if "tags" in d:
        new.tags = set(d["tags"])
    if "description" in d:
        new.description = d["description"]
    return new


class VirtualWorker(BaseWorker):
    """An in-process worker: its own object store, used exactly like a remote one."""

    kind = "virtual"

    def __init__(self, worker_id: str):
        super().__init__(worker_id)
        self.core = WorkerCore(self.id)
        registry.register(self)

    @property
    def objects(self) -> dict:
        """The store: object id -> object."""
        return self.core.objects

    def _store_copy(self, obj) -> int:
        return self.core.store(detached_copy(obj))

    def _load(self, obj, tags, description) -> int:
        copy = detached_copy(obj)
        copy.tags = set(tags)
        if description is not None:
            copy.description = description
        return self.core.store(copy, held=True)

    def _store_object(self, obj) -> int:
        return self.core.store(obj)

    def _receive_from(self, source, obj_id, requires_grad, keep_source=False):
        from ..tensors.pointer import PointerTensor

        obj = source._copy_out(obj_id) if keep_source else source._fetch(obj_id)
        new_id = self._store_object(obj)
        return PointerTensor(self, new_id, obj.shape, obj.dtype, requires_grad=requires_grad)

    def _run(self, func, args, kwargs):
        if self._batch is not None:
            return self._batch.record(func, args, kwargs)
        # held_by(self.id) without the context manager (it is a third of this method's cost):
        # an op on a stored pointer makes a pointer held here
        token = current_holder.set(self.id)
        try:
            return self.core.run(func, args, kwargs)
        finally:
            current_holder.reset(token)

    def _store_plan(self, graph, state, tags, description):
        # A copy through the plan's JSON form: the worker validates it as a remote one would.
        return self.core.store_plan(graph.copy(), [detached_copy(t) for t in plan_state_to_send(state, self)],
                                    tags, description)

    def _run_plan(self, plan_id, args, state):
        token = current_holder.set(self.id)  # held_by(self.id), as in _run
        try:
            return self.core.run_plan(plan_id, [a.id for a in args], None if state is None else [s.id for s in state])
        finally:
            current_holder.reset(token)

    def _run_graph(self, graph, input_ids, output_ids):
        with held_by(self.id):
            return self.core.run_graph(graph.copy(), input_ids, output_ids)

    def _fetch(self, obj_id):
        obj = self.core.fetch(obj_id)
        ref = getattr(obj, "__dict__", {}).get("_ref")
        if ref is not None:
            ref.owner_id = "me"  # a pointer fetched back is held here again
        return obj

    def _copy_out(self, obj_id):
        """An independent copy of a stored object; the object stays here."""
        return detached_copy(self.core.lookup(obj_id))

    def _discard(self, obj_id) -> None:
        self.core.fetch(obj_id)

    def _release(self, obj_id):
        if self._batch is not None and obj_id in self._batch.pending:
            self._batch.dropped.add(obj_id)
            return
        self.core.decref(obj_id)

    def _incref(self, obj_id):
        self.core.incref(obj_id)

    def _search(self, query):
        from ..inspection.model import object_meta

        return [(i, object_meta(self.core.objects[i])) for i in self.core.search(query)]

    def describe(self, obj_id):
        if self._batch is not None and obj_id in self._batch.pending:
            _, shape, dtype = self._batch.pending[obj_id]
            return [{"kind": "pending", "type": "Tensor", "id": obj_id, "owner": self.id, "shape": list(shape),
                     "dtype": dtype, "preview": None}]
        return self.core.describe(obj_id)

    def summary(self) -> list[dict]:
        return self.core.summary()


class LocalWorker(VirtualWorker):
    """``sy.local_worker`` ("me"): the notebook's own worker, owner of local pointers."""

    kind = "local"
