"""The fast-path policy of a worker service: where a command may run, and the in-process lean path.

A fast path changes where or how briefly a command runs, never what it does: every one answers
as the command table would (``WorkerService.call``), which the tests hold equal.

- ``FastPaths.quick_command(msg)``: the message is known to take a moment (a small op of
  bounded cost, releases, a stored plan whose last replay on inputs of the same metadata was
  quick, a small linear one-off graph). A driver answers it where it arrived (the websocket
  server's event loop) while nothing else runs, which saves the two thread wake-ups of a
  hand-over to the command thread (issue 28.4). Anything else runs where commands run.
- ``FastPaths.lean_ops(session, client)``: an in-process client's pointer op and release with
  no message dict (``VirtualWorker``): the same checks, errors, session references, ledger
  record and events as a ``run`` message (tests/workers/test_in_process_path.py).
"""
from __future__ import annotations

import json
import threading

import torch

from ..commands import NewObject, Ref
from ..events import current_cell as _current_cell
from ..errors import RemoteError, SyftError
from ..plans.graph import _metadata_key
from ..plans.plan import StoredPlan
from ..wire import allowlist, op_cost
from . import core as _core
from .limits import OutputEstimator

# A command whose cost is bounded by its sizes, and small, runs where it arrived while the
# command thread is idle: a pointer op then costs one round trip, not one plus the two thread
# wake-ups of a hand-over. Everything else, and anything while the thread is busy, goes there
# (its time budget and cancellation).
QUICK_BYTES = 2**20  # tensors a quick command reads, and again what it makes
QUICK_WORK = 2**20  # element operations of a quick op (check_call's estimate): well under a millisecond
QUICK_ARGS = 64  # tensors a quick op's arguments may name (each looked up on the loop)
# A stored plan whose last replay on inputs of the same metadata took less than this (and
# whose every op's sizes follow from that metadata) is quick (two thread wake-ups: ~0.1-0.2 ms
# on a shared machine, a quarter of a training step's round trip).
QUICK_SECONDS = 0.005
QUICK_RELEASES = 64  # releases a quick message may carry (each a decref, maybe a delete)
QUICK_VALUES = 1024  # state and inputs a quick plan run may name (each looked up on the loop)
# A one-off graph (``run_graph``: a secure computation's round, syft_lab/smpc/runtime.py) is quick
# when it is small and of linear-cost ops only: JSON text, tensors it reads (stored and carried)
# and outputs it declares each under these bounds (issue 30: the hand-over cost ~3 ms a round on
# a loaded 2-core machine, against ~0.3 ms of work)
QUICK_GRAPH_TEXT = 64 * 2**10
QUICK_GRAPH_BYTES = 2**21
_linear_ops: dict = {}  # op name -> whether its work is linear in its sizes (op_cost.family_of)
_QUICK_LITERALS = (int, float, bool, str, type(None))
_QUICK_TYPES = (torch.dtype, torch.device, torch.layout, torch.memory_format)

_ALLOWED = allowlist.ALLOWED  # op name -> OpOverload
_ALLOWED_IDS = frozenset(id(op) for op in allowlist.ALLOWED_OPS)
_Tensor, _Parameter = torch.Tensor, torch.nn.Parameter
_strided = torch.strided
_NUMBERS = (int, float, bool)
_thread_id = threading.get_ident
_HELD_DTYPES, _VIEW_IDS = allowlist._HELD_DTYPES, allowlist._VIEW_IDS
_check_call, _function_mode = allowlist.check_call, allowlist.function_mode_enabled


class _NotQuick(Exception):
    pass


