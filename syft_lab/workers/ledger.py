"""A worker's ledger: what it saw and what left it, message by message; never a value.

Every command that carries data in or out of a worker (service.py) adds a record::

    {"seq": 12, "kind": "dealer material", "direction": "in", "peer": "carol",
     "peer_kind": "crypto provider", "bytes": 384, "cell": 5, "time": 1764669000.1,
     "id": 77, "session": "client 1", "op": "mul"}

``kind`` is one of KINDS; ``peer`` is who the data came from or went to: a client session (by a
label the worker gives it, "client 1": never the session's name, which lets its holder take the
session over), another worker (a move), or the crypto provider (its material, which travels
through the notebook that coordinates a protocol). ``bytes`` counts tensor bytes (a graph's JSON
text by its length); ``cell`` is the notebook cell that sent it (the message's optional ``cell``
field, else, in process, ``events.current_cell``). Records hold ids, sizes and names only.

What a client declares: a worker cannot tell a dealer row or an opened masked value from other
int64 words, so a message may carry an optional ``note`` (``parse_note``) saying what its data
is; the SMPC runtime (syft_lab/smpc/runtime.py) notes every message of a protocol. A note only
names data, it never changes what a command does.

Memory is bounded: a ring buffer of the last LEDGER_CAP records per worker (older ones drop off;
``dropped`` counts them) plus totals per kind that never drop.

``worker.ledger()`` reads it: an in-process worker's records directly, a remote worker's through
the ``ledger`` command (docs/wire-format.md): a client reads its own session's part, and every
session's with the worker's token.
"""
from __future__ import annotations

import collections
import hmac
import time
import weakref

from .. import events
from ..commands import LOCAL_OWNER
from ..errors import SyftError
from .base import BaseWorker

LEDGER_CAP = 2000  # records kept per worker (a ring buffer); totals per kind are kept beyond it
READ_LIMIT = LEDGER_CAP  # one ledger reply: at most this many records
KINDS = ("stored", "op", "plan run", "opened value", "dealer material", "fetched", "moved", "deleted")
WHY = {"dealer": "dealer material", "opened": "opened value", "move": "moved"}  # a note's why -> kind
MAX_NOTE_ITEMS = 16  # distinct material labels in one note
MAX_NOTE_CARRIES = 8
MAX_LABEL = 64
MAX_MATERIAL_LABELS = 64  # distinct labels a provider's totals keep (then "other")
_RECENT_FETCHES = 64  # in process: objects fetched lately, to see a move arrive at another worker


class Note:
    """What a client declared about one message's data (``parse_note``)."""

    __slots__ = ("why", "peer", "items", "carries", "op")

    def __init__(self, why=None, peer=None, items=None, carries=(), op=None):
        self.why, self.peer, self.items, self.carries, self.op = why, peer, items, carries, op


def _label(v, what: str) -> str:
    if type(v) is not str or not v or len(v) > MAX_LABEL:
        raise SyftError(f"a ledger note's {what} is a short string (at most {MAX_LABEL} characters)")
    return v


def _count(v, what: str) -> int:
    if type(v) is not int or v < 0:
        raise SyftError(f"a ledger note's {what} is a non-negative integer")
    return v


