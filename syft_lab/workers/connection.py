"""One client session's connection to a worker service, free of I/O: the one place a message is answered.

Every host is a driver that only moves bytes (in process, message dicts) and calls a
``ServiceConnection``: the websocket server (one per websocket connection), the Ray host (one per
worker and client session) and the in-process transport. The connection says **where** a
message may be answered (``at_once``, ``on_arrival``, ``quick``: the fast-path policy of
fastpath.py), **answers** it through the service's one command table (``WorkerService.call``; a
failure is an error reply, ``subscribe`` follows the worker's event feed), **encodes** the reply
(a reply that cannot travel becomes an error reply and its object goes back), gives back **what
to send**, the events a follower is owed first (``push_owed``), and owns the **after-send hooks**
(``Then``): ``sent`` once the reply has gone out, ``failed`` if it could not go (``run=``: where
a driver runs them, the websocket server on its command thread).

    conn = ServiceConnection(service, Session())
    out = conn.respond({"r": 1, "c": "ping"})       # out.message == {"r": 1, "ok": "pong"}
    ...send out.encoded.frames...; conn.sent(out.then)
"""
from __future__ import annotations

import re

import torch

from ..commands import current_holder
from ..errors import ObjectNotFoundError, RemoteError
from ..tensors.registry import stored_copy
from ..wire.format import Decoder, RejectedMessage, WireError, encode
from .sessions import Session

MAX_MESSAGE_TEXT = 2000
WHOLE = 2**62  # a chunk size no message reaches: one message, one frame
AT_ONCE = ("hello", "ping", "subscribe")  # answered where they arrive (without releases: they read nothing)
READS_ACROSS_SESSIONS = ("summary", "ledger", "search")  # what reads the store as every session left it
_set_holder, _reset_holder = current_holder.set, current_holder.reset
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.\-+~]+){2,}")


def scrub(message: str) -> str:
    """An error message fit to leave the worker: no file paths, bounded length."""
    return _PATH.sub("<path>", str(message))[:MAX_MESSAGE_TEXT]


def error_reply(rid, e: BaseException) -> dict:
    if isinstance(e, ObjectNotFoundError):
        err = {"t": "ObjectNotFoundError", "m": scrub(e), "id": e.obj_id}
    elif isinstance(e, RemoteError):
        err = {"t": e.remote_type, "m": scrub(e.remote_message)}
    else:
        err = {"t": type(e).__name__, "m": scrub(e)}
    return {"r": rid, "err": err}


def refusal(e: WireError) -> dict:
    """The error reply to a message the decoder refused: a well-formed one (RejectedMessage)
    with its request id, a malformed one with request id 0 (a client reads it as out of step)."""
    if isinstance(e, RejectedMessage):
        return error_reply(e.rid, e.error)
    return error_reply(0, e)


def error_bytes(rid, e: BaseException) -> bytes:
    """An error reply as one whole frame (what a driver answers a message it could not route)."""
    return bytes(encode(error_reply(rid, e), chunk_size=WHOLE).frames[0])


class Then:
    """A command result plus what to do once its reply has (or has not) gone out.

    ``snapshot``: the reply reads memory that another command could change while it travels
    (a copy kept in the store, a view of a stored tensor), so it is copied first: on the wire
    its bytes, in process the object (``stored_copy``). ``reserved``: bytes of the worker's
    memory budget the reply holds until it has gone out (``WorkerService.reply_done``)."""

    __slots__ = ("result", "sent", "failed", "snapshot", "reserved")

    def __init__(self, result, *, sent=None, failed=None, snapshot=False, reserved=0):
        self.result, self.sent, self.failed, self.snapshot = result, sent, failed, snapshot
        self.reserved = reserved


class Reply:
    """What to send for one message: ``message`` (the reply dict), ``encoded`` (its frames) and
    ``then`` (the hooks to run once it has gone out, or not: ``ServiceConnection.sent``/``failed``)."""

    __slots__ = ("message", "encoded", "then")

    def __init__(self, message, encoded, then):
        self.message, self.encoded, self.then = message, encoded, then


def refcounts_changed(msg) -> list:
    """Objects whose reference count a command changed without an event (an incref, releases
    that left references): a follower's view is told of them too (``EventFeed.note_refcount``)."""
    rel = msg.get("rel")
    ids = list(rel) if type(rel) is list else []
    if msg.get("c") == "incref":
        ids.append(msg.get("id"))
    return ids


def _copied(result):
    """A reply's values as copies (a list reply: each tensor in it)."""
    if type(result) in (list, tuple):
        return type(result)(stored_copy(r) if isinstance(r, torch.Tensor) else r for r in result)
    return stored_copy(result)


def _call_now(fn):
    fn()


