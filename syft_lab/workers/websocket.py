"""WebSocketWorker: a worker in another process (or machine), used exactly like a VirtualWorker.

    bob = sy.WebSocketWorker("ws://127.0.0.1:8777", id="bob", token=token)
    p = torch.tensor([1., 2.]).send(bob)

The client protocol is protocol.py's WorkerClient; this module is its transport: wire-format
frames on a websocket connection read and written in the calling thread (``_LeanConnection``: a
plain socket whose frames are framing.py's ``ClientFrames``, websockets' sans-I/O protocol with a
short way for a whole binary frame; no compression: lowest latency; a reply costs one thread
wake-up, not the two of websockets' sync client and its reader thread). Connection states are explicit:

    disconnected --connect--> connected --lost--> disconnected --(next call)--> connected ...
                                        --close()--> closed

A call on a disconnected worker reconnects first; if the worker cannot be reached it raises
WorkerUnavailableError naming the worker. A restarted worker has lost its objects: pointers to
them raise ObjectNotFoundError with a note saying so.

Garbage collection: a pointer's ``__del__`` may run at any moment, even in the middle of
another request on this connection, so a release only queues the id; the queue travels
with the next request (or on close). Never re-entrant, never lost on a failed send.

Sessions: the client names a session in its hello (a random id it keeps across reconnects).
Everything this client stores belongs to that session; the worker releases it all when the
client closes the connection, or after its grace period when the connection dropped and the
client did not come back. An interpreter that exits without ``close()`` closes every open
worker on the way out (atexit).
"""
from __future__ import annotations

import atexit
import os
import secrets
import select
import socket
import ssl as ssl_module
import struct
import threading
import time
import weakref

from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI, WebSocketException
from websockets.protocol import State
from websockets.uri import parse_uri

from ..errors import SyftError
from ..wire.format import DEFAULT_MAX_MESSAGE_SIZE, WS_MAX_SIZE
from .framing import ClientFrames
from .protocol import FramedWorker
from .transport import ConnectionLost, FramedTransport

# Close codes: 1000 says this client is done (the worker ends its session now); a connection
# dropped to start afresh (a timeout, a reply out of step) keeps the session for a reconnect.
CLOSE_DONE, CLOSE_RECONNECT = 1000, 4000
CLOSE_TIMEOUT = 2.0  # seconds close() waits for the worker's closing handshake
KEEPALIVE = 10.0  # seconds between an idle connection's reads of the worker's pings (it pings every 20 s)
RECV_BYTES = 64 * 2**10  # bytes read from the socket at a time (larger reads allocate by mmap: slower)
_TIMEVAL = struct.Struct("@ll")


