"""The websocket worker server: one WorkerCore behind an authenticated asyncio websockets server.

    syft-lab worker --id bob --host 127.0.0.1 --port 8777     # see syft_lab/cli.py

Layers, each small:
- ``WorkerService`` handles decoded commands on the core (sans-I/O: a dict in, a dict out) and
  keeps, per client session, the references that session holds;
- ``WorkerServer`` moves bytes: it bounds and authenticates the opening HTTP handshake (a bearer
  token, compared in constant time; no browser ``Origin`` unless allowed) before any message is
  read, feeds each connection's messages through its own wire Decoder, runs commands one at a
  time on one command thread (so the event loop keeps answering pings, handshakes and other
  connections while an op runs) and sends replies in chunks.

A malformed message closes only the connection that sent it; a command that fails gets an
error reply naming the exception type and message (never a traceback). Objects are stored
only once a message is complete, so a client that disconnects mid-transfer leaves nothing.

Sessions: every object a connection creates belongs to its session. A client names its session
in ``hello`` and keeps the name across reconnects; the session ends (and releases what it
holds) when the client closes the connection, or ``session_grace`` seconds after a connection
dropped without a close, unless the client came back meanwhile. Worker-held data (``load``)
belongs to no session.
"""
from __future__ import annotations

import asyncio
import collections
import hmac
import ipaddress
import logging
import os
import re
import resource
import secrets
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus

import torch
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from ..errors import ObjectNotFoundError, RemoteError, SyftError
from ..wire import allowlist
from ..wire.format import (DEFAULT_MAX_MESSAGE_SIZE, MAX_TEXT, WIRE_VERSION, WS_MAX_SIZE, Decoder, PointerSpec,
                           WireError, encode)
from .core import NewObject, WorkerCore
from .limits import Limits

DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_MAX_PENDING_HANDSHAKES = 16
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
DEFAULT_SESSION_GRACE = 30.0
MAX_HANDSHAKE_BYTES = 32 * 2**10  # request line + headers of one opening handshake
RESERVED_FDS = 32  # file descriptors kept for the worker's own files, pipes and libraries
LOG_INTERVAL = 10.0  # one log line per kind of event per this many seconds
DEFAULT_SUMMARY_LIMIT = 1000
MAX_SUMMARY_LIMIT = 10000
MAX_TAGS = 256
CLOSE_POLICY = 1008  # websocket close code for a peer that broke the protocol
CLOSE_TOO_BIG = 1009
CLEAN_CLOSE_CODES = (1000, 1001)  # a client that closes with these has left for good
MAX_MESSAGE_TEXT = 2000

_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.\-+~]+){2,}")
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


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
    while not (type(obj) is torch.Tensor or type(obj) is torch.nn.Parameter):
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


class Session:
    """The references one client holds, released together when the client leaves.

    ``refs`` is touched only on the command thread; ``connections`` and ``expiry`` only on the
    event loop."""

    __slots__ = ("id", "refs", "connections", "expiry", "named", "ended")

    def __init__(self, session_id: str, named: bool):
        self.id, self.named = session_id, named
        self.refs: collections.Counter = collections.Counter()  # object id -> references held
        self.connections = 0
        self.expiry = None
        self.ended = False

    def __repr__(self):
        return f"<Session {self.id[:8]}: {sum(self.refs.values())} reference(s)>"


class _Then:
    """A command result plus what to do once its reply has (or has not) gone out.

    ``snapshot``: the reply reads memory that another command could change while it streams,
    so its bytes are copied first (on the command thread, between commands)."""

    __slots__ = ("result", "sent", "failed", "snapshot")

    def __init__(self, result, *, sent=None, failed=None, snapshot=False):
        self.result, self.sent, self.failed, self.snapshot = result, sent, failed, snapshot


