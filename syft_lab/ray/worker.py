"""RayWorker: a worker that is a Ray actor, used exactly like a VirtualWorker or WebSocketWorker.

    sy.ray.init()                                 # a local Ray (or address=... for a cluster)
    bob = sy.RayWorker("bob")                     # one actor running the worker service
    clients = sy.ray.workers(32, prefix="client") # many at once, placed by Ray
    p = torch.ones(3).send(bob); (p * 2).get()
    p.move(clients[0])                            # actor to actor through Ray's object store

Each command is one actor call carrying wire-format bytes (``host.py``): the same commands,
allow-list, quotas and sessions as a websocket worker, and the same client code for them
(``RayWorker`` reuses ``WebSocketWorker``'s command methods; only the request path differs).
A move between two Ray workers passes Ray's reference to the source's reply to the target:
the bytes go from one actor to the other through Ray's object store, never through this process.

States (``state``, no remote call): ``connected`` (the last call was answered), ``unreachable``
(the last call timed out: nothing hangs longer than ``timeout``), ``restarting`` (the actor died
and Ray may restart it: ``max_restarts``), ``dead`` (the actor is gone for good), ``closed``.
Ray restarted the actor: ``restarted`` is True, the worker is empty, the command that found out
raises WorkerUnavailableError saying so, and old pointers get ObjectNotFoundError with a note.
"""
from __future__ import annotations

import collections
import secrets

from ..errors import SyftError, WorkerUnavailableError
from ..wire.format import DEFAULT_MAX_MESSAGE_SIZE, WireError, encode
from ..workers import registry
from ..workers.base import BaseWorker
from ..workers.websocket import WebSocketWorker
from .host import WorkerHost, pack, unpack
from .runtime import ensure_initialized

DEFAULT_NUM_CPUS = 0.05  # a worker waits most of the time: many share a core
DEFAULT_TIMEOUT = 60.0

CONNECTED, UNREACHABLE, RESTARTING, DEAD, CLOSED = "connected", "unreachable", "restarting", "dead", "closed"

_actor_classes: dict = {}


def host_class(ray):
    """``WorkerHost`` as a Ray actor class (made once per process)."""
    cls = _actor_classes.get(id(ray))
    if cls is None:
        cls = _actor_classes[id(ray)] = ray.remote(WorkerHost)
    return cls


def start_hosts(groups, *, num_cpus=DEFAULT_NUM_CPUS, memory=None, resources=None, max_restarts=0,
                max_bytes=None, max_objects=None, threads=1, timeout=DEFAULT_TIMEOUT, **actor_options):
    """Start one actor per group of worker ids; returns ``[(handle, hello), ...]``. The actors
    start in parallel (Ray places them); raises WorkerUnavailableError if one does not answer."""
    ray = ensure_initialized()
    options = dict(num_cpus=num_cpus, max_restarts=max_restarts, **actor_options)
    if memory is not None:
        options["memory"] = memory
    if resources:
        options["resources"] = dict(resources)
    cls = host_class(ray).options(**options)
    handles = [cls.remote(list(ids), max_bytes, max_objects, threads) for ids in groups]
    refs = [h.hello.remote() for h in handles]
    try:
        replies = ray.get(refs, timeout=timeout)
    except Exception as e:
        for h in handles:
            ray.kill(h)
        names = ", ".join(i for ids in groups for i in ids)
        raise WorkerUnavailableError(f"Ray worker(s) {names} did not start: {_why(e)}") from None
    return [(h, unpack(r, DEFAULT_MAX_MESSAGE_SIZE)["ok"]) for h, r in zip(handles, replies)]


def _gone_for_good(e) -> bool:
    """Whether Ray says an actor will not come back (an ActorDiedError, not an unavailable one)."""
    import ray

    return isinstance(e, ray.exceptions.ActorDiedError)


def _why(e) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


