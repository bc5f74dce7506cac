"""The world the views show, kept current by per-object changes instead of recomputed.

Why it exists: a worker event already names the object it is about, yet the views used to
recompute the whole world (one summary round trip per remote worker) and diff it back down
to the one object that changed. A ``WorldTracker`` keeps the last snapshot of one notebook
namespace and applies each change to it:

- ``stored`` / ``changed`` (worker, id) on an in-process worker: that one entry is read again
  through the worker (``VirtualWorker.world_entry``); on a remote worker the event itself
  brings the entry (the worker pushes its events: workers/feed.py); ``deleted``: it goes. No
  other entry is looked at.
- ``pointer_created`` / ``pointer_dropped`` of a notebook pointer: that pointer's row comes or
  goes in "me" (with the names of the last read); the refcount the pointer changed on its
  worker comes as that worker's event.
- after a cell or an action (names may change): the "me" lane is read again; a remote lane only
  if its worker does not push its events (``follows_events``).
- a worker that appears is read once (a remote one is first asked to push its events); a
  ``resync`` event (a gap in a worker's pushes, a reconnect) reads that lane again; a resync of
  a view recomputes everything.

``update()`` returns the new snapshot and the patch ops that lead to it (diff.py's format), so
every view in step with the tracker sends them as they are; the step's events come from the
touched entries only (``update_step``). Each view holds a ``Feed`` (the world it was last sent
and its revision): the feed says what goes next, the patch plus its step for revision
``base``, or the whole world; the world widget and the sidebar panel only deliver it. Each lane keeps its objects in a dict by id
(insertion order is the lane's order), so a change costs O(1) lookups plus one copy of the
touched lane's list.
"""
from __future__ import annotations

import time
import weakref

from ..inspection.model import (WORLD_HEADER, Names, finish_entry, gone_lane, gone_lane_objects, lane_header,
                                lane_is_down, lane_of, local_pointer_entry, local_pointers, mark_dangling,
                                mark_plan_state)
from ..notebook import notebook_namespace
from ..tensors.nodes import LOCAL_OWNER, is_edge, live_edge
from ..tensors.pointer import newest_live_refs
from ..workers.registry import all_workers
from . import diff

IN_PROCESS = ("local", "virtual")
ENTRY_EVENTS = ("stored", "changed")


class _Lane:
    __slots__ = ("header", "objects", "listed")

    def __init__(self, header: dict, objects: list):
        self.header = header
        self.objects = {o["id"]: o for o in objects}
        self.listed: list | None = None  # the list the last snapshot showed (reused while unchanged)

    def as_list(self) -> list:
        if self.listed is None:
            self.listed = list(self.objects.values())
        return self.listed


