"""The transports' shared part: the typed errors of replies, the ``Transport`` interface every
worker's transport implements, and ``FramedTransport``, the protocol work of every transport that
carries bytes (request ids, the hello, encoding, decoding, pushed events, deadlines, progress).

protocol.py's ``WorkerClient`` uses a transport and knows no bytes; a transport knows no
commands but ``hello`` and ``subscribe``. The layers are drawn in protocol.py's docstring.
"""
from __future__ import annotations

import collections
import time

from ..errors import ObjectNotFoundError, OpCancelledError, QuotaExceededError, RemoteError, SyftError, WorkerUnavailableError
from ..wire.allowlist import OpNotAllowedError
from ..wire.format import DEFAULT_MAX_MESSAGE_SIZE, Decoder, RejectedMessage, WireError, encode
from .. import progress as progress_bars
from ..events import current_cell as _current_cell
from .base import closed_error

PROGRESS_THRESHOLD = 8 * 2**20  # a progress bar for transfers above this many bytes
# What a worker pushes unasked is bounded here, so a worker that floods pushes holds up no one:
# one poll reads at most POLL_FRAMES frames (the rest waits for the next), and a push of more than
# PUSH_RECORDS records (a worker's own bound) counts as lost (a resync); the client keeps at most
# HELD_PUSHES pushes until its request ends (protocol.py).
POLL_FRAMES = 256
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
    service runs in this process on this process's objects (no encoding, no lock needed); its
    client then calls only ``exchange``, never ``send``/``receive``."""

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
        cell = _current_cell.number
        if cell is not None:  # the worker's record says which cell sent it (workers/ledger.py)
            msg["cell"] = cell
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
