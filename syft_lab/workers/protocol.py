"""The client side of the worker protocol: one client for every worker, over any transport.

Layers (python-websockets style: the protocol knows no sockets, the transport no commands)::

    BaseWorker     base.py       what users call: send, load, search, unload, move policy ...
    WorkerClient   here          builds every request, keeps the release queue and the sy.batch
                                 hook, turns replies into values and typed errors, issues
                                 requests without waiting (``submit`` / ``gather``); no I/O
    Transport      here          carries requests to one WorkerService and brings the replies
                                 back, in order:
        InProcessTransport   virtual.py     calls the service directly with the message dicts
        FramedTransport      here           wire-format frames (bytes): encoding, request ids,
                                            decoding, progress bars; subclasses move the frames
            WebSocketTransport  websocket.py    over a websocket connection
            RayTransport        syft_lab/ray/   through a Ray actor hosting the service
    WorkerService  service.py    runs each command on the worker's WorkerCore (core.py)

A worker is ``WorkerClient(worker_id, transport)``; the named workers are thin subclasses
(``VirtualWorker``, ``WebSocketWorker``, ``RayWorker``) that build their transport.

Writing a transport: subclass ``FramedTransport`` for anything that carries bytes, and
implement ``_connect()``, ``_send_frame(frame)``, ``_receive_frame()`` and ``_disconnect(done)``
(see its docstring); or subclass ``Transport`` directly (``send``/``receive``/``open``/``close``)
for a transport that hands the service this process's objects, as the in-process one does.

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
import time

import torch

from ..errors import ObjectNotFoundError, OpCancelledError, QuotaExceededError, RemoteError, SyftError, WorkerUnavailableError
from ..plans.graph import PlanBuilds
from ..plans.plan import StoredPlan
from ..tensors.pointer import PointerTensor, wrap_result
from ..wire.allowlist import OpNotAllowedError, op_name
from ..wire.format import DEFAULT_MAX_MESSAGE_SIZE, Decoder, RejectedMessage, WireError, encode
from .. import events, progress as progress_bars
from . import registry
from .base import BaseWorker, closed_error

PUSHED_TYPES = ("stored", "changed", "deleted")  # the events a service pushes (feed.py)
PROGRESS_THRESHOLD = 8 * 2**20  # a progress bar for transfers above this many bytes
SUMMARY_PAGE = 10000  # entries per summary request (the service's maximum)
SUMMARY_CAP = 100_000  # summary() lists at most this many objects (the views stay usable)
# What a worker pushes unasked is bounded here too, so a worker that floods pushes holds up no
# one: one poll reads at most POLL_FRAMES frames (the rest waits for the next), and a client keeps
# at most HELD_PUSHES pushes (of at most PUSH_RECORDS records, a worker's own bound) until its
# request ends; past either, what it held becomes one resync (the view reads the lane again).
POLL_FRAMES = 256
HELD_PUSHES = 64
PUSH_RECORDS = 2000


# --- errors ----------------------------------------------------------------------------------

class ConnectionLost(WorkerUnavailableError):
    """The transport broke while a request was on its way: it may not have arrived, so the
    releases it carried are queued again."""


class RemoteQuotaExceededError(RemoteError, QuotaExceededError):
    """A worker refused an op over its quotas (both a RemoteError and a QuotaExceededError)."""


class RemoteOpNotAllowedError(RemoteError, OpNotAllowedError):
    """A worker refused an op off its allow-list (both a RemoteError and an OpNotAllowedError)."""


class RemoteOpCancelledError(RemoteError, OpCancelledError):
    """A worker stopped an op past its time budget (both a RemoteError and an OpCancelledError)."""


class RemoteWireError(RemoteError, WireError):
    """A worker could not read or write a message (both a RemoteError and a WireError)."""


_TYPED = {"QuotaExceededError": RemoteQuotaExceededError, "OpNotAllowedError": RemoteOpNotAllowedError,
          "WireError": RemoteWireError, "OpCancelledError": RemoteOpCancelledError}


def error_from_reply(worker_id: str, err, restarted: bool = False) -> SyftError:
    """The typed SyftError for an error reply ``{"t": type, "m": message[, "id": obj id]}``:
    ObjectNotFoundError for a missing object (with a note if the worker restarted), the typed
    RemoteErrors above for quotas, the allow-list and the wire, RemoteError otherwise."""
    if not isinstance(err, dict):
        return RemoteError(worker_id, "SyftError", "malformed error reply")
    kind, message = str(err.get("t")), str(err.get("m"))
    if kind == "ObjectNotFoundError" and type(err.get("id")) is int:
        e = ObjectNotFoundError(worker_id, err["id"])
        if restarted:
            e.add_note(f"worker {worker_id!r} restarted since this client first connected: "
                       f"objects it held before are gone")
        return e
    return _TYPED.get(kind, RemoteError)(worker_id, kind, message)


# --- transports ------------------------------------------------------------------------------

class Transport:
    """Carries requests to one WorkerService and brings back their results, in order.

    A transport implements:

    ``open() -> dict``
        Connect (or reconnect) and exchange the hello; returns the service's hello reply
        (``{"worker": id, "instance": ..., ...}``). Raises WorkerUnavailableError if the
        service cannot be reached.
    ``send(msg, *, detach=False, label=None) -> None``
        Send one request (a dict, see docs/wire-format.md) without waiting for its reply.
        ``detach``: the message's payload (``o``, ``s``) is still the caller's object: the
        service must get its own copy, outside autograd (on the wire every payload is a copy).
        ``label``: what a progress bar calls a large transfer ("send", "get", ...).
    ``receive(*, label=None)``
        The result of the oldest request sent and not yet received; raises its error as a
        typed SyftError (``error_from_reply``), or WorkerUnavailableError / ConnectionLost /
        WireError when the transport itself failed (then nothing more arrives on it).
    ``close(done=True) -> None``
        Close the transport. ``done``: the client has left (the service ends its session);
        else the session lives on for a reconnect.
    ``state -> str``
        "connected", "disconnected" (the next request reconnects), "closed" or "in-process".

    and may override ``exchange(msg, ...)`` (send + receive, the common case: a faster path)
    and set ``release_now`` (a function(obj_id) applying a release at once instead of queueing
    it; in process). ``client`` is set to the WorkerClient using it (for its id in messages and for
    ``client._on_restart()`` after a reconnect found a new worker process). ``in_process``: the
    service runs in this process on this process's objects (no encoding, no lock needed)."""

    in_process = False
    client = None

    def open(self) -> dict:
        raise NotImplementedError

    def send(self, msg: dict, *, detach: bool = False, label: str | None = None) -> None:
        raise NotImplementedError

    def receive(self, *, label: str | None = None):
        raise NotImplementedError

    def exchange(self, msg: dict, *, detach: bool = False, label: str | None = None):
        self.send(msg, detach=detach, label=label)
        return self.receive(label=label)

    #: a function(obj_id) that applies one release at once (in process), or None: releases are
    #: queued and travel with the next request
    release_now = None

    def ensure_open(self) -> None:
        """Reconnect if the connection dropped while idle (a transport that can)."""

    def unavailable(self, why: str, cls=WorkerUnavailableError) -> WorkerUnavailableError:
        return cls(f"worker {self.worker_id!r} is unavailable: {why}")

    def close(self, done: bool = True) -> None:
        raise NotImplementedError

    @property
    def state(self) -> str:
        raise NotImplementedError

    @property
    def worker_id(self) -> str:
        return self.client.id if self.client is not None else "?"