def parse_note(msg: dict) -> Note | None:
    """The message's optional ``note``, checked: ``{"why": "dealer"|"opened"|"move", "peer":
    worker id, "op": label, "items": {label: count}, "carries": [{"why", "peer"?, "bytes"}]}``
    (``carries``: public values inlined in a program, by what they are)."""
    raw = msg.get("note")
    if raw is None:
        return None
    if type(raw) is not dict:
        raise SyftError("a message's note is a map (docs/wire-format.md, 'The ledger')")
    unknown = set(raw) - {"why", "peer", "op", "items", "carries"}
    if unknown:
        raise SyftError(f"a ledger note has no field {sorted(unknown)[0]!r}")
    why = raw.get("why")
    if why is not None and why not in WHY:
        raise SyftError(f"a ledger note's why is one of {sorted(WHY)}")
    peer = _label(raw["peer"], "peer") if raw.get("peer") is not None else None
    op = _label(raw["op"], "op") if raw.get("op") is not None else None
    items = raw.get("items")
    if items is not None:
        if type(items) is not dict or len(items) > MAX_NOTE_ITEMS:
            raise SyftError(f"a ledger note's items map at most {MAX_NOTE_ITEMS} labels to counts")
        items = {_label(k, "item"): _count(v, "item count") for k, v in items.items()}
    carries = raw.get("carries") or []
    if type(carries) is not list or len(carries) > MAX_NOTE_CARRIES:
        raise SyftError(f"a ledger note's carries lists at most {MAX_NOTE_CARRIES} entries")
    checked = []
    for c in carries:
        if type(c) is not dict or c.get("why") not in WHY or set(c) - {"why", "peer", "bytes"}:
            raise SyftError("a carried value is {'why': 'dealer'|'opened', 'peer': worker id, 'bytes': n}")
        checked.append((c["why"], _label(c["peer"], "peer") if c.get("peer") is not None else None,
                        _count(c.get("bytes", 0), "bytes")))
    return Note(why, peer, items, checked, op)


def message_cell(msg: dict):
    """The notebook cell a message came from: its ``cell`` field, else (in process) the cell
    running now; None when neither says."""
    cell = msg.get("cell")
    if type(cell) is int and cell >= 0:
        return cell
    return events.current_cell.number


_now = time.time
_op_labels: dict = {}  # id(OpOverload) -> (op, its label in a record: "add"); ops live as long as torch


def op_label(op) -> str:
    """An op's name in a ledger record: its schema's name without the namespace ("add")."""
    if type(op) is str:
        return op
    got = _op_labels.get(id(op))
    if got is None or got[0] is not op:
        got = _op_labels[id(op)] = (op, op._schema.name.split("::")[-1])
    return got[1]


