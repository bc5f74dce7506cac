"""The client side of the worker protocol: one client for every worker, over any transport.

Layers (python-websockets style: the protocol knows no sockets, the transport no commands)::

    BaseWorker     base.py       what users call: send, load, search, unload, move policy ...
    WorkerClient   here          builds every request, keeps the release queue and the sy.batch
                                 hook, turns replies into values and typed errors, issues
                                 requests without waiting (``submit`` / ``gather``); no I/O
    Transport      transport.py  carries requests to one WorkerService and brings the replies
                                 back, in order:
        InProcessTransport   virtual.py     calls the service directly with the message dicts
        FramedTransport      transport.py   wire-format frames (bytes): encoding, request ids,
                                            decoding, progress bars; subclasses move the frames
            WebSocketTransport  websocket.py    over a websocket connection
            RayTransport        syft_lab/ray/   through a Ray actor hosting the service
    WorkerService  service.py    runs each command on the worker's WorkerCore (core.py)

A worker is ``WorkerClient(worker_id, transport)``; the named workers are thin subclasses
(``VirtualWorker``, ``WebSocketWorker``, ``RayWorker``) that build their transport.

Writing a transport: subclass ``FramedTransport`` for anything that carries bytes, and
implement ``_connect()``, ``_send_frame(frame)``, ``_receive_frame()`` and ``_disconnect(done)``
(see its docstring); or subclass ``Transport`` directly (``open``/``exchange``/``close``, with
``in_process = True``) for a transport that hands the service this process's objects, as the
in-process one does.

Limits and guarantees:
- Replies come in request order; a client may have several requests in flight on one
  transport (``submit``), and requests to several workers in flight at once (``gather``).
- A request never re-enters its own transport: a second request from inside a request on the
  same remote worker (a callback) raises SyftError instead of corrupting the stream.
- Releases (a pointer garbage collected) may happen at any moment, even inside a request: they
  are queued and travel with the next request (``rel``), or apply at once in process.
- A transport error (``WorkerUnavailableError``, ``WireError``) fails every request in flight on
  that transport; the next request reconnects.
"""
from __future__ import annotations

import collections
import threading

import torch

from ..errors import SyftError, WorkerUnavailableError
from ..plans.graph import PlanBuilds
from ..plans.plan import StoredPlan
from ..tensors.pointer import PointerTensor, wrap_result
from ..wire.allowlist import op_name
from ..wire.format import WireError
from .. import events
from . import registry
from .base import BaseWorker, closed_error
from .transport import (ConnectionLost, FramedTransport, RemoteQuotaExceededError, Transport,  # noqa: F401
                        error_from_reply)

PUSHED_TYPES = ("stored", "changed", "deleted")  # the events a service pushes (feed.py)
SUMMARY_PAGE = 10000  # entries per summary request (the service's maximum)
SUMMARY_CAP = 100_000  # summary() lists at most this many objects (the views stay usable)
# A client keeps at most HELD_PUSHES pushes (of at most PUSH_RECORDS records; a poll reads at most
# POLL_FRAMES frames: transport.py) until its request ends; past it, what it held becomes one
# resync (the view reads the lane again).
HELD_PUSHES = 64


# --- requests in flight ------------------------------------------------------------------------

class Pending:
    """A request sent and not answered yet. ``result()`` waits for its reply (receiving, in
    order, the replies of requests sent before it on the same worker)."""

    __slots__ = ("client", "done", "value", "error", "wrap")

    def __init__(self, client, wrap=None):
        self.client, self.wrap = client, wrap
        self.done, self.value, self.error = False, None, None

    def result(self):
        if not self.done:
            self.client._wait_for(self)
        if self.error is not None:
            raise self.error
        return self.wrap(self.value) if self.wrap is not None else self.value

    def __repr__(self):
        return f"<Pending on {self.client.id!r}: {'done' if self.done else 'in flight'}>"


