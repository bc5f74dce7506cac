"""RayWorker: a worker that is a Ray actor, used exactly like a VirtualWorker or WebSocketWorker.

    sy.ray.init()                                 # a local Ray (or address=... for a cluster)
    bob = sy.RayWorker("bob")                     # one actor running the worker service
    clients = sy.ray.workers(32, prefix="client") # many at once, placed by Ray
    p = torch.ones(3).send(bob); (p * 2).get()
    p.move(clients[0])                            # actor to actor through Ray's object store

A RayWorker is a ``WorkerClient`` (workers/protocol.py: the same requests, replies, typed errors
and release queue as every worker) over a ``RayTransport``: each request is one call of the
actor (``host.py``) carrying wire-format bytes, answered by the same ``WorkerService`` as a
websocket worker's (allow-list, quotas, sessions). Several requests may be in flight (Ray
queues them on the actor, in order). A move between two Ray workers passes Ray's reference to
the source's reply to the target: the bytes go from one actor to the other through Ray's object
store, never through this process.

States (``state``, no remote call): ``connected``; ``unreachable`` (the last call timed out or
Ray lost its reply: nothing waits longer than ``timeout``; the next call tries again);
``restarting`` (the actor died and Ray may restart it, ``max_restarts``); ``dead`` (gone for
good: every call raises WorkerUnavailableError at once); ``closed``. When Ray restarted the
actor, the next call says so (WorkerUnavailableError: it came back empty), ``restarted`` turns
True and old pointers get ObjectNotFoundError with a note.
"""
from __future__ import annotations

import collections
import secrets
import threading
import time
import weakref

from ..errors import RemoteError, SyftError, WorkerUnavailableError
from ..tensors.pointer import PointerTensor
from ..wire.format import CHUNK_SIZE, DEFAULT_MAX_MESSAGE_SIZE, encode
from ..workers.base import check_worker_id
from ..workers.connection import error_bytes
from ..workers.protocol import ConnectionLost, FramedTransport, FramedWorker, Pending, error_from_reply
from .host import RESTARTED, MoveSourceError, pack, unpack
from .starting import DEFAULT_NUM_CPUS, _why, start_hosts_shown

DEFAULT_TIMEOUT = 60.0

CONNECTED, UNREACHABLE, RESTARTING, DEAD, CLOSED = "connected", "unreachable", "restarting", "dead", "closed"

_transports: dict = {}  # actor id -> the RayTransports calling that actor (a weak set each)
_probes: dict = {}  # actor id -> the ObjectRef of a liveness probe (hello) not yet answered


