// World patches (syft_lab/widget/diff.py makes them): apply one to a world snapshot.
//
// The result shares every lane, objects array and entry that the patch did not touch, so a
// view can find what changed by identity (see world.js) instead of re-rendering everything.

import { isEdge } from "./dom.js";
/**
 * Apply `patch` to `world`. Returns the new world, or null when the patch does not follow
 * this world (its `base` is not our `rev`): the caller then asks the kernel for a resync.
 */
export function applyWorldPatch(world, patch) {
  if (!world || !patch || !Array.isArray(patch.ops)) return null;
  if (patch.base !== undefined && world.rev !== undefined && patch.base !== world.rev) return null;
  let lanes = world.workers || [];
  if (Array.isArray(patch.lanes)) {
    // headers come without ledgers: a lane keeps its own unless patch.ledgers names it
    const old = new Map(lanes.map((l) => [l.id, l]));
    lanes = patch.lanes.map((hdr) => {
      const prev = old.get(hdr.id);
      if (prev && sameHeader(prev, hdr)) return prev;
      const lane = { ...hdr, objects: prev ? prev.objects : [] };
      if (prev?.ledger) lane.ledger = prev.ledger;
      return lane;
    });
  }
  if (patch.ledgers && typeof patch.ledgers === "object") {
    lanes = lanes.map((l) => {
      if (!Object.hasOwn(patch.ledgers, l.id)) return l;
      const ledger = applyLedger(l.ledger, patch.ledgers[l.id]);
      const { ledger: _old, ...rest } = l;
      return ledger ? { ...rest, ledger } : rest;
    });
  }
  const index = new Map(lanes.map((l, i) => [l.id, i]));
  const touched = new Map(); // lane index -> working copy of its objects
  const work = (i) => {
    if (!touched.has(i)) touched.set(i, lanes[i].objects.slice());
    return touched.get(i);
  };
  for (const op of patch.ops) {
    const i = index.get(op[1]);
    if (i === undefined) continue;
    if (op[0] === "del") {
      const objs = work(i);
      const at = objs.findIndex((o) => o.id === op[2]);
      if (at >= 0) objs.splice(at, 1);
    } else if (op[0] === "put") {
      const objs = work(i);
      const entry = op[3];
      const at = objs.findIndex((o) => o.id === entry.id);
      if (at >= 0) objs.splice(at, 1);
      objs.splice(Math.min(op[2], objs.length), 0, entry);
    } else {
      return null; // an op this version does not know: resync
    }
  }
  if (touched.size) {
    lanes = lanes.map((l, i) => (touched.has(i) ? { ...l, objects: touched.get(i) } : l));
  }
  // the step the kernel says this patch is (syft_lab/widget/live.py step): views highlight it
  return { ...world, workers: lanes, rev: patch.rev ?? world.rev, step: patch.step ?? null };
}

/** A lane's ledger after a patch's entry for it: null, a whole ledger, or its newer records. */
function applyLedger(old, delta) {
  if (!delta || !Array.isArray(delta.append)) return delta || null;
  const { append, keep, ...rest } = delta;
  const records = keep ? [...(old?.records || []), ...append].slice(-keep) : [];
  return { ...rest, records };
}

function sameHeader(a, b) {
  const ka = Object.keys(a).filter((k) => k !== "objects" && k !== "ledger");
  const kb = Object.keys(b);
  return ka.length === kb.length && kb.every((k) => JSON.stringify(a[k]) === JSON.stringify(b[k]));
}

/** Index of every object in a world by "worker:id" (for pointer targets and arrows). */
export function indexWorld(world) {
  const byKey = new Map();
  for (const lane of world?.workers || []) {
    for (const o of lane.objects || []) byKey.set(`${lane.id}:${o.id}`, { lane: lane.id, entry: o });
  }
  return byKey;
}

/** The arrows of a world: one per pointer whose target is shown, [{from, to, location}]. */
export function worldArrows(world) {
  const byKey = indexWorld(world);
  const arrows = [];
  for (const lane of world?.workers || []) {
    for (const o of lane.objects || []) {
      if (!isEdge(o) || o.location === undefined) continue;
      const to = `${o.location}:${o.id_at_location}`;
      if (byKey.has(to)) arrows.push({ from: `${lane.id}:${o.id}`, to, location: o.location });
    }
  }
  return arrows;
}
