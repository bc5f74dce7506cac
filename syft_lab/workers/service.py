"""The worker service: every command a worker answers, on one WorkerCore, free of I/O.

Every worker runs its commands here, whatever carries them: each host's driver hands a client
session's messages to a ``ServiceConnection`` (connection.py), which answers them through this
service's one command table (``call``). So the validation, the op allow-list, the store rules,
sessions (sessions.py) and paging are the same for every worker; fastpath.py says where a
command may run and holds the in-process lean op path.

    service = WorkerService("bob")                 # quotas from limits.py (unlimited=True: none)
    reply, then = ServiceConnection(service, Session()).answer({"r": 1, "c": "ping"})  # {"r": 1, "ok": "pong"}

A message is a dict: ``c`` names the command, ``r`` the request id (echoed), ``rel`` lists
object ids the client released since its last request; the other fields are the command's
(docs/wire-format.md lists them). A failure becomes an error reply
``{"r": rid, "err": {"t": type name, "m": message, "id": object id for ObjectNotFoundError}}``
(``call`` raises it instead): the worker and its connection live on.

Store rule (one rule for every worker): **a worker stores a pointer only to a worker it can
itself reach.** ``reach`` (given by whoever builds the service) says which: in-process workers
share this process's registry, so a VirtualWorker may hold a pointer to any live worker of the
process (``x.send(bob).send(alice)``); a worker process reaches no other worker (it would need
that worker's address and the client's credentials), so it refuses every pointer with a
SyftError that says to move the data instead. Layers that are not ``remote_storable`` (a shared
tensor) are refused everywhere.
"""
from __future__ import annotations

import copy
import secrets
import threading

import torch

from ..commands import NewObject
from ..events import current_cell as _current_cell
from ..errors import ObjectNotFoundError, SyftError
from ..plans.graph import PlanBuilds, PlanGraph
from ..tensors.base import ChainLayer
from ..tensors.pointer import PointerSpec, PointerTensor
from ..tensors.registry import LayerSpec
from ..wire import allowlist
from ..wire.format import DEFAULT_MAX_MESSAGE_SIZE, MAX_TEXT, WIRE_VERSION
from .connection import WHOLE, ServiceConnection, Then, error_reply, scrub  # noqa: F401 (named here too)
from .core import WorkerCore
from .fastpath import QUICK_GRAPH_TEXT, QUICK_RELEASES, FastPaths, carried_bytes  # noqa: F401 (named here too)
from .ledger import (READ_LIMIT, WHY, Ledger, arrived_from, fetched_here, may_read_all, message_cell, op_label,
                     parse_note)
from .limits import Limits
from .randomness import random_below, random_words
from .sessions import Session, SessionRefs

DEFAULT_SUMMARY_LIMIT = 1000
MAX_SUMMARY_LIMIT = 10000
MAX_TAGS = 256
GRAPH_CACHE = 64  # run_graph texts whose validated graphs are kept (_one_off_graph)

_ALLOWED = allowlist.ALLOWED  # op name -> OpOverload
_ALLOWED_IDS = frozenset(id(op) for op in allowlist.ALLOWED_OPS)
_OpOverload = torch._ops.OpOverload
_Tensor, _Parameter = torch.Tensor, torch.nn.Parameter
_thread_id = threading.get_ident


def _int(msg, key, default=None):
    v = msg.get(key, default)
    if type(v) is not int:
        raise SyftError(f"field {key!r} must be an integer")
    return v


def _str(msg, key):
    v = msg.get(key)
    if type(v) is not str:
        raise SyftError(f"field {key!r} must be a string")
    return v


def _ids(msg, key):
    v = msg.get(key)
    if type(v) is not list or not all(type(i) is int for i in v):
        raise SyftError(f"field {key!r} must be a list of object ids")
    return v


def _tags_and_description(msg):
    tags, description = msg.get("tags") or [], msg.get("d")
    if (type(tags) is not list or len(tags) > MAX_TAGS
            or not all(type(t) is str and len(t) <= MAX_TEXT for t in tags)):
        raise SyftError(f"tags are a list of at most {MAX_TAGS} strings")
    if description is not None and (type(description) is not str or len(description) > MAX_TEXT):
        raise SyftError(f"a description is a string of at most {MAX_TEXT} characters")
    return tags, description