class Ledger:
    """One worker's records (a ring buffer of LEDGER_CAP) and its totals per kind.

    ``records`` holds record dicts, and a client's own ops (``add_op``, one per pointer op) as
    compact tuples that ``read`` turns into the same dicts."""

    def __init__(self, cap: int = LEDGER_CAP):
        self.records: collections.deque = collections.deque(maxlen=cap)
        self.cap = cap
        self.seq = 0  # records ever added (the next record's seq)
        self.version = 0  # changes with every record added or retagged (views cache by it)
        self.totals: dict = {}  # (kind, direction) -> [count, bytes], never dropped
        self.material: dict = {}  # dealer material made, by label -> count (a crypto provider's)
        self._clients = 0
        self._op_totals = None  # totals[("op", "in")], which add_op counts on every op

    def label(self, session) -> str:
        """The session's name in this ledger ("client 1", ...): never its secret id."""
        got = session.label
        if got is None:
            self._clients += 1
            got = session.label = f"client {self._clients}"
        return got

    def add(self, kind, direction, session, nbytes=0, cell=None, obj_id=None, *, peer=None,
            peer_kind="client", op=None, items=None) -> dict:
        who = self.label(session)
        rec = {"seq": self.seq, "kind": kind, "direction": direction, "peer": peer or who,
               "peer_kind": peer_kind if peer else "client", "bytes": int(nbytes), "cell": cell,
               "time": time.time(), "id": obj_id, "session": who}
        if op is not None:
            rec["op"] = op
        if items:
            rec["items"] = dict(items)
            material = self.material
            for k, v in items.items():
                if k not in material and len(material) >= MAX_MATERIAL_LABELS:
                    k = "other"
                material[k] = material.get(k, 0) + v
        self.seq += 1
        self.version += 1
        self.records.append(rec)
        t = self.totals.get((kind, direction))
        if t is None:
            t = self.totals[(kind, direction)] = [0, 0]
        t[0] += 1
        t[1] += rec["bytes"]
        return rec

    def add_from_client(self, kind, direction, session, nbytes, cell, obj_id, op) -> None:
        """``add`` for the common record (a client's own command, no peer, no items): every
        pointer op makes one, so it is built in one step."""
        who = session.label
        if who is None:
            who = self.label(session)
        seq = self.seq
        rec = {"seq": seq, "kind": kind, "direction": direction, "peer": who, "peer_kind": "client",
               "bytes": nbytes, "cell": cell, "time": _now(), "id": obj_id, "session": who}
        if op is not None:
            rec["op"] = op
        self.records.append(rec)
        self.seq = seq + 1
        self.version += 1
        t = self.totals.get((kind, direction))
        if t is None:
            t = self.totals[(kind, direction)] = [0, 0]
        t[0] += 1
        t[1] += nbytes

    def add_op(self, session, nbytes: int, cell, obj_id, op) -> None:
        """The record of a client's own op (``kind`` "op", direction "in"; every pointer op on
        an in-process worker): kept as a tuple, made a record dict only when it is read
        (``op``: the OpOverload, named then too). What a reader sees is what
        ``add_from_client`` would have recorded."""
        who = session.label
        if who is None:
            who = self.label(session)
        seq = self.seq
        self.records.append((seq, who, nbytes, cell, _now(), obj_id, op))
        self.seq = seq + 1
        self.version += 1
        t = self._op_totals
        if t is None:
            t = self._op_totals = self.totals.setdefault(("op", "in"), [0, 0])
        t[0] += 1
        t[1] += nbytes

    def retag(self, rec: dict, kind: str, peer=None, peer_kind="worker") -> None:
        """A record turns out to be part of a move (a fetch that was the first half of one)."""
        old = self.totals.get((rec["kind"], rec["direction"]))
        if old is not None:
            old[0] -= 1
            old[1] -= rec["bytes"]
        rec["kind"] = kind
        self.version += 1
        if peer is not None:
            rec["peer"], rec["peer_kind"] = peer, peer_kind
        t = self.totals.setdefault((kind, rec["direction"]), [0, 0])
        t[0] += 1
        t[1] += rec["bytes"]

    def last_fetch(self, session, obj_id):
        """The newest record of a copy of ``obj_id`` this session fetched (``fetch`` with keep)."""
        who = self.label(session)
        for rec in reversed(self.records):
            if type(rec) is tuple:  # an op's record (add_op): never a fetch
                if rec[5] == obj_id and rec[1] == who:
                    return None
            elif rec["id"] == obj_id and rec["session"] == who:
                return rec if rec["kind"] == "fetched" and rec.get("op") == "copy" else None
        return None

    def read(self, session, *, everything: bool = False, since: int = 0, limit: int = READ_LIMIT) -> dict:
        """Records from ``since`` on (copies): the reading ``session``'s own, or with
        ``everything`` every session's (``mine`` marks the reader's); with totals."""
        who = self.label(session)
        out = []
        # every session's records: the totals are kept, so only the newest ``limit`` are copied
        # (a lane header reads the tail on every change; a long ledger must not cost its length)
        records = reversed(self.records) if everything else self.records
        for rec in records:
            if everything and len(out) >= limit:
                break
            if type(rec) is tuple:  # an op's record (add_op), as add_from_client records it
                seq, by, nbytes, cell, t, obj_id, op = rec
                if seq < since or (not everything and by != who):
                    continue
                out.append({"seq": seq, "kind": "op", "direction": "in", "peer": by, "peer_kind": "client",
                            "bytes": nbytes, "cell": cell, "time": t, "id": obj_id, "session": by,
                            "op": op_label(op), "mine": by == who})
                continue
            if rec["seq"] < since or (not everything and rec["session"] != who):
                continue
            r = dict(rec)
            if "items" in r:
                r["items"] = dict(r["items"])
            r["mine"] = rec["session"] == who
            out.append(r)
        if everything:
            out.reverse()  # oldest first, as read
            totals = [[k, d, c, b] for (k, d), (c, b) in self.totals.items() if c]
            material = dict(self.material)
        else:  # a session's part: its kept records only (the totals are every session's)
            acc, material = {}, {}
            for r in out:
                t = acc.setdefault((r["kind"], r["direction"]), [0, 0])
                t[0] += 1
                t[1] += r["bytes"]
                for k, v in (r.get("items") or {}).items():
                    material[k] = material.get(k, 0) + v
            totals = [[k, d, c, b] for (k, d), (c, b) in acc.items()]
        out = out[-limit:]
        return {"records": out, "seq": self.seq, "cap": self.cap, "dropped": self.seq - len(self.records),
                "totals": totals, "material": material, "scope": "all" if everything else "session"}


