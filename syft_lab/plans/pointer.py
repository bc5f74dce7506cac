"""PlanPointer: a plan held by a worker. Calling it runs the whole plan there in one message."""
from __future__ import annotations

import torch

from ..errors import SyftError
from ..ids import short
from ..tensors.pointer import PointerTensor, RemoteHandle, RemoteRef, mark_left, pointer_state, wrap_result


class PlanPointer(RemoteHandle):
    kind = "plan_pointer"

    def __init__(self, location, obj_id: int, meta: dict, owning: bool = True, plan=None):
        self._ref = RemoteRef(location, obj_id, owning, target_kind="plan")
        self.meta = meta
        self.plan = plan  # the local Plan it was sent from, if any

    @property
    def name(self) -> str:
        return self.meta.get("name", "plan")

    def _state_refs(self):
        """The module's current tensors when they are pointers on this worker (model.send(worker)
        before the call); otherwise None, and the worker uses the state sent with the plan."""
        plan = self.plan
        if plan is None or plan.state is None:
            return None
        values = plan._state_values()
        if not values:
            return None
        loc = self._ref.location
        refs = []
        for v in values:
            ref = v._ref if isinstance(v, PointerTensor) else None
            if ref is None or ref.location is not loc:
                return None
            refs.append(ref)
        return refs

    def __call__(self, *args):
        self._check_alive()
        loc = self._ref.location
        refs = []
        for a in args:
            if isinstance(a, PointerTensor):
                ref = a._ref
                if ref.location is not loc:
                    raise SyftError(f"plan {self.name!r} lives on worker {loc.id!r} but an argument is on "
                                    f"worker {ref.location.id!r}: move it first")
                if ref.released:
                    a._check_alive()  # raises: the object is gone
                refs.append(ref)
            elif isinstance(a, torch.Tensor):
                raise SyftError(f"plan {self.name!r} lives on worker {loc.id!r}: send its inputs there first "
                                f"(a local {type(a).__name__} was given)")
            else:
                raise SyftError(f"plan {self.name!r} takes pointers to tensors, got {type(a).__name__}")
        outs = loc._run_plan(self._ref.id, refs, self._state_refs())
        if len(outs) == 1 and self.meta.get("single_output", True):
            return wrap_result(PointerTensor, outs[0], loc)
        return tuple([wrap_result(PointerTensor, o, loc) for o in outs])

    def get(self):
        """Fetch the plan back (it leaves the worker)."""
        self._check_alive()
        stored = self.location._fetch(self._ref.id)  # a StoredPlan (plans/plan.py)
        mark_left(self.location, self._ref.id, "fetched")
        return stored.to_plan(f"fetched from worker {self.location.id}")

    def _inspection_nodes(self, owner: str, with_values: bool) -> dict:
        """The root of this pointer's chain: its node, and the plan its worker describes."""
        ref = self._ref
        remote = self._remote_root()
        return {"kind": "pointer", "type": "PlanPointer", "id": ref.pointer_id, "owner": owner,
                "location": ref.location.id, "id_at_location": ref.id, "owning": ref.owning,
                "state": pointer_state(ref), "name": self.name, "children": [] if remote is None else [remote]}

    def __repr__(self):
        return f"[PlanPointer {self.name} | me:{short(self.id)} -> {self.location.id}:{short(self.id_at_location)}]"

    def __reduce_ex__(self, protocol):
        raise SyftError("a PlanPointer cannot be pickled: fetch the plan with .get() and save plan.to_json()")
