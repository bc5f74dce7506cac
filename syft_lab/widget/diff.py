"""Per-object changes between two world snapshots: what crosses the comm after the first render.

A patch is a small JSON object::

    {"type": "world_patch", "base": 4, "rev": 5,
     "lanes": [{"id": "me", "kind": "local", "state": "in-process"}, ...],   # only if a lane changed
     "ops": [["del", "bob", 123], ["put", "bob", 0, {...entry...}]]}

applied in order: ``del`` drops object ``id`` from a lane; ``put`` removes the entry with the
same id from the lane if there is one, then inserts the entry at ``index``. ``lanes`` (lane
headers without their objects and ledgers, in order) replaces the lane list: lanes it no longer
names go, new ones start empty. A lane's ledger (its record, model.lane_header) changes with
every command, so it travels on its own: ``ledgers`` maps a lane id to ``null`` (the lane has
no ledger now), a whole ledger, or ``{"append": [records], ...}``: the records newer than the
ledger the browser has, with every other field, the list cut to ``keep`` newest. A lane the
patch does not name in ``ledgers`` keeps its ledger. js/widget/patch.js applies the same patches
in the browser.
"""
from __future__ import annotations

import copy

from ..commands import LOCAL_OWNER
from ..inspection.model import lane_is_down
from ..tensors.nodes import live_edge


def lane_header(lane: dict) -> dict:
    return {k: v for k, v in lane.items() if k not in ("objects", "ledger")}


def ledger_delta(old: dict | None, new: dict | None):
    """What turns lane ledger ``old`` into ``new``: None, the whole ledger, or its newer records."""
    if not old or not new:
        return new
    records, before = new.get("records", []), old.get("records", [])
    last = before[-1]["seq"] if before else -1
    append = [r for r in records if r.get("seq", -1) > last]
    keep = len(records)
    expected = (before + append)[-keep:] if keep else []
    if expected != records:  # not the old list grown at its end: send it whole
        return new
    return {**{k: v for k, v in new.items() if k != "records"}, "append": append, "keep": keep}


def apply_ledger(old: dict | None, delta):
    """``old`` with a ``ledgers`` entry applied (see ``ledger_delta``)."""
    if not isinstance(delta, dict) or "append" not in delta:
        return copy.deepcopy(delta)
    keep = delta["keep"]
    records = ((old or {}).get("records", []) + delta["append"])[-keep:] if keep else []
    return {**{k: v for k, v in delta.items() if k not in ("append", "keep")}, "records": records}


def find_entry(world: dict | None, lane_id: str, obj_id) -> dict | None:
    """The entry of object ``obj_id`` in lane ``lane_id`` of ``world``, or None."""
    for lane in (world or {}).get("workers", []):
        if lane.get("id") == lane_id:
            for o in lane.get("objects", []):
                if o.get("id") == obj_id:
                    return o
    return None


def diff(old: dict, new: dict) -> dict | None:
    """The patch turning ``old`` into ``new`` (both world dicts), or None if they are equal."""
    old_lanes = {lane["id"]: lane for lane in old.get("workers", [])}
    ops: list = []
    for lane in new.get("workers", []):
        lid = lane["id"]
        before = old_lanes.get(lid, {}).get("objects", [])
        after = lane.get("objects", [])
        after_ids = {o["id"] for o in after}
        cur = []
        by_id = {}
        for o in before:
            if o["id"] in after_ids:
                cur.append(o["id"])
                by_id[o["id"]] = o
            else:
                ops.append(["del", lid, o["id"]])
        for i, o in enumerate(after):
            oid = o["id"]
            if i < len(cur) and cur[i] == oid:
                if by_id[oid] != o:
                    ops.append(["put", lid, i, o])
                continue
            if oid in by_id:
                cur.remove(oid)
            cur.insert(i, oid)
            ops.append(["put", lid, i, o])
    patch = {"type": "world_patch", "ops": ops, **header_changes(old, new)}
    if not ops and "lanes" not in patch and "ledgers" not in patch:
        return None
    return patch


def header_changes(old: dict, new: dict) -> dict:
    """The ``lanes`` and ``ledgers`` parts of the patch from ``old`` to ``new`` (empty if none)."""
    out: dict = {}
    headers_new = [lane_header(lane) for lane in new.get("workers", [])]
    if [lane_header(lane) for lane in old.get("workers", [])] != headers_new:
        out["lanes"] = headers_new
    old_ledgers = {lane["id"]: lane.get("ledger") for lane in old.get("workers", [])}
    ledgers = {}
    for lane in new.get("workers", []):
        before = old_ledgers.get(lane["id"])
        if lane.get("ledger") != before:
            ledgers[lane["id"]] = ledger_delta(before, lane.get("ledger"))
    if ledgers:
        out["ledgers"] = ledgers
    return out


