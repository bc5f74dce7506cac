"""WorkerCore: one worker's object store, reference counts and command handling, free of I/O.

Every worker's service (service.py) runs its commands here, in process or in a worker
process, so the semantics cannot drift between them. The core knows tensors and the layer
protocol, never the inspection package: what it tells about its objects comes from
``syft_lab.tensors.nodes``.

Events (``syft_lab.events``): "stored" and "deleted" (with a reason) for every object that
enters or leaves the store, "changed" for a stored object an op wrote in place.
"""
from __future__ import annotations

import functools
import itertools
import os
import time

import torch

from .. import events
from ..commands import NewObject, Ref, SameAsArg, current_holder
from ..errors import ObjectNotFoundError, OpCancelledError, QuotaExceededError, RemoteError, SyftError
from ..ids import ID_BITS, new_id
from ..ids import _rand as _id_random
from ..plans.graph import _UNKEYED, _metadata_key
from ..plans.plan import StoredPlan
from ..tensors import nodes
from ..tensors.pointer import PointerTensor
from ..wire.allowlist import _HELD_DTYPES, _VIEW_IDS, check_call, check_result
from ..wire.format import WireError
from . import forked
from ..tensors.registry import MAX_DIM_SIZE, MAX_DIMS
from .limits import (PLAN_EXPANSION, Estimate, Limits, MemoryBudget, OutputEstimator, StorageLedger,
                     check_input_sizes, check_quota, fmt_bytes, output_count, uncarriable)

_Tensor = torch.Tensor
_strided = torch.strided
_set_holder, _reset_holder = current_holder.set, current_holder.reset
_seq = (list, tuple)
_new_id = functools.partial(_id_random.getrandbits, ID_BITS)  # ids.new_id without its frame (``or 1``)
_NO_LIMITS = object()  # the policy token of a worker without limits (PlanGraph.run's ``learn``)
MAX_OBJECT_ID = 2**63 - 1  # ids a client may name (run_graph's outputs); the worker's own are 53-bit


def _check_carriable(op, out, then: str) -> None:
    """A result the wire could not carry back (65 dimensions) is refused, never stored."""
    why = uncarriable(out) if isinstance(out, _Tensor) else None
    if why is not None:
        raise WireError(f"{op} returned {why}: {then}")


