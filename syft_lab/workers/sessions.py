"""Sessions: the references each client holds on a worker, and the table of named sessions.

A ``Session`` is one client's share of a worker's store: every object a command stores for it is
counted in ``refs``, and ``end_session`` releases them all (the client left). A release only drops
references its session holds, never another client's. ``SessionRefs`` is that bookkeeping, the
part of ``WorkerService`` (service.py) that touches sessions; ``SessionTable`` is the one table of
named sessions a host keeps (the websocket server, across a client's reconnects; the Ray host,
per worker), so a named session is found, or made anew once it has ended, by one rule.
"""
from __future__ import annotations

import re
import secrets

from ..commands import NewObject
from ..errors import SyftError

SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")  # what a client may name its session


class Session:
    """The references one client holds, released together when the client leaves.

    ``refs`` is touched only where commands run (the server's command thread); ``connections``
    and ``expiry`` only by the server's event loop."""

    __slots__ = ("id", "refs", "connections", "expiry", "named", "ended", "label")

    def __init__(self, session_id: str | None = None, named: bool = False):
        self.id, self.named = session_id or secrets.token_hex(16), named
        self.label = None  # its name in the worker's ledger ("client 1"): never the id
        self.refs: dict[int, int] = {}  # object id -> references held
        self.connections = 0
        self.expiry = None
        self.ended = False

    def __repr__(self):
        return f"<Session {self.id[:8]}: {sum(self.refs.values())} reference(s)>"


class SessionTable(dict):
    """Named sessions by id: ``named(sid)`` finds the live one, or makes one (a session that has
    ended is replaced: its references are gone)."""

    def named(self, session_id: str) -> Session:
        s = self.get(session_id)
        if s is None or s.ended:
            s = self[session_id] = Session(session_id, named=True)
        return s

    def forget(self, session: Session) -> None:
        """The session leaves the table (if it is still the one under its id)."""
        if self.get(session.id) is session:
            del self[session.id]


class SessionRefs:
    """The references sessions hold on a worker's core (``self.core``): a mixin of WorkerService.
    ``sessions_with_refs`` lists the sessions that hold any (a fetched object is disowned in each)."""

    def _own(self, session: Session, obj_id: int) -> int:
        """The session holds one more reference to ``obj_id``."""
        refs = session.refs
        refs[obj_id] = refs.get(obj_id, 0) + 1
        self.sessions_with_refs.add(session)
        return obj_id

    def _claim(self, session: Session, result):
        """The session owns the objects a command stored (its NewObject results, one reference each)."""
        if type(result) is NewObject:
            refs = session.refs
            refs[result.id] = refs.get(result.id, 0) + 1
            self.sessions_with_refs.add(session)
        elif type(result) in (list, tuple):
            for r in result:
                if type(r) is NewObject:
                    self._own(session, r.id)
        return result

    def _disown(self, obj_id: int) -> dict:
        """The object leaves the store: no session holds it any more. Returns who held it."""
        holders = {}
        for s in list(self.sessions_with_refs):
            n = s.refs.pop(obj_id, 0)
            if n:
                holders[s] = n
        return holders

    def release(self, session: Session, ids) -> None:
        """Drop references the session holds; ids it does not hold are ignored (a pointer that
        another session owns, an object fetched meanwhile): never another client's reference."""
        if type(ids) is not list:
            raise SyftError("release takes a list of ids")
        refs = session.refs
        for i in ids:
            n = refs.get(i, 0) if type(i) is int else 0
            if n > 0:
                if n == 1:
                    del refs[i]
                else:
                    refs[i] = n - 1
                self.core.decref(i)

    def release_one(self, session: Session, obj_id: int) -> None:
        """``release(session, [obj_id])``, for one id (an in-process pointer dropped)."""
        refs = session.refs
        n = refs.get(obj_id, 0)
        if n == 1:
            del refs[obj_id]
        elif n > 1:
            refs[obj_id] = n - 1
        else:
            return
        self.core.decref(obj_id)

    def end_session(self, session: Session) -> None:
        """Release every reference the session holds (its client has left)."""
        session.ended = True
        refs, session.refs = session.refs, {}
        self.sessions_with_refs.discard(session)
        for obj_id, n in refs.items():
            for _ in range(n):
                self.core.decref(obj_id)

    def merge_session(self, source: Session, target: Session) -> None:
        """``target`` takes over what ``source`` holds (a hello named a session after commands)."""
        for obj_id, n in source.refs.items():
            target.refs[obj_id] = target.refs.get(obj_id, 0) + n
        source.refs = {}
        source.ended = True
        self.sessions_with_refs.discard(source)
        if target.refs:
            self.sessions_with_refs.add(target)