class RayWorker(WebSocketWorker):
    """A worker service running in a Ray actor (see the module docstring).

    ``RayWorker("bob")`` starts its own actor; resources go to Ray (``num_cpus``, ``memory``,
    ``resources={"custom": 1}``, ``max_restarts``, other actor options such as
    ``scheduling_strategy``). ``max_bytes``/``max_objects`` are the worker's quotas,
    ``threads`` its torch threads, ``timeout`` the longest a call may take."""

    kind = "ray"

    def __init__(self, id: str, *, num_cpus: float = DEFAULT_NUM_CPUS, memory: int | None = None,
                 resources: dict | None = None, max_restarts: int = 0, max_bytes: int | None = None,
                 max_objects: int | None = None, threads: int = 1, timeout: float = DEFAULT_TIMEOUT,
                 progress: bool | None = None, _host=None, **actor_options):
        BaseWorker.__init__(self, id)  # checks the id
        if _host is None:
            _host = start_hosts([[id]], num_cpus=num_cpus, memory=memory, resources=resources,
                                max_restarts=max_restarts, max_bytes=max_bytes, max_objects=max_objects,
                                threads=threads, timeout=timeout, **actor_options)[0]
        self._setup(_host, timeout, progress, max_restarts)

    def _setup(self, host, timeout, progress, max_restarts):
        import ray

        self._ray = ray
        self.actor, hello = host
        self.timeout = timeout
        self.progress = progress
        self.max_restarts = max_restarts
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        self.url = None  # not reachable by address: through Ray only
        self.session = secrets.token_urlsafe(24)
        self._rid = 0
        self._owner = None
        self._releases = collections.deque()
        self._state = CONNECTED
        self._hello(hello)
        self.restarted = False
        registry.register(self)

    def _hello(self, info):
        self.instance = info["instance"]
        self.node = info.get("node")  # the Ray node's IP (the views group lanes by it)
        self.host = info.get("host")  # its hostname
        self.node_id = info.get("node_id")
        self.pid = info.get("pid")
        self.actor_id = self.actor._actor_id.hex()

    # --- state -------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """connected | unreachable | restarting | dead | closed (no remote call)."""
        return self._state

    def _unavailable(self, why) -> WorkerUnavailableError:
        return WorkerUnavailableError(f"Ray worker {self.id!r} (actor {self.actor_id[:12]} on {self.node}) is "
                                      f"unavailable: {why}")

    def _died(self, e) -> WorkerUnavailableError:
        """The actor died under a call: dead, or restarting if Ray may start it again."""
        if self.max_restarts == 0 or "restart" not in type(e).__name__.lower() and _gone_for_good(e):
            self._state = DEAD
            return self._unavailable(f"its actor died ({_why(e)}). Objects it held are gone; make a new "
                                     f"RayWorker")
        self._state = RESTARTING
        return self._unavailable(f"its actor died ({_why(e)}); Ray restarts it (max_restarts="
                                 f"{self.max_restarts}): it comes back empty")

    # --- one request ----------------------------------------------------------------------
    def _request(self, header: dict, *, detach: bool = False, label: str | None = None):
        return self._call(header, detach=detach)

    def _message(self, header, detach=False):
        self._rid += 1
        header["r"] = self._rid
        if self._releases:
            rel = []
            while self._releases:
                rel.append(self._releases.popleft())
            header["rel"] = rel
        return header, encode(header, max_message_size=self.max_message_size, detach=detach)

    def _call(self, header, *, detach=False, source=None, source_ref=None):
        if self._state == CLOSED:
            raise SyftError(f"Ray worker {self.id!r} was closed; make a new RayWorker")
        if self._state == DEAD:
            raise self._unavailable("its actor died earlier. Objects it held are gone; make a new RayWorker")
        header, encoded = self._message(header, detach)
        message = pack(encoded)
        if source_ref is None:
            ref = self.actor.call.remote(self.id, self.instance, self.session, message)
        else:
            ref = self.actor.receive.remote(self.id, self.instance, self.session, message, source_ref)
        del message, encoded  # Ray holds its own copy of the arguments now
        reply = self._wait(ref, header, source)
        return self._result(reply, header, source)

    def _wait(self, ref, header, source=None):
        exc = self._ray.exceptions
        try:
            data = self._ray.get(ref, timeout=self.timeout)
        except exc.GetTimeoutError:
            self._requeue(header)
            self._state = UNREACHABLE
            raise self._unavailable(f"no reply within {self.timeout} s") from None
        except exc.RayActorError as e:
            self._requeue(header)
            if source is not None and getattr(e, "actor_id", None) == source.actor_id:
                raise source._died(e) from None  # the move's source died, not this worker
            raise self._died(e) from None
        except exc.RayError as e:  # the object store lost the reply, a node went away, ...
            self._requeue(header)
            self._state = UNREACHABLE
            raise self._unavailable(_why(e)) from None
        self._state = CONNECTED
        try:
            return unpack(data, self.max_message_size)
        except WireError:
            raise
        finally:
            del data

    def _requeue(self, header):
        """A request that got no reply: its releases go again with the next one."""
        rel = header.get("rel")
        if rel and self._state != DEAD:
            self._releases.extendleft(reversed(rel))

    def _result(self, reply, header, source=None):
        if "restarted" in reply:
            self._restarted(reply["restarted"])
            raise self._unavailable("Ray restarted its actor: the worker came back empty (objects it "
                                    "held before are gone). Send the data again")
        if "source" in reply and source is not None:
            src = reply["source"]
            if "restarted" in src:
                source._restarted(src["restarted"])
                raise source._unavailable("Ray restarted its actor: the worker came back empty")
            raise source._error(src.get("err"))
        if reply.get("r") != header["r"]:
            raise self._unavailable("reply out of step")
        if "err" in reply:
            raise self._error(reply["err"])
        return reply.get("ok")

    def _restarted(self, instance):
        self.instance = instance
        self.restarted = True
        self._releases.clear()  # they name objects of the previous process

    # --- moving between Ray workers: through the object store ------------------------------
    def _receive_from(self, source, obj_id, requires_grad, keep_source=False):
        from ..tensors.pointer import PointerTensor

        if not isinstance(source, RayWorker) or source._state in (CLOSED, DEAD):
            return super()._receive_from(source, obj_id, requires_grad, keep_source)
        # the source's reply to a fetch stays in Ray's object store; the target reads it there
        fetch, encoded = source._message({"c": "fetch", "id": obj_id, "keep": True})
        source_ref = source.actor.call.remote(source.id, source.instance, source.session, pack(encoded))
        del encoded
        new_id, shape, dtype = self._call({"c": "store"}, source=source, source_ref=source_ref)
        if not keep_source:
            source._discard(obj_id)
        return PointerTensor(self, new_id, shape, dtype, requires_grad=requires_grad)

    # --- connection ----------------------------------------------------------------------
    def close(self) -> None:
        """End this client's session (the worker releases what it stored) and let go of the
        actor: Ray stops it once no handle is left."""
        if self._state == CLOSED:
            return
        if self._state in (CONNECTED, UNREACHABLE):
            try:
                if self._releases:
                    self._call({"c": "release", "ids": []})
                self._ray.get(self.actor.end_session.remote(self.id, self.session), timeout=5)
            except Exception:
                pass
        self._state = CLOSED
        BaseWorker.close(self)
        self._closed = True
        self._state = CLOSED

    def ping(self) -> bool:
        return self._call({"c": "ping"}) == "pong"

    def __repr__(self):
        return f"<RayWorker {self.id!r} on {self.node}: {self._state}>"