class WorldTracker:
    """The last world snapshot of one namespace, and the changes that are still to apply."""

    def __init__(self, namespace: dict | None):
        self.namespace = namespace  # a notebook's globals (or a test's dict)
        self.world: dict | None = None
        self.previous: dict | None = None  # the world before the last update
        self.step: dict | None = None  # the step of the last update (update_step)
        self.lanes: dict[str, _Lane] = {}
        self.order: list[str] = []
        self.names = Names(None)
        self.seen: dict[str, str] = {}  # worker id -> kind, of every lane shown (for gone lanes)
        # worker id -> the worker object its lane shows, weakly (a closed worker's name can come back)
        self._objects: "weakref.WeakValueDictionary[str, object]" = weakref.WeakValueDictionary()
        self._entries: set = set()  # (worker, id) to read again
        self._pushed: dict = {}  # (worker, id) -> the entry a remote worker pushed (None: deleted)
        self._state_owner: dict = {}  # (worker, state tensor id) -> id of the plan it is state of
        self._lanes_dirty: set[str] = set()  # lanes to read whole
        self._ledgers_dirty: set[str] = set()  # remote lanes whose record to read again (after commands)
        self._me_dirty = True
        self._me_new_pointers = False  # a notebook pointer was made: its row goes into "me"
        self._me_dropped: set = set()  # pointer ids of notebook pointers dropped: their rows go
        self._full = True
        self.last_ops: list = []
        self.last_touched: list = []  # ((lane, id), old entry or None, new entry or None)
        self.last_headers_changed = False

    # --- what to do next ------------------------------------------------------------------
    def on_event(self, event: dict) -> None:
        """Note what an event changes (cheap: it may run inside a finaliser)."""
        kind, worker = event.get("type"), event.get("worker")
        if kind in ENTRY_EVENTS or kind == "deleted":
            if worker == LOCAL_OWNER:
                self._me_dirty = True
            else:
                key = (worker, event.get("id"))
                self._entries.add(key)
                if event.get("pushed"):  # a remote worker's event: it carries the object's entry
                    self._pushed[key] = event.get("entry") if kind != "deleted" else None
        elif kind in ("pointer_created", "pointer_dropped"):
            if worker == LOCAL_OWNER:  # that one row of "me" (update: _pointer_rows)
                if kind == "pointer_created":
                    self._me_new_pointers = True
                else:
                    self._me_dropped.add(event.get("id"))
            else:
                self._lanes_dirty.add(worker)
            loc = event.get("location")
            if loc is not None and loc != worker:
                key = (loc, event.get("id_at_location"))  # its refcount changed
                if not self._follows(loc):  # a following worker pushes that change itself
                    self._entries.add(key)
        elif kind == "resync":  # a remote worker's pushes were lost (it lagged, a reconnect)
            self._lanes_dirty.add(worker)

    def _follows(self, lane_id) -> bool:
        w = self._objects.get(lane_id)
        return w is not None and w.kind not in IN_PROCESS and bool(getattr(w, "follows_events", False))

    def after_commands(self) -> None:
        """A cell or an action ran: names may have changed; remote workers that do not push
        their events ran commands (their lanes are read again)."""
        self._me_dirty = True
        for lid, lane in self.lanes.items():
            if lane.header.get("kind") in IN_PROCESS or lid == LOCAL_OWNER:
                continue
            if not self._follows(lid):
                self._lanes_dirty.add(lid)
            else:  # its objects come as pushed events, its record does not: read it again
                self._ledgers_dirty.add(lid)

    def resync(self) -> None:
        self._full = True

    def entry(self, lane_id: str, obj_id) -> dict | None:
        """The entry of object ``obj_id`` in lane ``lane_id`` as of the last update."""
        lane = self.lanes.get(lane_id)
        return lane.objects.get(obj_id) if lane is not None else None

    def update_step(self, context: "StepContext") -> dict:
        """The step of the last update, computed once for all the views in step with the
        tracker, from the entries it touched (not from the two whole worlds)."""
        if self.step is None:
            old, new = self.changed_parts()
            self.step = make_step(old, new, context)
        return self.step

    # --- applying -------------------------------------------------------------------------
    def update(self) -> dict:
        """Apply what is pending; returns the current snapshot (a new dict when it changed)."""
        workers = all_workers()
        if self._full or self.world is None:
            return self._recompute(workers)
        by_id = {w.id: w for w in workers}
        ops: list = []
        touched: list = []
        lanes_before, down_before = list(self.order), self._down()
        entries, pushed, dirty, new_pointers, dropped, ledgers = self._take_pending(by_id)
        reread = {lid for lid in dirty if lid in by_id}
        me_rows = False  # rows of "me" changed without reading it whole
        if LOCAL_OWNER not in reread and (new_pointers or dropped) and LOCAL_OWNER in self.lanes:
            me_rows = self._pointer_rows(new_pointers, dropped, ops, touched)
        headers_changed = self._read_lanes_whole(by_id, reread, ops, touched)
        headers_changed |= self._read_headers(by_id, reread, ledgers, ops, touched)
        for lid, oid in entries:
            self._apply_entry(lid, oid, by_id, reread, pushed, ops, touched)
        headers_changed |= self._settle_lanes(by_id, reread, me_rows, lanes_before, down_before, ops, touched)
        self.names.local = []  # lanes are built: hold no notebook object
        self.last_ops, self.last_touched, self.last_headers_changed = ops, touched, headers_changed
        if ops or headers_changed:
            self.previous, self.world = self.world, self._snapshot()
        else:
            self.previous = self.world
        return self.world

    def _take_pending(self, by_id: dict) -> tuple:
        """What is pending, taken now (events that arrive while an update reads a lane, pushes
        emitted after its request, wait for the next update), with the lanes to read whole:
        (entries, pushed, dirty lanes, new notebook pointers, dropped ones, ledgers to read)."""
        entries, self._entries = self._entries, set()
        pushed, self._pushed = self._pushed, {}
        dirty, self._lanes_dirty = self._lanes_dirty, set()
        me_dirty, self._me_dirty = self._me_dirty, False
        new_pointers, self._me_new_pointers = self._me_new_pointers, False
        dropped, self._me_dropped = self._me_dropped, set()
        ledgers, self._ledgers_dirty = self._ledgers_dirty, set()
        for lid, w in by_id.items():
            if lid not in self.lanes or self._objects.get(lid) is not w:
                dirty.add(lid)  # a new worker (or a new one under an old name): read once
                self._objects[lid] = w
        if me_dirty:
            old_parts = self.names.stored_parts if self.names.parts else {}
            self.names = self._names()
            dirty.add(LOCAL_OWNER)
            # a stored part (a share) is marked by the layer the notebook holds, under its name:
            # when that name (or the part's holder) changed, its row on its worker is read again
            new_parts = self.names.stored_parts if self.names.parts else {}
            if old_parts or new_parts:
                entries.update(k for k in old_parts.keys() | new_parts.keys() if old_parts.get(k) != new_parts.get(k))
        return entries, pushed, dirty, new_pointers, dropped, ledgers

    def _read_lanes_whole(self, by_id: dict, reread: set, ops: list, touched: list) -> bool:
        """Read the lanes of ``reread`` whole (a new lane is added); returns whether a header changed."""
        headers_changed = False
        for lid in reread:
            new_lane = self._read_lane(by_id[lid])
            header = {k: v for k, v in new_lane.items() if k != "objects"}
            old = self.lanes.get(lid)
            if old is None or old.header.get("gone"):
                lane = self.lanes[lid] = _Lane(header, [])
                if lid not in self.order:
                    self.order.append(lid)
                headers_changed = True
                old = lane
            elif header != old.header:
                old.header = header
                headers_changed = True
            self._replace_lane(old, lid, new_lane["objects"], ops, touched)
        return headers_changed

    def _read_headers(self, by_id: dict, reread: set, ledgers: set, ops: list, touched: list) -> bool:
        """The header of every lane not read whole, read locally (a state change: a connection
        that died); a remote lane whose connection changed is read whole (added to ``reread``).
        Returns whether a header changed."""
        headers_changed = False
        for lid, w in by_id.items():
            if lid in reread:
                continue
            header = lane_header(w, read_ledger=lid in ledgers)  # a remote record: one request
            lane = self.lanes[lid]
            if header == _plain_header(lane.header):
                continue
            headers_changed = True
            if w.kind in IN_PROCESS or _without_ledger(header) == _without_ledger(_plain_header(lane.header)):
                lane.header = header  # in process, or a remote lane whose record grew: no re-read
                continue
            # a remote worker's connection changed: when in doubt, read that one worker again (a
            # killed process then says "unreachable", not "disconnected")
            reread.add(lid)
            new_lane = self._read_lane(w)
            lane.header = {k: v for k, v in new_lane.items() if k != "objects"}
            self._replace_lane(lane, lid, new_lane["objects"], ops, touched)
        return headers_changed

    def _apply_entry(self, lid: str, oid, by_id: dict, reread: set, pushed: dict, ops: list, touched: list) -> None:
        """Object ``oid`` of lane ``lid`` changed: its entry as pushed, or read again (in process),
        or its lane read whole (a remote worker that does not push its events)."""
        lane, w = self.lanes.get(lid), by_id.get(lid)
        if w is None and lane is not None and lane.header.get("gone"):
            w = self._objects.get(lid)  # a closed in-process worker: its releases still come
            w = w if w is not None and w.kind in IN_PROCESS else None
        if lane is None or w is None or lid in reread:
            return  # a lane read whole in this update is newer than the events before it
        if (lid, oid) in pushed:  # a remote worker's event brought the entry
            raw = pushed[(lid, oid)]
            raw = dict(raw) if type(raw) is dict else None
        elif w.kind in IN_PROCESS:
            raw = w.world_entry(oid)
        else:  # a remote worker that does not push its events: read its lane once
            reread.add(lid)
            self._replace_lane(lane, lid, self._read_lane(w)["objects"], ops, touched)
            return
        old = lane.objects.get(oid)
        if raw is None:
            if old is not None:
                del lane.objects[oid]
                lane.listed = None
                ops.append(["del", lid, oid])
                touched.append(((lid, oid), old, None))
            return
        entry = finish_entry(lid, raw, self.names)
        if lane.header.get("gone"):  # a closed worker takes no request: no action on its rows
            entry["actions"] = []
        self._mark_state(lid, lane, entry, old, ops, touched)
        if entry != old:
            lane.objects[oid] = entry
            lane.listed = None
            ops.append(["put", lid, len(lane.objects) - 1 if old is None else list(lane.objects).index(oid), entry])
            touched.append(((lid, oid), old, entry))

    def _settle_lanes(self, by_id: dict, reread: set, me_rows: bool, lanes_before: list, down_before: set,
                      ops: list, touched: list) -> bool:
        """The lanes' order, gone lanes and dangling pointers after the changes; returns whether
        a header changed."""
        headers_changed = False
        # lanes in the registry's order, as a full recompute has them (several new lanes come from a
        # set; a worker made again under an old name is last in the registry), then gone lanes
        order = [lid for lid in by_id if lid in self.lanes] + [lid for lid in self.order if lid not in by_id]
        if order != self.order:
            self.order = order
            headers_changed = True
        went = any(lid not in by_id and not self.lanes[lid].header.get("gone") for lid in self.order)
        gone_lanes = (LOCAL_OWNER in reread or me_rows) and any(lane.header.get("gone") for lane in self.lanes.values())
        # a lane that came, went or went down (a header's other fields change often: a lane's
        # ledger) may make pointers dangling or not, and gone lanes come or go: every pointer
        lanes_changed = self.order != lanes_before or self._down() != down_before
        if went or lanes_changed or gone_lanes:
            headers_changed |= self._gone_lanes(list(by_id), ops, touched)
        else:  # only the touched rows can have become (or stopped being) dangling
            self._mark_dangling([(k, new) for k, _old, new in touched if new is not None], ops, touched)
        return headers_changed

    def _pointer_rows(self, new: bool, dropped: set, ops: list, touched: list) -> bool:
        """The rows of the notebook's pointers made or dropped since the last update, one by one
        (the "me" lane is not read again: a pointer event costs its row, not the lane's). A
        dropped pointer's row goes (no name holds a pointer whose ref died); a new one goes where
        a whole read puts it, among the pointers in id order, before the local objects. Names
        are those of the last read (they change with a cell or an action: ``after_commands``)."""
        lane = self.lanes[LOCAL_OWNER]
        objs = lane.objects
        changed = False
        for pid in dropped:
            o = objs.get(pid)
            if o is not None and is_edge(o) and not self.names.bound(pid):
                del objs[pid]
                ops.append(["del", LOCAL_OWNER, pid])
                touched.append(((LOCAL_OWNER, pid), o, None))
                changed = True
        if new:
            fresh = self._new_refs(objs)
            if fresh:
                rows = list(objs.items())
                for ref in fresh:
                    entry = finish_entry(LOCAL_OWNER, local_pointer_entry(ref), self.names)
                    pid = ref.pointer_id
                    at = 0
                    while at < len(rows) and is_edge(rows[at][1]) and rows[at][0] < pid:
                        at += 1
                    rows.insert(at, (pid, entry))
                    ops.append(["put", LOCAL_OWNER, at, entry])
                    touched.append(((LOCAL_OWNER, pid), None, entry))
                lane.objects = dict(rows)
                changed = True
        if changed:
            lane.listed = None
        return changed

    def _new_refs(self, objs: dict) -> list:
        """The notebook's live pointer refs that have no row in "me" yet, in id order. Refs are
        kept in the order they were made (tensors/pointer.py ``newest_live_refs``), so the scan goes from
        the newest back to the first one that has its row: one made since the last update is
        after it. A released ref no name holds has no row (``local_pointers``)."""
        fresh = []
        bound = self.names.bound
        for r in newest_live_refs():
            if r.owner_id != LOCAL_OWNER:
                continue
            if r.pointer_id in objs:
                break
            if not r.released or bound(r.pointer_id):
                fresh.append(r)
        return sorted(fresh, key=lambda r: r.pointer_id)

    def _mark_state(self, lid: str, lane: _Lane, entry: dict, old: dict | None, ops: list, touched: list) -> None:
        """``state_of`` on a plan's state entries, as ``lane_of`` marks them: a plan entry marks
        the state entries its lane holds; a state entry read again asks its plan."""
        if entry.get("kind") == "plan":
            ids = [i for i in entry.get("state_ids") or () if i != entry["id"]]
            for i in ids:
                self._state_owner[(lid, i)] = entry["id"]
            states = [dict(lane.objects[i]) for i in ids if i in lane.objects]  # copies: the last world keeps its rows
            mark_plan_state([entry, *states])
            for s in states:
                if s != lane.objects[s["id"]]:
                    ops.append(["put", lid, list(lane.objects).index(s["id"]), s])
                    touched.append(((lid, s["id"]), lane.objects[s["id"]], s))
                    lane.objects[s["id"]] = s
                    lane.listed = None
            return
        plan_id = self._state_owner.get((lid, entry["id"]), (old or {}).get("state_of_id"))
        plan = lane.objects.get(plan_id) if plan_id is not None else None
        if plan is not None:
            mark_plan_state([plan, entry])

    def _read_lane(self, w) -> dict:
        """One worker's lane read whole; a remote worker is first asked to push its events, so
        that from now on its lane changes object by object (no re-read after each cell)."""
        if w.kind not in IN_PROCESS and not getattr(w, "follows_events", True):
            try:
                w.follow_events()
            except Exception:  # an unreachable worker: its lane says so (lane_of)
                pass
        lane = lane_of(w, self.names)
        if w.kind not in IN_PROCESS and (self._entries or self._pushed):
            # what it pushed before its summary's reply is older than the lane just read
            wid = w.id
            self._entries = {k for k in self._entries if k[0] != wid}
            for k in [k for k in self._pushed if k[0] == wid]:
                del self._pushed[k]
        return lane

    def _names(self) -> Names:
        ns = self.namespace
        if ns is None:
            ns = notebook_namespace()
        return Names(ns)

    # --- what views send ------------------------------------------------------------------
    def patch_since(self, base: dict | None) -> dict | None:
        """The patch from ``base`` (a world this tracker made) to the current world: the ops of
        the last update when ``base`` is the world before it, else a diff; None if equal."""
        if base is self.world:
            return None
        if base is not None and base is self.previous and self.last_ops is not None:
            patch = {"type": "world_patch", "ops": list(self.last_ops)}
            if self.last_headers_changed:
                patch.update(diff.header_changes(self.previous, self.world))
            return patch if patch["ops"] or "lanes" in patch or "ledgers" in patch else None
        return diff.diff(base or {"workers": []}, self.world)

    def changed_parts(self) -> tuple[dict, dict]:
        """The worlds before and after the last update, cut down to what ``diff.describe``
        needs: every lane header, the whole "me" lane (pointer names), the touched entries."""
        before = self.previous or {"workers": []}
        if self.last_ops is None:  # a recompute: describe compares the whole worlds
            return before, self.world
        old_lanes = {lane["id"]: lane for lane in before.get("workers", [])}
        old_rows: dict = {}
        new_rows: dict = {}
        for (lid, oid), old, new in self.last_touched:
            if old is not None:
                old_rows.setdefault(lid, {})[oid] = old
            if new is not None:
                new_rows.setdefault(lid, {})[oid] = new
            else:
                new_rows.setdefault(lid, {}).pop(oid, None)

        def part(lanes, rows, me):
            out = []
            for lane in lanes:
                objs = list(me) if lane["id"] == LOCAL_OWNER else list(rows.get(lane["id"], {}).values())
                out.append({**{k: v for k, v in lane.items() if k != "objects"}, "objects": objs})
            return {"workers": out}

        old_me = old_lanes.get(LOCAL_OWNER, {}).get("objects", [])
        new_me = self.lanes[LOCAL_OWNER].as_list() if LOCAL_OWNER in self.lanes else []
        return (part(before.get("workers", []), old_rows, old_me),
                part(self.world.get("workers", []), new_rows, new_me))

    def _down(self) -> set:
        return {lid for lid, lane in self.lanes.items() if lane_is_down(lane.header)}

    def _mark_dangling(self, rows, ops: list, touched: list) -> None:
        """``dangling`` (and no actions) on pointers to a worker that is gone or down."""
        down = self._down()
        for (lid, oid), o in rows:
            new = mark_dangling(o, down, self.names, lid)
            if new is o:
                continue
            lane = self.lanes[lid]
            lane.objects[oid] = new
            lane.listed = None
            ops.append(["put", lid, list(lane.objects).index(oid), new])
            touched.append(((lid, oid), o, new))

    def _replace_lane(self, lane: _Lane, lid: str, objects: list, ops: list, touched: list) -> None:
        """A lane read whole again: the ops that turn its old entries into ``objects``."""
        new = {o["id"]: o for o in objects}
        if list(new) == list(lane.objects) and all(new[k] == lane.objects[k] for k in new):
            return
        for oid, o in lane.objects.items():
            if oid not in new:
                ops.append(["del", lid, oid])
                touched.append(((lid, oid), o, None))
        kept = [oid for oid in lane.objects if oid in new]
        for i, (oid, o) in enumerate(new.items()):
            old = lane.objects.get(oid)
            if i < len(kept) and kept[i] == oid:
                if old != o:
                    ops.append(["put", lid, i, o])
                    touched.append(((lid, oid), old, o))
                continue
            if oid in kept:
                kept.remove(oid)
            kept.insert(i, oid)
            ops.append(["put", lid, i, o])
            touched.append(((lid, oid), old, o))
        lane.objects = new
        lane.listed = None

    def _gone_lanes(self, ids: list, ops: list, touched: list) -> bool:
        """A lane (``gone: true``, no objects) for each worker that went away while pointers still
        point to it (it goes once none does), then ``dangling`` on the pointers to a worker that
        is gone or down. Looks at every pointer row: run when lanes or the "me" lane changed."""
        present = set(ids)
        for lid in ids:
            self.seen[lid] = self.lanes[lid].header.get("kind")
        targets = {o.get("location") for lane in self.lanes.values() for o in lane.objects.values()
                   if live_edge(o)}
        changed = False
        for lid in sorted(t for t in targets - present - set(self.lanes) if isinstance(t, str)):
            # pointers to a worker that closed before this tracker showed it: a closed worker is a
            # gone lane whatever its kind, whether a view saw it open or not
            self.lanes[lid] = _Lane(gone_lane(lid, self.seen.get(lid)), self._gone_rows(lid))
            self.order.append(lid)
            changed = True
        for lid in [lid for lid in self.order if lid not in present]:
            lane = self.lanes[lid]
            if lid in targets:
                if not lane.header.get("gone"):
                    lane.header = gone_lane(lid, self.seen.get(lid))
                    self._replace_lane(lane, lid, self._gone_rows(lid), ops, touched)  # what it still holds
                    changed = True
            else:
                del self.lanes[lid]
                self.order.remove(lid)
                self.seen.pop(lid, None)
                changed = True
        self._mark_dangling([((lid, oid), o) for lid, lane in self.lanes.items() for oid, o in lane.objects.items()
                             if is_edge(o)], ops, touched)
        return changed

    def _gone_rows(self, lid: str) -> list:
        """The rows of a worker that went away: what it still holds (``gone_lane_objects``)."""
        w = self._objects.get(lid)
        if w is None:  # closed before this tracker showed it: the worker its pointers name
            w = next((r.location for r in local_pointers(self.names) if r.location.id == lid), None)
        return gone_lane_objects(w, self.names) if w is not None else []

    def _recompute(self, workers) -> dict:
        self.names = self._names()
        for w in workers:
            self._objects[w.id] = w
        lanes, order = {}, []
        self._entries.clear()  # every lane is read now: what was pending is in it
        self._pushed.clear()
        for w in workers:
            lane = self._read_lane(w)
            lanes[w.id] = _Lane({k: v for k, v in lane.items() if k != "objects"}, lane["objects"])
            order.append(w.id)
        # lanes of workers that went away stay while pointers point there (gone lanes)
        for lid in self.order:
            if lid not in lanes and lid in self.lanes:
                lanes[lid] = _Lane(dict(self.lanes[lid].header), self._gone_rows(lid))
                order.append(lid)
        self.lanes, self.order = lanes, order
        present = {w.id for w in workers}
        for ref in local_pointers(self.names):  # a worker closed before this tracker saw it: its kind
            loc = ref.location
            if loc.id not in present:
                self.seen.setdefault(loc.id, getattr(loc, "kind", None))
        self._lanes_dirty.clear()
        self._me_dirty = self._full = False
        self._me_new_pointers, self._me_dropped = False, set()
        self._gone_lanes([w.id for w in workers], [], [])
        self.names.local = []
        self.last_ops, self.last_touched, self.last_headers_changed = None, [], True
        self.previous, self.world = self.world, self._snapshot()
        return self.world

    def _snapshot(self) -> dict:
        return {**WORLD_HEADER,
                "workers": [{**self.lanes[lid].header, "objects": self.lanes[lid].as_list()} for lid in self.order]}