class WorkerService:
    """Commands on one WorkerCore, decoded message in, reply message out (no I/O).

    Not thread-safe: the server calls it from its one command thread."""

    def __init__(self, worker_id: str, limits=None):
        self.core = WorkerCore(worker_id, limits=Limits() if limits is None else limits)  # quotas: limits.py
        self.instance = secrets.token_hex(8)  # changes on every start: clients detect restarts
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        self.sessions_with_refs: set[Session] = set()
        self._default_session = None
        self._commands = {
            "hello": self._hello, "ping": self._ping, "store": self._store, "load": self._load,
            "run": self._run, "fetch": self._fetch, "delete": self._delete, "incref": self._incref,
            "release": self._release, "search": self._search, "describe": self._describe,
            "summary": self._summary, "store_plan": self._store_plan, "run_plan": self._run_plan,
            "run_graph": self._run_graph,
        }

    def handle(self, msg: dict, session: Session | None = None):
        """Returns ``(reply, then)``: ``then`` (a _Then or None) says what to do after sending."""
        if session is None:  # sans-I/O callers (tests): one session for everything
            if self._default_session is None:
                self._default_session = Session(secrets.token_hex(16), named=False)
            session = self._default_session
        rid = msg.get("r", 0)
        try:
            rel = msg.get("rel")
            if rel is not None:
                self._release({"ids": rel}, session)
            cmd = msg.get("c")
            handler = self._commands.get(cmd) if type(cmd) is str else None
            if handler is None:
                raise SyftError(f"unknown command {str(cmd)[:40]!r}; known: {', '.join(self._commands)}")
            result = handler(msg, session)
            then = None
            if type(result) is _Then:
                then, result = result, result.result
            return {"r": rid, "ok": result}, then
        except Exception as e:  # every failure becomes a reply: the connection lives on
            return error_reply(rid, e), None

    # --- sessions ------------------------------------------------------------------------
    def _own(self, session: Session, obj_id: int) -> int:
        """The session holds one more reference to ``obj_id``."""
        session.refs[obj_id] += 1
        self.sessions_with_refs.add(session)
        return obj_id

    def _claim(self, session: Session, result):
        """The session owns the objects a command stored (its NewObject results, one reference each)."""
        if type(result) is NewObject:
            self._own(session, result.id)
        elif type(result) in (list, tuple):
            for r in result:
                if type(r) is NewObject:
                    self._own(session, r.id)
        return result

    def _disown(self, obj_id: int) -> dict:
        """The object leaves the store: no session holds it any more. Returns who held it."""
        holders = {}
        for s in self.sessions_with_refs:
            n = s.refs.pop(obj_id, 0)
            if n:
                holders[s] = n
        return holders

    def end_session(self, session: Session) -> None:
        """Release every reference the session holds (its client has left)."""
        session.ended = True
        refs, session.refs = session.refs, collections.Counter()
        self.sessions_with_refs.discard(session)
        for obj_id, n in refs.items():
            for _ in range(n):
                self.core.decref(obj_id)

    def merge_session(self, source: Session, target: Session) -> None:
        """``target`` takes over what ``source`` holds (a hello named a session after commands)."""
        target.refs.update(source.refs)
        source.refs.clear()
        source.ended = True
        self.sessions_with_refs.discard(source)
        if target.refs:
            self.sessions_with_refs.add(target)

    # --- commands ------------------------------------------------------------------------
    def _hello(self, msg, session):
        return {"worker": self.core.id, "v": WIRE_VERSION, "instance": self.instance,
                "max_message_size": self.max_message_size, "session": session.id}

    def _ping(self, msg, session):
        return "pong"

    def _checked_object(self, msg):
        obj = msg.get("o")
        if isinstance(obj, PointerSpec):
            raise SyftError(f"worker {self.core.id!r} cannot hold a pointer: pointers to pointers across "
                            f"remote workers are not supported. Move the data instead (ptr.move(worker)).")
        from ..tensors.logging import LoggingTensor

        if type(obj) is not torch.Tensor and not isinstance(obj, LoggingTensor):
            raise SyftError(f"{msg.get('c')} takes a tensor or a LoggingTensor chain")
        return obj

    def _store(self, msg, session):
        return self._own(session, self.core.store(self._checked_object(msg)))

    def _load(self, msg, session):
        """Data the worker itself holds: no session or pointer releases it; ``delete`` does."""
        obj = self._checked_object(msg)
        tags, description = _tags_and_description(msg)
        if tags:
            obj.tags = set(tags)
        if description is not None:
            obj.description = description
        return self.core.store(obj, held=True)

    def _run(self, msg, session):
        op = allowlist.resolve(msg.get("op"))
        args, kwargs = msg.get("a"), msg.get("k")
        if type(args) is not list or (kwargs is not None and type(kwargs) is not dict):
            raise SyftError("run takes a list of arguments and a map of keyword arguments")
        return self._claim(session, self.core.run(op, args, kwargs))

    def _fetch(self, msg, session):
        obj_id = _int(msg, "id")
        obj = self.core.lookup(obj_id)
        if getattr(obj, "kind", None) == "plan":  # a stored plan travels as its JSON graph
            out = {"plan": obj.builds.to_json(), "tags": sorted(obj.tags), "description": obj.description}
            if msg.get("keep"):
                return out
            # a plan's reply holds no memory of the store: it leaves once the reply has gone out
            return _Then(out, sent=lambda: self.core.objects.get(obj_id) is obj and self._take(obj_id))
        if msg.get("keep"):  # still in the store while its reply streams: send a copy
            return _Then(obj, snapshot=True)
        # A get takes the object out of the store before its reply streams, so no other
        # command can reach it meanwhile; if the reply cannot be delivered it goes back.
        refcount, held = self.core.refcounts.get(obj_id, 0), obj_id in self.core.held
        holders = self._disown(obj_id)
        self.core.fetch(obj_id)
        return _Then(obj, failed=lambda: self._put_back(obj_id, obj, refcount, held, holders),
                     snapshot=shares_memory(obj))

    def _take(self, obj_id):
        self._disown(obj_id)
        return self.core.fetch(obj_id)

    def _put_back(self, obj_id, obj, refcount, held, holders):
        for s, n in holders.items():
            if s.ended:
                refcount -= n  # its client has left meanwhile: its references are gone
            else:
                s.refs[obj_id] += n
                self.sessions_with_refs.add(s)
        if obj_id in self.core.objects or not (refcount > 0 or held):
            return
        self.core.store(obj, obj_id, refcount=refcount, held=held)
        if held:  # a held object's store keeps no count: the references sessions took on it
            for _ in range(refcount):
                self.core.incref(obj_id)

    def _delete(self, msg, session):
        self._take(_int(msg, "id"))

    def _incref(self, msg, session):
        obj_id = _int(msg, "id")
        self.core.incref(obj_id)
        self._own(session, obj_id)

    def _release(self, msg, session):
        """Drop references the session holds; ids it does not hold are ignored (a pointer that
        another session owns, an object fetched meanwhile): never another client's reference."""
        ids = msg.get("ids")
        if type(ids) is not list:
            raise SyftError("release takes a list of ids")
        refs = session.refs
        for i in ids:
            if type(i) is int and refs.get(i, 0) > 0:
                refs[i] -= 1
                if not refs[i]:
                    del refs[i]
                self.core.decref(i)

    # plans travel as their JSON graph (docs/plan-format.md), validated here before anything runs
    def _store_plan(self, msg, session):
        from ..plans.graph import PlanBuilds

        builds = PlanBuilds.from_json(_str(msg, "g"))  # every graph of the plan, one per signature
        state = msg.get("s") or []
        if type(state) is not list or not all(type(t) is torch.Tensor for t in state):
            raise SyftError("a plan's state is a list of tensors")
        tags, description = _tags_and_description(msg)
        return self._own(session, self.core.store_plan(builds, state, tags, description))

    def _run_plan(self, msg, session):
        args, state = _ids(msg, "a"), msg.get("s")
        return self._claim(session, self.core.run_plan(_int(msg, "id"), args,
                                                       None if state is None else _ids(msg, "s")))

    def _run_graph(self, msg, session):
        from ..plans.graph import PlanGraph

        graph = PlanGraph.from_json(_str(msg, "g"))
        return self._claim(session, self.core.run_graph(graph, _ids(msg, "i"), _ids(msg, "o")))

    def _search(self, msg, session):
        from ..inspection.model import object_meta

        q = msg.get("q")
        if type(q) is not list or not q or not all(type(t) is str for t in q):
            raise SyftError("search takes a list of tags")
        return [[i, object_meta(self.core.objects[i])] for i in self.core.search(tuple(q))]

    def _describe(self, msg, session):
        return self.core.describe(_int(msg, "id"))

    def _summary(self, msg, session):
        offset = _int(msg, "offset", 0)
        limit = _int(msg, "limit", DEFAULT_SUMMARY_LIMIT)
        if offset < 0 or not 1 <= limit <= MAX_SUMMARY_LIMIT:
            raise SyftError(f"summary takes offset >= 0 and 1 <= limit <= {MAX_SUMMARY_LIMIT}")
        return {"total": len(self.core.objects), "objects": self.core.summary(offset, limit)}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RateLimitedLog:
    """One line per kind of event per ``interval`` seconds, then a count of the lines left out.

    A flood (EMFILE on every accept, thousands of refused handshakes) costs a few lines, not
    megabytes; no tracebacks, only the exception's type and message."""

    def __init__(self, write, interval: float = LOG_INTERVAL, clock=time.monotonic):
        self._write, self.interval, self._clock = write, interval, clock
        self._last: dict[str, tuple[float, str]] = {}  # kind -> when and what was last written
        self._suppressed: collections.Counter = collections.Counter()

    def __call__(self, kind: str, line: str | None = None) -> None:
        line = line or kind
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last[0] < self.interval:
            self._suppressed[kind] += 1
            return
        self._emit(kind, line, now)

    def flush(self) -> None:
        """Report the lines left out of kinds whose interval has passed (the server calls this
        every interval, so a flood that stops still gets its count)."""
        now = self._clock()
        for kind in [k for k, (t, _) in self._last.items() if self._suppressed[k] and now - t >= self.interval]:
            self._emit(kind, self._last[kind][1], now)

    def _emit(self, kind, line, now):
        n = self._suppressed.pop(kind, 0)
        more = f" ({n} more like this in the last {now - self._last[kind][0]:.0f} s)" if n else ""
        self._last[kind] = (now, line)
        self._write(f"{line}{more}")

    def handler(self) -> logging.Handler:
        """A logging handler feeding this log (for websockets' and asyncio's loggers)."""
        log = self

        class _Handler(logging.Handler):
            def emit(self, record):
                line = record.getMessage()
                if record.exc_info and record.exc_info[1] is not None:
                    e = record.exc_info[1]
                    line += f": {type(e).__name__}: {scrub(e)}"
                log(f"{record.name}:{record.msg}", line)

        return _Handler(logging.WARNING)

    def loop_exception(self, loop, context) -> None:
        """asyncio's exception handler (accept() failing with EMFILE, ...)."""
        e = context.get("exception")
        message = context.get("message", "event loop error")
        log_line = message + (f": {type(e).__name__}: {scrub(e)}" if e is not None else "")
        self(f"asyncio:{message}:{type(e).__name__}", log_line)