def gather(pending) -> list:
    """The results of requests in flight (``Pending``s from ``submit``), in order.

    Waits for every reply, so no worker is left with a reply unread; then raises the first
    error, if any. Requests to different workers run at the same time: the time of a gather
    is about that of its slowest request, not their sum::

        outs = sy.workers.gather([submit(aten.add.Tensor, (a0, b0)), submit(aten.add.Tensor, (a1, b1))])
    """
    results, first = [], None
    for p in pending:
        try:
            results.append(p.result())
        except Exception as e:  # the others still get their replies read
            results.append(None)
            if first is None:
                first = e
    if first is not None:
        raise first
    return results


def submit(op, args=(), kwargs=None) -> Pending:
    """Send one op on pointers to their worker without waiting for the reply.

    ``op`` is an aten OpOverload (``torch.ops.aten.add.Tensor``), ``args``/``kwargs`` hold
    PointerTensors to objects on one worker (and plain Python values or 0-dim local tensors,
    as a pointer op takes them). ``submit(...).result()`` (or ``gather``) gives what the op
    would have returned: new PointerTensors, or the caller's own pointer for an in-place op.
    On an in-process worker the op runs at once; its result waits in the Pending."""
    loc = None
    wire_args = []
    for a in args:
        a, loc = _wire_arg(a, loc)
        wire_args.append(a)
    wire_kwargs = None
    if kwargs:
        wire_kwargs = {}
        for k, v in kwargs.items():
            wire_kwargs[k], loc = _wire_arg(v, loc)
    if loc is None:
        raise SyftError(f"submit({op}) needs at least one PointerTensor argument: it runs on that pointer's worker")
    if not isinstance(loc, WorkerClient):
        raise SyftError(f"worker {loc.id!r} cannot take requests without waiting")
    args = tuple(args)
    return loc._submit_run(op, wire_args, wire_kwargs, lambda out: wrap_result(PointerTensor, out, loc, args))


def _wire_arg(a, loc):
    """One argument of a submitted op as a command carries it, and the worker it names."""
    if isinstance(a, PointerTensor):
        a._check_alive()
        if loc is not None and a.location is not loc:
            raise SyftError(f"an op mixes data on worker {loc.id!r} with data on worker {a.location.id!r}: "
                            f"submit one op per worker")
        return a._ref, a.location
    if type(a) in (list, tuple):
        out = []
        for b in a:
            b, loc = _wire_arg(b, loc)
            out.append(b)
        return out, loc
    if isinstance(a, torch.Tensor):
        if a.dim() == 0 and type(a) is torch.Tensor:
            return a.detach(), loc
        raise SyftError("a submitted op takes pointers and 0-dim local tensors only: send the tensor first")
    if type(a) is torch.device and a.type == "meta":  # the pointer's placeholder device: where the data is
        return torch.device("cpu"), loc
    return a, loc


# --- the client ---------------------------------------------------------------------------------

_op_names: dict = {}  # id(OpOverload) -> its wire name (ops live as long as torch)


def _wire_name(op) -> str:
    name = _op_names.get(id(op))
    if name is None:
        name = _op_names[id(op)] = op_name(op)
    return name


def _plan_or_object(obj):
    """A fetched object; a plan arrives as its JSON graph and is validated here."""
    if type(obj) is dict and "plan" in obj:
        return StoredPlan(PlanBuilds.from_json(obj["plan"]), [], obj.get("tags") or (), obj.get("description"))
    return obj


def plan_state_to_send(state: list, worker) -> list:
    """The state tensors a plan carries to ``worker``: none when the module was sent there
    already (calls then use its pointers), else local copies."""
    pointers = [t for t in state if isinstance(t, PointerTensor)]
    if not pointers:
        return list(state)
    if len(pointers) == len(state) and all(p.location is worker for p in pointers):
        return []
    raise SyftError(f"a plan's state must be local, or sent to worker {worker.id!r} as a whole")


