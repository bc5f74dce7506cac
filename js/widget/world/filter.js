// What the world view shows of each lane: the search (parseQuery: words, worker:, kind:, #tag),
// which objects match it, the targets a matching pointer keeps in view, what a lesson may hide
// (isTemporary), and a lane's rows in order (laneItems). Pure: data in, data out.

import { LOCAL, isEdge, objKey, shortId } from "../dom.js";

/** A filter from the search text: words match names, types, ids and tags; `worker:bob`,
 * `kind:pointer` and `#tag` (or `tag:x`) restrict. */
export function parseQuery(text, kind = "", worker = "") {
  const q = { words: [], tags: [], kinds: kind ? [kind] : [], workers: worker ? [worker] : [] };
  for (const raw of String(text || "").toLowerCase().split(/\s+/).filter(Boolean)) {
    if (raw.startsWith("worker:")) q.workers.push(raw.slice(7));
    else if (raw.startsWith("kind:")) q.kinds.push(raw.slice(5));
    else if (raw.startsWith("tag:")) q.tags.push(raw.slice(4).replace(/^#?/, "#"));
    else if (raw.startsWith("#")) q.tags.push(raw);
    else q.words.push(raw);
  }
  q.empty = !q.words.length && !q.tags.length && !q.kinds.length && !q.workers.length;
  return q;
}

const searchText = new WeakMap();
function textOf(o) {
  let t = searchText.get(o);
  if (t === undefined) {
    t = [...(o.names || []), ...(o.held_in || []), o.type, o.kind, shortId(o.id), o.location, o.name, o.description,
      o.dataset?.name, o.group !== undefined && o.group !== null ? `share group:${o.group}` : "",
      ...(o.tags || [])].filter(Boolean).join(" ").toLowerCase();
    searchText.set(o, t);
  }
  return t;
}

export function matches(q, laneId, o) {
  if (q.kinds.length && !q.kinds.some((k) => o.kind === k || (k === "dataset" && o.dataset) || (k === "gone" && o.state === "gone"))) return false;
  if (q.tags.length && !q.tags.every((t) => (o.tags || []).some((x) => x.toLowerCase() === t))) return false;
  if (q.words.length) {
    const text = textOf(o);
    if (!q.words.every((w) => text.includes(w))) return false;
  }
  return true;
}


export const laneMatches = (q, id) => !q.workers.length || q.workers.some((w) => id.toLowerCase().includes(w));

/** The targets of the pointers a search shows, by lane: a search for `x_ptr` keeps the object it
 * points to in view (no arrow into an empty lane). */
export function pinnedTargets(lanes, q) {
  const pins = new Map();
  if (q.empty) return pins;
  for (const lane of lanes) {
    for (const o of lane.objects || []) {
      if (!isEdge(o) || o.state === "gone" || !matches(q, lane.id, o)) continue;
      if (!pins.has(o.location)) pins.set(o.location, new Set());
      pins.get(o.location).add(o.id_at_location);
    }
  }
  return pins;
}

/** A temporary: what a lesson can hide (issue 26.11). A gone pointer; an unnamed pointer of the
 * notebook; an object on a worker that no named pointer points to and that is nothing else a
 * person would look for (tagged, a share, a dataset, held data, a plan or its state). */
export function isTemporary(laneId, o, namedTargets) {
  if (o.state === "gone") return true;
  if (o.names?.length || o.held_in?.length || o.tags?.length || o.group != null || o.dataset || o.held || o.state_of || o.kind === "plan") return false;
  if (isEdge(o)) return laneId === LOCAL;
  return laneId !== LOCAL && !namedTargets?.has(objKey(laneId, o.id));
}

/** The rows of a lane, in order: the "me" lane groups pointers by target worker (named first,
 * by name), then local objects; other lanes keep the worker's order. Group headers are
 * {header, label, count} (header: the target worker, or "" for local objects). */
export function laneItems(lane, q, laneOrder, pinned, namedTargets) {
  const objs = (lane.objects || []).filter((o) => (q.empty || matches(q, lane.id, o) || !!pinned?.has(o.id))
    && !(q.tidy && isTemporary(lane.id, o, namedTargets)));
  if (lane.id !== LOCAL) return objs;
  const byName = (a, b) => {
    const na = (a.names || a.held_in || [])[0];
    const nb = (b.names || b.held_in || [])[0];
    if (na && nb) return na.localeCompare(nb, undefined, { numeric: true }) || a.id - b.id;
    return na ? -1 : nb ? 1 : a.id - b.id;
  };
  const groups = new Map();
  const local = [];
  for (const o of objs) {
    if (isEdge(o)) {
      if (!groups.has(o.location)) groups.set(o.location, []);
      groups.get(o.location).push(o);
    } else local.push(o);
  }
  const order = [...groups.keys()].sort((a, b) => (laneOrder.get(a) ?? 1e9) - (laneOrder.get(b) ?? 1e9) || a.localeCompare(b));
  const items = [];
  for (const loc of order) {
    const g = groups.get(loc).sort(byName);
    items.push({ header: loc, label: `pointers to ${loc}`, count: g.length }, ...g);
  }
  if (local.length && items.length) items.push({ header: "", label: "here, in the notebook", count: local.length });
  items.push(...local.sort(byName));
  return items;
}
