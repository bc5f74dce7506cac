"""Per-object changes between two world snapshots: what crosses the comm after the first render.

A patch is a small JSON object::

    {"type": "world_patch", "base": 4, "rev": 5,
     "lanes": [{"id": "me", "kind": "local", "state": "in-process"}, ...],   # only if a lane changed
     "ops": [["del", "bob", 123], ["put", "bob", 0, {...entry...}]]}

applied in order: ``del`` drops object ``id`` from a lane; ``put`` removes the entry with the
same id from the lane if there is one, then inserts the entry at ``index``. ``lanes`` (lane
headers without their objects, in order) replaces the lane list: lanes it no longer names
go, new ones start empty. js/widget/patch.js applies the same patches in the browser.
"""
from __future__ import annotations

import copy


def lane_header(lane: dict) -> dict:
    return {k: v for k, v in lane.items() if k != "objects"}


def diff(old: dict, new: dict) -> dict | None:
    """The patch turning ``old`` into ``new`` (both world dicts), or None if they are equal."""
    old_lanes = {lane["id"]: lane for lane in old.get("workers", [])}
    headers_old = [lane_header(lane) for lane in old.get("workers", [])]
    headers_new = [lane_header(lane) for lane in new.get("workers", [])]
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
    patch = {"type": "world_patch", "ops": ops}
    if headers_old != headers_new:
        patch["lanes"] = headers_new
    if not ops and "lanes" not in patch:
        return None
    return patch


def apply(world: dict, patch: dict) -> dict:
    """``world`` with ``patch`` applied (a new dict; ``world`` is left as it was)."""
    out = {k: v for k, v in world.items() if k != "workers"}
    lanes = {lane["id"]: {**lane, "objects": list(lane.get("objects", []))} for lane in world.get("workers", [])}
    order = [lane["id"] for lane in world.get("workers", [])]
    if "lanes" in patch:
        new_lanes = {}
        for h in patch["lanes"]:
            objects = lanes[h["id"]]["objects"] if h["id"] in lanes else []
            new_lanes[h["id"]] = {**copy.deepcopy(h), "objects": objects}
        lanes, order = new_lanes, [h["id"] for h in patch["lanes"]]
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