class StepContext:
    """What makes the step being recorded: the cell that runs (its In[] number and code) or an
    action (its equivalent code), and the runtime's events since the last step."""

    def __init__(self):
        self.cell: int | None = None
        self.code: str | None = None
        self.action: str | None = None
        self.raw: list = []
        # (worker, id) -> the "stored" event an earlier refresh of this cell run reported: a
        # refresh in the middle of a cell sees an object stored before the name it gets and its
        # record on the worker; the cell's later steps say them (diff.restate)
        self.stored: dict = {}


def make_step(old: dict, new: dict, context: StepContext) -> dict:
    """The step from ``old`` to ``new``: which cell or action made it, and what happened
    (diff.describe)."""
    code = context.action or context.code
    events = diff.describe(old, new, context.raw, code)
    events += diff.restate(new, [e for k, e in context.stored.items()
                                 if not any(x.get("id") == k[1] and x.get("worker") == k[0] for x in events)])
    for e in events:
        if e["type"] == "stored":
            context.stored[(e["worker"], e["id"])] = e
    return {"cell": None if context.action else context.cell, "code": code or "",
            "by": "action" if context.action else ("cell" if context.cell is not None else "event"),
            "time": time.time(), "events": events}


def marked_failed(world: dict | None, line: str) -> dict:
    """``world`` with ``line`` as the error of its "me" lane (where a world view shows a lane's
    error), and a "me" lane if it had none."""
    lanes = list((world or {}).get("workers", []))
    for i, lane in enumerate(lanes):
        if lane.get("id") == LOCAL_OWNER:
            lanes[i] = {**lane, "error": line}
            break
    else:
        lanes.insert(0, {"id": LOCAL_OWNER, "kind": "local", "state": "in-process", "error": line, "objects": []})
    return {**(world or WORLD_HEADER), "workers": lanes}


