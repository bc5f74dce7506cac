"""The Ray actor that hosts worker services: bytes in, bytes out.

``WorkerHost`` is a plain class; ``syft_lab.ray`` makes it a Ray actor class with
``ray.remote`` when it first starts one (Ray is an optional dependency). Ray imports it by name
on the node (``syft_lab`` must be installed there), so no code from the notebook runs in the
actor: every argument is a string, an int or wire-format bytes, and every message goes through
``syft_lab.wire.format``'s validating decoder and then the same ``WorkerService`` (allow-list,
quotas, sessions) as a websocket worker. Ray's own plumbing pickles those bytes and strings
(see docs/workers.md, "Ray's trust model").

One host runs one worker service by default (one actor process per worker, placed by Ray);
``sy.ray.workers(n, per_actor=k)`` packs ``k`` services into one process to save memory
(each process imports torch: ~230 MiB).

A message is ``bytes`` (a small message, inline) or a list ``[first frame, *buffers]`` where
each buffer is one tensor's bytes as a NumPy ``uint8`` array: Ray moves those through its
object store without pickling them (zero-copy on the receiving side), and the receiver feeds
them to the wire Decoder in chunks, which copies them into tensors it allocated from the
validated header.
"""
from __future__ import annotations

import os
import socket

import numpy as np
import torch

from ..commands import NewObject, Ref
from ..errors import SyftError
from ..wire.format import CHUNK_SIZE, DEFAULT_MAX_MESSAGE_SIZE, Decoder, WireError, encode
from ..workers.connection import WHOLE, ServiceConnection, error_bytes
from ..workers.feed import EventFeed
from ..workers.limits import Limits
from ..workers.heap import zero_fresh_allocations
from ..workers.service import WorkerService
from ..workers.sessions import Session, SessionTable

NO_CHUNK = WHOLE  # encode's chunk size for "never stream": one frame
_error = error_bytes  # an error reply as one frame (tests/ray/test_ray_worker.py names it so)


def pack(encoded):
    """An ``Encoded`` message as Ray should carry it: bytes, or a list of a frame and buffers."""
    if not encoded.streamed:
        return bytes(encoded.frames[0])
    frames = encoded.frames
    return [bytes(frames[0]), *(np.frombuffer(f, dtype=np.uint8) for f in frames[1:])]


def unpack(message, max_message_size: int):
    """Decode a message made by ``pack`` (validated by the wire Decoder); raises WireError."""
    decoder = Decoder(max_message_size)
    if isinstance(message, (bytes, bytearray, memoryview)):
        out = decoder.feed(message)
        if out is None:
            raise WireError("a streamed message arrived without its buffers")
        return out
    if type(message) is not list or not message:
        raise WireError(f"a message is bytes or a list of frames, got {type(message).__name__}")
    out = decoder.feed(message[0])
    for buf in message[1:]:
        if out is not None:
            raise WireError("more buffers than the message declared")
        if not isinstance(buf, np.ndarray) or buf.dtype != np.uint8 or buf.ndim != 1:
            raise WireError("a buffer frame is a 1-d uint8 array")
        view = memoryview(buf)
        for off in range(0, len(view), CHUNK_SIZE):
            out = decoder.feed(view[off:off + CHUNK_SIZE])
    if out is None:
        raise WireError("a streamed message is missing buffers")
    return out


def node_info() -> dict:
    """Where this process runs: the Ray node's IP, hostname and id, and the process id."""
    import ray

    ctx = ray.get_runtime_context()
    return {"node": ray.util.get_node_ip_address(), "host": socket.gethostname(),
            "node_id": ctx.get_node_id(), "pid": os.getpid()}


def warm_up() -> None:
    """Run one op through a scratch service: the first op of a process builds the allow-list's
    tables and the quota estimates (~1 s of CPU), which belongs to the actor's start, not to
    the user's first op."""
    conn = ServiceConnection(WorkerService("warm-up", Limits()), Session())
    x = conn.respond({"r": 1, "c": "store", "o": torch.ones(1)}).message["ok"]
    conn.respond({"r": 2, "c": "run", "op": "aten.mul.Tensor", "a": [Ref(x), 2.0], "k": None})
    conn.close()


RESTARTED = "restarted"  # what a call gets back from an actor Ray restarted since the client's hello


