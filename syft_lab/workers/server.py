"""The websocket worker server: one WorkerService behind an authenticated asyncio websockets server.

    syft-lab worker --id bob --host 127.0.0.1 --port 8777     # see syft_lab/cli.py

The service (service.py) runs the commands, the same for every worker; ``WorkerServer`` moves
bytes: it bounds and authenticates the opening HTTP handshake (a bearer
  token, compared in constant time; no browser ``Origin`` unless allowed) before any message is
  read, feeds each connection's messages through its own wire Decoder, runs commands one at a
  time on one command thread (so the event loop keeps answering pings, handshakes and other
  connections while an op runs) and sends replies in chunks. The one exception: a stored plan
  known to take under a few milliseconds (``WorkerService.quick``) runs on the event loop
  when the command thread is idle, which saves the two thread wake-ups of a hand-over.
  As it starts, the server warms up on its command thread (``warm_up``: torch's meta kernels,
  which size every op before it runs, made to run without importing ``torch._dynamo``), so a
  fresh worker's first op or plan call no longer takes seconds.

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
import re
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

from ..commands import Ref
from ..errors import SyftError
from ..wire.allowlist import ALLOWED, check_call
from ..wire.format import DEFAULT_MAX_MESSAGE_SIZE, WS_MAX_SIZE, Decoder, RejectedMessage, WireError, encode
from .feed import EventFeed
from .limits import OutputEstimator
from .service import Session, WorkerService, error_reply, scrub

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

# A command whose cost is bounded by its sizes, and small (WorkerServer.quick_command), runs
# on the event loop while the command thread is idle: a pointer op then costs one round trip,
# not one plus the two thread wake-ups of a hand-over (issue 28.4). Everything else, and
# anything while the thread is busy, goes to the thread (its time budget and cancellation).
QUICK_BYTES = 2**20  # tensors a quick command reads, and again what it makes
QUICK_WORK = 2**20  # element operations of a quick op (check_call's estimate): well under a millisecond
QUICK_RELEASES = 64  # releases a quick message may carry (each a decref, maybe a delete)
QUICK_ARGS = 64  # tensors a quick op's arguments may name (each looked up on the loop)
_QUICK_LITERALS = (int, float, bool, str, type(None))
_Tensor, _Parameter = torch.Tensor, torch.nn.Parameter

_DATA_OPCODES = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)

_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_READS_ACROSS_SESSIONS = ("summary", "ledger", "search")  # what reads the store as every session left it

class _NotQuick(Exception):
    pass


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
    """One client connection: its websocket, its sender lock, its event subscription, its
    decoder and session, and what ``WorkerServer._inline`` handed to its handler."""

    __slots__ = ("ws", "lock", "subscriber", "pushing", "decoder", "session", "later")

    def __init__(self, ws):
        self.ws, self.lock, self.subscriber, self.pushing = ws, asyncio.Lock(), None, False
        self.decoder, self.session = None, None
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
        self.sessions: dict[str, Session] = {}  # named sessions, alive or in their grace period
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
        self._estimator = OutputEstimator()  # quick_command's output sizes (memoised meta runs)
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
            s = conn.subscriber
            if not conn.pushing and s is not None and (s.pending or s.lost):
                conn.pushing = True  # one push task per connection: a slow reader holds up only itself
                asyncio.ensure_future(self._push(conn))

    async def _push(self, conn) -> None:
        try:
            while conn.subscriber is not None and (conn.subscriber.pending or conn.subscriber.lost):
                await self._send(conn, None)
        except Exception:  # the connection closed: its handler ends it
            pass
        finally:
            conn.pushing = False

    def _follow(self, conn, msg) -> dict:
        """A ``subscribe`` (on the loop): this connection gets the worker's events from now on."""
        if conn.subscriber is None:
            conn.subscriber = self.feed.subscribe(self.service.core.id)
            self._followers[conn.subscriber] = conn
        return {"r": msg.get("r", 0), "ok": {"seq": conn.subscriber.seq}}

    def _unfollow(self, conn) -> None:
        if conn.subscriber is not None:
            self._followers.pop(conn.subscriber, None)
            self.feed.unsubscribe(conn.subscriber)
            conn.subscriber = None

    # --- one connection ----------------------------------------------------------------
    def _execute(self, msg, session, decoder):
        """On the command thread: run one command and encode its reply. The message's budget
        is given back first: what the command stores, the store counts from now on."""
        decoder.release()
        out = self.service.encoded_reply(msg, session)
        if self._followers:
            self._refcounts_changed(msg)
            self._pushes_due()
        return out

    def _refcounts_changed(self, msg) -> None:
        """Reference counts a command changed without an event (an incref, releases that left
        references): records for the followers too."""
        ids = list(msg.get("rel") or ()) if type(msg.get("rel")) is list else []
        if msg.get("c") == "incref":
            ids.append(msg.get("id"))
        if ids:
            self.feed.note_refcount(self.service.core.id, ids)

    def quick_command(self, msg) -> bool:
        """Whether ``msg`` is known to take a moment (a hint for where it runs, never what it
        does: it goes through the service as every command does; call it on the loop while the
        command thread is idle). A stored plan known to replay quickly (``WorkerService.quick``),
        or a ``run`` of an allowed op on plain tensors of at most QUICK_BYTES whose estimated work
        (check_call, memoised on the arguments' metadata) is at most QUICK_WORK and whose outputs,
        from the meta run, are at most QUICK_BYTES; releases and increfs. Reads the store only."""
        cmd = msg.get("c")
        rel = msg.get("rel")
        if rel is not None and (type(rel) is not list or len(rel) > QUICK_RELEASES):
            return False
        if cmd == "run":
            return self._quick_op(msg)
        if cmd in ("release", "incref"):
            ids = msg.get("ids") if cmd == "release" else [msg.get("id")]
            return type(ids) is list and len(ids) <= QUICK_RELEASES
        return self.service.quick(msg)

    def _quick_op(self, msg) -> bool:
        core = self.service.core
        if core.limits is None:
            return False
        name, args, kwargs = msg.get("op"), msg.get("a"), msg.get("k")
        op = ALLOWED.get(name) if type(name) is str else None
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
            if tp in _QUICK_LITERALS or isinstance(a, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
                return a
            raise _NotQuick  # an unknown id, a chain of layers, a pointer: the thread's run says

        try:
            resolved = [value(a) for a in args]
            kw = {k: value(v) for k, v in kwargs.items()} if kwargs else None
            if check_call(op, resolved, kw) > QUICK_WORK:
                return False
            est = self._estimator.estimate(op, resolved, kw)
        except Exception:  # a hint only: whatever is wrong, the command thread's run says so
            return False
        return est.outputs > 0 and est.uncarriable is None and est.new_bytes <= QUICK_BYTES

    def _session(self, conn, msg) -> Session:
        """The session a message of this connection works in (a hello may name one)."""
        if msg.get("c") == "hello":
            conn.session = self._attach(msg, conn.session)
        if conn.session is None:
            conn.session = Session()
            conn.session.connections = 1
        return conn.session

    def _inline(self, conn, data) -> bool:
        """A small message, from the connection's ``data_received`` while its handler waits
        for the next one (nothing queued before it): decoded, and if it is answered on the
        event loop anyway (hello, ping, a quick command with the command thread idle, the
        reply one frame, nothing owed before it) run and answered here, which saves the
        handler's wake-up (a turn of the event loop) per message. Anything else is handed to
        the handler as decoded (or as its decoding error, or its reply still to send): returns
        False, and the frame goes on to the handler's queue, in order, as a token for it."""
        ws, later = conn.ws, conn.later
        try:
            msg = conn.decoder.feed(data)
        except WireError as e:  # (RejectedMessage too) the handler answers
            later.append(e)
            return False
        if msg is None:
            return True  # streamed buffers still arriving: the decoder holds them
        try:
            cmd = msg.get("c")
            if (conn.subscriber is not None or cmd in _READS_ACROSS_SESSIONS or ws.paused or conn.lock.locked()
                    or ws.protocol.state is not State.OPEN or ws.send_in_progress is not None):
                later.append(msg)
                return False
            if cmd in ("hello", "ping") and "rel" not in msg:
                session = self._session(conn, msg)
                conn.decoder.release()
                reply, then = self.service.handle(msg, session)
                encoded = encode(reply)
                then = None
            elif cmd != "subscribe" and self._queued == 0 and self.quick_command(msg):
                encoded, then = self._execute(msg, self._session(conn, msg), conn.decoder)
            else:
                later.append(msg)
                return False
            if not self._send_now(conn, encoded):  # a streamed reply: the handler sends it
                later.append((encoded, then))
                return False
            self._sent(then)
            return True
        except Exception as e:  # the handler raises it (the connection ends, as from the handler)
            later.append(_Failed(e))
            return False

    def _sent(self, then) -> None:
        if then is not None and then.sent is not None:
            self._submit(then.sent)
        self.service.reply_done(then)

    async def _handler(self, ws):
        loop = asyncio.get_running_loop()
        decoder = Decoder(self.max_message_size, budget=self.service.core.budget)
        conn = _Connection(ws)
        conn.decoder = decoder
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
                encoded = None
                try:
                    if later:  # a message _inline decoded (the frame is its token)
                        msg = later.popleft()
                        if type(msg) is tuple:
                            encoded, then = msg
                        elif isinstance(msg, BaseException):
                            raise msg
                        elif type(msg) is _Failed:
                            raise msg.error
                    elif decodes_long(data, decoder.in_message):  # a large header decodes for long: off the loop
                        msg = await loop.run_in_executor(self._decoding, decoder.feed, data)
                    else:
                        msg = decoder.feed(data)
                except RejectedMessage as e:  # a well-formed frame refused: answered, the connection goes on
                    await self._send(conn, encode(error_reply(e.rid, e.error)))
                    continue
                except WireError as e:
                    await self._send(conn, encode(error_reply(0, e)))
                    await ws.close(CLOSE_POLICY, "malformed message")
                    return
                if encoded is None:
                    if msg is None:
                        continue  # streamed buffers still arriving
                    cmd = msg.get("c")
                    if cmd in _READS_ACROSS_SESSIONS:
                        # a connection that closed a moment ago may not have run its handler's end yet
                        # (the closing handshake is answered before it): one turn of the loop lets it
                        # queue its session's release, so a read sees what the closed client stored gone
                        await asyncio.sleep(0)
                    session = self._session(conn, msg)
                    if cmd in ("hello", "ping", "subscribe") and "rel" not in msg:
                        # answered on the event loop: never queued behind a long op
                        decoder.release()
                        if cmd == "subscribe":
                            reply = self._follow(conn, msg)
                        else:
                            reply, then = self.service.handle(msg, session)
                        encoded = encode(reply)
                        if not self._send_now(conn, encoded):
                            await self._send(conn, encoded)
                        elif ws.paused or ws.transport.is_closing():
                            await ws.drain()  # what ws.send waits for after a write
                        continue
                    if self._queued == 0 and self.quick_command(msg):
                        # known to take a moment, with the command thread idle: run here, saving
                        # the two thread wake-ups of the hand-over (quick_command)
                        encoded, then = self._execute(msg, session, decoder)
                    else:
                        encoded, then = await asyncio.wrap_future(
                            self._on_command_thread(self._execute, msg, session, decoder))
                try:
                    if not self._send_now(conn, encoded):
                        await self._send(conn, encoded)
                    elif ws.paused or ws.transport.is_closing():
                        await ws.drain()  # what ws.send waits for after a write
                except BaseException:
                    if then is not None and then.failed is not None:
                        self._submit(then.failed)
                    self.service.reply_done(then)
                    raise
                self._sent(then)
        except ConnectionClosed:
            pass
        finally:
            ws.inline = None
            self._unfollow(conn)
            decoder.close()  # a half-received message goes with it (and its budget): nothing partial is stored
            del decoder
            conn.decoder = None
            session = conn.session
            if session is not None:
                rcvd = ws.protocol.close_rcvd
                self._leave(session, clean=rcvd is not None and rcvd.code in CLEAN_CLOSE_CODES)

    @staticmethod
    def _send_now(conn, encoded) -> bool:
        """Write a one-frame reply at once if nothing else is owed first (no follower's pushes,
        no other sender on this connection): what ``ws.send`` does for it (the protocol's frame,
        the transport's write), without its async context and coroutine (a small op's reply).
        False: nothing was written, ``_send`` sends it."""
        ws = conn.ws
        if (conn.subscriber is not None or len(encoded.frames) != 1 or conn.lock.locked()
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
            s = conn.subscriber
            if s is not None:
                push = self.feed.take(s)
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