def apply(world: dict, patch: dict) -> dict:
    """``world`` with ``patch`` applied (a new dict; ``world`` is left as it was)."""
    out = {k: v for k, v in world.items() if k != "workers"}
    lanes = {lane["id"]: {**lane, "objects": list(lane.get("objects", []))} for lane in world.get("workers", [])}
    order = [lane["id"] for lane in world.get("workers", [])]
    if "lanes" in patch:
        new_lanes = {}
        for h in patch["lanes"]:
            prev = lanes.get(h["id"], {})
            new_lanes[h["id"]] = {**copy.deepcopy(h), "objects": prev.get("objects", [])}
            if prev.get("ledger") is not None:
                new_lanes[h["id"]]["ledger"] = prev["ledger"]
        lanes, order = new_lanes, [h["id"] for h in patch["lanes"]]
    for lid, delta in patch.get("ledgers", {}).items():
        if lid in lanes:
            ledger = apply_ledger(lanes[lid].get("ledger"), delta)
            if ledger is None:
                lanes[lid].pop("ledger", None)
            else:
                lanes[lid]["ledger"] = ledger
    for op in patch.get("ops", []):
        if op[0] == "del":
            _, lid, oid = op
            if lid in lanes:
                lanes[lid]["objects"] = [o for o in lanes[lid]["objects"] if o["id"] != oid]
        elif op[0] == "put":
            _, lid, index, entry = op
            if lid not in lanes:
                continue
            objs = [o for o in lanes[lid]["objects"] if o["id"] != entry["id"]]
            objs.insert(index, entry)
            lanes[lid]["objects"] = objs
        else:
            raise ValueError(f"unknown patch op {op[0]!r}")
    out["workers"] = [lanes[i] for i in order]
    if "rev" in patch:
        out["rev"] = patch["rev"]
    return out


# --- what a patch means: the events of a step, for the views' highlights and timeline ------


def _index(world: dict) -> dict:
    return {(lane["id"], o["id"]): o for lane in world.get("workers", []) for o in lane.get("objects", [])}


def _pointer_names(world: dict, wanted) -> dict:
    """(location, id_at_location) -> names (and container paths) of the pointers to it, for
    the targets in ``wanted`` (no scan when there are none)."""
    out: dict = {}
    if not wanted:
        return out
    for lane in world.get("workers", []):
        for o in lane.get("objects", []):
            loc = o.get("location")
            if loc is None:
                continue
            key = (loc, o.get("id_at_location"))
            if key in wanted and live_edge(o):
                out.setdefault(key, []).extend(o.get("names") or o.get("held_in") or [])
    return out


KIT_EVENTS = ("trained", "averaged")  # what the federated kit says it did (events.activity)
_HOW = {("stored", "in"): "sent", ("op", "in"): "computed", ("plan run", "in"): "plan run", ("moved", "in"): "moved"}


def describe(old: dict, new: dict, raw: list | None = None, code: str | None = None) -> list[dict]:
    """The events between two worlds, as a learner names them: ``stored`` (with ``how``: sent,
    computed, moved in, from the lane's record), ``moved`` (with ``to``), ``fetched``,
    ``deleted``, ``plan run``, ``reconstructed`` (every share of a secret fetched: ``secret``,
    ``workers``), ``ops`` (ops a worker ran whose results are not in the world any more:
    ``count``), what a kit did (``trained``, ``averaged``: events.activity), ``named`` (rows of
    "me" that names now reach) and worker changes (``worker added``, ``worker down``,
    ``worker back``). ``raw`` are the runtime's events of the step (syft_lab.events: a
    ``deleted`` with reason ``fetched`` tells a get or move from a release); ``code`` is the cell
    or action that made the step (it names the plan that ran)."""
    raw = raw or []
    before, after = _index(old), _index(new)
    fetched = {(e.get("worker"), e.get("id")) for e in raw if e.get("type") == "deleted" and e.get("reason") == "fetched"}
    events: list[dict] = [_kit_event(e) for e in raw if e.get("type") == "activity" and e.get("what") in KIT_EVENTS]
    appeared = [(k, o) for k, o in after.items() if k not in before and k[0] != LOCAL_OWNER]
    names_before = _pointer_names(old, {k for k in before if k[0] != LOCAL_OWNER and k not in after})
    names_after = _pointer_names(new, {k for k, _o in appeared})
    secrets: dict = {}  # a secret's name -> the workers whose shares of it were fetched
    for (lid, oid), o in list(before.items()):
        if lid == LOCAL_OWNER or (lid, oid) in after:
            continue
        ev = {"type": "deleted", "worker": lid, "id": oid, "names": names_before.get((lid, oid), [])}
        if (lid, oid) in fetched:
            if o.get("secret") and o.get("share"):  # a share: the secret is being reconstructed
                secrets.setdefault(o["secret"], []).append(lid)
                continue
            # a move stores a same-shaped object on another worker in the same step
            dest = next((k for k, a in appeared if k[0] != lid and a.get("shape") == o.get("shape")
                         and a.get("dtype") == o.get("dtype") and a.get("kind") == o.get("kind")), None)
            ev.update(type="moved", to=dest[0], to_id=dest[1]) if dest else ev.update(type="fetched")
            if dest:
                appeared = [(k, a) for k, a in appeared if k != dest]
        events.append(ev)
    for secret, workers in secrets.items():
        events.append({"type": "reconstructed", "secret": secret, "workers": workers, "names": []})
    plans = {n: o.get("location") for o in after.values() if o.get("type") == "PlanPointer" for n in o.get("names", [])}
    ran = {loc for n, loc in plans.items() if code and f"{n}(" in code}
    lanes_old = {lane["id"]: lane for lane in old.get("workers", [])}
    records = {lane["id"]: _step_records(lanes_old.get(lane["id"]), lane) for lane in new.get("workers", [])}
    computed: dict = {}
    for (lid, oid), o in appeared:
        kind = "plan run" if lid in ran and o.get("kind") != "plan" else "stored"
        ev = {"type": kind, "worker": lid, "id": oid, "names": names_after.get((lid, oid), [])}
        how = records[lid].get(oid)
        if kind == "stored" and how is not None:
            ev["how"] = how
            computed[lid] = computed.get(lid, 0) + (how == "computed")
        events.append(ev)
    for lane in new.get("workers", []):  # ops whose results the world no longer shows (temporaries)
        ops = _ops_in(lanes_old.get(lane["id"]), lane) - computed.get(lane["id"], 0)
        if ops > 0 and lane["id"] != LOCAL_OWNER:
            events.append({"type": "ops", "worker": lane["id"], "count": ops})
    events.extend(_named(old, new))
    for lane in new.get("workers", []):
        prev = lanes_old.get(lane["id"])
        down = lane_is_down(lane)
        if prev is None:
            if old.get("workers"):
                events.append({"type": "worker added", "worker": lane["id"]})
        elif lane_is_down(prev) != down:
            events.append({"type": "worker down" if down else "worker back", "worker": lane["id"],
                           "state": lane.get("state")})
    return events