class WorkerHost:
    """A Ray actor running ``WorkerService`` s, one per worker id (see the module docstring).

    Ray runs an actor's methods one at a time, so each service is used from one thread, as the
    websocket server's command thread does. Every call names the service's ``instance`` the
    client said hello to: after Ray restarted the actor (a new process, empty services with new
    instances), a call made for the old one is refused with ``RESTARTED`` before it runs, so
    the client reconnects, learns that the worker came back empty and says so."""

    def __init__(self, worker_ids: list, max_bytes: int | None = None, max_objects: int | None = None,
                 threads: int = 1):
        if type(worker_ids) is not list or not worker_ids or not all(type(w) is str for w in worker_ids):
            raise SyftError("a WorkerHost hosts a list of worker ids")
        torch.set_num_threads(threads)  # the actor shares its node's cores with others
        zero_fresh_allocations()  # no client reads another's freed memory (workers/heap.py)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
        kwargs = {k: v for k, v in (("max_bytes", max_bytes), ("max_objects", max_objects)) if v is not None}
        limits = Limits(**kwargs, max_op_seconds=None)  # no forks of a Ray actor (docs/workers.md)
        self.services = {w: WorkerService(w, limits) for w in worker_ids}
        warm_up()
        self.sessions = {w: SessionTable() for w in worker_ids}  # per worker: session id -> Session
        # per-object events for the client sessions that subscribed, sent with their next reply
        self.feed = EventFeed({w: s.core for w, s in self.services.items()})
        self.connections: dict = {}  # Session -> its ServiceConnection (answers, pushes, hooks)
        self.info = {**node_info(), "workers": {w: s.instance for w, s in self.services.items()}}
        self._last = []  # (connection, Reply) of the last call's replies, until Ray has copied them

    def hello(self) -> bytes:
        """Where this actor runs and which workers it hosts (a wire message)."""
        return bytes(encode({"r": 0, "ok": self.info}, chunk_size=NO_CHUNK).frames[0])

    def _route(self, message):
        """The decoded message and its session's connection; ``(None, None)`` when the message
        was made for a service instance of an earlier process (Ray restarted the actor).
        Routing fields (``@w`` worker id, ``@s`` session id, ``@i`` the service instance of the
        client's hello; none for a hello) travel in the message: one argument per actor call
        (each extra argument of a Ray call costs ~35 us)."""
        msg = unpack(message, DEFAULT_MAX_MESSAGE_SIZE)
        worker_id, session_id, instance = msg.pop("@w", None), msg.pop("@s", None), msg.pop("@i", None)
        service = self.services.get(worker_id) if type(worker_id) is str else None
        if service is None:
            raise SyftError(f"this Ray actor hosts {', '.join(self.services)}, not {str(worker_id)[:64]!r}")
        if instance is not None and instance != service.instance:
            return None, None
        if type(session_id) is not str or not 16 <= len(session_id) <= 64:
            raise SyftError("a session id is a string of 16 to 64 characters")
        session = self.sessions[worker_id].named(session_id)
        conn = self.connections.get(session)
        if conn is None:
            conn = self.connections[session] = ServiceConnection(service, session, self.feed)
        return msg, conn

    def call(self, message):
        """One command: a packed message in, a packed reply out (``RESTARTED`` if the message
        names a service instance other than this process's). Ray copies a method's result into
        its object store when the method returns, before the next method runs (an actor runs
        one at a time): the reply has gone out when the next call begins (``_finish_last``)."""
        routed = self._begin(message)
        if type(routed) is not tuple:
            return routed
        msg, conn = routed
        return self._respond(conn, msg, msg.pop("@x", None))

    def _respond(self, conn, msg, elsewhere, shape=None):
        """Answer one message; its reply is kept until Ray has copied it. ``elsewhere``: the
        reply goes to another actor (a move's source): no events are pushed with it."""
        out = conn.respond(msg, shape=shape)
        self._last.append((conn, out))  # ``out.encoded`` keeps its buffers alive until then
        packed = pack(out.encoded)
        push = None if elsewhere else conn.push_owed()
        return packed if push is None else (bytes(encode(push, chunk_size=NO_CHUNK).frames[0]), packed)

    def calls(self, messages):
        """Several commands in one actor call (a client's part of a federated round: the
        round's inputs, its plan run, the fetches of the plan's outputs): ``messages`` is a
        list of packed messages, each run in order exactly as ``call`` runs one (routing,
        allow-list, quotas, session), and the result a tuple of their packed replies. Called
        with Ray's ``num_returns=len(messages)``, each reply is an ObjectRef of its own: the
        client reads some and hands others to another actor (a fetch's reply to the
        aggregator's ``receive``), so one call costs one hop. A message with ``@o: k`` (and no
        ``id``) names the k-th output of the last ``run_plan`` of this call (the ids are the
        worker's: the client cannot know them when it sends); after a failed plan run it gets
        an error reply. ``@x``: the reply goes to another actor (no pushed events)."""
        if type(messages) is not list or not messages:
            return error_bytes(0, SyftError("calls takes a non-empty list of messages"))
        self._finish_last()
        replies, outputs = [], None
        for message in messages:
            routed = self._begin(message, keep_last=True)
            if type(routed) is not tuple:
                replies.append(routed)
                continue
            msg, conn = routed
            elsewhere = msg.pop("@x", None)
            slot = msg.pop("@o", None)
            if slot is not None:
                if type(slot) is not int or "id" in msg or msg.get("c") != "fetch":
                    replies.append(error_bytes(msg.get("r", 0), SyftError(
                        "'@o' is a fetch's index into the outputs of the call's last run_plan (with no 'id')")))
                    continue
                if outputs is None or not 0 <= slot < len(outputs):
                    replies.append(error_bytes(msg.get("r", 0), SyftError(
                        "the plan run before this fetch failed or has no such output: nothing to fetch")))
                    continue
                msg["id"] = outputs[slot]
            replies.append(self._respond(conn, msg, elsewhere))
            if msg.get("c") == "run_plan":
                ok = self._last[-1][1].message.get("ok")
                outputs = [o.id for o in ok if type(o) is NewObject] if type(ok) is list else None
        return tuple(replies) if len(replies) > 1 else replies[0]

    def receive(self, message, source_reply):
        """Store what another worker sent: ``source_reply`` is that worker's reply to a fetch,
        which Ray resolved from its object store (it never went through the client).
        ``message`` is a ``store`` command without its object (the reply's result is
        ``[id, shape, dtype]``: what the client's pointer needs), or a ``run`` command whose
        argument ``@m`` (an index into ``a``, None there) is the object: an op on it, such as
        ``acc.add_(moved)`` (averaging on the workers), answered as any run."""
        routed = self._begin(message, lambda msg, conn: _moved_object(msg, conn.service, source_reply))
        if type(routed) is not tuple:
            return routed
        msg, conn = routed
        if msg["c"] == "run":  # an op on the moved object (a streamed sum's add): the service's reply
            return self._respond(conn, msg, False)
        obj = msg["o"]
        return self._respond(conn, msg, False, shape=lambda obj_id: [obj_id, list(obj.shape), obj.dtype])

    def _begin(self, message, check=None, keep_last=False):
        """What every call does first: the previous reply is done (Ray has copied it), then
        the message is routed (and ``check(msg, connection)`` run, which may add to it). Returns
        ``(msg, connection)``, or what the call answers at once: ``RESTARTED``, or an error
        reply (a WireError, a worker id this actor does not host, a bad session id).
        ``keep_last``: a message of ``calls``, whose earlier replies have not gone out yet."""
        if not keep_last:
            self._finish_last()
        rid = 0
        try:
            msg, conn = self._route(message)
            if msg is None:
                return RESTARTED
            rid = msg.get("r", 0)
            if check is not None:
                check(msg, conn)
        except Exception as e:
            return error_bytes(rid, e)
        return msg, conn

    def _finish_last(self) -> None:
        """The last call's replies have gone out: their hooks run (a fetched plan leaves the
        store) and the memory budget they held is free again."""
        last, self._last = self._last, []
        for conn, out in last:
            conn.sent(out.then)

    def end_session(self, worker_id: str, session_id: str) -> None:
        """The client closed: no more pushes, and every reference its session holds is released."""
        self._finish_last()
        table = self.sessions.get(worker_id)
        s = table.pop(session_id, None) if table is not None else None
        conn = self.connections.pop(s, None)
        if conn is not None:
            conn.close()
        elif s is not None:
            self.services[worker_id].end_session(s)


