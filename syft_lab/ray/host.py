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
from ..workers.feed import EventFeed
from ..workers.limits import Limits
from ..workers.heap import zero_fresh_allocations
from ..workers.service import Session, WorkerService, error_reply

NO_CHUNK = 2**62  # encode's chunk size for "never stream": one frame


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
    service = WorkerService("warm-up", Limits())
    session = Session()
    x = service.handle({"r": 1, "c": "store", "o": torch.ones(1)}, session)[0]["ok"]
    service.handle({"r": 2, "c": "run", "op": "aten.mul.Tensor", "a": [Ref(x), 2.0], "k": None}, session)
    service.end_session(session)


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
        self.sessions: dict = {}  # (worker id, session id) -> Session
        # per-object events for the client sessions that subscribed, sent with their next reply
        self.feed = EventFeed({w: s.core for w, s in self.services.items()})
        self.followers: dict = {}  # (worker id, session id) -> feed.Subscriber
        self.info = {**node_info(), "workers": {w: s.instance for w, s in self.services.items()}}
        self._last = None  # (service, then, Encoded) of the last reply, until Ray has copied it

    def hello(self) -> bytes:
        """Where this actor runs and which workers it hosts (a wire message)."""
        return bytes(encode({"r": 0, "ok": self.info}, chunk_size=NO_CHUNK).frames[0])

    def _route(self, message):
        """The decoded message, its service and its session; ``(None, None, None)`` when the
        message was made for a service instance of an earlier process (Ray restarted the actor).
        Routing fields (``@w`` worker id, ``@s`` session id, ``@i`` the service instance of the
        client's hello; none for a hello) travel in the message: one argument per actor call
        (each extra argument of a Ray call costs ~35 us)."""
        msg = unpack(message, DEFAULT_MAX_MESSAGE_SIZE)
        worker_id, session_id, instance = msg.pop("@w", None), msg.pop("@s", None), msg.pop("@i", None)
        service = self.services.get(worker_id) if type(worker_id) is str else None
        if service is None:
            raise SyftError(f"this Ray actor hosts {', '.join(self.services)}, not {str(worker_id)[:64]!r}")
        if instance is not None and instance != service.instance:
            return None, None, None
        if type(session_id) is not str or not 16 <= len(session_id) <= 64:
            raise SyftError("a session id is a string of 16 to 64 characters")
        session = self.sessions.get((worker_id, session_id))
        if session is None or session.ended:
            session = self.sessions[(worker_id, session_id)] = Session(session_id, named=True)
        return msg, service, session

    def call(self, message):
        """One command: a packed message in, a packed reply out (``RESTARTED`` if the message
        names a service instance other than this process's)."""
        routed = self._begin(message)
        if type(routed) is not tuple:
            return routed
        msg, service, session = routed
        if msg.get("c") == "subscribe" and "rel" not in msg:  # this session follows the worker's events
            key = (service.id, session.id)
            if key not in self.followers:
                self.followers[key] = self.feed.subscribe(service.id)
            reply = {"r": msg.get("r", 0), "ok": {"seq": self.followers[key].seq}}
            return bytes(encode(reply, chunk_size=NO_CHUNK).frames[0])
        # The service's reply path, as the websocket server's (its snapshot copy included: the
        # bytes Ray copies are then the reply's own). Ray copies a method's result into its
        # object store when the method returns, before the next method runs (an actor runs one
        # at a time): the reply has gone out when the next call begins (``_finish_last``).
        elsewhere = msg.pop("@x", None)  # the reply goes to another actor (a move's source): no push
        encoded, then = service.encoded_reply(msg, session)
        self._last = (service, then, encoded)  # ``encoded`` keeps its buffers alive until then
        if elsewhere:
            return pack(encoded)
        return self._reply(service, session, msg, pack(encoded))

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
            return _error(0, SyftError("calls takes a non-empty list of messages"))
        self._finish_last()
        replies, lasts, outputs = [], [], None
        try:
            for message in messages:
                routed = self._begin(message, keep_last=True)
                if type(routed) is not tuple:
                    replies.append(routed)
                    continue
                msg, service, session = routed
                elsewhere = msg.pop("@x", None)
                slot = msg.pop("@o", None)
                if slot is not None:
                    if type(slot) is not int or "id" in msg or msg.get("c") != "fetch":
                        replies.append(_error(msg.get("r", 0), SyftError("'@o' is a fetch's index into the outputs of "
                                                                         "the call's last run_plan (with no 'id')")))
                        continue
                    if outputs is None or not 0 <= slot < len(outputs):
                        replies.append(_error(msg.get("r", 0), SyftError(
                            "the plan run before this fetch failed or has no such output: nothing to fetch")))
                        continue
                    msg["id"] = outputs[slot]
                if msg.get("c") == "run_plan":
                    outputs = None
                reply, then = service.handle(msg, session)
                if msg.get("c") == "run_plan" and type(reply.get("ok")) is list:
                    outputs = [o.id for o in reply["ok"] if type(o) is NewObject]
                encoded, then = _encoded(service, reply, then)
                lasts.append((service, then, encoded))
                packed = pack(encoded)
                replies.append(packed if elsewhere else self._reply(service, session, msg, packed))
        finally:
            self._last = lasts or None  # until Ray has copied the replies (the next call begins)
        return tuple(replies) if len(replies) > 1 else replies[0]

    def _reply(self, service, session, msg, packed):
        """A call's packed reply, with the events this session is owed before it, if it follows."""
        if not self.followers:
            return packed
        s = self.followers.get((service.id, session.id))
        if s is None:
            return packed
        rel = msg.get("rel")
        ids = list(rel) if type(rel) is list else []
        if msg.get("c") == "incref":
            ids.append(msg.get("id"))
        if ids:  # reference counts a command changed without an event
            self.feed.note_refcount(service.id, ids)
        push = self.feed.take(s)
        return _with_push(push and bytes(encode(push, chunk_size=NO_CHUNK).frames[0]), packed)

    def receive(self, message, source_reply):
        """Store what another worker sent: ``source_reply`` is that worker's reply to a fetch,
        which Ray resolved from its object store (it never went through the client).
        ``message`` is a ``store`` command without its object (the reply's result is
        ``[id, shape, dtype]``: what the client's pointer needs), or a ``run`` command whose
        argument ``@m`` (an index into ``a``, None there) is the object: an op on it, such as
        ``acc.add_(moved)`` (averaging on the workers), answered as any run."""
        routed = self._begin(message, lambda msg, service: _moved_object(msg, service, source_reply))
        if type(routed) is not tuple:
            return routed
        msg, service, session = routed
        if msg["c"] == "run":  # an op on the moved object (a streamed sum's add): the service's reply
            encoded, then = service.encoded_reply(msg, session)
            self._last = (service, then, encoded)
            return self._reply(service, session, msg, pack(encoded))
        obj = msg["o"]
        reply, _ = service.handle(msg, session)  # a store's reply holds nothing of the store
        if "ok" in reply:
            reply["ok"] = [reply["ok"], list(obj.shape), obj.dtype]
        return self._reply(service, session, msg, bytes(encode(reply, chunk_size=NO_CHUNK).frames[0]))

    def _begin(self, message, check=None, keep_last=False):
        """What every call does first: the previous reply is done (Ray has copied it), then
        the message is routed (and ``check(msg, service)`` run, which may add to it). Returns
        ``(msg, service, session)``, or what the call answers at once: ``RESTARTED``, or an
        error reply (a WireError, a worker id this actor does not host, a bad session id).
        ``keep_last``: a message of ``calls``, whose earlier replies have not gone out yet."""
        if not keep_last:
            self._finish_last()
        rid = 0
        try:
            msg, service, session = self._route(message)
            if msg is None:
                return RESTARTED
            rid = msg.get("r", 0)
            if check is not None:
                check(msg, service)
        except Exception as e:
            return _error(rid, e)
        return msg, service, session

    def _finish_last(self) -> None:
        """The last reply has gone out: its ``then`` runs (a fetched plan leaves the store) and
        the memory budget it held is free again."""
        last, self._last = self._last, None
        if last is None:
            return
        for service, then, _encoded in (last if type(last) is list else [last]):
            if then is not None and then.sent is not None:
                then.sent()
            service.reply_done(then)

    def end_session(self, worker_id: str, session_id: str) -> None:
        """The client closed: release every reference its session holds."""
        self._finish_last()
        self.feed.unsubscribe(self.followers.pop((worker_id, session_id), None))
        s = self.sessions.pop((worker_id, session_id), None)
        service = self.services.get(worker_id)
        if s is not None and service is not None:
            service.end_session(s)


class MoveSourceError(SyftError):
    """A move between two Ray workers whose source could not send the object."""


def _with_push(push, packed):
    """A reply and the push owed before it: ``(push frame, packed reply)``; the reply alone if none."""
    return packed if push is None else (push, packed)


def _encoded(service, reply, then):
    """A reply dict encoded as ``WorkerService.encoded_reply`` encodes it: ``(Encoded, then)``;
    one that cannot travel becomes an error reply (and a fetched object goes back)."""
    try:
        return encode(reply, max_message_size=service.max_message_size,
                      copy=then is not None and then.snapshot), then
    except WireError as e:
        if then is not None:
            if then.failed is not None:
                then.failed()
            service.reply_done(then)
        return encode(error_reply(reply.get("r", 0), e)), None


def _error(rid, e) -> bytes:
    return bytes(encode(error_reply(rid, e)).frames[0])


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