def _tensor_payload(obj):
    """The dense tensor at the bottom of a chain (a LoggingTensor's child, ...)."""
    while not (type(obj) is _Tensor or type(obj) is _Parameter):
        obj = getattr(obj, "child", None)
        if obj is None:
            return None
    return obj


def shares_memory(obj) -> bool:
    """Whether another tensor may read or write ``obj``'s memory (a view of it, a view it is,
    a tensor autograd saved). Unknown means yes."""
    t = _tensor_payload(obj)
    if t is None:
        return True
    use_count = getattr(torch._C, "_storage_Use_Count", None)
    if use_count is None:
        return True
    # one use by ``t``, one by the temporary storage object made here
    return use_count(t.untyped_storage()._cdata) > 2


def reaches_nobody(location) -> bool:
    """The ``reach`` of a worker process: it can reach no other worker."""
    return False


def dense_bytes(obj) -> int:
    """Bytes of the dense tensor a reply carrying ``obj`` sends (an expanded view, made whole)."""
    t = _tensor_payload(obj)
    return t.numel() * t.element_size() if t is not None else 0


def needs_copy(obj) -> bool:
    """Whether encoding ``obj`` makes a copy of its bytes (a view that is not contiguous)."""
    t = _tensor_payload(obj)
    return t is not None and (not t.is_contiguous() or t.is_conj() or t.is_neg())


def storage_bytes(obj) -> int:
    t = _tensor_payload(obj)
    return t.untyped_storage().nbytes() if t is not None else 0


def _raw_constants(cv, graph) -> list:
    """run_graph's ``cv``: one plain tensor per constant of its graph, whose JSON constants are
    then empty placeholders (public values travel as raw bytes, not base64 in the JSON)."""
    if (type(cv) is not list or len(cv) != len(graph.constants) or not all(type(t) is _Tensor for t in cv)
            or any(c.numel() for c in graph.constants)):
        raise SyftError("run_graph's 'cv' lists one tensor per constant of its graph, whose JSON constants are "
                        "empty placeholders")
    return cv


_PEER_KIND = {"dealer": "crypto provider", "move": "worker", "opened": "client"}