class MoveSourceError(SyftError):
    """A move between two Ray workers whose source could not send the object."""


def _moved_object(msg: dict, service, source_reply) -> None:
    """A move's store command gets its object (a run command: its argument ``@m``): the
    source's fetch reply, decoded here."""
    command, slot = msg.get("c"), msg.pop("@m", None)
    if command == "run":
        args = msg.get("a")
        if type(slot) is not int or type(args) is not list or not 0 <= slot < len(args) or args[slot] is not None:
            raise SyftError("receive takes a run command with one empty argument, '@m' its index")
    elif command != "store" or "o" in msg or slot is not None:
        raise SyftError("receive takes a store command without its object, or a run command")
    if source_reply == RESTARTED:
        raise MoveSourceError("the source worker was restarted by Ray: it came back empty")
    src = unpack(source_reply, service.max_message_size)
    if "ok" not in src:
        err = src.get("err") if type(src.get("err")) is dict else {}
        raise MoveSourceError(f"the source worker could not send it: {str(err.get('t'))[:64]}: "
                              f"{str(err.get('m'))[:1000]}")
    if command == "run":
        if not isinstance(src["ok"], torch.Tensor):
            raise SyftError("an op's moved argument is a tensor")
        msg["a"][slot] = src["ok"]
        return
    msg["o"] = src["ok"]