class RayTransport(FramedTransport):
    """Wire-format messages as calls of a ``WorkerHost`` actor (see the module docstring)."""

    def __init__(self, actor, info: dict, *, timeout: float | None, session: str, progress=False,
                 max_restarts: int = 0):
        super().__init__(session=session, max_message_size=DEFAULT_MAX_MESSAGE_SIZE, progress=progress)
        import ray  # the optional dependency (this module is only used once Ray is running)

        self._ray = ray
        self.actor = actor
        self.actor_id = actor._actor_id.hex()
        self.info = info
        self.timeout = timeout
        self.max_restarts = max_restarts
        self.health = None  # None (fine), UNREACHABLE, RESTARTING or DEAD
        _transports.setdefault(self.actor_id, weakref.WeakSet()).add(self)  # workers packed in one actor
        self._replies: collections.deque = collections.deque()  # [ObjectRef, move source or None]
        self._frames: collections.deque = collections.deque()  # the rest of the reply being read

    @property
    def address(self) -> str:
        return f"Ray actor {self.actor_id[:12]} on {self.info.get('node')}"

    @property
    def state(self) -> str:
        if self._state == CLOSED:
            return CLOSED
        return self.health or super().state

    def unavailable(self, why: str, cls=WorkerUnavailableError) -> WorkerUnavailableError:
        return cls(f"Ray worker {self.worker_id!r} ({self.address}) is unavailable: {why}")

    # --- what FramedTransport asks of a transport -------------------------------------------
    def _connect(self) -> None:
        """Nothing to open (Ray routes each call to the actor); after a failure, wait (at most
        ``timeout``) until the actor answers again: Ray may be restarting it."""
        if self.health == DEAD:
            raise self.unavailable("its actor died. Objects it held are gone: start a new RayWorker")
        if self.health is None:
            return
        exc = self._ray.exceptions
        deadline = time.monotonic() + (DEFAULT_TIMEOUT if self.timeout is None else self.timeout)
        delay = 0.02
        while True:
            try:
                data = self._ray.get(self.actor.hello.remote(), timeout=max(deadline - time.monotonic(), 0.01))
                break
            except exc.GetTimeoutError:
                raise self.unavailable(f"no reply within {self.timeout} s") from None
            except exc.ActorDiedError as e:
                raise self.died(e) from None
            except exc.RayError as e:  # ActorUnavailableError: restarting; a node lost meanwhile
                if time.monotonic() + delay > deadline:
                    raise self.unavailable(f"it did not come back within {self.timeout} s ({_why(e)})") from None
                time.sleep(delay)  # a bounded back-off while Ray starts the actor again
                delay = min(delay * 2, 0.5)
        self.info = unpack(data, self.max_message_size)["ok"]  # a restarted actor: a new process, maybe a new node
        self.health = None

    def _is_open(self) -> bool:
        return True

    def poll(self) -> None:
        """Between requests: notice an actor that died (``ray.kill``, its process lost) without
        waiting. A Ray worker pushes nothing unasked, so each poll looks at the answer of the
        last probe (one ``hello`` per actor, shared by the workers it hosts) and sends the next."""
        if self.health is not None or self._replies:
            return
        ray, aid = self._ray, self.actor_id
        probe = _probes.get(aid)
        if probe is None:
            _probes[aid] = self.actor.hello.remote()
            return
        ready, _ = ray.wait([probe], timeout=0)
        if not ready:
            return
        del _probes[aid]
        try:
            ray.get(probe, timeout=0)
        except ray.exceptions.RayActorError as e:
            self.died(e)
        except ray.exceptions.RayError:
            pass  # the probe was lost, not the actor: the next request says what is wrong

    def _send_message(self, msg: dict, detach: bool, label: str | None) -> None:
        """One actor call per request: the frames as ``[first frame, *buffers]`` (host.pack)."""
        source = msg.pop("src", None)  # a move: (source worker, ObjectRef of its fetch reply)
        encoded = self._encode(msg, detach)
        if source is None:
            ref = self.actor.call.remote(pack(encoded))
        else:
            ref = self.actor.receive.remote(pack(encoded), source[1])
        del encoded  # Ray has copied the arguments into its object store
        self._replies.append((ref, source, msg.get("r", 0)))

    def send_calls(self, msgs: list, elsewhere: int) -> list:
        """Send ``msgs`` in ONE actor call (``WorkerHost.calls``): the first ``len(msgs) -
        elsewhere`` are this client's requests (their replies are read in order, as any
        request's); the last ``elsewhere`` are for another actor to read (a fetch whose reply
        the aggregator adds): their ObjectRefs are returned."""
        encoded, rids = [], []
        for k, msg in enumerate(msgs):
            self._rid += 1
            msg["r"] = self._rid
            if k >= len(msgs) - elsewhere:
                msg["@x"] = 1
            else:
                rids.append(self._rid)
            encoded.append(pack(self._encode(msg)))
        call = self.actor.calls.options(num_returns=len(msgs)) if len(msgs) > 1 else self.actor.calls
        refs = call.remote(encoded)
        refs = list(refs) if len(msgs) > 1 else [refs]
        del encoded
        for ref, rid in zip(refs, rids):
            self._replies.append((ref, None, rid))
            self._in_flight.append(rid)
        return refs[len(rids):]

    def call_ref(self, msg: dict):
        """Send one request and leave its reply in Ray's object store: returns the ObjectRef
        (for another actor to read; this client never reads it)."""
        self._rid += 1
        msg["r"] = self._rid
        msg["@x"] = 1  # its reply carries no pushed events: they wait for this client's next call
        return self.actor.call.remote(pack(self._encode(msg)))

    def _encode(self, msg, detach=False):
        """The message with its routing fields (host.WorkerHost._route), encoded."""
        msg["@w"], msg["@s"] = self.worker_id, self.session
        if msg.get("c") != "hello":  # a hello learns the instance; later calls name it
            msg["@i"] = self.instance
        try:
            return encode(msg, max_message_size=self.max_message_size, detach=detach)
        finally:
            del msg["@w"], msg["@s"]
            msg.pop("@i", None)

    def _receive_frame(self):
        if self._frames:
            return self._frames.popleft()
        if not self._replies:
            raise self.unavailable("no reply is expected", ConnectionLost)
        ref, source, rid = self._replies.popleft()
        exc = self._ray.exceptions
        try:
            data = self._ray.get(ref, timeout=self.timeout)
        except exc.GetTimeoutError:
            self.health = UNREACHABLE
            raise TimeoutError from None
        except exc.RayActorError as e:
            if source is not None and getattr(e, "actor_id", None) == source[0].transport.actor_id:
                # the source died, not this worker: this request's own error reply (the stream stays
                # in step: the requests after it, in flight, are answered as usual)
                return error_bytes(rid, MoveSourceError(str(source[0].transport.died(e))))
            raise self.died(e, ConnectionLost) from None
        except exc.RayError as e:  # the object store lost the reply, its node went away, ...
            self.health = UNREACHABLE
            raise self.unavailable(_why(e), ConnectionLost) from None
        self.health = None
        if type(data) is str and data == RESTARTED:
            raise self.unavailable("Ray restarted its actor since this client's hello: the worker came back "
                                   "empty (objects it held are gone). Send the data again", ConnectionLost)
        pushed = None
        if type(data) is tuple and len(data) == 2:  # (the events this client is owed, the reply)
            pushed, data = data
        if type(data) is list:
            for buf in data[1:]:
                view = memoryview(buf)
                for off in range(0, len(view), CHUNK_SIZE):
                    self._frames.append(view[off:off + CHUNK_SIZE])
            data = data[0]
        if pushed is None:
            return data
        self._frames.appendleft(data)  # the push is read first, then the reply
        return pushed

    def died(self, e, cls=WorkerUnavailableError) -> WorkerUnavailableError:
        """The actor died under a call (ActorDiedError: for good) or Ray is restarting it
        (ActorUnavailableError)."""
        if isinstance(e, self._ray.exceptions.ActorDiedError):
            for t in _transports.get(self.actor_id, ()):  # every worker of that process died with it
                t.health = DEAD
            return self.unavailable(f"its actor died ({_why(e)}). Objects it held are gone: start a new "
                                    f"RayWorker", cls)
        self.health = RESTARTING if self.max_restarts != 0 else UNREACHABLE
        if self.health == RESTARTING:
            for t in _transports.get(self.actor_id, ()):
                t.health = t.health or RESTARTING
        return self.unavailable(f"{_why(e)} The worker comes back empty if Ray restarts its actor "
                                f"(max_restarts={self.max_restarts}): objects it held are gone", cls)

    def _disconnect(self, done: bool) -> None:
        self._replies.clear()  # late replies are never read: each call has its own ObjectRef
        self._frames.clear()
        if done and self.health is None:
            try:  # the actor releases what this client's session holds
                self._ray.get(self.actor.end_session.remote(self.worker_id, self.session), timeout=5)
            except Exception:
                pass