class WorkerService(SessionRefs):
    """Commands on one WorkerCore: a message dict in, its result (or an error reply) out.

    ``limits``: the core's quotas (None: ``Limits()``'s defaults; ``unlimited=True``: none, as
    for an in-process worker that shares the notebook's memory). ``reach(location) -> bool``:
    whether this worker can reach the worker a pointer it is asked to store points to (see the
    module docstring; the default reaches nobody). Not thread-safe: callers run one command at
    a time (the server on its one command thread)."""

    def __init__(self, worker_id: str, limits: Limits | None = None, *, unlimited: bool = False,
                 reach=reaches_nobody):
        self.core = WorkerCore(worker_id, limits=None if unlimited else (Limits() if limits is None else limits))
        self.reach = reach
        self.instance = secrets.token_hex(8)  # changes on every start: clients detect restarts
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        self.sessions_with_refs: set[Session] = set()
        self._graphs: dict = {}  # run_graph's validated graphs by their JSON text (_one_off_graph)
        # (msg, stored plan, values, metadata key, graph, thread) of the run_plan ``quick`` said yes
        # to: the ``call`` of that very message, next on that thread, reuses them (``_run_plan``)
        self._quick_hint = self._plan_hint = None
        self.policy = FastPaths(self)  # where a command may run, the in-process lean path (fastpath.py)
        # what this worker saw and what left it (ledger.py); its token lets a client read every
        # session's part (the server that serves this worker sets it: None, each session its own)
        self.ledger = Ledger()
        self.ledger_token: str | None = None
        self._commands = {
            "hello": self._hello, "ping": self._ping, "store": self._store, "load": self._load,
            "run": self._run, "fetch": self._fetch, "delete": self._delete, "incref": self._incref, "hold": self._hold,
            "release": self._release, "search": self._search, "describe": self._describe,
            "summary": self._summary, "store_plan": self._store_plan, "run_plan": self._run_plan,
            "run_graph": self._run_graph, "deal": self._deal, "ledger": self._ledger,
        }

    @property
    def id(self) -> str:
        return self.core.id

    def call(self, msg: dict, session: Session):
        """Run one command; returns ``(result, then)`` (``then``: a Then or None) and raises
        what the command raised. The in-process path: no reply dict, the exception itself."""
        hint = self._quick_hint
        if hint is not None:  # one use, by the very message quick saw, next on its thread
            self._quick_hint = None
            self._plan_hint = hint if hint[0] is msg and hint[5] == _thread_id() else None
        rel = msg.get("rel")
        if rel is not None:
            self.release(session, rel)
        cmd = msg.get("c")
        handler = self._commands.get(cmd) if type(cmd) is str else None
        if handler is None:
            raise SyftError(f"unknown command {str(cmd)[:40]!r}; known: {', '.join(self._commands)}")
        result = handler(msg, session)
        if type(result) is Then:
            return result.result, result
        return result, None

    # --- what the connection (connection.py), which answers every message, asks of the service
    def quick(self, msg: dict) -> bool:
        """``FastPaths.quick_stored``: a run_plan or run_graph known to take a moment."""
        return self.policy.quick_stored(msg)

    def reply_done(self, then) -> None:
        """A reply has gone out (or failed to): the budget it held is free again."""
        if then is not None and then.reserved:
            n, then.reserved = then.reserved, 0
            self.core.budget.release(n)

    def _reserve_reply(self, nbytes: int, what: str) -> int:
        budget = self.core.budget
        if budget is None or not nbytes:
            return 0
        budget.reserve(nbytes, what)
        return nbytes

    # --- commands ------------------------------------------------------------------------
    def _hello(self, msg, session):
        reply = {"worker": self.core.id, "v": WIRE_VERSION, "instance": self.instance,
                 "max_message_size": self.max_message_size, "session": session.id}
        limits = self.core.limits
        if limits is not None:  # what a client may count on (an in-process worker has none)
            reply["limits"] = {"max_bytes": limits.max_bytes, "max_objects": limits.max_objects,
                               "source": limits.source}
        return reply

    def _ping(self, msg, session):
        return "pong"

    def _checked_object(self, msg):
        """The object of a store or load, if this worker may keep it (the store rule)."""
        obj = msg.get("o")
        if isinstance(obj, LayerSpec):  # decoded: a chain of layers over a pointer (never live)
            self._check_reach(obj.pointer_specs()[0])
        if not isinstance(obj, (_Tensor, PointerSpec)):
            raise SyftError(f"{msg.get('c')} takes a tensor or a chain of layers over one")
        t = obj
        while True:
            if isinstance(t, (PointerSpec, PointerTensor)):
                self._check_reach(t)
                return obj
            tp = type(t)
            if tp is _Tensor or tp is _Parameter:
                return obj
            if not isinstance(t, ChainLayer):
                raise SyftError(f"{msg.get('c')} takes a tensor or a chain of layers, not a {tp.__name__}")
            if not tp.remote_storable:
                raise SyftError(f"a {tp.__name__} cannot be stored on a worker as one object: "
                                f"{tp.remote_storable_reason}")
            children = t.layer_children()
            if len(children) != 1:  # a layer over several tensors is never one stored object
                raise SyftError(f"a {tp.__name__} over {len(children)} tensors cannot be stored as one object")
            t = children[0]

    def _check_reach(self, pointer) -> None:
        """The store rule: a pointer (live, or a decoded PointerSpec) only to a worker this one reaches."""
        location = pointer if isinstance(pointer, PointerSpec) else pointer.location
        if self.reach(location):
            return
        where = pointer.worker_id if isinstance(pointer, PointerSpec) else pointer.location.id
        me = self.core.id
        raise SyftError(f"worker {me!r} cannot hold a pointer to an object on worker {where!r}: a worker stores "
                        f"a pointer only to a worker it can itself reach, and {me!r} reaches no other worker (it "
                        f"would need the address of {where!r} and your credentials). Move the data instead: "
                        f"ptr.move({me}) (docs/wire-format.md, 'Pointers to pointers')")

    # --- the ledger (ledger.py): recorded once a command has done its work ---------------------
    def _note_in(self, msg, session, note, kind, nbytes, obj_id, op=None):
        """An in-record of ``kind``, plus one per value a note says the message carried."""
        cell = message_cell(msg)
        led = self.ledger
        if note is None:  # the common case: a client's own command (every pointer op)
            led.add_from_client(kind, "in", session, int(nbytes), cell, obj_id, op)
            return
        if note.op is not None and op is None:
            op = note.op
        led.add(kind, "in", session, nbytes, cell, obj_id, op=op)
        if note is not None:
            for why, peer, n in note.carries:
                led.add(WHY[why], "in", session, n, cell, obj_id, peer=peer, peer_kind=_PEER_KIND[why], op=op)

    def _note_out(self, msg, session, note, obj, obj_id, nbytes, op=None):
        """An out-record of an object that leaves (a get, an opened value, dealer material)."""
        kind, peer, peer_kind, items = "fetched", None, "client", None
        if note is not None and note.why is not None:
            kind, peer, items = WHY[note.why], note.peer, note.items
            peer_kind = _PEER_KIND[note.why] if note.why == "move" else "client"
            if op is None:
                op = note.op
        rec = self.ledger.add(kind, "out", session, nbytes, message_cell(msg), obj_id, peer=peer,
                              peer_kind=peer_kind, op=op, items=items)
        if obj is not None and op is None:
            fetched_here(obj, self.ledger, rec, self.core.id)  # a move to another in-process worker finds it
        return rec

    def _ledger(self, msg, session):
        """The ledger's records: this session's part, or with the worker's token every session's."""
        since = _int(msg, "since", 0)
        limit = _int(msg, "limit", READ_LIMIT)
        if since < 0 or not 1 <= limit <= READ_LIMIT:
            raise SyftError(f"ledger takes since >= 0 and 1 <= limit <= {READ_LIMIT}")
        everything = msg.get("all") is True
        if everything and not may_read_all(self.ledger_token, msg.get("token")):
            raise SyftError(f"reading every session's ledger on worker {self.core.id!r} takes the worker's token "
                            f"(token=...); without it a client reads its own session's part")
        return self.ledger.read(session, everything=everything, since=since, limit=limit)

    def _store(self, msg, session):
        note = parse_note(msg)
        obj = self._checked_object(msg)
        obj_id = self._own(session, self.core.store(obj))
        nbytes = dense_bytes(obj)
        if note is None or note.why is None:
            source = arrived_from(obj, self.core.id)  # in process a move hands over the object itself
            if source is not None:
                self.ledger.add("moved", "in", session, nbytes, message_cell(msg), obj_id, peer=source,
                                peer_kind="worker")
                return obj_id
            self._note_in(msg, session, note, "stored", nbytes, obj_id)
            return obj_id
        led = self.ledger
        led.add(WHY[note.why], "in", session, nbytes, message_cell(msg), obj_id, peer=note.peer,
                peer_kind=_PEER_KIND[note.why] if note.peer else "client", op=note.op)
        return obj_id

    def _load(self, msg, session):
        """Data the worker itself holds: no session or pointer releases it; ``delete`` does."""
        note = parse_note(msg)
        obj = self._checked_object(msg)
        tags, description = _tags_and_description(msg)
        if tags:
            obj.tags = set(tags)
        if description is not None:
            obj.description = description
        obj_id = self.core.store(obj, held=True)
        self._note_in(msg, session, note, "stored", dense_bytes(obj), obj_id, op="load")
        return obj_id

    def _run(self, msg, session):
        name = msg.get("op")
        if type(name) is _OpOverload:  # in process: the op itself (no decoder ever makes one)
            if id(name) not in _ALLOWED_IDS:
                allowlist.resolve(allowlist.op_name(name))  # refused in the words a remote worker uses
            op = name
        else:
            op = _ALLOWED.get(name) if type(name) is str else None
            if op is None:
                op = allowlist.resolve(name)  # raises OpNotAllowedError saying why
        args, kwargs = msg.get("a"), msg.get("k")
        if type(args) is not list or (kwargs is not None and type(kwargs) is not dict):
            raise SyftError("run takes a list of arguments and a map of keyword arguments")
        return self.run_op(op, args, kwargs, session, msg)

    def run_op(self, op, args: list, kwargs, session: Session, msg: dict | None = None):
        """Run an allowed op for ``session``: the op itself and its argument list (a ``run``
        message's, or an in-process pointer's, ``msg`` None: no note, the running cell). The
        same allow-list, checks, errors, session references and ledger record every way."""
        if id(op) not in _ALLOWED_IDS:
            if type(op) is not _OpOverload:
                raise SyftError("run takes an op")
            allowlist.resolve(allowlist.op_name(op))  # refused in the words a remote worker uses
        note = parse_note(msg) if msg is not None and "note" in msg else None
        result = self.core.run(op, args, kwargs)
        nbytes = carried_bytes(args) + (carried_bytes(kwargs.values()) if kwargs else 0)
        obj_id = result.id if type(result) is NewObject else None
        if obj_id is not None:  # the common case, inline (this is every pointer op's path)
            refs = session.refs
            refs[obj_id] = refs.get(obj_id, 0) + 1
            self.sessions_with_refs.add(session)
        if note is None:  # a client's own op: the ledger's compact record (named when read)
            cell = _current_cell.number if msg is None else message_cell(msg)
            self.ledger.add_op(session, nbytes, cell, obj_id, op)
        else:
            self._note_in(msg, session, note, "op", nbytes, obj_id, op=op_label(op))
        return result if obj_id is not None else self._claim(session, result)

    def _fetch(self, msg, session):
        obj_id = _int(msg, "id")
        note = parse_note(msg)
        obj = self.core.lookup(obj_id)
        if getattr(obj, "kind", None) == "plan":  # a stored plan travels as its JSON graph
            out = {"plan": obj.builds.to_json(), "tags": sorted(obj.tags), "description": obj.description}
            self._note_out(msg, session, note, None, obj_id, len(out["plan"]),
                           op="copy" if msg.get("keep") else f"plan {obj.builds.name}")
            if msg.get("keep"):
                return out
            # a plan's reply holds no memory of the store: it leaves once the reply has gone out
            return Then(out, sent=lambda: self.core.objects.get(obj_id) is obj and self._take(obj_id))
        if msg.get("keep"):  # still in the store while its reply travels: send a copy
            reserved = self._reserve_reply(dense_bytes(obj), f"a copy of object {obj_id} to send")
            self._note_out(msg, session, note, None, obj_id, dense_bytes(obj), op="copy")
            return Then(obj, snapshot=True, reserved=reserved)
        # A get takes the object out of the store before its reply travels, so no other
        # command can reach it meanwhile; if the reply cannot be delivered it goes back.
        snapshot = shares_memory(obj)
        copy = dense_bytes(obj) if snapshot or needs_copy(obj) else 0  # an expand's get makes it whole
        reserved = self._reserve_reply(copy, f"object {obj_id} made whole to send")
        refcount, held = self.core.refcounts.get(obj_id, 0), obj_id in self.core.held
        holders = self._disown(obj_id)
        self.core.fetch(obj_id)
        if self.core.budget is not None:  # its memory leaves the store's count, not the budget, until sent
            kept = storage_bytes(obj)
            self.core.budget.hold(kept)
            reserved += kept
        then = Then(obj, snapshot=snapshot, reserved=reserved)
        self._note_out(msg, session, note, obj, obj_id, dense_bytes(obj))

        def failed():  # its budget first: the object is counted by the store again
            self.reply_done(then)
            self._put_back(obj_id, obj, refcount, held, holders)
        then.failed = failed
        return then

    def _take(self, obj_id):
        self._disown(obj_id)
        return self.core.fetch(obj_id)

    def _put_back(self, obj_id, obj, refcount, held, holders):
        for s, n in holders.items():
            if s.ended:
                refcount -= n  # its client has left meanwhile: its references are gone
            else:
                s.refs[obj_id] = s.refs.get(obj_id, 0) + n
                self.sessions_with_refs.add(s)
        if obj_id in self.core.objects or not (refcount > 0 or held):
            return
        self.core.store(obj, obj_id, refcount=refcount, held=held)
        if held:  # a held object's store keeps no count: the references sessions took on it
            for _ in range(refcount):
                self.core.incref(obj_id)

    def _delete(self, msg, session):
        obj_id = _int(msg, "id")
        self._take(obj_id)
        copied = self.ledger.last_fetch(session, obj_id)
        if copied is not None:  # a copy sent, then the original deleted: the object moved (remote)
            self.ledger.retag(copied, "moved", copied["peer"], copied["peer_kind"])
        else:
            self.ledger.add("deleted", "in", session, 0, message_cell(msg), obj_id)

    def _hold(self, msg, session):
        """The worker keeps an object the session holds a reference to (``plan.send(bob, keep=True)``,
        ``bob.load(plan)``): it outlives the session, as loaded data does; ``delete`` removes it."""
        obj_id = _int(msg, "id")
        if session.refs.get(obj_id, 0) < 1:
            raise ObjectNotFoundError(self.id, obj_id)  # a session keeps only what it holds
        self.core.hold(obj_id)

    def _incref(self, msg, session):
        obj_id = _int(msg, "id")
        self.core.incref(obj_id)
        self._own(session, obj_id)

    def _release(self, msg, session):
        self.release(session, msg.get("ids"))

    # plans travel as their JSON graph (docs/plan-format.md), validated here before anything runs
    def _store_plan(self, msg, session):
        builds = PlanBuilds.from_json(_str(msg, "g"))  # every graph of the plan, one per signature
        state = msg.get("s") or []
        if type(state) is not list or not all(type(t) is _Tensor for t in state):
            raise SyftError("a plan's state is a list of tensors")
        tags, description = _tags_and_description(msg)
        obj_id = self._own(session, self.core.store_plan(builds, state, tags, description, json_size=len(msg["g"])))
        self.ledger.add("stored", "in", session, len(msg["g"]) + carried_bytes(state), message_cell(msg), obj_id,
                        op=f"plan {builds.name}")
        return obj_id

    def _run_plan(self, msg, session):
        args, state = _ids(msg, "a"), msg.get("s")
        plan_id = _int(msg, "id")
        hint = self._plan_hint
        if hint is not None:
            self._plan_hint = None
            hint = hint[1:5] if hint[0] is msg else None  # (the graph and key quick found: WorkerCore.run_plan)
        state = None if state is None else _ids(msg, "s")
        out = self._claim(session, self.core.run_plan(plan_id, args, state) if hint is None
                          else self.core.run_plan(plan_id, args, state, hint=hint))
        plan = self.core.objects.get(plan_id)
        name = getattr(getattr(plan, "builds", None), "name", None)
        self.ledger.add("plan run", "in", session, 0, message_cell(msg), plan_id,
                        op=f"plan {name}" if name else None)
        return out

    def _one_off_graph(self, text: str) -> PlanGraph:
        """The validated graph of ``text``: a secure computation sends the same round programs again
        and again (their public values travel beside the text, in ``cv``), so the last GRAPH_CACHE
        texts' graphs (each at most QUICK_GRAPH_TEXT) are kept, compiled, and each run gets its own
        shallow copy (its constants its own; the nodes, read only, shared)."""
        if len(text) > QUICK_GRAPH_TEXT:  # a large one (constants inline) is not kept: memory outside the quota
            return PlanGraph.from_json(text)
        cached = self._graphs.get(text)
        if cached is None:
            cached = PlanGraph.from_json(text)
            cached._program or cached._compile()
            if len(self._graphs) >= GRAPH_CACHE:
                self._graphs.pop(next(iter(self._graphs)))
            self._graphs[text] = cached
        return copy.copy(cached)

    def _run_graph(self, msg, session):
        """Run a one-off graph; its outputs are stored under the ids ``o`` names, except those
        ``ret`` names (optional, a subset of ``o``): their values come back in the reply, in
        output order, and are not kept (a run_graph plus a get of each, in one message)."""
        note = parse_note(msg)
        graph = self._one_off_graph(_str(msg, "g"))
        carried = 0
        if "cv" in msg:  # the graph's constants as raw tensor bytes (the JSON lists empty placeholders)
            graph.constants = _raw_constants(msg["cv"], graph)
            carried = carried_bytes(graph.constants)
        out = self._graph_results(graph, msg, session, note=note)
        self._note_in(msg, session, note, "op", len(msg["g"]) + carried, None, op=f"graph of {len(graph.nodes)} ops")
        return out

    def _deal(self, msg, session):
        """A crypto provider's program (syft_lab/smpc/provider.py): run_graph, with the graph's
        last ``len(bits)`` inputs uniform random words drawn here from the cryptographic
        generator (``bits[k]``: 64, a ring element, or fewer: an integer below 2^bits), so the
        dealer's material is made on its worker and never travels to it. The graph carries no
        constants; its ops pass the same allow-list and quotas as run_graph's: a client gains
        nothing but uniform words."""
        note = parse_note(msg)
        graph = PlanGraph.from_json(_str(msg, "g"))
        bits = msg.get("bits")
        if (type(bits) is not list or not bits or len(bits) > len(graph.inputs)
                or not all(type(b) is int and 1 <= b <= 64 for b in bits)):
            raise SyftError("deal's 'bits' lists, per drawn input (the graph's last inputs), a width of 1 to 64 bits")
        if graph.constants:
            raise SyftError("a dealer program carries no constants: its random words are drawn on the worker")
        specs = graph.inputs[len(graph.inputs) - len(bits):]
        nbytes = 0
        for spec in specs:
            if spec["role"] != "input" or spec["dtype"] != "int64" or not all(type(s) is int and s >= 0 for s in spec["shape"]):
                raise SyftError(f"a drawn input is int64 of a fixed shape, got {spec['dtype']}{spec['shape']}")
            numel = 1
            for s in spec["shape"]:
                numel *= s
            nbytes += 8 * numel
        reserved = self._reserve_reply(nbytes, "the dealer's random words")  # until the program has run
        try:
            drawn = [random_words(spec["shape"]) if b == 64 else random_below(spec["shape"], b)
                     for spec, b in zip(specs, bits)]
            out = self._graph_results(graph, msg, session, drawn, note=note, default="dealer")
            self.ledger.add("op", "in", session, len(msg["g"]), message_cell(msg), None,
                            op=f"deal: {nbytes // 8} random words")
            return out
        finally:
            if reserved:
                self.core.budget.release(reserved)

    def _graph_results(self, graph, msg, session, drawn=(), *, note=None, default=None):
        """``default``: what a returned value is when no note says (a deal's: dealer material)."""
        outputs = _ids(msg, "o")
        ret = msg.get("ret")
        if ret is not None and not set(_ids(msg, "ret")) <= set(outputs):
            raise SyftError(f"{msg.get('c')}'s 'ret' names some of its outputs (a subset of 'o')")
        results = self.core.run_graph(graph, _ids(msg, "i"), outputs, drawn)
        if not ret:
            return self._claim(session, results)
        wanted, out, snapshot, reserved = set(ret), [], False, 0
        budget = self.core.budget
        for r in results:
            if r.id in wanted:
                value = self.core.fetch(r.id)
                snapshot = snapshot or shares_memory(value)
                if budget is not None:  # held by the reply until it has gone out
                    n = storage_bytes(value) + (dense_bytes(value) if needs_copy(value) else 0)
                    budget.hold(n)
                    reserved += n
                out.append(value)
                if note is None and default is not None:
                    note = parse_note({"note": {"why": default}})
                self._note_out(msg, session, note, None, r.id, dense_bytes(value), op=note.op if note else None)
                if note is not None:
                    note.items = None  # a note's item counts go with the first value only
            else:
                out.append(self._claim(session, r))
        return Then(out, snapshot=snapshot, reserved=reserved)

    def _search(self, msg, session):
        q = msg.get("q")
        if type(q) is not list or not q or not all(type(t) is str for t in q):
            raise SyftError("search takes a list of tags")
        return [[i, m] for i, m in self.core.search_meta(tuple(q))]

    def _describe(self, msg, session):
        return self.core.describe(_int(msg, "id"))

    def _summary(self, msg, session):
        offset = _int(msg, "offset", 0)
        limit = _int(msg, "limit", DEFAULT_SUMMARY_LIMIT)
        if offset < 0 or not 1 <= limit <= MAX_SUMMARY_LIMIT:
            raise SyftError(f"summary takes offset >= 0 and 1 <= limit <= {MAX_SUMMARY_LIMIT}")
        return {"total": len(self.core.objects), "objects": self.core.summary(offset, limit)}