class _LeanConnection:
    """One websocket client connection driven in the caller's own thread: a plain socket
    whose bytes go to and come from ``frames`` (framing.py's ``ClientFrames``: websockets'
    ``ClientProtocol``, with a short way for a whole binary frame). It only moves bytes.

    websockets' sync client reads its socket on a background thread and hands each message to
    the caller through a queue: every reply then costs two thread wake-ups (the reader's, then
    the caller's), a third of a small op's round trip on a shared machine. Here the caller reads
    the socket itself, so a reply costs one. While no call reads (an idle notebook), a keepalive
    thread reads every KEEPALIVE seconds, so the worker's pings are answered (it drops a
    connection whose pongs stop, and then the session's objects after its grace period); what it
    reads besides (a push) waits here for the caller. One lock (``io``) orders the two.

    The same surface as the parts of websockets' ``ClientConnection`` this module uses:
    ``send``, ``recv(timeout)``, ``close(code)``, ``state``, ``socket``."""

    def __init__(self, url: str, headers: dict | None, max_size: int, open_timeout: float, ssl=None):
        wsuri = parse_uri(url)
        sock = socket.create_connection((wsuri.host, wsuri.port), timeout=open_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if wsuri.secure:
                ctx = ssl if ssl is not None else ssl_module.create_default_context()
                sock = ctx.wrap_socket(sock, server_hostname=wsuri.host)
            self.socket = sock
            self.protocol = protocol = ClientProtocol(wsuri, max_size=max_size)
            self.frames = frames = ClientFrames(protocol)  # every frame read or written (framing.py)
            request = protocol.connect()
            for k, v in (headers or {}).items():
                request.headers[k] = v
            protocol.send_request(request)
            self._flush()
            deadline = time.monotonic() + open_timeout
            while frames.response is None and protocol.handshake_exc is None:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                data = sock.recv(RECV_BYTES)
                if not data:
                    raise ConnectionError("the worker closed the connection during the handshake")
                frames.receive_data(data)
            if protocol.handshake_exc is not None:
                raise protocol.handshake_exc
        except BaseException:
            sock.close()
            raise
        self._timeout = -1.0  # the socket's current timeout (set only when it changes)
        # A plain TCP socket stays in blocking mode and its timeouts are the kernel's
        # (SO_RCVTIMEO / SO_SNDTIMEO): with a Python socket timeout every send and recv is a
        # poll() and then the call; a zero-wait read is one recv with MSG_DONTWAIT, not a
        # select() first. TLS keeps Python's timeouts (its reads may need writes).
        self._plain = not wsuri.secure
        if self._plain:
            sock.settimeout(None)
            self._set_timeout(open_timeout)  # until the first read sets the caller's
        self._broken = False
        self.io = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._keepalive, name="syft-lab-ws-keepalive", daemon=True).start()

    @property
    def state(self) -> State:
        return State.CLOSED if self._broken else self.protocol.state

    # --- frames --------------------------------------------------------------------------
    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:
                self.socket.sendall(data)
            else:  # the protocol is done writing
                try:
                    self.socket.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

    def _set_timeout(self, timeout) -> None:
        """The socket's timeout for reads and writes (seconds; None: none), set when it changes."""
        self._timeout = timeout
        sock = self.socket
        if not self._plain:
            sock.settimeout(timeout)
            return
        if timeout is None:
            tv = _TIMEVAL.pack(0, 0)  # no timeout
        else:
            us = max(int(timeout * 1e6), 1)  # (0 would mean none)
            tv = _TIMEVAL.pack(us // 1_000_000, us % 1_000_000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)

    def _read(self, timeout) -> None:
        """Read once from the socket (``timeout``: seconds, None forever, 0 only what is there)."""
        sock = self.socket
        try:
            if timeout == 0:
                if self._plain:
                    data = sock.recv(RECV_BYTES, socket.MSG_DONTWAIT)
                else:
                    if not (sock.pending() or select.select([sock], [], [], 0)[0]):
                        raise TimeoutError
                    if self._timeout is not None:
                        self._set_timeout(None)  # readable: the read returns at once
                    data = sock.recv(RECV_BYTES)
            else:
                if timeout != self._timeout:
                    self._set_timeout(timeout)
                data = sock.recv(RECV_BYTES)
        except (ssl_module.SSLWantReadError, BlockingIOError, TimeoutError):  # (socket.timeout is TimeoutError)
            raise TimeoutError from None
        except OSError:
            self._broken = True
            raise
        if not data:
            self._broken = True
            self.frames.receive_eof()
            raise ConnectionError("the worker closed the connection")
        self.frames.receive_data(data)
        self._flush()  # pongs, the closing handshake

    def _closed_error(self) -> ConnectionError:
        self._broken = True
        code = self.protocol.close_code
        return ConnectionError(f"the connection is closed (code {code})" if code else "the connection is closed")

    # --- what the transport calls ----------------------------------------------------------
    def send(self, data) -> None:
        """Send one binary message as one frame (ClientFrames.frame)."""
        with self.io:
            if self._broken or self.protocol.state is not State.OPEN:
                raise self._closed_error()
            try:
                for piece in self.frames.frame(data):
                    self.socket.sendall(piece)
            except OSError:
                self._broken = True
                raise

    def recv(self, timeout: float | None = None):
        """The next message (bytes); TimeoutError if none came within ``timeout`` seconds (0:
        only one already here); ConnectionError if the connection closed. ``timeout`` bounds
        the whole wait: pings, or a message arriving a byte at a time, do not extend it."""
        with self.io:
            messages = self.frames.messages
            wait, deadline = timeout, None
            while not messages:
                if self._broken or self.protocol.state is not State.OPEN:
                    raise self._closed_error()
                if deadline is not None:  # a read returned without a whole message: what is left
                    wait = deadline - time.monotonic()
                    if wait <= 0:
                        raise TimeoutError
                elif timeout:
                    deadline = time.monotonic() + timeout
                self._read(wait)
            return messages.popleft()

    def poll(self) -> None:
        """Read what has arrived, without waiting (pings, a push, the worker's close or EOF), so
        ``state`` tells a connection the worker closed; a call reading meanwhile does it itself."""
        if not self.io.acquire(blocking=False):
            return
        try:
            if not self._broken and self.protocol.state is State.OPEN:
                while True:
                    self._read(0)
        except (TimeoutError, OSError):
            pass
        except Exception:  # a protocol error: the connection is unusable
            self._broken = True
        finally:
            self.io.release()

    def _keepalive(self) -> None:
        while not self._closed.wait(KEEPALIVE):
            self.poll()  # (skipped while a call is reading: it answers the pings)

    def close(self, code: int = CLOSE_DONE) -> None:
        self._closed.set()
        got = self.io.acquire(timeout=CLOSE_TIMEOUT)
        try:
            if not self._broken and self.protocol.state is State.OPEN:
                self.protocol.send_close(code)
                self._flush()
                deadline = time.monotonic() + CLOSE_TIMEOUT
                while self.protocol.state is not State.CLOSED and time.monotonic() < deadline:
                    self._read(max(deadline - time.monotonic(), 0.001))
        except Exception:  # closing anyway
            pass
        finally:
            self._broken = True
            try:
                self.socket.close()
            finally:
                if got:
                    self.io.release()


class AuthenticationError(SyftError):
    """The worker refused this client's token (or it sent none)."""


class WebSocketTransport(FramedTransport):
    """Wire-format frames over one synchronous websocket connection (reopened after a drop)."""

    def __init__(self, url: str, *, token: str | None, timeout: float | None, ssl, session: str,
                 max_message_size: int, progress):
        super().__init__(session=session, max_message_size=max_message_size, progress=progress)
        self.url, self.token, self.timeout, self.ssl = url, token, timeout, ssl
        self.ws = None

    @property
    def address(self) -> str:
        return self.url

    def _is_open(self) -> bool:
        ws = self.ws
        if ws is None:
            return False
        # a worker that went away is noticed now, not by the next reply (what arrives meanwhile
        # waits for its reader; a call reading at this moment reads for itself)
        ws.poll()
        return ws.state is State.OPEN

    def _connect(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        try:
            self.ws = _LeanConnection(self.url, headers, WS_MAX_SIZE,
                                      10.0 if self.timeout is None else min(self.timeout, 10.0), self.ssl)
        except InvalidStatus as e:
            status = e.response.status_code
            if status == 401:
                raise AuthenticationError(f"worker at {self.url} refused the connection: missing or wrong "
                                          f"token (set token= or SYFT_LAB_TOKEN)") from None
            raise self.unavailable(f"HTTP {status} {e.response.reason_phrase}") from None
        except InvalidURI as e:
            raise SyftError(f"bad worker url {self.url!r}: {e}") from None
        except (OSError, TimeoutError, WebSocketException) as e:
            raise self.unavailable(f"{type(e).__name__}: {e}") from None

    def _send_frame(self, frame) -> None:
        try:
            self.ws.send(frame)
        except (ConnectionClosed, OSError) as e:
            raise self.unavailable(f"connection lost ({type(e).__name__})", ConnectionLost) from None

    def _receive_frame(self):
        try:
            return self.ws.recv(timeout=self.time_left())
        except TimeoutError:  # (an OSError): FramedTransport says no reply came in time
            raise
        except (ConnectionClosed, OSError) as e:
            raise self.unavailable(f"connection lost ({type(e).__name__})", ConnectionLost) from None

    def _poll_frame(self):
        try:
            return self.ws.recv(timeout=0)
        except TimeoutError:  # nothing has arrived
            return None
        except (ConnectionClosed, OSError) as e:
            raise self.unavailable(f"connection lost ({type(e).__name__})", ConnectionLost) from None

    def _disconnect(self, done: bool) -> None:
        ws, self.ws = self.ws, None
        if ws is not None:
            ws.close(CLOSE_DONE if done else CLOSE_RECONNECT)


class WebSocketWorker(FramedWorker):
    """A remote worker reached over websockets (``ws://`` or ``wss://``).

    ``id``: the worker's id (checked against what it says; None: take its word). ``token``:
    the bearer token (default $SYFT_LAB_TOKEN). ``timeout``: seconds to wait for a reply.
    ``progress``: None shows a bar for large transfers, False never."""

    kind = "websocket"

    def __init__(self, url: str, id: str | None = None, *, token: str | None = None, timeout: float = 60.0,
                 ssl=None, progress: bool | None = None, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE):
        if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
            raise SyftError(f"a WebSocketWorker url looks like 'ws://127.0.0.1:8777', got {url!r}")
        token = token if token is not None else (os.environ.get("SYFT_LAB_TOKEN") or None)
        self.session = secrets.token_urlsafe(24)  # kept across reconnects: see the module docstring
        transport = WebSocketTransport(url, token=token, timeout=timeout, ssl=ssl, session=self.session,
                                       max_message_size=max_message_size, progress=progress)
        super().__init__(id, transport)
        _open.add(self)

    @property
    def url(self) -> str:
        return self.transport.url

    def close(self) -> None:
        super().close()
        _open.discard(self)

    def __repr__(self):
        return f"<WebSocketWorker {self.id!r} at {self.url}: {self.state}>"


_open: weakref.WeakSet = weakref.WeakSet()  # workers not closed yet


@atexit.register
def _close_all():
    """An interpreter that exits without close(): flush releases and close, so the worker
    ends this client's session at once instead of after its grace period."""
    for w in list(_open):
        try:
            w.close()
        except Exception:
            pass