class Feed:
    """One view's end of a tracker's world feed: the world it was last sent and its revision.
    The tracker decides what goes next (the patch, plus its step, for revision ``base``; or the
    whole world); a view (widgets.WorldWidget, sidebar.Panel) only delivers it."""

    def __init__(self, tracker: WorldTracker):
        self.tracker = tracker
        self.synced: dict | None = None  # the world last sent (a tracker's, or one marked failed)
        self.rev = 0

    @property
    def world(self) -> dict:
        """The world last sent, with its revision (what the browser holds)."""
        return {**(self.synced or {"workers": []}), "rev": self.rev}

    def start(self, world: dict) -> dict:
        """``world`` (the tracker's current one) whole, at the current revision: a first render."""
        self.synced = world
        return self.world

    def reset(self, world: dict) -> dict:
        """``world`` (the tracker's current one) whole, as a new revision: a resync."""
        self.rev += 1
        return self.start(world)

    def patch(self, world: dict, context: StepContext) -> dict | None:
        """The patch from the world last sent to ``world`` (the tracker's current one), with its
        revisions and step; None when nothing changed."""
        in_step = self.synced is self.tracker.previous  # then the tracker's own ops and step serve
        patch = self.tracker.patch_since(self.synced)
        if patch is None:
            self.synced = world
            return None
        step = (self.tracker.update_step(context) if in_step
                else make_step(self.synced or {"workers": []}, world, context))
        return self._advance(patch, world, step)

    def failed(self, line: str) -> dict | None:
        """A refresh raised: the patch that keeps the world last sent and says ``line`` on its
        "me" lane (None when it says so already). The tracker recomputes at the next refresh
        (it may have stopped half-way), whose patch clears the line."""
        self.tracker.resync()
        marked = marked_failed(self.synced, line)
        patch = diff.diff(self.synced or {"workers": []}, marked)
        return None if patch is None else self._advance(patch, marked, None)

    def marked(self, line: str) -> dict:
        """The world to send whole when it could not be computed: the one last sent (or an
        empty one) saying ``line``; the tracker recomputes at the next refresh."""
        self.tracker.resync()
        return marked_failed(self.synced, line)

    def _advance(self, patch: dict, world: dict, step: dict | None) -> dict:
        patch.update(base=self.rev, rev=self.rev + 1, step=step)
        self.rev += 1
        self.synced = world
        return patch


def _plain_header(header: dict) -> dict:
    return {k: v for k, v in header.items() if k not in ("error", "gone")}


def _without_ledger(header: dict) -> dict:
    return {k: v for k, v in header.items() if k != "ledger"}