class WorkerClient(BaseWorker):
    """A worker as this process uses it: every BaseWorker operation as requests on a Transport.

    ``WorkerClient(worker_id, transport)``; ``worker_id`` None: the service's hello names it.
    The named workers (VirtualWorker, WebSocketWorker, RayWorker) are subclasses that build
    their transport and add what only they have (a URL, an actor)."""

    kind = "worker"

    def __init__(self, worker_id: str | None, transport: Transport):
        self.transport = transport
        transport.client = self
        self._releases: collections.deque = collections.deque()
        self._waiting: collections.deque = collections.deque()  # Pendings in request order
        # a remote transport is used by one thread at a time; in process, requests nest
        # (a worker's op on a pointer it stores runs on that pointer's worker) and need no lock
        self._lock = None if transport.in_process else threading.Lock()
        self._owner = None  # the thread inside a request (re-entrance would corrupt the stream)
        self._restarted = False
        self._pushes: collections.deque = collections.deque()  # pushed records not emitted yet
        # a function sending what must reach the worker before any other request (a protocol
        # round held back to travel with the next one: smpc/runtime.py), called once, by the next request
        self.before_request = None
        self.id = "?"  # for error messages until the service tells its id
        if worker_id is not None:
            BaseWorker.__init__(self, worker_id)
        if self._lock is None:
            # in process nothing is ever queued or in flight (releases apply at once, a submit
            # completes at once): a request is the transport's exchange, one call less per op
            self._request = transport.exchange
            hello = transport.open()
        else:
            with self._lock:
                hello = transport.open()
        if worker_id is None:
            BaseWorker.__init__(self, hello["worker"])
        registry.register(self)

    # --- connection ------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self.transport.state

    @property
    def limits(self) -> dict | None:
        """The quotas the worker announced in its hello: ``{"max_bytes", "max_objects",
        "source"}`` (``source``: where its memory budget comes from, e.g. its cgroup's limit),
        or None (an in-process worker, which has none)."""
        hello = getattr(self.transport, "hello", None)
        return hello.get("limits") if type(hello) is dict else None

    @property
    def restarted(self) -> bool:
        """Whether the worker restarted (and lost its objects) since this client first connected."""
        return self._restarted

    def _on_restart(self) -> None:
        """The transport reconnected to a new process of this worker: its objects are gone,
        and so is the meaning of the queued releases."""
        self._restarted = True
        self._releases.clear()

    def close(self) -> None:
        """Send the queued releases, close the transport and forget this worker."""
        lock = self._lock
        if lock is not None:
            lock.acquire()
        try:
            self._fail_waiting(closed_error(self.id))
            if self._releases and self.transport.state == "connected":
                try:
                    self._exchange_locked({"c": "release", "ids": []})
                except SyftError:
                    pass
            self.transport.close(done=True)
        finally:
            if lock is not None:
                lock.release()
        registry.unregister(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- requests ---------------------------------------------------------------------------
    def _request(self, msg: dict, *, detach: bool = False, label: str | None = None):
        """One request and its result (raises its typed error). Every request goes through here."""
        lock = self._lock
        if lock is None:  # in process: no queue to flush (releases apply at once), no stream
            if self._waiting:
                return self._submit(msg, detach, label).result()
            return self.transport.exchange(msg, detach=detach, label=label)
        return self._locked(self._exchange_locked, msg, detach, label)

    def _locked(self, fn, *args):
        """``fn(*args)`` (an exchange, or a transport's own request such as ``follow``) as one
        request of this client: alone on the transport, after the replies in flight; the
        pushes it brought are emitted after it."""
        if self.before_request is not None:
            self._send_held()
        if self._owner == threading.get_ident():
            raise SyftError(f"re-entrant call on worker {self.id!r} (a callback inside a request?)")
        try:
            with self._lock:
                self._owner = threading.get_ident()
                try:
                    if self._waiting:
                        self._drain()
                    if self.transport.state != "connected":
                        self.transport.ensure_open()
                    return fn(*args)
                finally:
                    self._owner = None
        finally:
            if self._pushes:
                self._emit_pushes()

    def _exchange_locked(self, msg, detach=False, label=None):
        transport = self.transport
        if transport.state != "connected" and not transport.in_process:
            transport.ensure_open()
        rel = self._take_releases(msg)
        try:
            return transport.exchange(msg, detach=detach, label=label)
        except ConnectionLost:
            if rel:
                self._releases.extendleft(reversed(rel))
            raise

    def _take_releases(self, msg):
        if not self._releases:
            return None
        rel = []
        while self._releases:
            rel.append(self._releases.popleft())
        msg["rel"] = rel
        return rel

    def _submit(self, msg, detach=False, label=None, wrap=None) -> Pending:
        """Send a request without waiting; its reply waits in the returned Pending."""
        if self.before_request is not None:
            self._send_held()
        p = Pending(self, wrap)
        lock = self._lock
        if lock is None:
            try:
                p.value = self.transport.exchange(msg, detach=detach, label=label)
            except SyftError as e:
                p.error = e
            p.done = True
            return p
        if self._owner == threading.get_ident():
            raise SyftError(f"re-entrant call on worker {self.id!r} (a callback inside a request?)")
        with lock:
            self._owner = threading.get_ident()
            try:
                transport = self.transport
                if not self._waiting and transport.state != "connected":
                    transport.ensure_open()
                rel = self._take_releases(msg)
                try:
                    transport.send(msg, detach=detach, label=label)
                except ConnectionLost:
                    if rel:
                        self._releases.extendleft(reversed(rel))
                    self._fail_waiting(None)
                    raise
                self._waiting.append(p)
            finally:
                self._owner = None
        return p

    def _wait_for(self, p: Pending) -> None:
        lock = self._lock
        if lock is None:
            return
        if self._owner == threading.get_ident():
            raise SyftError(f"re-entrant call on worker {self.id!r} (a callback inside a request?)")
        try:
            with lock:
                self._owner = threading.get_ident()
                try:
                    while not p.done:
                        self._receive_one()
                finally:
                    self._owner = None
        finally:
            if self._pushes:
                self._emit_pushes()

    def _drain(self) -> None:
        while self._waiting:
            self._receive_one()

    def _receive_one(self) -> None:
        q = self._waiting.popleft()
        try:
            q.value = self.transport.receive()
        except (WorkerUnavailableError, WireError) as e:  # the transport broke: nothing more comes
            q.error = e
            self._fail_waiting(e)
        except SyftError as e:
            q.error = e
        q.done = True

    def _fail_waiting(self, error) -> None:
        while self._waiting:
            q = self._waiting.popleft()
            q.error = error or self.transport.unavailable("the connection was lost")
            q.done = True

    # --- the worker's events (pushed by a remote service; docs/wire-format.md) ---------------
    def follow_events(self) -> bool:
        """Have the worker's per-object events ("stored", "changed", "deleted", each with the
        object's world entry) arrive on this process's event bus (``syft_lab.events``), as an
        in-process worker's do: the world view then follows the worker object by object.
        Returns whether they do (True at once in process; False if the service cannot push)."""
        transport = self.transport
        if transport.in_process:
            return True
        if getattr(transport, "following", None) is None:
            return False
        if transport.following:
            return True
        try:
            return bool(self._locked(transport.follow))
        except SyftError:
            return False

    @property
    def follows_events(self) -> bool:
        """Whether the worker's events arrive on this process's bus (``follow_events``)."""
        return self.transport.in_process or bool(getattr(self.transport, "following", False))

    def poll_events(self) -> None:
        """Emit the events the worker pushed while no request was in flight (never waits: a
        request in flight reads them itself)."""
        lock = self._lock
        if lock is None or not lock.acquire(blocking=False):
            return
        try:
            if not self._waiting and self.transport.state == "connected":
                self.transport.poll()
        finally:
            lock.release()
        if self._pushes:
            self._emit_pushes()

    def _send_held(self) -> None:
        """Send what ``before_request`` holds back, once, ahead of the request being made."""
        send, self.before_request = self.before_request, None
        send()

    def _pushed(self, records) -> None:
        """Records a push brought (None: some were lost, a resync), kept until the request ends:
        a subscriber may then make requests of its own. Past HELD_PUSHES, one resync stands
        for all of them."""
        pushes = self._pushes
        if len(pushes) >= HELD_PUSHES:  # (the records after it are kept again, up to the bound)
            pushes.clear()
            records = None
        pushes.append(records)

    def _emit_pushes(self) -> None:
        """The pushed records as events on this process's bus, outside any request; a lost
        push as one "resync" event for this worker (its lane is read again)."""
        wid = self.id
        while self._pushes:
            try:
                records = self._pushes.popleft()
            except IndexError:
                return
            if records is None:
                events.emit("resync", wid, None)
                continue
            for r in records:
                if type(r) is not dict or r.get("worker") != wid:
                    continue  # a record about another worker is not this service's to give
                kind, oid = r.get("type"), r.get("id")
                if kind not in PUSHED_TYPES or type(oid) is not int:
                    continue
                entry = r.get("entry")
                fields = {"entry": entry} if type(entry) is dict else {}
                if type(r.get("reason")) is str:
                    fields["reason"] = r["reason"]
                events.emit(kind, wid, oid, pushed=True, **fields)

    def submit_request(self, msg: dict, *, detach: bool = False, label: str | None = None) -> Pending:
        """Send one command message (docs/wire-format.md, "Commands") without waiting for its
        reply; ``Pending.result()`` (or ``gather``) gives its result or raises its typed error.

        For code that drives workers at the command level (syft_lab/smpc: a ``run_graph`` per
        party per round, all parties' requests in flight at once). ``detach``: the message's
        payload (``o``, ``s``) is the caller's object, which the worker must copy. Most code
        wants ``submit(op, args)`` instead, which makes pointers of the results."""
        return self._submit(msg, detach, label)

    def _submit_run(self, op, args, kwargs, wrap) -> Pending:
        if self._batch is not None:
            raise SyftError(f"submit cannot run inside sy.batch({self.id}): the batch sends its ops at its end")
        return self._submit({"c": "run", "op": _wire_name(op), "a": args, "k": kwargs}, wrap=wrap)

    # --- what BaseWorker asks of a worker ---------------------------------------------------
    def _run(self, func, args, kwargs):
        if self._batch is not None:  # inside sy.batch(worker): recorded, sent as one graph at the end
            return self._batch.record(func, args, kwargs)
        if self._lock is None:  # in process the op itself (the service checks it against the allow-list)
            return self._request({"c": "run", "op": func, "a": args, "k": kwargs})
        return self._request({"c": "run", "op": _wire_name(func), "a": args, "k": kwargs})

    def _release(self, obj_id) -> None:
        batch = self._batch
        if batch is not None and obj_id in batch.pending:
            batch.dropped.add(obj_id)
            return
        release_now = self.transport.release_now
        if release_now is not None:
            release_now(obj_id)
        else:
            self._releases.append(obj_id)  # sent with the next request: see the module docstring

    def _store_copy(self, obj) -> int:
        return self._request({"c": "store", "o": obj}, detach=True, label="send")

    def _load(self, obj, tags, description) -> int:
        """Store ``obj`` as data the worker itself holds (no session or pointer releases it)."""
        return self._request({"c": "load", "o": obj, "tags": list(tags), "d": description}, detach=True,
                             label="load")

    def _receive_from(self, source, obj_id, requires_grad, keep_source=False):
        """Move (or, with ``keep_source``, copy) an object from ``source`` to this worker: copy it
        here through this process, then delete it at the source, so a failure on the way loses
        nothing. Between two in-process workers the object itself changes stores."""
        src_transport = getattr(source, "transport", None)
        if not keep_source and self.transport.in_process and getattr(src_transport, "in_process", False):
            obj = source._fetch(obj_id)
            new_id = self._request({"c": "store", "o": obj}, label="move")
        else:
            # through this process, but noted as the worker-to-worker flow it is: each worker's
            # record says who sent what to whom (workers/ledger.py, notes)
            obj = _plan_or_object(source._request({"c": "fetch", "id": obj_id, "keep": True,
                                                   "note": {"why": "move", "peer": self.id}}, label="copy"))
            new_id = self._request({"c": "store", "o": obj, "note": {"why": "move", "peer": source.id}},
                                   label="copy" if keep_source else "move")
            if not keep_source:
                source._discard(obj_id)
        return PointerTensor(self, new_id, obj.shape, obj.dtype, requires_grad=requires_grad)

    def _copy_out(self, obj_id):
        """An independent copy of a stored object; the object stays on the worker."""
        return _plan_or_object(self._request({"c": "fetch", "id": obj_id, "keep": True}, label="copy"))

    def _fetch(self, obj_id):
        return _plan_or_object(self._request({"c": "fetch", "id": obj_id, "keep": False}, label="get"))

    def _discard(self, obj_id) -> None:
        self._request({"c": "delete", "id": obj_id})

    def _incref(self, obj_id) -> None:
        self._request({"c": "incref", "id": obj_id})

    def _hold(self, obj_id) -> None:
        self._request({"c": "hold", "id": obj_id})

    def _search(self, query):
        return [(i, meta) for i, meta in self._request({"c": "search", "q": list(query)})]

    # plans: the JSON graph travels as text; the worker validates it
    def _store_plan(self, builds, state, tags, description):
        return self._request({"c": "store_plan", "g": builds.to_json(), "s": plan_state_to_send(state, self),
                              "tags": list(tags), "d": description}, detach=True, label="send plan")

    def _run_plan(self, plan_id, args, state):
        return self._request({"c": "run_plan", "id": plan_id, "a": [a.id for a in args],
                              "s": None if state is None else [s.id for s in state]})

    def _run_graph(self, graph, input_ids, output_ids):
        return self._request({"c": "run_graph", "g": graph.to_json(), "i": list(input_ids), "o": list(output_ids)})

    def describe(self, obj_id: int) -> dict:
        """The root node of the object's chain tree (docs/inspection-model.md, version 2; no
        values: they stay on the worker); an object a ``sy.batch`` block has not made yet is
        one "pending" node."""
        batch = self._batch
        if batch is not None and obj_id in batch.pending:
            _, shape, dtype = batch.pending[obj_id]
            return {"kind": "pending", "type": "Tensor", "id": obj_id, "owner": self.id, "shape": list(shape),
                    "dtype": dtype, "preview": None, "children": []}
        return self._request({"c": "describe", "id": obj_id})

    def summary(self, limit: int = SUMMARY_CAP) -> list[dict]:
        """One entry per object on the worker (at most ``limit``), fetched in pages."""
        entries, seen, offset = [], set(), 0
        while len(entries) < limit:
            page = self._request({"c": "summary", "offset": offset, "limit": min(SUMMARY_PAGE, limit - len(entries))})
            objects = page["objects"]
            for e in objects:
                if e["id"] not in seen:  # objects that came or went between pages shift the offsets
                    seen.add(e["id"])
                    entries.append(e)
            offset += len(objects)
            if not objects or offset >= page["total"]:
                break
        return entries

    @property
    def objects(self) -> dict:
        """A snapshot of the worker's store: object id -> what the worker says about it."""
        return {e["id"]: e for e in self.summary()}

    def ping(self) -> bool:
        """True if the worker answers (reconnecting if needed); raises WorkerUnavailableError if not."""
        return self._request({"c": "ping"}) == "pong"

    def flush(self) -> None:
        """Send queued releases now (they otherwise travel with the next request)."""
        if self._releases and self.transport.state == "closed":
            self._releases.clear()  # its session ended with the close, and released them all
        elif self._releases:
            self._request({"c": "release", "ids": []})

    def __repr__(self):
        return f"<{type(self).__name__} {self.id!r}: {self.state}>"


class FramedWorker(WorkerClient):
    """A worker over a FramedTransport (a websocket connection, a Ray actor): what those
    workers share beside the client (their reply timeout, message size and service instance)."""

    @property
    def timeout(self) -> float | None:
        """Seconds to wait for a reply (None: forever); a late reply drops the connection."""
        return self.transport.timeout

    @timeout.setter
    def timeout(self, seconds: float | None) -> None:
        self.transport.timeout = seconds

    @property
    def max_message_size(self) -> int:
        return self.transport.max_message_size

    @property
    def instance(self):
        """The worker service's instance id; it changes when its process restarts."""
        return self.transport.instance
