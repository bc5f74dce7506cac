"""WebSocketWorker: a worker in another process (or machine), used exactly like a VirtualWorker.

    bob = sy.WebSocketWorker("ws://127.0.0.1:8777", id="bob", token=token)
    p = torch.tensor([1., 2.]).send(bob)

Every call is one request and one reply on a synchronous websocket connection (the
``websockets`` sync client, no compression: lowest latency). Connection states are explicit:

    disconnected --connect--> connected --lost--> disconnected --(next call)--> connected ...
                                        --close()--> closed

A call on a disconnected worker reconnects first; if the worker cannot be reached it raises
WorkerUnavailableError naming the worker. A restarted worker has lost its objects: pointers to
them raise ObjectNotFoundError with a note saying so.

Garbage collection: a pointer's ``__del__`` may run at any moment, even in the middle of
another request on this connection, so ``_release`` only queues the id; the queue travels
with the next request (or on close). Never re-entrant, never lost on a failed send.

Sessions: the client names a session in its hello (a random id it keeps across reconnects).
Everything this client stores belongs to that session; the worker releases it all when the
client closes the connection, or after its grace period when the connection dropped and the
client did not come back. An interpreter that exits without ``close()`` closes every open
worker on the way out (atexit).
"""
from __future__ import annotations

import atexit
import collections
import os
import secrets
import threading
import weakref

from ..errors import ObjectNotFoundError, RemoteError, SyftError, WorkerUnavailableError
from ..wire.allowlist import op_name
from ..wire.format import DEFAULT_MAX_MESSAGE_SIZE, WS_MAX_SIZE, Decoder, WireError, encode
from . import registry
from .base import BaseWorker

from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

PROGRESS_THRESHOLD = 8 * 2**20  # show a progress bar for transfers above this many bytes
SUMMARY_PAGE = 10000  # entries per summary request (the worker's maximum)
SUMMARY_CAP = 100_000  # summary() lists at most this many objects (the views stay usable)

CONNECTED, DISCONNECTED, CLOSED = "connected", "disconnected", "closed"
# Close codes: 1000 says this client is done (the worker ends its session now); a connection
# dropped to start afresh (a timeout, a reply out of step) keeps the session for a reconnect.
CLOSE_DONE, CLOSE_RECONNECT = 1000, 4000


class AuthenticationError(SyftError):
    """The worker refused this client's token (or it sent none)."""


_op_names: dict = {}


def _plan_or_object(obj):
    """A fetched object; a plan arrives as its JSON graph and is validated here."""
    if type(obj) is dict and "plan" in obj:
        from ..plans.graph import PlanBuilds
        from ..plans.plan import StoredPlan

        return StoredPlan(PlanBuilds.from_json(obj["plan"]), [], obj.get("tags") or (), obj.get("description"))
    return obj


