"""A worker's event feed: the per-object events of its core, for the clients that subscribed.

A worker process (the websocket server) and a Ray actor run their core away from the notebook,
whose world view then learns of a remote object's change only by reading the worker's whole
lane again. An ``EventFeed`` listens to this process's event bus (``syft_lab.events``: the
core's "stored", "changed", "deleted") for the workers it serves, and keeps, per subscriber
(a connection, a Ray client session), the records to push next, each with the object's world
entry (``nodes.object_entry``, what a summary page says of it), so the client applies the
change without a request of its own::

    {"push": "events", "seq": n, "events": [{"type": "stored", "worker": "bob", "id": 7, "entry": {...}}, ...]}

Bounded: a subscriber's records are coalesced by object (the last state of each object is
what a view needs), and past ``MAX_PENDING`` objects they are dropped and ``seq`` skips one: the
client sees the gap and reads that worker's lane again (a resync). Records are made where
commands run (the core is not thread-safe); ``take`` may run on any thread.
"""
from __future__ import annotations

import threading

from .. import events
from ..tensors.nodes import object_entry

MAX_PENDING = 2000  # objects whose records wait for one subscriber; past it: a resync
PUSH = "events"  # a push message's ``push`` field


class Subscriber:
    """What one subscriber is owed: records by object id (insertion order), and its sequence."""

    __slots__ = ("worker_id", "pending", "seq", "lost")

    def __init__(self, worker_id: str):
        self.worker_id = worker_id
        self.pending: dict[int, dict] = {}
        self.seq = 0  # of the last push message made for it
        self.lost = False  # records were dropped since the last push: its seq skips one


class EventFeed:
    """The event records of the cores ``cores`` (worker id -> WorkerCore) for their subscribers."""

    def __init__(self, cores: dict):
        self.cores = cores
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._unsubscribe = None

    def subscribe(self, worker_id: str) -> Subscriber:
        s = Subscriber(worker_id)
        with self._lock:
            self._subscribers.append(s)
        if self._unsubscribe is None:  # the bus costs nothing while no client follows the worker
            self._unsubscribe = events.subscribe(self._on_event)
        return s

    def unsubscribe(self, s: Subscriber | None) -> None:
        if s is None:
            return
        with self._lock:
            if s in self._subscribers:
                self._subscribers.remove(s)
            empty = not self._subscribers
        if empty and self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    @property
    def active(self) -> bool:
        return bool(self._subscribers)

    def _on_event(self, event: dict) -> None:
        """On the thread that runs commands: one record, with the object's entry as of now."""
        worker_id = event.get("worker")
        core = self.cores.get(worker_id)
        if core is None:
            return
        targets = [s for s in self._subscribers if s.worker_id == worker_id]
        if targets:
            self._note(targets, self._record(core, event))

    def note_refcount(self, worker_id: str, ids) -> None:
        """Objects whose reference count changed without an event (an incref, a release that
        left references): a "changed" record each, so a view's refcount stays true."""
        core = self.cores.get(worker_id)
        if core is None:
            return
        targets = [s for s in self._subscribers if s.worker_id == worker_id]
        if not targets:
            return
        for i in ids:
            if type(i) is int and i in core.objects:
                self._note(targets, self._record(core, {"type": "changed", "worker": worker_id, "id": i}))

    @staticmethod
    def _record(core, event: dict) -> dict:
        record = {k: v for k, v in event.items() if type(v) in (str, int, bool) or v is None}
        oid = event.get("id")
        obj = core.objects.get(oid)
        if obj is not None and event.get("type") != "deleted":
            record["entry"] = object_entry(oid, obj, core.id, core.refcounts.get(oid, 0), oid in core.held)
        return record

    def _note(self, targets, record: dict) -> None:
        oid = record.get("id")
        with self._lock:
            for s in targets:
                old = s.pending.pop(oid, None)
                if old is not None and old.get("type") == "stored" and record.get("type") == "changed":
                    record = {**record, "type": "stored"}  # still new to the subscriber
                s.pending[oid] = record
                if len(s.pending) > MAX_PENDING:  # the client lags: it reads the lane again instead
                    s.pending.clear()
                    s.lost = True

    def take(self, s: Subscriber) -> dict | None:
        """The push message owed to ``s`` (its records since the last one), or None."""
        with self._lock:
            if not s.pending and not s.lost:
                return None
            records = list(s.pending.values())
            s.pending.clear()
            s.seq += 2 if s.lost else 1  # a skipped number: the client resyncs
            s.lost = False
            return {"push": PUSH, "seq": s.seq, "events": records}
