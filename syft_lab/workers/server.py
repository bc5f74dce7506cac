"""The websocket worker server: one WorkerService behind an authenticated asyncio websockets server.

    syft-lab worker --id bob --host 127.0.0.1 --port 8777     # see syft_lab/cli.py

A driver: each connection's ``ServiceConnection`` (connection.py) answers its messages, says
where each may run and owns the replies' after-send hooks; ``WorkerServer`` moves bytes. It
bounds and authenticates the opening HTTP handshake (a bearer token, compared in constant time;
no browser ``Origin`` unless allowed) before any message is read, feeds each connection's
messages through its own wire Decoder, runs commands one at a time on one command thread (so
the event loop keeps answering pings, handshakes and other connections while an op runs) and
sends replies in chunks. What the connection's policy says takes a moment (fastpath.py) runs on
the event loop when the command thread is idle, which saves the two thread wake-ups of a
hand-over. As it starts, the server warms up on its command thread (``warm_up``: torch's meta
kernels, which size every op before it runs, made to run without importing ``torch._dynamo``),
so a fresh worker's first op or plan call no longer takes seconds.

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
import gc
import hmac
import ipaddress
import logging
import os
import resource
import signal
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK
from websockets.frames import Frame, Opcode
from websockets.protocol import State

import torch

from ..errors import SyftError
from ..wire.format import DEFAULT_MAX_MESSAGE_SIZE, WS_MAX_SIZE, Decoder, RejectedMessage, WireError, encode
from .connection import READS_ACROSS_SESSIONS, Reply, ServiceConnection, refusal, scrub
from .fastpath import QUICK_BYTES, QUICK_RELEASES  # noqa: F401 (the fast path's bounds, named here too)
from .feed import EventFeed
from .service import WorkerService
from .sessions import SESSION_ID, Session, SessionTable

DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_MAX_PENDING_HANDSHAKES = 16
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
DEFAULT_SESSION_GRACE = 30.0
MAX_HANDSHAKE_BYTES = 32 * 2**10  # request line + headers of one opening handshake
RESERVED_FDS = 32  # file descriptors kept for the worker's own files, pipes and libraries
LOG_INTERVAL = 10.0  # one log line per kind of event per this many seconds
CLOSE_POLICY = 1008  # websocket close code for a peer that broke the protocol
CLEAN_CLOSE_CODES = (1000, 1001)  # a client that closes with these has left for good
# Frames above this size decode on a decoding thread, so that one client's 16 MiB header never
# holds up the event loop (other clients' pings, handshakes and small commands); smaller ones,
# every op's usual message, decode on the loop (a thread hop would cost more than the decode).
OFFLOAD_DECODE = 64 * 2**10
# A frame whose header is above this size decodes on a decoding thread too: up to 64 KiB of empty
# lists took the loop ~50 ms each (16 clients sending them held other clients' pings 1.9 s); a
# 4 KiB header holds at most 4,096 values (a few ms), an op's usual header ~100 bytes.
OFFLOAD_HEADER = 4 * 2**10
DECODE_THREADS = 2


def decodes_long(data, chunk: bool = False) -> bool:
    """Whether a received frame goes to a decoding thread rather than decode on the event loop:
    its size, or its header's (the u32 at offset 4 of a message's first frame; ``chunk``: the
    frame is a later one, raw buffer bytes)."""
    n = len(data)
    if n > OFFLOAD_DECODE:
        return True
    return (not chunk and n >= 8 and type(data) is not str
            and (data[4] << 24 | data[5] << 16 | data[6] << 8 | data[7]) > OFFLOAD_HEADER)

_DATA_OPCODES = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _no_dynamo_disable() -> int:
    """Let torch's Python meta kernels run without importing ``torch._dynamo``; returns how many
    functions it changed. A worker process runs ops, never torch.compile.

    A worker estimates an op's output sizes with a meta run (``OutputEstimator``, before every
    op and every plan node it checks), and many aten ops' meta kernels are Python references
    whose type-promotion wrapper is a ``torch._disable_dynamo`` function: its first call imports
    ``torch._dynamo`` (2-4 s and ~70 MiB on this machine) only to wrap the function so that a
    dynamo trace skips it. Without dynamo in the process there is no trace to skip, so each
    such wrapper is given its own function as its "disabled" form (the attribute it caches that
    form in): the same call, nothing imported. Done once, before the process imports dynamo
    (after, nothing changes); a wrapper made later imports it as before."""
    if "torch._dynamo" in sys.modules:
        return 0
    try:
        inner = torch._compile._disable_dynamo(_noop).__code__
    except Exception:  # another torch: nothing to do
        return 0
    if inner.co_freevars[:1] != ("fn",):
        return 0
    n = 0
    for obj in gc.get_objects():
        if type(obj) is types.FunctionType and obj.__code__ is inner:
            try:
                fn = obj.__closure__[0].cell_contents
                if getattr(fn, "__dynamo_disable", None) is None:
                    setattr(fn, "__dynamo_disable", fn)
                    n += 1
            except (ValueError, AttributeError, TypeError, IndexError):
                continue
    return n


def _noop():
    pass


def warm_up() -> None:
    """On the command thread as a worker starts: what every worker's first op would otherwise
    pay while its client waits (a fresh worker's first op or plan call took 1-3 s): torch's
    meta kernels without the dynamo import (``_no_dynamo_disable``), then one meta run, which
    imports what they need (sympy)."""
    _no_dynamo_disable()
    m = torch.empty(1, device="meta")
    torch.ops.aten.add.Tensor(m, m)


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
        # set by the server's handler while it waits for a message with none queued: a small
        # complete binary message goes to it at once (WorkerServer._inline), which returns
        # True if it handled the message, False if the frame goes on to the handler's queue
        self.inline = None

    def process_event(self, event):
        inline = self.inline
        if inline is not None and type(event) is Frame and event.opcode in _DATA_OPCODES:
            # only while the handler's read waits on an empty queue (websockets' assembler):
            # then nothing received before this frame is still to be handled
            waiting = getattr(getattr(self.recv_messages, "frames", None), "get_waiter", None) is not None
            if (waiting and event.opcode is Opcode.BINARY and event.fin and not decodes_long(event.data)
                    and inline(event.data)):
                return
            self.inline = None  # this frame waits in the queue: so do the ones after it
        super().process_event(event)

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


class _Connection:
    """One client connection: its websocket, its sender lock, its decoder, its service
    connection (``sc``: session, event subscription, answers) and what ``WorkerServer._inline``
    handed to its handler."""

    __slots__ = ("ws", "lock", "sc", "pushing", "decoder", "later")

    def __init__(self, ws, sc: ServiceConnection):
        self.ws, self.lock, self.sc, self.pushing = ws, asyncio.Lock(), sc, False
        self.decoder = None
        self.later = collections.deque()  # decoded messages (or errors, replies) for the handler, in order


class _Failed:
    """An exception _inline met after decoding a message: the handler raises it."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


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
        # the worker's own token reads every session's ledger (``ledger`` with ``all``); without
        # one, each session reads its own part only
        self.service.ledger_token = token or None
        self.host, self.port = host, port
        self._token = token.encode() if token else None
        self.ssl = ssl
        self.max_message_size = max_message_size
        self.max_connections = max_connections
        self.handshake_timeout = handshake_timeout
        self.session_grace = session_grace
        # None: requests without an Origin header (every non-browser client); browsers always send one
        self.origins = [None, *allow_origins]
        self.sessions = SessionTable()  # named sessions, alive or in their grace period
        self._log = RateLimitedLog(log or (lambda line: print(line, file=sys.stderr, flush=True)))
        self._guard = _HandshakeGuard(max_connections, max_pending_handshakes, self._log)
        self._commands: ThreadPoolExecutor | None = None
        # jobs handed to the command thread and not finished: counted up on the loop, down on the
        # thread once a job is done; 0 means nothing runs there nor waits to (see _handler)
        self._queued = 0
        self._queued_lock = threading.Lock()
        self._decoding: ThreadPoolExecutor | None = None
        self._stop: asyncio.Event | None = None
        self._loop = None
        # per-object events for the connections that subscribed (feed.py), pushed between replies
        self.feed = EventFeed({worker_id: self.service.core})
        self._followers: dict = {}  # Subscriber -> its _Connection
        self.warm = True  # warm_up() on the command thread when serving starts

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
        if type(sid) is not str or not SESSION_ID.match(sid):
            return session
        named = self.sessions.named(sid)
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
        self.sessions.forget(session)
        self._submit(self.service.end_session, session)

    def _submit(self, fn, *args):
        """Run ``fn`` on the command thread after the commands already queued."""
        def run():
            try:
                fn(*args)
            except Exception as e:  # bookkeeping must never kill the command thread
                self._log("internal error", f"syft-lab worker {self.service.core.id}: {type(e).__name__}: {e}")
            self._pushes_due()
        return self._on_command_thread(run)

    def _on_command_thread(self, fn, *args):
        """Queue ``fn(*args)`` on the command thread (a concurrent Future), counted in _queued."""
        def job():
            try:
                return fn(*args)
            finally:
                with self._queued_lock:
                    self._queued -= 1

        with self._queued_lock:
            self._queued += 1
        try:
            return self._commands.submit(job)
        except BaseException:
            with self._queued_lock:
                self._queued -= 1
            raise

    # --- pushed events (feed.py) -----------------------------------------------------------
    def _pushes_due(self) -> None:
        """On the command thread, after a command: the followers' pushes go out from the loop."""
        if self._followers and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._push_all)
            except RuntimeError:  # the loop closed: the server stops
                pass

    def _push_all(self) -> None:
        for conn in list(self._followers.values()):
            s = conn.sc.subscriber
            if not conn.pushing and s is not None and (s.pending or s.lost):
                conn.pushing = True  # one push task per connection: a slow reader holds up only itself
                asyncio.ensure_future(self._push(conn))

    async def _push(self, conn) -> None:
        try:
            while conn.sc.follows and (conn.sc.subscriber.pending or conn.sc.subscriber.lost):
                await self._send(conn, None)
        except Exception:  # the connection closed: its handler ends it
            pass
        finally:
            conn.pushing = False

    def _unfollow(self, conn) -> None:
        sc = conn.sc
        if sc.follows:
            self._followers.pop(sc.subscriber, None)
            sc.unfollow()

    # --- one connection ----------------------------------------------------------------
    def _execute(self, conn, msg) -> Reply:
        """Where commands run (the command thread, or the loop for a quick one while the thread
        is idle): answer one message. The message's budget is given back first: what the
        command stores, the store counts from now on."""
        conn.decoder.release()
        out = conn.sc.respond(msg)
        if self._followers:
            self._pushes_due()
        return out

    def quick_command(self, msg) -> bool:
        """The fast-path policy's ``quick_command`` (fastpath.py): where a message runs."""
        return self.service.policy.quick_command(msg)

    def _session(self, conn, msg) -> Session:
        """The session a message of this connection works in (a hello may name one)."""
        sc = conn.sc
        if msg.get("c") == "hello":
            sc.session = self._attach(msg, sc.session)
        if sc.session is None:
            sc.session = Session()
            sc.session.connections = 1
        return sc.session

    def _inline(self, conn, data) -> bool:
        """A small message, from the connection's ``data_received`` while its handler waits
        for the next one (nothing queued before it): decoded, and if it is answered on the
        event loop anyway (``ServiceConnection.on_arrival``: at once, or quick with the command
        thread idle; the reply one frame) run and answered here, which saves
        the handler's wake-up (a turn of the event loop) per message. Anything else is handed to
        the handler as decoded (or as its decoding error, or its reply still to send): returns
        False, and the frame goes on to the handler's queue, in order, as a token for it."""
        ws, later, sc = conn.ws, conn.later, conn.sc
        try:
            msg = conn.decoder.feed(data)
        except WireError as e:  # (RejectedMessage too) the handler answers
            later.append(e)
            return False
        if msg is None:
            return True  # streamed buffers still arriving: the decoder holds them
        try:
            if (not sc.on_arrival(msg) or ws.paused or conn.lock.locked()
                    or ws.protocol.state is not State.OPEN or ws.send_in_progress is not None):
                later.append(msg)
                return False
            if sc.at_once(msg):
                self._session(conn, msg)
                conn.decoder.release()
                out = sc.respond(msg)
            elif self._queued == 0 and sc.quick(msg):
                self._session(conn, msg)
                out = self._execute(conn, msg)
            else:
                later.append(msg)
                return False
            if not self._send_now(conn, out.encoded):  # a streamed reply: the handler sends it
                later.append(out)
                return False
            sc.sent(out.then, self._submit)
            return True
        except Exception as e:  # the handler raises it (the connection ends, as from the handler)
            later.append(_Failed(e))
            return False

    async def _handler(self, ws):
        conn = _Connection(ws, ServiceConnection(self.service, None, self.feed))
        decoder = conn.decoder = Decoder(self.max_message_size, budget=self.service.core.budget)
        later = conn.later
        inline = (lambda data: self._inline(conn, data)) if isinstance(ws, _GuardedConnection) else None
        try:
            while True:
                if not later:  # waiting with nothing queued: the next small message may be run at once
                    ws.inline = inline
                try:
                    data = await ws.recv()
                except ConnectionClosedOK:
                    return
                finally:
                    ws.inline = None
                try:
                    msg = await self._next_message(conn, data)
                except RejectedMessage as e:  # a well-formed frame refused: answered, the connection goes on
                    await self._send(conn, encode(refusal(e)))
                    continue
                except WireError as e:
                    await self._send(conn, encode(refusal(e)))
                    await ws.close(CLOSE_POLICY, "malformed message")
                    return
                if msg is None:
                    continue  # streamed buffers still arriving
                out = msg if type(msg) is Reply else await self._answer(conn, msg)
                await self._deliver(conn, out)
        except ConnectionClosed:
            pass
        finally:
            ws.inline = None
            self._unfollow(conn)
            decoder.close()  # a half-received message goes with it (and its budget): nothing partial is stored
            del decoder
            conn.decoder = None
            session = conn.sc.session
            if session is not None:
                rcvd = ws.protocol.close_rcvd
                self._leave(session, clean=rcvd is not None and rcvd.code in CLEAN_CLOSE_CODES)

    async def _next_message(self, conn, data):
        """The message a received frame completes (None: a streamed one still arriving), or the
        reply ``_inline`` left to send; raises what decoding it raised."""
        later, decoder = conn.later, conn.decoder
        if later:  # a message _inline decoded (the frame is its token)
            item = later.popleft()
            if isinstance(item, BaseException):
                raise item
            if type(item) is _Failed:
                raise item.error
            return item
        if decodes_long(data, decoder.in_message):  # a large header decodes for long: off the loop
            return await asyncio.get_running_loop().run_in_executor(self._decoding, decoder.feed, data)
        return decoder.feed(data)

    async def _answer(self, conn, msg) -> Reply:
        """Answer one message where the connection's policy says: hello, ping and subscribe at
        once on the loop (never queued behind a long op), a quick command on the loop while the
        command thread is idle (saving the two thread wake-ups of the hand-over), anything else
        on the command thread."""
        sc = conn.sc
        if msg.get("c") in READS_ACROSS_SESSIONS:
            # a connection that closed a moment ago may not have run its handler's end yet (the
            # closing handshake is answered before it): one turn of the loop lets it queue its
            # session's release, so a read sees what the closed client stored gone
            await asyncio.sleep(0)
        self._session(conn, msg)
        if sc.at_once(msg):
            conn.decoder.release()
            out = sc.respond(msg)
            if sc.follows:
                self._followers[sc.subscriber] = conn
            return out
        if self._queued == 0 and sc.quick(msg):
            return self._execute(conn, msg)
        return await asyncio.wrap_future(self._on_command_thread(self._execute, conn, msg))

    async def _deliver(self, conn, out: Reply) -> None:
        """Send a reply, then run its hooks on the command thread (``failed`` if it could not go)."""
        ws = conn.ws
        try:
            if not self._send_now(conn, out.encoded):
                await self._send(conn, out.encoded)
            elif ws.paused or ws.transport.is_closing():
                await ws.drain()  # what ws.send waits for after a write
        except BaseException:
            conn.sc.failed(out.then, self._submit)
            raise
        conn.sc.sent(out.then, self._submit)

    @staticmethod
    def _send_now(conn, encoded) -> bool:
        """Write a one-frame reply at once if nothing else is owed first (no follower's pushes,
        no other sender on this connection): what ``ws.send`` does for it (the protocol's frame,
        the transport's write), without its async context and coroutine (a small op's reply).
        False: nothing was written, ``_send`` sends it."""
        ws = conn.ws
        if (conn.sc.follows or len(encoded.frames) != 1 or conn.lock.locked()
                or ws.protocol.state is not State.OPEN or ws.send_in_progress is not None):
            return False
        ws.protocol.send_binary(encoded.frames[0])
        ws.send_data()
        return True

    async def _send(self, conn, encoded):
        """Send a reply (``encoded``; None: only the pushes owed). The events a follower is owed
        go first, so a reply arrives after the events of its own command; one sender at a time
        per connection, so a push never lands between the frames of a streamed reply."""
        async with conn.lock:
            push = conn.sc.push_owed()
            if push is not None:
                await conn.ws.send(encode(push).frames[0])
            if encoded is not None:
                for frame in encoded.frames:
                    await conn.ws.send(frame)

    # --- running -----------------------------------------------------------------------
    async def serve(self, ready=None) -> None:
        self._stop = asyncio.Event()
        loop = self._loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._log.loop_exception)
        ws_logger = logging.getLogger(f"syft_lab.worker.{self.service.core.id}")
        ws_logger.propagate = False
        ws_logger.addHandler(self._log.handler())
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._stop.set)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        # torch's thread count is per thread under OpenMP: a new thread starts with the machine's,
        # and its ops then spin up that many OpenMP threads (a plan replay on the command thread
        # took 10-25x the CPU time it takes on the main thread, and 60x the wall time on a
        # shared machine). Each thread takes the process's setting (--threads) as it starts.
        threads = (torch.get_num_threads(),)
        self._commands = ThreadPoolExecutor(1, thread_name_prefix="syft-lab-commands",
                                            initializer=torch.set_num_threads, initargs=threads)
        self._decoding = ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="syft-lab-decode",
                                            initializer=torch.set_num_threads, initargs=threads)
        self._guard.max_connections = self._fd_budget(self._guard.max_connections)
        guard = self._guard
        if self.warm:  # before any command: a first command waits behind it, pings do not
            self._submit(warm_up)

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
            self._decoding.shutdown(wait=False, cancel_futures=True)

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