class _HandshakeGuard:
    """Counts connections from accept to close and bounds those still in their opening handshake.

    Pending handshakes count toward ``max_connections``; at most ``max_pending`` exist, each
    may send at most MAX_HANDSHAKE_BYTES and lasts at most the handshake timeout (websockets'
    ``open_timeout``). When a new connection would pass a bound, the oldest pending handshake
    is dropped: real clients finish theirs in milliseconds, slow or idle peers are the oldest."""

    def __init__(self, max_connections: int, max_pending: int, log):
        self.max_connections, self.max_pending, self.log = max_connections, max_pending, log
        self.pending: dict = {}  # connection -> None, oldest first
        self.open: set = set()

    def accepted(self, conn) -> None:
        while self.pending and (len(self.pending) >= self.max_pending
                                or len(self.pending) + len(self.open) >= self.max_connections):
            oldest = next(iter(self.pending))
            del self.pending[oldest]
            self.log("evicted", "dropped the oldest unfinished handshake: too many pending")
            oldest.transport.abort()
        self.pending[conn] = None

    def completed(self, conn) -> None:
        if self.pending.pop(conn, 0) is None and conn.protocol.state is State.OPEN:
            self.open.add(conn)

    def closed(self, conn) -> None:
        self.pending.pop(conn, None)
        self.open.discard(conn)


