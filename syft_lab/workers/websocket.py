"""WebSocketWorker: a worker in another process (or machine), used exactly like a VirtualWorker.

    bob = sy.WebSocketWorker("ws://127.0.0.1:8777", id="bob", token=token)
    p = torch.tensor([1., 2.]).send(bob)

The client protocol is protocol.py's WorkerClient; this module is its transport: wire-format
frames on a synchronous websocket connection (the ``websockets`` sync client, no compression:
lowest latency). Connection states are explicit:

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
import weakref

from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI, WebSocketException
from websockets.protocol import State
from websockets.sync.client import connect

from ..errors import SyftError
from ..wire.format import DEFAULT_MAX_MESSAGE_SIZE, WS_MAX_SIZE
from .protocol import ConnectionLost, FramedTransport, FramedWorker

# Close codes: 1000 says this client is done (the worker ends its session now); a connection
# dropped to start afresh (a timeout, a reply out of step) keeps the session for a reconnect.
CLOSE_DONE, CLOSE_RECONNECT = 1000, 4000


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
        return ws is not None and ws.state is State.OPEN

    def _connect(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        try:
            self.ws = connect(self.url, additional_headers=headers, compression=None, max_size=WS_MAX_SIZE,
                              max_queue=8, open_timeout=10.0 if self.timeout is None else min(self.timeout, 10.0),
                              close_timeout=2, ssl=self.ssl, ping_interval=20, ping_timeout=60,
                              user_agent_header=None, legacy=True)
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
            return self.ws.recv(timeout=self.timeout)
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