def may_read_all(service_token: str | None, token) -> bool:
    """Whether ``token`` is the worker's own (compared in constant time)."""
    if not service_token or type(token) is not str:
        return False
    return hmac.compare_digest(token.encode(), service_token.encode())


# --- in process: a move's two halves meet (the same object leaves one store, enters another) ---
_recent: collections.OrderedDict = collections.OrderedDict()  # id(obj) -> (weakref, ledger, record, worker)


def fetched_here(obj, ledger: Ledger, rec: dict, worker_id: str) -> None:
    try:
        ref = weakref.ref(obj)
    except TypeError:
        return
    _recent[id(obj)] = (ref, ledger, rec, worker_id)
    while len(_recent) > _RECENT_FETCHES:
        _recent.popitem(last=False)


def arrived_from(obj, worker_id: str) -> str | None:
    """The id of the worker ``obj`` just left, if it was fetched there in this process (a move
    between in-process workers hands over the object itself); that fetch is retagged a move to
    ``worker_id``."""
    got = _recent.pop(id(obj), None)
    if got is None:
        return None
    ref, ledger, rec, source = got
    if ref() is not obj:
        return None
    ledger.retag(rec, "moved", worker_id)
    return source


# --- reading -----------------------------------------------------------------------------------
def read_ledger(worker, everything: bool = False, token: str | None = None) -> list[dict]:
    """``worker.ledger()``: the worker's records as dicts, oldest first (see the module
    docstring). A remote worker gives this client's own session's part; ``everything=True``
    with the worker's ``token`` gives every session's. A record of this notebook's own session
    names it "me"."""
    return [_mine_as_me(r) for r in ledger_reply(worker, everything, token)["records"]]


def ledger_reply(worker, everything: bool = False, token: str | None = None, since: int = 0,
                 limit: int = READ_LIMIT) -> dict:
    """The ``ledger`` command's reply (records, totals, material, seq, dropped); in process,
    only the newest ``limit`` records."""
    service = getattr(worker, "service", None)
    if service is not None and getattr(worker, "kind", None) in ("local", "virtual"):
        # in process the one session is this notebook's: its part is all of it
        return service.ledger.read(worker.transport.session, everything=True, since=since, limit=limit)
    msg = {"c": "ledger", "since": since}
    if limit != READ_LIMIT:  # a lane's view: the newest records only (the totals count them all)
        msg["limit"] = limit
    if everything:
        msg["all"] = True
        if token is None:
            token = getattr(getattr(worker, "transport", None), "token", None)
        if token is not None:
            msg["token"] = token
    return worker.submit_request(msg).result()


def _mine_as_me(rec: dict) -> dict:
    if rec.get("mine"):
        if rec.get("peer_kind") == "client":
            rec["peer"] = LOCAL_OWNER
        rec["session"] = LOCAL_OWNER
    return rec


def _ledger_method(self, everything: bool = False, token: str | None = None) -> list[dict]:
    """What this worker saw and what left it: one dict per message (kind, direction, peer, bytes,
    cell, time, id; never a value). See syft_lab/workers/ledger.py."""
    return read_ledger(self, everything, token)


BaseWorker.ledger = _ledger_method  # every worker kind reads its ledger the same way