def restate(world: dict, stored: list) -> list[dict]:
    """The ``stored`` events of earlier steps of a cell run again, for the objects whose names
    or ``how`` ``world`` now knows better (a refresh in the middle of a cell sees an object
    before a variable names it and before its worker records it). The views keep the later."""
    if not stored:
        return []
    names = _pointer_names(world, {(e["worker"], e["id"]) for e in stored})
    lanes = {lane["id"]: lane for lane in world.get("workers", [])}
    out = []
    for e in stored:
        lane = lanes.get(e["worker"])
        if lane is None:
            continue
        how = _step_records(None, lane).get(e["id"], e.get("how"))
        got = names.get((e["worker"], e["id"]), e.get("names") or [])
        if how != e.get("how") or got != (e.get("names") or []):
            new = {**e, "names": got}
            if how is not None:
                new["how"] = how
            out.append(new)
    return out


def _kit_event(e: dict) -> dict:
    out = {k: v for k, v in e.items() if k not in ("type", "what", "id") and v is not None}
    return {"type": e["what"], **out}


def _step_records(old_lane: dict | None, lane: dict) -> dict:
    """Object id -> how it came in this step ("sent", "computed", ...), from the lane's record:
    the records newer than the ones the old lane's record had."""
    led = lane.get("ledger")
    if not led:
        return {}
    last = (old_lane or {}).get("ledger") or {}
    since = last.get("seq", 0) if last else 0
    out = {}
    for r in led.get("records", []):
        if r.get("seq", -1) >= since and r.get("id") is not None and r.get("op") != "load":  # loaded: stored
            how = _HOW.get((r.get("kind"), r.get("direction")))
            if how is not None:
                out.setdefault(r["id"], how)
    return out


def _ops_in(old_lane: dict | None, lane: dict) -> int:
    """Ops (and plan runs) the lane's worker ran in this step, by its record's totals."""
    new_t = (lane.get("ledger") or {}).get("totals") or {}
    old_t = ((old_lane or {}).get("ledger") or {}).get("totals") or {}
    if old_lane is None or not (old_lane.get("ledger")):
        return 0  # a lane first read now: its record's past is not this step's
    return sum(new_t.get(k, [0])[0] - old_t.get(k, [0])[0] for k in ("op in", "plan run in"))


def _named(old: dict, new: dict) -> list[dict]:
    """Rows of "me" that kept their id but are named differently now (a rebinding)."""
    def me(world):
        lane = next((ln for ln in world.get("workers", []) if ln.get("id") == LOCAL_OWNER), None)
        return {o["id"]: o for o in (lane or {}).get("objects", [])}

    out = []
    before, after = me(old), me(new)
    for oid, o in after.items():
        prev = before.get(oid)
        names = o.get("names") or []
        if prev is not None and names and set(names) - set(prev.get("names") or []):
            out.append({"type": "named", "worker": LOCAL_OWNER, "id": oid, "names": names})
    return out