class FastPaths:
    """The fast-path policy of one WorkerService (``service.policy``)."""

    def __init__(self, service):
        self.service = service
        self._estimator = None  # quick_command's output sizes (memoised meta runs), made on first use

    def quick_command(self, msg) -> bool:
        """Whether ``msg`` is known to take a moment (a hint for where it runs, never what it
        does; call it where commands run, or while nothing runs there). A stored plan known to
        replay quickly or a small linear graph (``quick_stored``), a ``run`` of an allowed op on
        plain tensors of at most QUICK_BYTES whose estimated work (check_call, memoised on the
        arguments' metadata) is at most QUICK_WORK and whose outputs, from the meta run, are at
        most QUICK_BYTES; releases and increfs. Reads the store only."""
        cmd = msg.get("c")
        rel = msg.get("rel")
        if rel is not None and (type(rel) is not list or len(rel) > QUICK_RELEASES):
            return False
        if cmd == "run":
            return self._quick_op(msg)
        if cmd in ("release", "incref"):
            ids = msg.get("ids") if cmd == "release" else [msg.get("id")]
            return type(ids) is list and len(ids) <= QUICK_RELEASES
        return self.quick_stored(msg)

    def _quick_op(self, msg) -> bool:
        core = self.service.core
        if core.limits is None:
            return False
        name, args, kwargs = msg.get("op"), msg.get("a"), msg.get("k")
        op = _ALLOWED.get(name) if type(name) is str else None
        if op is None or type(args) is not list or (kwargs is not None and type(kwargs) is not dict):
            return False
        objects = core.objects
        budget = [QUICK_BYTES, QUICK_ARGS]

        def value(a):
            tp = type(a)
            if tp is Ref:
                a = objects.get(a.id)
                tp = type(a)
            if tp is _Tensor or tp is _Parameter:
                budget[0] -= a.untyped_storage().nbytes()
                budget[1] -= 1
                if budget[0] < 0 or budget[1] < 0:
                    raise _NotQuick
                return a
            if tp is list or tp is tuple:
                return [value(b) for b in a]
            if tp in _QUICK_LITERALS or isinstance(a, _QUICK_TYPES):
                return a
            raise _NotQuick  # an unknown id, a chain of layers, a pointer: the thread's run says

        try:
            resolved = [value(a) for a in args]
            kw = {k: value(v) for k, v in kwargs.items()} if kwargs else None
            if _check_call(op, resolved, kw) > QUICK_WORK:
                return False
            if self._estimator is None:
                self._estimator = OutputEstimator()
            est = self._estimator.estimate(op, resolved, kw)
        except Exception:  # a hint only: whatever is wrong, the command thread's run says so
            return False
        return est.outputs > 0 and est.uncarriable is None and est.new_bytes <= QUICK_BYTES

    def quick_stored(self, msg: dict) -> bool:
        """Whether ``msg`` is a ``run_plan`` (with at most QUICK_RELEASES releases) of a stored
        plan on stored tensors whose last replay on inputs of their metadata, checks learned,
        took under QUICK_SECONDS (``PlanGraph.replay_seconds``), or a quick ``run_graph``
        (``_quick_graph``). A run_plan said yes to leaves its graph and key for the very
        message's run, next on this thread (``WorkerService.call``)."""
        service = self.service
        core = service.core
        if msg.get("c") == "run_graph" and core.limits is not None:
            return self._quick_graph(msg)
        service._quick_hint = None
        if msg.get("c") != "run_plan" or core.limits is None:
            return False
        rel = msg.get("rel")
        if rel is not None and (type(rel) is not list or len(rel) > QUICK_RELEASES):
            return False
        objects = core.objects
        plan_id, args, state = msg.get("id"), msg.get("a"), msg.get("s")
        stored = objects.get(plan_id) if type(plan_id) is int else None
        if type(stored) is not StoredPlan or type(args) is not list:
            return False
        ids = (stored.state_ids if state is None else state) if type(state) in (list, type(None)) else None
        if ids is None or len(ids) + len(args) > QUICK_VALUES:
            return False
        values = []
        for i in (*ids, *args):
            v = objects.get(i) if type(i) is int else None
            if not (type(v) is _Tensor or type(v) is _Parameter):
                return False
            values.append(v)
        try:
            key = _metadata_key(values)  # (once: the graph's choice and its timing both read it)
            graph = stored.builds.find(values, key=key)
            seconds = None if graph is None else graph.replay_seconds(values, core.limits, key)
        except Exception:  # a hint only: whatever is wrong, the command thread's run says so
            return False
        if seconds is None or seconds >= QUICK_SECONDS:
            return False
        service._quick_hint = (msg, stored, values, key, graph, _thread_id())
        return True

    def _quick_graph(self, msg: dict) -> bool:
        """``quick`` for a ``run_graph``: small (QUICK_GRAPH_TEXT, QUICK_GRAPH_BYTES read and made,
        QUICK_VALUES), linear-cost ops only (no contraction, window, sort...), releases bounded."""
        text, ids, cv, rel = msg.get("g"), msg.get("i"), msg.get("cv", []), msg.get("rel")
        if (type(text) is not str or len(text) > QUICK_GRAPH_TEXT or type(ids) is not list or type(cv) is not list
                or len(ids) + len(cv) > QUICK_VALUES
                or (rel is not None and (type(rel) is not list or len(rel) > QUICK_RELEASES))):
            return False
        objects = self.service.core.objects
        nbytes = 0
        for t in cv:
            if type(t) is not _Tensor:
                return False
            nbytes += t.numel() * t.element_size()
        for i in ids:
            v = objects.get(i) if type(i) is int else None
            if type(v) is not _Tensor:
                return False
            nbytes += v.untyped_storage().nbytes()
        if nbytes > QUICK_GRAPH_BYTES:
            return False
        try:  # a hint only: whatever is wrong, the command's own run says so
            made = 0
            for node in json.loads(text)["graphs"][0]["nodes"]:
                name = node["op"]
                linear = _linear_ops.get(name)
                if linear is None:
                    op = _ALLOWED.get(name)
                    linear = _linear_ops[name] = op is not None and op_cost.family_of(name, op) is op_cost.LINEAR
                if not linear:
                    return False
                for o in node["outputs"]:
                    n = 8
                    for d in o["shape"]:
                        n *= int(d)
                    made += n
            return made <= QUICK_GRAPH_BYTES
        except Exception:
            return False

    def lean_ops(self, session, client):
        """The lean path of an in-process client (VirtualWorker): ``(run, release)``, what its
        pointers call for every op and every dropped pointer (``client._run``/``_release``).
        ``run(op, args, kwargs)`` is ``WorkerService.run_op`` in one frame for an allowed op
        (inside ``sy.batch(client)`` the op is recorded, as on every worker); ``release`` is
        ``WorkerService.release_one`` (a batch's own results are dropped once it has run)."""
        service = self.service
        core = service.core
        sessions_with_refs, ledger, run_op, claim = (service.sessions_with_refs, service.ledger, service.run_op,
                                                     service._claim)
        objects, plan_of, run_core, finish, store_plain = (core.objects, allowlist._plans.get, core.run,
                                                           core.finish, core.store_plain)

        def run(op, args, kwargs):
            batch = client._batch
            if batch is not None:
                return batch.record(op, args, kwargs)
            if id(op) not in _ALLOWED_IDS:
                return run_op(op, args, kwargs, session)  # refused there, in a remote worker's words
            plan = plan_of(id(op))
            resolved = None
            if kwargs is None and plan is not None and plan.fast and core.limits is None:
                # A pointwise op on stored plain tensors and numbers (every tiny op): WorkerCore.run
                # in this one frame (~10% of a pointer op), the same checks in the same order;
                # anything else (a missing or non-plain object, a constant) is core.run's.
                resolved, numbers = [], False
                for a in args:
                    if isinstance(a, Ref):
                        obj = objects.get(a.id)
                        if type(obj) is not _Tensor:
                            resolved = None
                            break
                        resolved.append(obj)
                    elif type(a) in _NUMBERS:
                        resolved.append(a)
                        numbers = True
                    else:
                        resolved = None
                        break
            if resolved is None:
                result = run_core(op, args, kwargs)
                nbytes = carried_bytes(args) + (carried_bytes(kwargs.values()) if kwargs else 0)
            else:
                if _core.check_call is _check_call:  # check_call's pointwise bound, inline (its plan is here)
                    product = 1
                    for x in resolved:
                        if type(x) is _Tensor:
                            product *= x.numel()
                    if product > op_cost.MAX_OP_WORK:
                        op_cost.check_pointwise(plan.name, resolved)
                else:  # (bench_op_policy and bench_runtime swap the module's check for their figures)
                    _core.check_call(op, resolved, None)
                # torch's own binding of the op where it is the same overload (allowlist.fast_call)
                call = op._op if numbers or _function_mode() else (
                    plan.calls.get(len(resolved)) or allowlist.fast_call(plan, resolved))
                try:
                    out = call(*resolved)
                except SyftError:
                    raise
                except Exception as e:  # the op's own error, reported without a traceback
                    raise RemoteError(core.id, type(e).__name__, str(e)) from None
                result = (store_plain(op, out, resolved, args) if type(out) is _Tensor and not out.is_meta
                          and out.layout is _strided and out.dtype in _HELD_DTYPES and id(op) not in _VIEW_IDS
                          else finish(op, out, resolved, args))
                nbytes = 0  # (ids and numbers: no tensor travels)
            if type(result) is NewObject:
                obj_id = result.id
                refs = session.refs
                refs[obj_id] = refs.get(obj_id, 0) + 1
                sessions_with_refs.add(session)
                ledger.add_op(session, nbytes, _current_cell.number, obj_id, op)
                return result
            ledger.add_op(session, nbytes, _current_cell.number, None, op)
            return claim(session, result)

        return run, _lean_release(service, session, client)


def _lean_release(service, session, client):
    """A dropped in-process pointer's release: the session's one release rule
    (``release_one``), after the client's ``sy.batch`` rule."""
    release_one = service.release_one

    def release(obj_id):
        batch = client._batch
        if batch is not None and obj_id in batch.pending:
            batch.dropped.add(obj_id)
            return
        release_one(session, obj_id)

    return release


def carried_bytes(args) -> int:
    """Bytes of the public tensors an op's arguments carry (its stored inputs are ids)."""
    n = 0
    for a in args:
        tp = type(a)
        if tp is _Tensor or tp is _Parameter:
            n += a.numel() * a.element_size()
        elif tp is list or tp is tuple:
            n += carried_bytes(a)
    return n