class WebSocketWorker(BaseWorker):
    """A remote worker reached over websockets (``ws://`` or ``wss://``)."""

    kind = "websocket"

    def __init__(self, url: str, id: str | None = None, *, token: str | None = None, timeout: float = 60.0,
                 ssl=None, progress: bool | None = None, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE):
        if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
            raise SyftError(f"a WebSocketWorker url looks like 'ws://127.0.0.1:8777', got {url!r}")
        self.url = url
        self.token = token if token is not None else (os.environ.get("SYFT_LAB_TOKEN") or None)
        self.timeout = timeout
        self.ssl = ssl
        self.progress = progress  # None: a bar for large transfers; False: never
        self.max_message_size = max_message_size
        self._ws = None
        self._decoder = None
        self._state = DISCONNECTED
        self._lock = threading.Lock()
        self._owner = None  # the thread inside a request (re-entrance would corrupt the stream)
        self._rid = 0
        self._releases: collections.deque = collections.deque()
        self.instance = None  # the server process's instance id; changes when it restarts
        self.restarted = False
        self.session = secrets.token_urlsafe(24)  # kept across reconnects: see the module docstring
        self.id = "?"  # for error messages until the worker tells its id
        if id is not None:
            super().__init__(id)
        with self._lock:
            hello = self._connect()
        if id is None:
            super().__init__(hello["worker"])
        registry.register(self)
        _open.add(self)

    # --- connection ----------------------------------------------------------------------
    @property
    def state(self) -> str:
        """'connected', 'disconnected' (reconnects on the next call) or 'closed'."""
        ws = self._ws
        if self._state == CONNECTED and (ws is None or ws.state is not State.OPEN):
            return DISCONNECTED  # the worker closed the connection since the last call
        return self._state

    def _unavailable(self, why) -> WorkerUnavailableError:
        return WorkerUnavailableError(
            f"worker {self.id!r} at {self.url} is unavailable: {why}. Pointers to it work again once it "
            f"is back (objects it held are gone if it restarted).")

    def _connect(self) -> dict:
        """Open the connection and say hello (the caller holds the lock)."""
        from websockets.exceptions import InvalidStatus, InvalidURI, WebSocketException
        from websockets.sync.client import connect

        if self._state == CLOSED:
            raise SyftError(f"worker {self.id!r} was closed; make a new WebSocketWorker to reconnect")
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        try:
            ws = connect(self.url, additional_headers=headers, compression=None, max_size=WS_MAX_SIZE,
                         max_queue=8, open_timeout=10.0 if self.timeout is None else min(self.timeout, 10.0), close_timeout=2, ssl=self.ssl,
                         ping_interval=20, ping_timeout=60, user_agent_header=None, legacy=True)
        except InvalidStatus as e:
            status = e.response.status_code
            if status == 401:
                raise AuthenticationError(f"worker at {self.url} refused the connection: missing or wrong "
                                          f"token (set token= or SYFT_LAB_TOKEN)") from None
            raise self._unavailable(f"HTTP {status} {e.response.reason_phrase}") from None
        except InvalidURI as e:
            raise SyftError(f"bad worker url {self.url!r}: {e}") from None
        except (OSError, TimeoutError, WebSocketException) as e:
            raise self._unavailable(f"{type(e).__name__}: {e}") from None
        self._ws = ws
        self._decoder = Decoder(self.max_message_size)
        self._state = CONNECTED
        try:
            hello = self._exchange({"c": "hello", "session": self.session}, flush=False)
        except BaseException:
            self._drop()
            raise
        if self.id != "?" and hello.get("worker") != self.id:
            self._drop()
            raise SyftError(f"the worker at {self.url} is {hello.get('worker')!r}, not {self.id!r}")
        if self.instance is not None and hello.get("instance") != self.instance:
            self.restarted = True
            self._releases.clear()  # they name objects of the previous process
        self.instance = hello.get("instance")
        limit = hello.get("max_message_size")
        if type(limit) is int and limit > 0:
            self.max_message_size = min(self.max_message_size, limit)
        return hello

    def _drop(self, code: int = CLOSE_RECONNECT) -> None:
        """Close the connection; with CLOSE_RECONNECT the session lives on for the next one."""
        ws, self._ws = self._ws, None
        if self._state != CLOSED:
            self._state = DISCONNECTED
        if ws is not None:
            try:
                ws.close(code)
            except Exception:
                pass

    def close(self) -> None:
        """Send the queued releases, close the connection and forget this worker. The worker then
        releases every object this client stored (pointers still alive turn stale)."""
        with self._lock:
            if self._state == CONNECTED and self._releases:
                try:
                    self._exchange({"c": "release", "ids": []})
                except SyftError:
                    pass
            self._drop(CLOSE_DONE)
            self._state = CLOSED
        _open.discard(self)
        super().close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- one request ---------------------------------------------------------------------
    def _request(self, header: dict, *, detach: bool = False, label: str | None = None):
        if self._owner == threading.get_ident():
            raise SyftError(f"re-entrant call on worker {self.id!r} (a callback inside a request?)")
        with self._lock:
            self._owner = threading.get_ident()
            try:
                if self._state != CONNECTED or self._ws.state is not State.OPEN:
                    # the worker went away while we were idle: nothing was sent, so reconnect
                    self._drop()
                    self._connect()
                return self._exchange(header, detach=detach, label=label)
            finally:
                self._owner = None

    def _exchange(self, header: dict, *, flush: bool = True, detach: bool = False, label=None):
        self._rid += 1
        rid = header["r"] = self._rid
        rel = None
        if flush and self._releases:
            rel = []
            while self._releases:
                rel.append(self._releases.popleft())
            header["rel"] = rel
        encoded = encode(header, max_message_size=self.max_message_size, detach=detach)
        ws = self._ws
        try:
            if encoded.streamed:
                self._send_streamed(ws, encoded, label)
            else:
                ws.send(encoded.frames[0])
            reply = self._decoder.feed(ws.recv(timeout=self.timeout))
            if reply is None:
                reply = self._receive_streamed(ws, label)
        except TimeoutError:
            self._drop()  # a late reply would arrive out of step: start afresh
            raise self._unavailable(f"no reply within {self.timeout} s") from None
        except (ConnectionClosed, OSError) as e:
            if rel:
                self._releases.extendleft(reversed(rel))
            self._drop()
            raise self._unavailable(f"connection lost ({type(e).__name__})") from None
        except WireError:
            self._drop()
            raise
        if reply.get("r") != rid:  # the worker could not read our message and closes
            self._drop()
            if "err" in reply:
                raise self._error(reply["err"])
            raise self._unavailable("reply out of step")
        if "err" in reply:
            raise self._error(reply["err"])
        return reply.get("ok")

    def _send_streamed(self, ws, encoded, label):
        bar = self._bar(encoded.size, f"{label or 'send'} → {self.id}") if encoded.size > PROGRESS_THRESHOLD else None
        try:
            for frame in encoded.frames:
                ws.send(frame)
                if bar is not None:
                    bar.update(len(frame))
        finally:
            if bar is not None:
                bar.close()

    def _receive_streamed(self, ws, label):
        decoder = self._decoder
        bar = None
        if decoder.expected > PROGRESS_THRESHOLD:
            bar = self._bar(decoder.expected, f"{label or 'receive'} ← {self.id}")
        try:
            while True:
                reply = decoder.feed(ws.recv(timeout=self.timeout))
                if bar is not None:
                    bar.n = decoder.received
                    bar.refresh()
                if reply is not None:
                    return reply
        finally:
            if bar is not None:
                bar.close()

    def _error(self, err) -> SyftError:
        if not isinstance(err, dict):
            return RemoteError(self.id, "SyftError", "malformed error reply")
        kind, message = str(err.get("t")), str(err.get("m"))
        if kind == "ObjectNotFoundError" and type(err.get("id")) is int:
            e = ObjectNotFoundError(self.id, err["id"])
            if self.restarted:
                e.add_note(f"worker {self.id!r} restarted since this client first connected: "
                           f"objects it held before are gone")
            return e
        return RemoteError(self.id, kind, message)

    def _bar(self, total, desc):
        if self.progress is False:
            return None
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return None
        return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, leave=False)

    # --- what BaseWorker asks of a transport ---------------------------------------------
    @property
    def objects(self) -> dict:
        """A snapshot of the worker's store: object id -> what the worker says about it."""
        return {e["id"]: e for e in self.summary()}

    def _store_copy(self, obj) -> int:
        from ..tensors.pointer import PointerTensor

        if isinstance(obj, PointerTensor) or isinstance(getattr(obj, "child", None), PointerTensor):
            raise SyftError(f"worker {self.id!r} is remote and cannot hold a pointer to another worker's "
                            f"object: it would need that worker's credentials (README, 'Workers on other "
                            f"machines'). Move the data instead: ptr.move({self.id})")
        return self._request({"c": "store", "o": obj}, detach=True, label="send")

    def _store_object(self, obj) -> int:
        return self._store_copy(obj)

    def _load(self, obj, tags, description) -> int:
        """Store ``obj`` as data the worker itself holds (no session or pointer releases it)."""
        return self._request({"c": "load", "o": obj, "tags": list(tags), "d": description}, detach=True,
                             label="load")

    def _receive_from(self, source, obj_id, requires_grad, keep_source=False):
        """Move (or, with ``keep_source``, copy): copy the object here through this client, then
        delete it at the source, so a failure on the way loses nothing."""
        from ..tensors.pointer import PointerTensor

        obj = source._copy_out(obj_id)
        new_id = self._store_copy(obj)
        if not keep_source:
            source._discard(obj_id)
        return PointerTensor(self, new_id, obj.shape, obj.dtype, requires_grad=requires_grad)

    def _copy_out(self, obj_id):
        """The object's value; it stays on the worker."""
        return self._request({"c": "fetch", "id": obj_id, "keep": True}, label="copy")

    def _discard(self, obj_id) -> None:
        self._request({"c": "delete", "id": obj_id})

    def _run(self, func, args, kwargs):
        if self._batch is not None:  # inside sy.batch(worker): recorded, sent as one graph at the end
            return self._batch.record(func, args, kwargs)
        name = _op_names.get(func)
        if name is None:
            name = _op_names[func] = op_name(func)
        return self._request({"c": "run", "op": name, "a": args, "k": kwargs})

    def _fetch(self, obj_id):
        return _plan_or_object(self._request({"c": "fetch", "id": obj_id, "keep": False}, label="get"))

    def _release(self, obj_id) -> None:
        batch = self._batch
        if batch is not None and obj_id in batch.pending:
            batch.dropped.add(obj_id)
            return
        self._releases.append(obj_id)  # sent with the next request: see the module docstring

    # --- plans: the JSON graph travels as text; the worker validates it ---------------------
    def _store_plan(self, graph, state, tags, description):
        from .virtual import plan_state_to_send

        state = list(plan_state_to_send(state, self))
        return self._request({"c": "store_plan", "g": graph.to_json(), "s": state, "tags": list(tags),
                              "d": description}, detach=True, label="send plan")

    def _run_plan(self, plan_id, args, state):
        return self._request({"c": "run_plan", "id": plan_id, "a": [a.id for a in args],
                              "s": None if state is None else [s.id for s in state]})

    def _run_graph(self, graph, input_ids, output_ids):
        return self._request({"c": "run_graph", "g": graph.to_json(), "i": list(input_ids), "o": list(output_ids)})

    def _incref(self, obj_id) -> None:
        self._request({"c": "incref", "id": obj_id})

    def _search(self, query):
        return [(i, meta) for i, meta in self._request({"c": "search", "q": list(query)})]

    def describe(self, obj_id: int) -> list[dict]:
        batch = self._batch
        if batch is not None and obj_id in batch.pending:
            _, shape, dtype = batch.pending[obj_id]
            return [{"kind": "pending", "type": "Tensor", "id": obj_id, "owner": self.id, "shape": list(shape),
                     "dtype": dtype, "preview": None}]
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

    def ping(self) -> bool:
        """True if the worker answers (reconnecting if needed); raises WorkerUnavailableError if not."""
        return self._request({"c": "ping"}) == "pong"

    def flush(self) -> None:
        """Send queued releases now (they otherwise travel with the next request)."""
        if self._releases:
            self._request({"c": "release", "ids": []})

    def __repr__(self):
        return f"<WebSocketWorker {self.id!r} at {self.url}: {self._state}>"


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