class WorkerCore:
    """``limits``: the worker's quotas (``Limits(max_bytes=..., max_objects=...)``), or None for
    none, as for an in-process worker that shares the notebook's own memory."""

    def __init__(self, worker_id: str, limits: Limits | None = None):
        self.id = worker_id
        self.limits = limits
        self.ledger = StorageLedger() if limits is not None else None  # bytes held, per storage
        # stored bytes plus what is in flight (messages arriving or queued, replies leaving)
        self.budget = MemoryBudget(limits, self.ledger) if limits is not None else None
        self._estimator = OutputEstimator() if limits is not None else None
        self.objects: dict[int, object] = {}
        self.refcounts: dict[int, int] = {}
        # Objects the worker itself holds (``worker.load``): no pointer owns them, so no release
        # deletes them; only an explicit delete, a fetch or a move takes them away.
        self.held: set[int] = set()
        # A plan's random ops draw from the worker's own generator (seeded from the OS), so
        # workers in one process never share the notebook's default generator.
        self.generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        self._graph_deadline = None  # (monotonic deadline, budget, plan name) while a graph runs
        self._replay_held = 0  # bytes a running replay holds in the budget (_admit_replay)

    # --- store -------------------------------------------------------------------------
    def store(self, obj, obj_id: int | None = None, refcount: int = 1, held: bool = False) -> int:
        """Store ``obj`` with ``refcount`` owning pointers; ``held``: the worker itself keeps it."""
        if obj_id is None:
            obj_id = new_id()
        elif obj_id in self.objects:
            raise SyftError(f"worker {self.id!r} already holds an object with id {obj_id}")
        self.objects[obj_id] = obj
        if self.ledger is not None:
            self._admit(obj_id, obj)
        if held:
            self.held.add(obj_id)
        else:
            self.refcounts[obj_id] = refcount
        if isinstance(obj, PointerTensor):
            obj.set_holder(self.id)  # a pointer this worker stores is held here
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
        if self.ledger is not None:
            self.ledger.remove(obj)
        self.refcounts.pop(obj_id, None)
        self.held.discard(obj_id)
        events.emit("deleted", self.id, obj_id, reason="fetched")
        on_delete = getattr(obj, "_on_delete", None)
        if on_delete is not None:  # a fetched plan no longer needs its state copies here
            on_delete(self)
        return obj

    def incref(self, obj_id: int) -> None:
        self.lookup(obj_id)
        self.refcounts[obj_id] = self.refcounts.get(obj_id, 0) + 1

    def hold(self, obj_id: int) -> None:
        """The worker itself keeps ``obj_id`` from now on (as ``load`` does): no release deletes it."""
        self.lookup(obj_id)
        self.held.add(obj_id)

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
        if obj_id in self.held:
            return
        obj = self.objects.pop(obj_id)
        if self.ledger is not None:
            self.ledger.remove(obj)
        if events._subscribers:
            events.emit("deleted", self.id, obj_id, reason="released")
        if type(obj) is not _Tensor:  # (a plain tensor has no _on_delete)
            on_delete = getattr(obj, "_on_delete", None)
            if on_delete is not None:
                on_delete(self)
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
        """Run ``op`` (an aten OpOverload) on stored objects; store and describe its results.

        The op and its resolved arguments pass the allow-list's checks first, and with limits
        its estimated outputs must fit the worker's quotas; nothing runs otherwise."""
        objects = self.objects
        resolved = []
        plain = True  # only plain tensors stored: no pointer can come of the op
        for a in args:
            if isinstance(a, Ref):
                try:
                    obj = objects[a.id]
                except KeyError:
                    raise ObjectNotFoundError(self.id, a.id) from None
                if type(obj) is not _Tensor:
                    plain = False
                resolved.append(obj)
            elif type(a) in _seq:
                resolved.append(self._resolve(a))
                plain = False
            else:
                resolved.append(a)
        if kwargs:
            kw = {k: self._resolve(v) for k, v in kwargs.items()}
            plain = False
        else:
            kw = None
        work = check_call(op, resolved, kw)
        limits = self.limits
        new_bytes = 0
        if limits is not None:
            new_bytes = self._check_quota(op, resolved, kw, 0)
        # a pointer an op makes from a pointer this worker stores is held by this worker
        token = None if plain else _set_holder(self.id)
        try:
            # (a fork's results exist twice while they come back: only if that fits the budget)
            if (limits is not None and limits.max_op_seconds is not None and work >= forked.FORK_WORK
                    and self.budget.used + 2 * new_bytes <= limits.max_bytes and forked.forkable(op, resolved, kw)):
                out = forked.run_forked(op, resolved, kw, limits.max_op_seconds, (self.generator,))
            else:  # (``_op``: the OpOverload's own call, one Python frame less)
                out = op._op(*resolved, **kw) if kw else op._op(*resolved)
        except SyftError:
            raise
        except forked.ChildError as e:  # the op's own error, raised in the forked copy
            raise RemoteError(self.id, e.kind, str(e)) from None
        except Exception as e:  # the op's own error, reported without a traceback
            raise RemoteError(self.id, type(e).__name__, str(e)) from None
        finally:
            if token is not None:
                _reset_holder(token)
        if (type(out) is _Tensor and limits is None and not out.is_meta and out.layout is _strided
                and out.dtype in _HELD_DTYPES and id(op) not in _VIEW_IDS):
            # finish's common case (an in-process worker's tiny op): check_result has nothing to
            # say of a plain CPU tensor of a held dtype that no view made
            return self.store_plain(op, out, resolved, args)
        return self.finish(op, out, resolved, args)

    def finish(self, op, out, resolved, args):
        """What ``run`` does with an op's output ``out`` (it ran on ``resolved``, the stored
        objects ``args`` name): checked, stored and described (NewObject, SameAsArg), or a
        Python value as it is."""
        limits = self.limits
        if type(out) is _Tensor:  # the common case inline: a new plain tensor, or an argument
            if out.is_meta or out.layout is not _strided or out.dtype not in _HELD_DTYPES or id(op) in _VIEW_IDS:
                check_result(op, out)  # (what it checks of a plain tensor, read here first; it raises)
            result = self.store_plain(op, out, resolved, args)
            if type(result) is SameAsArg:
                return result
        elif isinstance(out, _Tensor):
            check_result(op, out)
            _check_carriable(op, out, "it was dropped")
            result = self._result(out, resolved, args)
        elif type(out) in _seq:
            for o in out:
                if isinstance(o, _Tensor):
                    check_result(op, o)
                    _check_carriable(op, o, "it was dropped")
            result = type(out)(self._result(o, resolved, args) if isinstance(o, _Tensor) else o for o in out)
        else:
            return out
        if limits is not None:
            self._check_after(op, result)
        return result

    def store_plain(self, op, out, resolved, args):
        """Store an op's new plain tensor ``out`` (its checks passed): a NewObject with one
        reference, or SameAsArg if ``out`` is an argument written in place. The one place an
        op's plain result enters the store (``run``, ``finish``, the in-process lean path)."""
        shape = out.shape
        if len(shape) > MAX_DIMS or (shape and max(shape) > MAX_DIM_SIZE):
            _check_carriable(op, out, "it was dropped")
        for a in resolved:
            if out is a:  # an argument written in place
                i = next(i for i, b in enumerate(resolved) if b is out)
                if events._subscribers and isinstance(args[i], Ref):  # a stored object written in place
                    events.emit("changed", self.id, args[i].id)
                return SameAsArg(i)
        return self._store_new(out, shape)

    def _check_quota(self, op, args, kwargs, extra_bytes: int, travels: bool = True) -> int:
        """Refuse (QuotaExceededError) an op whose outputs would not fit the quotas; returns the
        estimated new bytes. ``extra_bytes``: held outside the store (a running plan's values)."""
        check_input_sizes(self.limits, op, args, kwargs)
        n = output_count(op, args, kwargs)
        if n is not None:  # a list-returning op (unbind): counted before any meta run makes n tensors
            check_quota(self.limits, 0, len(self.objects), op, Estimate(0, n))
        est = self._estimator.estimate(op, args, kwargs)
        if travels and est.uncarriable is not None:
            raise WireError(f"{op} would return {est.uncarriable}: nothing ran")
        check_quota(self.limits, self.budget.used + extra_bytes, len(self.objects), op, est)
        return est.new_bytes

    def _admit(self, obj_id: int, obj) -> None:
        """Count a stored object against the quotas; one that does not fit is not kept."""
        self.ledger.add(obj)
        limits = self.limits
        if self.budget.used > limits.max_bytes or len(self.objects) > limits.max_objects:
            would = self.budget.used
            self.ledger.remove(obj)
            del self.objects[obj_id]
            raise QuotaExceededError(f"worker {self.id!r} cannot keep this object: it would hold "
                                     f"{fmt_bytes(would)} (objects, their tags and logs, and messages in flight) "
                                     f"in {len(self.objects) + 1} objects, over its limits of "
                                     f"{fmt_bytes(limits.max_bytes)} and {limits.max_objects} objects. Release "
                                     f"objects you no longer need, or send smaller pieces")

    def _check_after(self, op, result) -> None:
        """The backstop for ops whose size no meta run could tell: over a quota, the new
        results are dropped again and the op is refused."""
        limits = self.limits
        if self.budget.used <= limits.max_bytes and len(self.objects) <= limits.max_objects:
            return
        held = self.budget.used
        for r in (result if type(result) in _seq else [result]):
            if type(r) is NewObject:
                self.refcounts.pop(r.id, None)
                self.ledger.remove(self.objects.pop(r.id))
                if events._subscribers:
                    events.emit("deleted", self.id, r.id, reason="released")
        raise QuotaExceededError(f"{op} made results that exceed the worker's limits (it held {held} bytes in "
                                 f"{len(self.objects)} objects; limits {limits.max_bytes} bytes, "
                                 f"{limits.max_objects} objects): they were dropped. Release objects you no "
                                 f"longer need, or work in smaller pieces")

    def _result(self, out, resolved, args):
        for i, a in enumerate(resolved):
            if out is a:
                if self.ledger is not None and type(out) is not _Tensor:  # a layer (a LoggingTensor's
                    self.ledger.refresh(out)  # log) may have grown in place: counted at its size now
                if events._subscribers and isinstance(args[i], Ref):  # a stored object written in place
                    events.emit("changed", self.id, args[i].id)
                return SameAsArg(i)
        return self._store_new(out, out.shape)

    def _store_new(self, out, shape) -> NewObject:
        """An op's new result into the store with one reference (``store_plain``'s and ``_result``'s
        last step): the ledger counts it and followers hear of it."""
        obj_id = _new_id() or 1
        self.objects[obj_id] = out
        self.refcounts[obj_id] = 1
        if self.ledger is not None:
            self.ledger.add(out)
        if events._subscribers:
            events.emit("stored", self.id, obj_id)
        return NewObject(obj_id, shape, out.dtype)

    # --- plans -----------------------------------------------------------------------------
    def store_plan(self, builds, state: list, tags=(), description=None, json_size: int = 0) -> int:
        """Store a plan's validated graphs (a PlanBuilds, one graph per signature) with copies of its
        state (owned by the plan). ``json_size``: the length of its JSON text, which sizes the
        Python objects of its graphs for the memory quota."""
        plan = StoredPlan(builds, [], tags, description)
        plan._python_bytes = json_size * PLAN_EXPANSION
        if self.ledger is not None:  # the plan's own size first: no state is stored for a plan that cannot fit
            self.ledger.add(plan)
            fits = self.budget.used <= self.limits.max_bytes
            self.ledger.remove(plan)
            if not fits:
                raise QuotaExceededError(f"plan {builds.name!r} takes about {fmt_bytes(plan._python_bytes)} as "
                                         f"Python objects, more than the worker's memory limit of "
                                         f"{fmt_bytes(self.limits.max_bytes)} leaves: nothing was stored")
        plan.state_ids = [self.store(t) for t in state]
        try:
            return self.store(plan)
        except QuotaExceededError:
            for i in plan.state_ids:
                self.decref(i)
            raise

    def run_plan(self, plan_id: int, arg_ids: list[int], state_ids: list[int] | None = None, hint=None) -> list:
        """Run a stored plan on stored objects; its outputs are stored. One command, whole plan.

        ``hint``: (stored plan, values, metadata key, graph) as ``WorkerService.quick`` found them
        a moment ago for this very message, nothing run since: used if the plan and the values
        looked up now are those very objects (and autograd's mode is the key's)."""
        stored = self.lookup(plan_id)
        if not isinstance(stored, StoredPlan):
            raise SyftError(f"object {plan_id} on worker {self.id!r} is not a plan")
        values = [self.lookup(i) for i in (stored.state_ids if state_ids is None else state_ids)]
        values += [self.lookup(i) for i in arg_ids]
        graph = None
        if hint is not None:
            h_stored, h_values, key, graph = hint
            if not (h_stored is stored and key is not None and key[0] == torch.is_grad_enabled()
                    and len(h_values) == len(values) and all(a is b for a, b in zip(h_values, values))):
                graph = None
        if graph is None:
            key = _metadata_key(values)  # (once: the graph's choice and its learned checks both read it)
            graph = stored.builds.select(values, key)  # the graph built for these inputs' shapes and dtypes
        return self._run_graph(graph, values, None, learn=True, key=key)

    def run_graph(self, graph, input_ids: list[int], output_ids: list[int], drawn=()) -> list:
        """Run a one-off graph (a recorded ``sy.batch``) and store its outputs under the given ids;
        ``drawn``: tensors made here for its last inputs (a dealer's random words)."""
        values = [self.lookup(i) for i in input_ids] + list(drawn)
        graph.check_inputs(values)
        if (len(output_ids) != len(graph.outputs) or len(set(output_ids)) != len(output_ids)
                or not all(0 < i <= MAX_OBJECT_ID for i in output_ids) or any(i in self.objects for i in output_ids)):
            raise SyftError(f"a batch names one new, distinct object id per output (1 to {MAX_OBJECT_ID}): "
                            f"nothing ran")
        return self._run_graph(graph, values, output_ids)

    def _run_graph(self, graph, values, output_ids, learn: bool = False, key=_UNKEYED):
        """``learn``: a stored plan, replayed again and again: its ops are checked on its first run
        for some input metadata, then only what changes between calls (PlanGraph.run)."""
        limits = self.limits
        if limits is not None and len(self.objects) + len(graph.outputs) > limits.max_objects:
            raise QuotaExceededError(f"plan {graph.name!r} would store {len(graph.outputs)} objects while the worker "
                                     f"holds {len(self.objects)} of its limit of {limits.max_objects}: nothing ran")
        budget = limits.max_op_seconds if limits is not None else None
        graph.prepare()  # (its one-time compile is not the plan's time)
        self._graph_deadline = None if budget is None else (time.monotonic() + budget, budget, graph.name)
        try:
            outs = graph.run(values, guard=self._guard_node, check=check_result, generator=self.generator,
                             learn=(_NO_LIMITS if limits is None else limits) if learn else None,
                             recheck=None if limits is None else self._recheck_node,
                             admit=None if limits is None else self._admit_replay, key=key)
        except SyftError:
            raise
        except Exception as e:
            raise RemoteError(self.id, type(e).__name__, str(e)) from None
        finally:
            self._graph_deadline = None
            if self._replay_held:  # the replay's peak, held while it ran (_admit_replay)
                self.budget.release(self._replay_held)
                self._replay_held = 0
        for out in outs:
            _check_carriable(f"plan {graph.name!r}", out, "nothing was stored")
        results = []
        for k, out in enumerate(outs):
            same = next((i for i, v in enumerate(values) if v is out), None)
            if same is not None:  # the plan returned one of its inputs: store an alias, not the same object twice
                out = out.detach()
            obj_id = self.store(out, output_ids[k] if output_ids else None)
            results.append(NewObject(obj_id, out.shape, out.dtype))
        if limits is not None:
            self._check_after(f"plan {graph.name!r}", results)
        return results

    def _guard_node(self, op, args, kwargs, live_bytes: int) -> int:
        """Before each op of a plan replay: the same checks as a single ``run``, and the time budget
        (a replay stops between two ops; each op stays under the per-op cost bound)."""
        self._check_deadline()
        check_call(op, args, kwargs)
        if self.limits is None:
            return 0
        return self._check_quota(op, args, kwargs, live_bytes, travels=False)  # its values stay here

    def _admit_replay(self, peak_bytes: int, outputs: int):
        """Before a replay of a stored plan whose every op's checks passed for these inputs'
        metadata: the quota for the whole replay at once. If the most it holds at once
        (``peak_bytes``) fits beside what the worker holds, that memory is counted as held (in
        flight: a message arriving meanwhile sees it) until the replay ends, and no op needs a
        quota recheck; and the ops' most tensors (``outputs``) must fit the object limit. Returns
        (deadline, clock) for the per-op time check, or None: then every op is rechecked as
        before (``_recheck_node``: the refusal names the op that does not fit)."""
        if len(self.objects) + outputs > self.limits.max_objects or not self.budget.try_hold(peak_bytes):
            return None
        self._replay_held = peak_bytes
        d = self._graph_deadline
        return (None, None) if d is None else (d[0], time.monotonic)

    def _recheck_node(self, op, new_bytes: int, outputs: int, live_bytes: int) -> None:
        """Before an op of a stored plan whose checks passed for these inputs' metadata (its
        estimate is ``new_bytes`` and ``outputs`` tensors): what changes between calls, the time
        budget and what the worker holds."""
        self._check_deadline()
        limits = self.limits
        held = self.budget.used + live_bytes
        if held + new_bytes > limits.max_bytes or len(self.objects) + outputs > limits.max_objects:
            check_quota(limits, held, len(self.objects), op, Estimate(new_bytes, outputs))

    def _check_deadline(self) -> None:
        if self._graph_deadline is not None and time.monotonic() > self._graph_deadline[0]:
            _, budget, name = self._graph_deadline
            raise OpCancelledError(f"plan {name!r} ran past the worker's time budget of {budget:g} s and was "
                                   f"stopped between two of its ops: nothing was stored (in-place writes to its "
                                   f"inputs before that stay). Run it on smaller pieces, or start the worker "
                                   f"with a larger --max-op-seconds")

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

    # --- what the worker tells about its objects (the layer protocol's node builder) -----------
    def search_meta(self, query: tuple[str, ...]) -> list[tuple[int, dict]]:
        """``(id, metadata)`` of every object ``search`` finds: what a pointer to it needs."""
        return [(i, nodes.object_meta(self.objects[i])) for i in self.search(query)]

    def describe(self, obj_id: int) -> dict:
        """The root node of a stored object's chain tree (docs/inspection-model.md, version 2),
        known by its store id. Values stay private."""
        return nodes.stored_root(self.lookup(obj_id), obj_id, self.id)

    def summary(self, offset: int = 0, limit: int | None = None) -> list[dict]:
        """One entry per stored object, for the world view; ``offset``/``limit``: one page of
        them, in store order (a remote worker's reply stays small however many objects it holds)."""
        held = self.held
        items = list(itertools.islice(self.objects.items(), offset, None if limit is None else offset + limit))
        return [nodes.object_entry(obj_id, obj, self.id, self.refcounts.get(obj_id, 0), obj_id in held)
                for obj_id, obj in items]