class ServiceConnection:
    """One client session on one ``WorkerService`` (see the module docstring). ``feed``: the
    host's EventFeed, for ``subscribe`` (None: this host pushes no events). ``session`` may be
    set later by the driver (a websocket connection's first message, a hello naming one)."""

    __slots__ = ("service", "session", "feed", "subscriber")

    def __init__(self, service, session: Session | None = None, feed=None):
        self.service, self.session, self.feed = service, session, feed
        self.subscriber = None  # feed.Subscriber once the client follows the worker's events

    # --- where a message may be answered -------------------------------------------------
    @staticmethod
    def at_once(msg) -> bool:
        """hello, ping and subscribe without releases: answered where they arrive, at once,
        never queued behind a long op."""
        return msg.get("c") in AT_ONCE and "rel" not in msg

    def on_arrival(self, msg) -> bool:
        """Whether ``msg`` may be answered the moment it arrives, before the driver's handler
        reads it (the websocket server's inline path): at once or quick, but never a follower's
        message (its pushes go first), a subscribe (it makes one) or a read across sessions (it
        waits for a connection that closed a moment ago to release what it held)."""
        cmd = msg.get("c")
        return not (self.subscriber is not None or cmd == "subscribe" or cmd in READS_ACROSS_SESSIONS)

    def quick(self, msg) -> bool:
        """Whether ``msg`` is known to take a moment (fastpath.py): a driver may answer it where
        it arrived while nothing else runs. Where, never what: it is answered as any command."""
        return self.service.policy.quick_command(msg)

    @property
    def follows(self) -> bool:
        """The client follows the worker's events: pushes are owed before its replies."""
        return self.subscriber is not None

    # --- answering -----------------------------------------------------------------------
    def answer(self, msg: dict):
        """``(reply dict, then)``: the message run through the command table; a failure is an
        error reply (the connection lives on)."""
        rid = msg.get("r", 0)
        if msg.get("c") == "subscribe" and "rel" not in msg and self.feed is not None:
            return {"r": rid, "ok": {"seq": self._follow().seq}}, None
        try:
            result, then = self.service.call(msg, self.session)
        except Exception as e:
            return error_reply(rid, e), None
        return {"r": rid, "ok": result}, then

    def respond(self, msg: dict, *, chunk_size: int | None = None, shape=None) -> Reply:
        """Answer ``msg`` and encode its reply. ``shape(result)``: what a successful reply
        carries instead of the result (the Ray host's move: id, shape and dtype). A reply that
        cannot travel (too large, an odd dtype) becomes an error reply, and ``then.failed`` runs
        (a fetched object goes back into the store)."""
        reply, then = self.answer(msg)
        if shape is not None and "ok" in reply:
            reply["ok"] = shape(reply["ok"])
        service = self.service
        try:
            # a snapshot's bytes point into a tensor other commands can reach: copied now,
            # between commands, so the stream never reads memory that changes or is freed
            encoded = encode(reply, max_message_size=service.max_message_size,
                             copy=then is not None and then.snapshot,
                             **({} if chunk_size is None else {"chunk_size": chunk_size}))
        except WireError as e:
            self.failed(then)
            reply, then = error_reply(reply.get("r", 0), e), None
            encoded = encode(reply)
        feed = self.feed
        if feed is not None and feed.active:  # what a follower's view would not learn from an event
            ids = refcounts_changed(msg)
            if ids:
                feed.note_refcount(service.id, ids)
        return Reply(reply, encoded, then)

    def respond_whole(self, data) -> bytes:
        """One whole wire message in, its whole reply out, hooks run (a transport that carries
        a message as one blob). Never raises for a bad message: a malformed one gets an error
        reply with request id 0, which a client reads as out of step."""
        service = self.service
        decoder = Decoder(service.max_message_size, chunk_size=WHOLE, budget=service.core.budget)
        try:
            msg = decoder.feed(data)
            if msg is None:
                raise WireError("a whole message was expected, got the start of a streamed one")
        except WireError as e:  # (RejectedMessage too)
            return bytes(encode(refusal(e), chunk_size=WHOLE).frames[0])
        decoder.release()  # the message is the command's now (what it stores, the store counts)
        out = self.respond(msg, chunk_size=WHOLE)
        data = bytes(out.encoded.frames[0])  # a copy: nothing of the store travels by reference
        self.sent(out.then)
        return data

    def result(self, msg: dict, holder: str | None = None):
        """In process: the command's result itself (its exception raised), hooks run. A result
        that would share memory with the store is handed out as a copy. ``holder``: the command
        runs while that worker is the current holder (a pointer an op makes on a pointer the
        worker stores is held by it: ``syft_lab.commands.held_by``); its hooks run after."""
        token = None if holder is None else _set_holder(holder)
        try:
            result, then = self.service.call(msg, self.session)
        finally:
            if token is not None:
                _reset_holder(token)
        if then is None:
            return result
        if then.snapshot:
            try:
                result = _copied(result)
            except BaseException:
                self.failed(then)
                raise
        self.sent(then)
        return result

    # --- pushes owed -----------------------------------------------------------------------
    def _follow(self):
        if self.subscriber is None:
            self.subscriber = self.feed.subscribe(self.service.id)
        return self.subscriber

    def push_owed(self):
        """The push message a follower is owed before its next reply (None: nothing owed)."""
        s = self.subscriber
        return None if s is None else self.feed.take(s)

    def unfollow(self) -> None:
        if self.subscriber is not None:
            self.feed.unsubscribe(self.subscriber)
            self.subscriber = None

    # --- after the reply: the Then lifecycle ------------------------------------------------
    def sent(self, then, run=_call_now) -> None:
        """The reply has gone out: its ``sent`` hook runs (``run(fn)``: where) and the budget it
        held is free again."""
        if then is None:
            return
        if then.sent is not None:
            run(then.sent)
        self.service.reply_done(then)

    def failed(self, then, run=_call_now) -> None:
        """The reply could not go out: its ``failed`` hook runs (a fetched object goes back)."""
        if then is None:
            return
        if then.failed is not None:
            run(then.failed)
        self.service.reply_done(then)

    def close(self) -> None:
        """The client has left: no more pushes, and its session's references are released."""
        self.unfollow()
        if self.session is not None:
            self.service.end_session(self.session)