class _GuardedConnection(ServerConnection):
    """websockets' server connection, with the handshake bounds of _HandshakeGuard."""

    def __init__(self, guard: _HandshakeGuard, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._guard = guard
        self._handshake_bytes = 0

    def connection_made(self, transport):
        super().connection_made(transport)
        self._guard.accepted(self)

    def data_received(self, data):
        if self.protocol.state is State.CONNECTING:
            self._handshake_bytes += len(data)
            if self._handshake_bytes > MAX_HANDSHAKE_BYTES:
                self._guard.log("handshake too big", f"dropped a handshake of more than {MAX_HANDSHAKE_BYTES} bytes")
                self.transport.abort()
                return
        super().data_received(data)

    async def handshake(self, *args, **kwargs):
        try:
            await super().handshake(*args, **kwargs)
        finally:
            self._guard.completed(self)

    def connection_lost(self, exc):
        self._guard.closed(self)
        super().connection_lost(exc)


class WorkerServer:
    """Serves one WorkerService over websockets. ``await serve()`` runs until ``stop()``."""

    def __init__(self, worker_id: str, host: str = "127.0.0.1", port: int = 8777, *, token: str | None = None,
                 ssl=None, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_pending_handshakes: int = DEFAULT_MAX_PENDING_HANDSHAKES,
                 handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT, allow_origins=(),
                 session_grace: float = DEFAULT_SESSION_GRACE, limits=None, log=None):
        if not is_loopback(host) and not token:
            raise SyftError(f"refusing to listen on {host} without a token: anyone who can reach it could use "
                            f"the worker. Set SYFT_LAB_TOKEN or --token-file, or bind 127.0.0.1.")
        if max_connections < 1 or max_pending_handshakes < 1 or handshake_timeout <= 0 or session_grace < 0:
            raise SyftError("connection limits and the handshake timeout are positive; the session grace "
                            "is zero or more seconds")
        self.service = WorkerService(worker_id, limits)
        self.service.max_message_size = max_message_size
        self.host, self.port = host, port
        self._token = token.encode() if token else None
        self.ssl = ssl
        self.max_message_size = max_message_size
        self.max_connections = max_connections
        self.handshake_timeout = handshake_timeout
        self.session_grace = session_grace
        # None: requests without an Origin header (every non-browser client); browsers always send one
        self.origins = [None, *allow_origins]
        self.sessions: dict[str, Session] = {}  # named sessions, alive or in their grace period
        self._log = RateLimitedLog(log or (lambda line: print(line, file=sys.stderr, flush=True)))
        self._guard = _HandshakeGuard(max_connections, max_pending_handshakes, self._log)
        self._commands: ThreadPoolExecutor | None = None
        self._stop: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"{'wss' if self.ssl else 'ws'}://{self.host}:{self.port}"

    @property
    def connections(self) -> set:
        """Open websocket connections (handshake done)."""
        return self._guard.open

    # --- the opening handshake ---------------------------------------------------------
    def _process_request(self, connection, request):
        if self._token is not None:
            values = request.headers.get_all("Authorization")
            if len(values) > 1:
                self._log("duplicate authorization", f"syft-lab worker {self.service.core.id}: refused a "
                                                     f"handshake with {len(values)} Authorization headers")
                return connection.respond(HTTPStatus.BAD_REQUEST, "send exactly one Authorization header\n")
            got = (values[0] if values else "").encode("utf-8", "replace")
            if not hmac.compare_digest(got, b"Bearer " + self._token):
                self._log("wrong token", f"syft-lab worker {self.service.core.id}: refused a connection with "
                                         f"a missing or wrong token")
                return connection.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong token\n")
        if len(self._guard.open) >= self.max_connections:
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE,
                                      f"worker has {self.max_connections} connections already\n")
        return None

    # --- sessions ------------------------------------------------------------------------
    def _attach(self, msg, session: Session | None) -> Session | None:
        """A hello naming a session: this connection now works in it (on the event loop)."""
        sid = msg.get("session")
        if type(sid) is not str or not _SESSION_ID.match(sid):
            return session
        named = self.sessions.get(sid)
        if named is None:
            named = self.sessions[sid] = Session(sid, named=True)
        if named is session:
            return session
        if named.expiry is not None:  # the client came back within the grace period
            named.expiry.cancel()
            named.expiry = None
        named.connections += 1
        if session is not None:
            self._leave(session, clean=True, merge_into=named)
        return named

    def _leave(self, session: Session, clean: bool, merge_into: Session | None = None) -> None:
        """A connection of ``session`` is gone (on the event loop)."""
        session.connections -= 1
        if session.connections > 0:
            return
        if merge_into is not None:
            self._submit(self.service.merge_session, session, merge_into)
        elif clean or not session.named or self.session_grace == 0:
            self._end(session)
        else:
            session.expiry = asyncio.get_running_loop().call_later(self.session_grace, self._expire, session)

    def _expire(self, session: Session) -> None:
        session.expiry = None
        if session.connections == 0:
            self._end(session)

    def _end(self, session: Session) -> None:
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
        self._submit(self.service.end_session, session)

    def _submit(self, fn, *args):
        """Run ``fn`` on the command thread after the commands already queued."""
        def run():
            try:
                fn(*args)
            except Exception as e:  # bookkeeping must never kill the command thread
                self._log("internal error", f"syft-lab worker {self.service.core.id}: {type(e).__name__}: {e}")
        return self._commands.submit(run)

    # --- one connection ----------------------------------------------------------------
    def _execute(self, msg, session):
        """On the command thread: run one command and encode its reply."""
        reply, then = self.service.handle(msg, session)
        try:
            encoded = encode(reply, max_message_size=self.max_message_size)
            if then is not None and then.snapshot and encoded.streamed:
                # the reply's bytes point into a tensor other commands can reach: copy them now,
                # between commands, so the stream never reads memory that changes or is freed
                encoded.frames = [encoded.frames[0], *(bytes(f) for f in encoded.frames[1:])]
        except WireError as e:  # the reply itself cannot travel (too large, odd dtype)
            if then is not None and then.failed is not None:
                then.failed()
            return encode(error_reply(reply.get("r", 0), e)), None
        return encoded, then

    async def _handler(self, ws):
        loop = asyncio.get_running_loop()
        decoder = Decoder(self.max_message_size)
        session = None
        try:
            async for data in ws:
                try:
                    msg = decoder.feed(data)
                except WireError as e:
                    await self._send(ws, encode(error_reply(0, e)))
                    await ws.close(CLOSE_POLICY, "malformed message")
                    return
                if msg is None:
                    continue  # streamed buffers still arriving
                cmd = msg.get("c")
                if cmd == "hello":
                    session = self._attach(msg, session)
                if session is None:
                    session = Session(secrets.token_hex(16), named=False)
                    session.connections = 1
                if cmd in ("hello", "ping") and "rel" not in msg:
                    # answered on the event loop: never queued behind a long op
                    reply, then = self.service.handle(msg, session)
                    await self._send(ws, encode(reply))
                    continue
                encoded, then = await loop.run_in_executor(self._commands, self._execute, msg, session)
                try:
                    await self._send(ws, encoded)
                except BaseException:
                    if then is not None and then.failed is not None:
                        self._submit(then.failed)
                    raise
                if then is not None and then.sent is not None:
                    self._submit(then.sent)
        except ConnectionClosed:
            pass
        finally:
            del decoder  # a half-received message goes with it: nothing partial is stored
            if session is not None:
                rcvd = ws.protocol.close_rcvd
                self._leave(session, clean=rcvd is not None and rcvd.code in CLEAN_CLOSE_CODES)

    async def _send(self, ws, encoded):
        for frame in encoded.frames:
            await ws.send(frame)

    # --- running -----------------------------------------------------------------------
    async def serve(self, ready=None) -> None:
        self._stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._log.loop_exception)
        ws_logger = logging.getLogger(f"syft_lab.worker.{self.service.core.id}")
        ws_logger.propagate = False
        ws_logger.addHandler(self._log.handler())
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._stop.set)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        self._commands = ThreadPoolExecutor(1, thread_name_prefix="syft-lab-commands")
        self._guard.max_connections = self._fd_budget(self._guard.max_connections)
        guard = self._guard

        def flush_log():
            self._log.flush()
            loop.call_later(self._log.interval, flush_log)

        loop.call_later(self._log.interval, flush_log)
        try:
            async with serve(self._handler, self.host, self.port, compression=None, max_size=WS_MAX_SIZE,
                             max_queue=8, process_request=self._process_request, ssl=self.ssl,
                             server_header=None, ping_interval=20, ping_timeout=60, origins=self.origins,
                             open_timeout=self.handshake_timeout, logger=ws_logger,
                             create_connection=lambda *a, **k: _GuardedConnection(guard, *a, **k)) as server:
                self.port = server.sockets[0].getsockname()[1]
                if ready is not None:
                    ready(self)
                await self._stop.wait()
        finally:
            self._commands.shutdown(wait=False, cancel_futures=True)

    def _fd_budget(self, max_connections: int) -> int:
        """Connections fit in the file descriptors this process may open (RLIMIT_NOFILE), with
        room for its own files: past it, accept() fails and every client waits."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY or soft - RESERVED_FDS >= max_connections:
            return max_connections
        budget = max(soft - RESERVED_FDS, 1)
        self._log("fd budget", f"syft-lab worker {self.service.core.id}: at most {budget} connections "
                               f"(the file descriptor limit is {soft})")
        self.max_connections = budget
        return budget

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()


def read_token(token_file: str | None) -> str | None:
    """The token from --token-file, else from SYFT_LAB_TOKEN, else None."""
    if token_file:
        with open(token_file, encoding="utf-8") as f:
            token = f.read().strip()
        if not token:
            raise SyftError(f"token file {token_file} is empty")
        return token
    return os.environ.get("SYFT_LAB_TOKEN") or None