class FramedTransport(Transport):
    """A transport that carries wire-format messages as frames of bytes.

    This class does the protocol work every byte transport shares: request ids, the hello,
    encoding (streamed in chunks above CHUNK_SIZE unless ``chunk_size`` says otherwise),
    decoding with one Decoder per connection, the reply-to-request check, typed errors,
    restart detection and progress bars. A subclass moves frames and implements:

    ``_connect() -> None``
        Open the connection (raise WorkerUnavailableError naming why not; AuthenticationError
        for a refused credential).
    ``_send_frame(frame) -> None``
        Send one frame (bytes or a memoryview); raise ConnectionLost if the connection broke.
    ``_receive_frame() -> bytes``
        The next frame from the service, in order; raise ConnectionLost if the connection
        broke, TimeoutError if none came in time: within ``time_left()`` seconds (the reply's
        deadline; what arrives meanwhile that is not a frame, a ping, does not extend it).
    ``_disconnect(done: bool) -> None``
        Close the connection (``done``: the client has left for good).
    ``_is_open() -> bool`` (optional)
        Whether the connection is still usable (default: True while connected).

    A transport that carries a whole message per call (bytes in, bytes out) sets
    ``chunk_size = WHOLE`` so no message is ever split, and pairs each ``_send_frame`` with the
    reply its ``_receive_frame`` returns (a queue of futures). One that carries a message as
    something other than frames (a Ray actor call: the first frame and the tensors' buffers
    as one argument) overrides ``_send_message(msg, detach, label)`` instead of
    ``_send_frame``; ``tests/workers/test_toy_transport.py`` is a complete byte transport."""

    chunk_size: int | None = None  # None: the wire format's CHUNK_SIZE
    progress: bool | None = None  # a bar for large transfers: None where a person sees it (progress.py); False never
    timeout: float | None = None  # seconds a reply may take to arrive, all of it (None: forever)

    def __init__(self, *, session: str, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, progress=None):
        self.session = session  # the client's session id, kept across reconnects
        self.max_message_size = max_message_size
        self.progress = progress
        self.instance = None  # the service's instance id; changes when its process restarts
        self.hello = None  # the service's last hello reply
        self._state = "disconnected"
        self._rid = 0
        self._in_flight: collections.deque = collections.deque()  # request ids sent, not answered
        self._decoder = None
        self._deadline = None  # time.monotonic() by which the reply being received is due (receive)
        self.following = False  # the service pushes this client its per-object events (``follow``)
        self._push_seq = 0  # the last push's sequence number on this connection

    # --- connection states -----------------------------------------------------------------
    @property
    def state(self) -> str:
        if self._state == "connected" and not self._is_open():
            return "disconnected"  # the service closed the connection since the last request
        return self._state

    def _is_open(self) -> bool:
        return True

    def open(self) -> dict:
        if self._state == "closed":  # every request of a closed client ends here (ensure_open)
            raise closed_error(self.worker_id)
        self._connect()
        self._state = "connected"
        self._decoder = Decoder(self.max_message_size)
        self._in_flight.clear()
        try:
            hello = self.exchange({"c": "hello", "session": self.session})
        except BaseException:
            self.drop()
            raise
        if self.worker_id != "?" and hello.get("worker") != self.worker_id:
            self.drop()
            raise SyftError(f"the worker at {self.address} is {hello.get('worker')!r}, not {self.worker_id!r}")
        if self.instance is not None and hello.get("instance") != self.instance and self.client is not None:
            self.client._on_restart()
        self.instance = hello.get("instance")
        self.hello = hello
        limit = hello.get("max_message_size")
        if type(limit) is int and limit > 0:
            self.max_message_size = min(self.max_message_size, limit)
        if self.following:  # a new connection: follow again; what was pushed meanwhile is lost
            self.following = False
            self.follow()
            self._lost()
        return hello

    # --- pushed events (docs/wire-format.md, "Pushed events") -------------------------------------
    def follow(self) -> bool:
        """Ask the service to push this client its per-object events from now on (a request:
        call it as one, under the client's lock). False if the service does not push."""
        if self.following:
            return True
        try:
            reply = self.exchange({"c": "subscribe"})
        except RemoteError:  # a service of an older version: the client reads lanes instead
            return False
        self._push_seq = reply.get("seq", 0) if type(reply) is dict else 0
        self.following = True
        return True

    def _on_push(self, msg: dict) -> None:
        """A push between replies: its records go to the client (emitted after the request)."""
        seq = msg.get("seq")
        records = msg.get("events")
        if (type(seq) is not int or type(records) is not list or seq != self._push_seq + 1
                or len(records) > PUSH_RECORDS):
            self._lost()  # a gap: the service dropped records for this client (it lagged)
        else:
            self.client._pushed(records)
        if type(seq) is int:
            self._push_seq = seq

    def _lost(self) -> None:
        if self.client is not None:
            self.client._pushed(None)

    def poll(self) -> None:
        """Read the pushes that arrived while no request was in flight (never blocks)."""
        if not self.following or self._in_flight or self._decoder is None or not self._is_open():
            return
        for _ in range(POLL_FRAMES):
            try:
                frame = self._poll_frame()
            except ConnectionLost:
                self.drop()
                return
            if frame is None:
                return
            try:
                msg = self._decoder.feed(frame)
            except WireError:
                self.drop()
                return
            if type(msg) is not dict or "push" not in msg:  # nothing but pushes comes unasked
                self.drop()
                return
            self._on_push(msg)

    def _poll_frame(self):
        """A frame that has arrived already, or None (a transport that cannot tell: None)."""
        return None

    @property
    def address(self) -> str:
        """Where the service is, for messages (a URL, an actor name)."""
        return "?"

    @property
    def restarted(self) -> bool:
        return self.client is not None and self.client.restarted

    def drop(self, done: bool = False) -> None:
        """Close the connection; requests in flight are lost (their callers get an error)."""
        if self._state != "closed":
            self._state = "disconnected"
        self._in_flight.clear()
        self._decoder = None
        try:
            self._disconnect(done)
        except Exception:
            pass

    def close(self, done: bool = True) -> None:
        self.drop(done)
        self._state = "closed"

    def unavailable(self, why: str, cls=WorkerUnavailableError) -> WorkerUnavailableError:
        return cls(f"worker {self.worker_id!r} at {self.address} is unavailable: {why}. Pointers to it work "
                   f"again once it is back (objects it held are gone if it restarted).")

    # --- one request ------------------------------------------------------------------------
    def ensure_open(self) -> None:
        """Reconnect if the connection dropped while idle (nothing was sent, so this is safe)."""
        if self._state != "connected" or not self._is_open():
            self.drop()
            self.open()

    def send(self, msg: dict, *, detach: bool = False, label: str | None = None) -> None:
        self._rid += 1
        rid = msg["r"] = self._rid
        try:
            self._send_message(msg, detach, label)
        except ConnectionLost:
            self.drop()
            raise
        self._in_flight.append(rid)

    def _send_message(self, msg: dict, detach: bool, label: str | None) -> None:
        """Encode one request (its id set) and send its frames, with a progress bar for a
        large one. The one hook a transport that carries a message per call overrides (a Ray
        actor call takes the first frame and the tensors' buffers as one argument)."""
        kw = {} if self.chunk_size is None else {"chunk_size": self.chunk_size}
        encoded = encode(msg, max_message_size=self.max_message_size, detach=detach, **kw)
        bar = None
        if encoded.streamed and encoded.size > PROGRESS_THRESHOLD:
            bar = self._bar(encoded.size, f"{label or 'send'} → {self.worker_id}")
        try:
            for frame in encoded.frames:
                self._send_frame(frame)
                if bar is not None:
                    bar.update(len(frame))
        finally:
            if bar is not None:
                bar.close()

    def receive(self, *, label: str | None = None):
        if not self._in_flight:
            raise SyftError(f"no request in flight on worker {self.worker_id!r}")
        rid = self._in_flight.popleft()
        decoder = self._decoder
        # ``timeout`` is a deadline for the whole reply, whatever else arrives first: pushes,
        # pings, a reply trickled a chunk (or a byte) at a time. The first read waits at most
        # ``timeout`` (time_left() says so while no deadline is set), every later one what is left.
        start = time.monotonic()
        try:
            frame = self._receive_frame()
            self._deadline = None if self.timeout is None else start + self.timeout
            while True:
                reply = decoder.feed(frame)
                if reply is None:
                    reply = self._receive_streamed(decoder, label)
                if "push" not in reply or "r" in reply:
                    break
                self._on_push(reply)  # pushed events before the reply: read on, within the deadline
                frame = self._next_frame()
        except RejectedMessage as e:
            if e.rid != rid:  # a reply for another request: out of step
                self.drop()
                raise self.unavailable("reply out of step") from None
            try:
                while decoder.in_message:  # the rest of a streamed reply: read and dropped, in step again
                    decoder.feed(self._next_frame())
            except TimeoutError:
                self.drop()
                raise self.unavailable(f"no reply within {self.timeout} s") from None
            raise RemoteWireError(self.worker_id, "WireError", f"its reply cannot be read here: {e.error}") from None
        except TimeoutError:
            self.drop()  # a late reply would arrive out of step: start afresh
            raise self.unavailable(f"no reply within {self.timeout} s") from None
        except ConnectionLost:
            self.drop()
            raise
        except WireError:
            self.drop()
            raise
        finally:
            self._deadline = None
        if reply.get("r") != rid:  # the service could not read our message and closes
            self.drop()
            if "err" in reply:
                raise error_from_reply(self.worker_id, reply["err"], self.restarted)
            raise self.unavailable("reply out of step")
        if "err" in reply:
            raise error_from_reply(self.worker_id, reply["err"], self.restarted)
        return reply.get("ok")

    def time_left(self) -> float | None:
        """Seconds a read of the reply being received may wait (None: no timeout): ``timeout``
        for its first frame, then what is left of it (0: only a frame already here)."""
        deadline = self._deadline
        if deadline is None:
            return self.timeout
        return max(deadline - time.monotonic(), 0.0)

    def _next_frame(self):
        """A later frame of the reply being received (a chunk, or the reply after a push): due
        by the reply's deadline."""
        deadline = self._deadline
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError
        return self._receive_frame()

    def _receive_streamed(self, decoder, label):
        bar = None
        if decoder.expected > PROGRESS_THRESHOLD:
            bar = self._bar(decoder.expected, f"{label or 'receive'} ← {self.worker_id}")
        try:
            while True:
                reply = decoder.feed(self._next_frame())
                if bar is not None:
                    bar.n = decoder.received
                    bar.refresh()
                if reply is not None:
                    return reply
        finally:
            if bar is not None:
                bar.close()

    def _bar(self, total, desc):
        return progress_bars.bar(total, show=self.progress, desc=desc, unit="B", unit_scale=True,
                                 unit_divisor=1024, leave=False)

    # --- what a subclass implements -----------------------------------------------------------
    def _connect(self) -> None:
        raise NotImplementedError

    def _send_frame(self, frame) -> None:
        raise NotImplementedError

    def _receive_frame(self):
        raise NotImplementedError

    def _disconnect(self, done: bool) -> None:
        raise NotImplementedError


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
        if self.before_request is not None:
            self._send_held()
        if self._owner == threading.get_ident():
            raise SyftError(f"re-entrant call on worker {self.id!r} (a callback inside a request?)")
        try:
            with lock:
                self._owner = threading.get_ident()
                try:
                    if self._waiting:
                        self._drain()
                    return self._exchange_locked(msg, detach, label)
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
            return bool(self._request_with(transport.follow))
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

    def _request_with(self, fn):
        """``fn()`` (a transport's own request, such as ``follow``) as one request of this client."""
        if self.before_request is not None:
            self._send_held()
        lock = self._lock
        if self._owner == threading.get_ident():
            raise SyftError(f"re-entrant call on worker {self.id!r} (a callback inside a request?)")
        try:
            with lock:
                self._owner = threading.get_ident()
                try:
                    if self._waiting:
                        self._drain()
                    if self.transport.state != "connected":
                        self.transport.ensure_open()
                    return fn()
                finally:
                    self._owner = None
        finally:
            if self._pushes:
                self._emit_pushes()

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
        name = _op_names.get(id(op))
        if name is None:
            name = _op_names[id(op)] = op_name(op)
        return self._submit({"c": "run", "op": name, "a": args, "k": kwargs}, wrap=wrap)

    # --- what BaseWorker asks of a worker ---------------------------------------------------
    def _run(self, func, args, kwargs):
        if self._batch is not None:  # inside sy.batch(worker): recorded, sent as one graph at the end
            return self._batch.record(func, args, kwargs)
        if self._lock is None:  # in process the op itself (the service checks it against the allow-list)
            return self._request({"c": "run", "op": func, "a": args, "k": kwargs})
        name = _op_names.get(id(func))
        if name is None:
            name = _op_names[id(func)] = op_name(func)
        return self._request({"c": "run", "op": name, "a": args, "k": kwargs})

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
            obj = source._copy_out(obj_id)
            new_id = self._request({"c": "store", "o": obj}, label="copy" if keep_source else "move")
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