class RayWorker(FramedWorker):
    """A worker service running in a Ray actor (see the module docstring).

    ``RayWorker("bob")`` starts its own actor, placed by Ray with ``num_cpus`` (a fraction of a
    core: a worker mostly waits), ``memory``, custom ``resources``, ``max_restarts`` and other
    actor options (``scheduling_strategy``, ...). ``max_bytes``/``max_objects``: the worker's
    quotas; ``threads``: its torch threads; ``timeout``: the longest a call may take.
    ``progress``: a bar while its actor starts, as ``sy.ray.workers(n)``'s: None where a person
    watches (progress.py's rule), True always (and for large transfers too), False never."""

    kind = "ray"

    def __init__(self, id: str, *, num_cpus: float = DEFAULT_NUM_CPUS, memory: int | None = None,
                 resources: dict | None = None, max_restarts: int = 0, max_bytes: int | None = None,
                 max_objects: int | None = None, threads: int = 1, timeout: float | None = DEFAULT_TIMEOUT,
                 progress: bool | None = None, _host=None, **actor_options):
        check_worker_id(id)
        if _host is None:  # its actor starts with a bar where a person watches, as sy.ray.workers(n)
            _host = start_hosts_shown([[id]], dict(num_cpus=num_cpus, memory=memory, resources=resources,
                                                   max_restarts=max_restarts, max_bytes=max_bytes,
                                                   max_objects=max_objects, threads=threads, **actor_options),
                                      progress)[0]
        actor, info = _host
        self.session = secrets.token_urlsafe(24)
        transport = RayTransport(actor, info, timeout=timeout, session=self.session,
                                 progress=False if progress is None else progress,  # transfers: asked for only
                                 max_restarts=max_restarts)
        super().__init__(id, transport)

    # --- where it runs (no remote call: the views read these for every lane) -----------------
    @property
    def actor(self):
        """The Ray actor handle (``ray.kill(bob.actor)`` stops it)."""
        return self.transport.actor

    @property
    def actor_id(self) -> str:
        return self.transport.actor_id

    @property
    def node(self) -> str | None:
        """The IP address of the Ray node the actor runs on (the views group lanes by it)."""
        return self.transport.info.get("node")

    @property
    def host(self) -> str | None:
        """The hostname of that node."""
        return self.transport.info.get("host")

    @property
    def node_id(self) -> str | None:
        return self.transport.info.get("node_id")

    @property
    def pid(self) -> int | None:
        """The actor's process id (on its node)."""
        return self.transport.info.get("pid")

    # --- moves between Ray workers: through the object store --------------------------------
    def _receive_from(self, source, obj_id, requires_grad, keep_source=False):
        if not isinstance(source, RayWorker) or source.state in (CLOSED, DEAD):
            return super()._receive_from(source, obj_id, requires_grad, keep_source)
        if source.before_request is not None:  # a round held back for the source goes first
            source._send_held()
        # actor to actor, noted as the worker-to-worker flow it is in both records (as a move
        # between worker processes: workers/protocol.py _receive_from)
        ref = source.transport.call_ref({"c": "fetch", "id": obj_id, "keep": True,
                                         "note": {"why": "move", "peer": self.id}})
        try:
            new_id, shape, dtype = self._request({"c": "store", "src": (source, ref),
                                                  "note": {"why": "move", "peer": source.id}},
                                                 label="copy" if keep_source else "move")
        except RemoteError as e:
            if e.remote_type != "MoveSourceError":
                raise
            raise self._source_error(source, ref, e) from None
        if not keep_source:
            try:
                source._discard(obj_id)
            except BaseException:
                # the source died (or stopped answering) after the copy: a move is all or nothing,
                # so the copy goes too (two live copies of a share would be two shares on one party)
                try:
                    self._discard(new_id)
                except Exception:
                    pass  # (this worker's own failure: its session releases the copy)
                raise
        return PointerTensor(self, new_id, shape, dtype, requires_grad=requires_grad)

    def submit_calls(self, msgs: list, *, elsewhere: int = 0):
        """Submit several command messages in ONE actor call, none awaited: ``(Pendings of the
        first len(msgs) - elsewhere, ObjectRefs of the replies of the last elsewhere)``. The
        messages run in order on the worker, as if sent one by one; a ``fetch`` with ``"@o": k``
        (no ``"id"``) takes the k-th output of the last ``run_plan`` before it (host.WorkerHost.calls).
        An ObjectRef goes to another Ray worker's ``submit_run_from(..., ref=)``: the reply
        travels actor to actor, never read here."""
        if self._batch is not None:
            raise SyftError(f"submit cannot run inside sy.batch({self.id}): the batch sends its ops at its end")
        if not 0 <= elsewhere < len(msgs):
            raise SyftError("submit_calls takes at least one message whose reply is read here")
        if self._owner == threading.get_ident():
            raise SyftError(f"re-entrant call on worker {self.id!r} (a callback inside a request?)")
        pending = [Pending(self) for _ in range(len(msgs) - elsewhere)]
        with self._lock:
            self._owner = threading.get_ident()
            try:
                transport = self.transport
                if not self._waiting and transport.state != "connected":
                    transport.ensure_open()
                rel = self._take_releases(msgs[0])
                try:
                    refs = transport.send_calls(msgs, elsewhere)
                except ConnectionLost:
                    if rel:
                        self._releases.extendleft(reversed(rel))
                    self._fail_waiting(None)
                    raise
                self._waiting.extend(pending)
            finally:
                self._owner = None
        return pending, refs

    def submit_run_from(self, source, obj_id: int, op: str, args: list, kwargs=None, *, slot: int,
                        keep_source: bool = False, ref=None):
        """Submit the op ``op`` (its wire name, e.g. ``"aten.add_.Tensor"``) on this worker, its
        argument ``args[slot]`` (None there) being object ``obj_id`` of the Ray worker ``source``:
        the object goes actor to actor through Ray's object store, never through this process,
        and no reply is awaited (``Pending``). Without ``keep_source`` the object leaves the
        source. ``ref``: instead, the ObjectRef of a reply of ``source`` that holds the object
        (``submit_calls``' elsewhere; ``obj_id`` is then unused). Returns None when ``source``
        is not a live Ray worker (then copy it first)."""
        if not isinstance(source, RayWorker) or source.state in (CLOSED, DEAD) or source.transport.health:
            return None
        if self._batch is not None:
            raise SyftError(f"submit cannot run inside sy.batch({self.id}): the batch sends its ops at its end")
        args = list(args)
        if not 0 <= slot < len(args) or args[slot] is not None:
            raise SyftError("submit_run_from takes args with None at the moved object's slot")
        if ref is None:
            ref = source.transport.call_ref({"c": "fetch", "id": obj_id, "keep": keep_source})
        return self._submit({"c": "run", "op": op, "a": args, "k": kwargs, "@m": slot, "src": (source, ref)})

    def _source_error(self, source, ref, e):
        """The source's own error for a move it could not serve (its reply is small: an error)."""
        ray = self.transport._ray
        try:
            data = ray.get(ref, timeout=source.transport.timeout)
        except ray.exceptions.RayActorError as x:  # it died: WorkerUnavailableError, naming it
            return source.transport.died(x)
        except Exception:
            return RemoteError(source.id, "SyftError", e.remote_message)
        try:
            if data == RESTARTED:
                source._on_restart()
                return source.transport.unavailable("Ray restarted its actor: the worker came back empty")
            return error_from_reply(source.id, unpack(data, source.transport.max_message_size).get("err"),
                                    source.restarted)
        except Exception:
            return RemoteError(source.id, "SyftError", e.remote_message)

    def __repr__(self):
        return f"<RayWorker {self.id!r} on {self.node}: {self.state}>"
