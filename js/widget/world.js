// The world view: one lane per worker, its objects, and an arrow from each pointer to its
// target. update(world) changes only the rows whose entries changed (patch.js keeps the
// identity of the others), so a live update costs a few DOM nodes, not the whole view.
//
// Lanes sit in a grid that wraps to the width; each lane is a virtual list with its own
// scroll (rows of ROW_H px; only rows in view exist). Arrows are routed in the gutters between
// lanes and the channels between rows of lanes, so they never cross a row they do not point
// to; hovering a row highlights it with its pointers or its target. A toolbar filters (worker,
// kind, tag, name), a legend explains the marks, and a timeline lists the steps the kernel
// reported (world.step) and shows the world as it was after any of them.
//
// Rows are built as HTML text in batches and their buttons' clicks are delegated to the
// view: a world of thousands of objects renders in a few frames.

import { actionBarHTML, toggleMenu } from "./actions.js";
import { colourStyle, esc, h, laneColours, objKey, s, shapeText, shortId } from "./dom.js";
import { indexWorld } from "./patch.js";
import { explainPanel, ledgerButton, ledgerPanel } from "./ledger.js";

const DOWN = new Set(["unreachable", "closed", "gone", "error", "stopped", "dead"]);
export const isDown = (lane) => !!lane && (lane.gone === true || DOWN.has(lane.state));

function laneHead(lane, shown, collapsed, closable, provides, ledgerOpen = false) {
  const n = (lane.objects || []).length;
  const count = shown === n ? `${n} object${n === 1 ? "" : "s"}` : `${shown} of ${n} objects`;
  const state = lane.gone ? "gone" : lane.state;
  return h("header", { class: "syft-lane-head" },
    h("button", { class: "syft-lane-toggle", type: "button", "aria-expanded": String(!collapsed),
      "aria-label": `${collapsed ? "expand" : "collapse"} ${lane.id}`, title: collapsed ? "expand" : "collapse" },
    collapsed ? "▸" : "▾"),
    h("span", { class: "syft-lane-name" }, lane.id),
    h("span", { class: "syft-lane-kind" }, lane.kind ?? ""),
    nodeOf(lane) ? h("span", { class: "syft-lane-node", title: `runs on node ${nodeOf(lane)}` }, `@${nodeOf(lane)}`) : null,
    state && state !== "in-process" && state !== "local"
      ? h("span", { class: `syft-lane-state syft-state-${state}`, title: STATE_TEXT[state] || state }, state) : null,
    provides ? h("span", { class: "syft-lane-role", title: `the crypto provider of ${provides}: it deals the correlated`
      + " randomness (Beaver triples) and never holds a share of an input" }, "crypto provider") : null,
    h("span", { class: "syft-lane-count" }, count),
    ledgerButton(lane, ledgerOpen),
    closable ? h("button", { class: "syft-lane-close", type: "button", "aria-label": `back to the overview: ${lane.id}`,
      title: "close this lane (back to the overview)" }, "×") : null,
    lane.gone ? h("div", { class: "syft-muted syft-lane-note" }, "closed: the pointers to it dangle") : null,
    lane.error ? h("div", { class: "syft-error-text" }, lane.error) : null,
    ledgerOpen && lane.ledger ? ledgerPanel(lane) : null);
}

/** The machine (Ray node, host) a worker runs on, when the snapshot says. */
export const nodeOf = (lane) => lane.node ?? lane.host ?? "";

const STATE_TEXT = {
  connected: "a worker process, connected",
  alive: "a Ray actor, alive",
  restarting: "restarting (Ray restarts the actor): it comes back empty",
  dead: "dead: its pointers dangle",
  disconnected: "the connection dropped: the next call reconnects",
  unreachable: "cannot be reached: its pointers dangle until it is back",
  closed: "closed: its objects are gone, its pointers dangle",
  gone: "closed: its objects are gone, its pointers dangle",
};

const DEFAULT_TYPE = { tensor: "Tensor", pointer: "PointerTensor", logging: "LoggingTensor", plan: "Plan" };

/** The HTML of one row: kind, names, id, shape, target, tags, then the buttons. The type is
 * shown only where the kind does not say it (a Parameter, a PlanPointer); the full text is
 * the row's tooltip, as a narrow lane cuts it. `target` is a pointer's target entry.
 * opts: {pointedBy: [names], colour(id) -> inline style, dangling, pending, mark: "new"|"changed",
 * gone: {how, to} (what the view saw become of a gone pointer's object), shareOf: the name of the
 * secret a share belongs to}. */
export function objectRowHTML(laneId, o, target, opts = {}) {
  const shape = shapeText(o) || (target ? shapeText(target) : "");
  const names = o.names || [];
  const held = o.held_in || [];
  const kind = esc(o.kind);
  const type = o.type && o.type !== DEFAULT_TYPE[o.kind] ? o.type : "";
  const gone = o.state === "gone";
  const dangling = !gone && (o.dangling || opts.dangling);
  let main = `<span class="syft-kind syft-kind-${kind}">${kind}</span>`;
  if (names.length) main += `<span class="syft-names" title="notebook variables">${esc(names.join(", "))}</span>`;
  else if (held.length) main += `<span class="syft-names syft-held-in" title="held in a notebook container">${esc(held.join(", "))}</span>`;
  else if (opts.shareOf) main += `<span class="syft-names syft-held-in" title="one share of the secret ${esc(opts.shareOf)}">share of ${esc(opts.shareOf)}</span>`;
  else if (o.state_of) main += `<span class="syft-names syft-held-in" title="a copy of the state (parameters) plan ${esc(o.state_of)} runs on, sent with it; it goes with the plan">state of ${esc(o.state_of)}</span>`;
  else if (o.description) main += `<span class="syft-names syft-held-in" title="its description">${esc(o.description)}</span>`;
  else if (o.kind === "pointer" && laneId === "me") main += '<span class="syft-muted" title="no notebook variable or container names it">unnamed</span>';
  if (o.group !== undefined && o.group !== null) main += shareHTML(o); // before the rest: a narrow row keeps it
  if (o.distributed?.length && o.kind !== "pointer") {
    main += `<span class="syft-nobody" title="no one holds this value: it exists only as shares on ${esc(o.distributed.join(", "))}`
      + ` (reconstructing needs every share)">held by nobody</span>`;
  }
  if (type) main += `<span class="syft-type">${esc(type)}</span>`;
  main += `<span class="syft-id" title="id ${esc(o.id)}">${shortId(o.id)}</span>`;
  if (shape) main += `<span class="syft-shape">${esc(shape)}</span>`;
  if (o.kind === "plan" && o.name) main += `<span class="syft-shape">${esc(o.name)}</span>`;
  if (o.held) main += '<span class="syft-held" title="held by the worker itself (worker.load): no pointer owns it">held</span>';
  if (o.crypto_provider) main += `<span class="syft-crypto" title="crypto provider: ${esc(o.crypto_provider)} supplies the correlated randomness">crypto: ${esc(o.crypto_provider)}</span>`;
  const ds = o.dataset;
  if (ds) main += datasetHTML(ds);
  const shownTags = ds ? (o.tags || []).filter((t) => !datasetTags(ds).includes(t)) : o.tags || [];
  for (const t of shownTags) main += `<span class="syft-tag">${esc(t)}</span>`;
  if (o.refcount > 1) main += `<span class="syft-muted" title="owning pointers">×${o.refcount}</span>`;
  let side = "";
  if (o.kind === "pointer") {
    const style = opts.colour ? ` style="${opts.colour(o.location)}"` : "";
    side += `<span class="syft-where"${style}>→ <span class="syft-worker-chip">${esc(o.location)}</span>`
      + `<span class="syft-id" title="id ${esc(o.id_at_location)}">:${shortId(o.id_at_location)}</span>`
      + `${o.owning === false ? '<span class="syft-muted" title="does not own its target: dropping it deletes nothing"> weak</span>' : ""}</span>`;
    if (gone) {
      const where = goneWhere(o, opts.gone);
      side += `<span class="syft-badge-gone" title="its object was ${where ? esc(where) : "fetched or moved away"}: this pointer is`
        + ` stale (it stays while a name holds it)">gone${where ? `<span class="syft-gone-where">: ${esc(where)}</span>` : ""}</span>`;
    }
    else if (dangling) side += `<span class="syft-badge-gone" title="${esc(o.location)} is closed or unreachable">dangling</span>`;
  }
  const by = opts.pointedBy || [];
  if (by.length) {
    side += `<span class="syft-pointed" title="pointed at by ${esc(by.join(", "))}">← ${esc(by.slice(0, 2).join(", "))}`
      + `${by.length > 2 ? ` +${by.length - 2}` : ""}</span>`;
  }
  const tip = [names.length ? names.join(", ") + " =" : held.length ? held.join(", ") + " =" : "", o.type ?? o.kind,
    shortId(o.id), shape, o.kind === "pointer" ? `→ ${o.location}:${shortId(o.id_at_location)}` : "",
    gone ? `(gone${goneWhere(o, opts.gone) ? `: ${goneWhere(o, opts.gone)}` : ""})` : dangling ? "(dangling)" : "", ...(o.tags || []), by.length ? `← ${by.join(", ")}` : "",
    o.description ? `— ${o.description}` : ""].filter(Boolean).join(" ");
  const cls = `syft-obj syft-obj-${kind}${ds ? " syft-obj-dataset" : ""}${gone ? " syft-obj-gone" : ""}`
    + `${dangling ? " syft-obj-dangling" : ""}${opts.mark ? ` syft-mark-${opts.mark}` : ""}`;
  let buttons = gone || dangling ? "" : actionBarHTML(laneId, o, names[0] || held[0]);
  if (o.explain && !gone) {
    buttons += `<button class="syft-btn syft-explain-btn" type="button" aria-label="${esc(`explain reconstructing ${o.explain.secret}`)}"`
      + ` title="what reconstructing it takes: the sum of every share mod 2^64 (no value shown)">Explain</button>`;
  }
  return `<li class="${cls}" data-key="${esc(objKey(laneId, o.id))}" data-kind="${kind}"`
    + ` data-names="${esc(names.join(","))}"${o.group !== undefined && o.group !== null ? ` data-group="${esc(o.group)}"` : ""}><span class="syft-obj-main" title="${esc(tip)}">${main}</span>`
    + `${side}${opts.pending ? buttons.replace(/<button /g, "<button disabled ") : buttons}</li>`;
}

/** Where a gone pointer's object went: "fetched", "moved to alice", "deleted" (the snapshot's
 * gone_how/gone_to; or what the view saw happen, o.gone_seen). */
export function goneWhere(o, seen) {
  const how = o.gone_how ?? seen?.how;
  const to = o.gone_to ?? seen?.to;
  if (how === "moved") return to ? `moved to ${to}` : "moved";
  if (how === "fetched") return "fetched";
  if (how === "deleted") return "deleted";
  return "";
}

// One share of a secret (#17): the shares of one secret carry one group id; a mark in one hue
// per group (so siblings match across lanes), never a value.
// Share groups get clearly distinct hues: in the order the world lists them, from hues far
// apart (then the golden angle); a group the view has not indexed falls back to a hash.
const GROUP_HUES = [210, 30, 130, 290, 0, 60, 170, 330];
let groupOrder = new Map();
export function setGroupOrder(groups) {
  groupOrder = new Map([...new Set(groups)].map((g, i) => [String(g), i]));
}
export function groupHue(g) {
  const i = groupOrder.get(String(g));
  if (i !== undefined) return i < GROUP_HUES.length ? GROUP_HUES[i] : Math.round((i * 137.508) % 360);
  let hash = 2166136261;
  for (const ch of String(g)) { hash ^= ch.codePointAt(0); hash = Math.imul(hash, 16777619) >>> 0; }
  return (hash % 24) * 15;
}

function shareHTML(o) {
  const sh = o.share;
  const crypto = o.crypto || o.kind === "crypto";
  const label = crypto ? "crypto material" : o.kind === "pointer" || o.kind === "tensor" || sh ? `share${sh ? ` ${sh.index + 1}/${sh.of}` : ""}` : "secret";
  const tip = crypto
    ? `correlated randomness from the crypto provider for secret ${o.group}: it exists until it is used`
    : o.kind === "pointer" || o.kind === "tensor" || sh
      ? `one share of secret ${o.group}: alone it reveals nothing about the secret (its value is never shown); hover to light up its siblings`
      : `a secret shared as group ${o.group}: hover to light up its shares`;
  return `<span class="syft-share${crypto ? " syft-share-crypto" : ""}" style="--syft-group-hue:${groupHue(o.group)}"`
    + ` title="${esc(tip)}">${esc(label)}</span>`;
}

// A part of a federated dataset (inspection model: entry.dataset, from the tags #dataset,
// #<name> and #data or #target): one badge with its name, part, samples and sample shape,
// instead of the three tags.
function datasetTags(ds) {
  return ["#dataset", `#${ds.name}`, ds.part === "targets" ? "#target" : "#data"];
}

function datasetHTML(ds) {
  const shape = (ds.sample_shape || []).length ? ` × ${ds.sample_shape.join("×")}` : "";
  const tip = `part of dataset ${ds.name}: its ${ds.part}, ${ds.samples} samples${shape ? ` of shape [${ds.sample_shape.join(", ")}]` : ""}`;
  return `<span class="syft-dataset" title="${esc(tip)}"><span class="syft-dataset-name">${esc(ds.name)}</span>`
    + ` ${esc(ds.part)} · ${esc(ds.samples)}${esc(shape)}</span>`;
}

/** Elements from row HTML strings, in order (one parse for many rows). */
function rowsFrom(htmls) {
  if (!htmls.length) return [];
  const tpl = document.createElement("template");
  tpl.innerHTML = htmls.join("");
  return Array.from(tpl.content.children);
}

// --- search and filter ------------------------------------------------------------------------

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
      o.dataset?.name, o.group !== undefined && o.group !== null ? `share group:${o.group}` : "", o.crypto ? "crypto" : "",
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

const laneMatches = (q, id) => !q.workers.length || q.workers.some((w) => id.toLowerCase().includes(w));

/** The rows of a lane, in order: the "me" lane groups pointers by target worker (named first,
 * by name), then local objects; other lanes keep the worker's order. Group headers are
 * {header, label, count} (header: the target worker, or "" for local objects). */
/** The targets of the pointers a search shows, by lane: a search for `x_ptr` keeps the object it
 * points to in view (no arrow into an empty lane). */
export function pinnedTargets(lanes, q) {
  const pins = new Map();
  if (q.empty) return pins;
  for (const lane of lanes) {
    for (const o of lane.objects || []) {
      if (o.kind !== "pointer" || o.state === "gone" || !matches(q, lane.id, o)) continue;
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
  if (o.names?.length || o.held_in?.length || o.tags?.length || o.group != null || o.dataset || o.held || o.state_of || o.kind === "plan"
    || o.kind === "crypto" || o.crypto) return false;
  if (o.kind === "pointer") return laneId === "me";
  return laneId !== "me" && !namedTargets?.has(objKey(laneId, o.id));
}

export function laneItems(lane, q, laneOrder, pinned, namedTargets) {
  const objs = (lane.objects || []).filter((o) => (q.empty || matches(q, lane.id, o) || !!pinned?.has(o.id))
    && !(q.tidy && isTemporary(lane.id, o, namedTargets)));
  if (lane.id !== "me") return objs;
  const byName = (a, b) => {
    const na = (a.names || a.held_in || [])[0];
    const nb = (b.names || b.held_in || [])[0];
    if (na && nb) return na.localeCompare(nb, undefined, { numeric: true }) || a.id - b.id;
    return na ? -1 : nb ? 1 : a.id - b.id;
  };
  const groups = new Map();
  const local = [];
  for (const o of objs) {
    if (o.kind === "pointer") {
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

// --- the legend --------------------------------------------------------------------------------

export function legendHTML() {
  const item = (sample, text) => `<li>${sample}<span>${text}</span></li>`;
  return `<ul class="syft-legend-list">${[
    item('<svg width="34" height="10"><path d="M1 5 H28" class="syft-legend-arrow"/><path d="M27 1 L33 5 L27 9 z" class="syft-arrowhead"/></svg>',
      "a pointer (its row, left) stands for an object on a worker (the row it points to); arrows run between lanes, never across rows; hover a row to light up its pair"),
    item('<svg width="34" height="10"><path d="M1 5 H28" class="syft-legend-arrow syft-legend-weak"/></svg>',
      '<b>weak</b>: a pointer that does not own its object (search results): dropping it deletes nothing; an owning pointer (solid) deletes its object when the last one goes'),
    item('<span class="syft-pointed">← x_ptr</span>', "the variables that point at this object"),
    item('<span class="syft-held">held</span>', "data the worker holds itself (worker.load): no pointer owns it"),
    item('<span class="syft-badge-gone">gone<span class="syft-gone-where">: moved to alice</span></span>',
      "a pointer a variable still names, whose object was fetched or moved away (it says where): the row stays while the name is bound"),
    item('<span class="syft-badge-gone">dangling</span>', "a pointer to a worker that is closed or unreachable (its lane is greyed)"),
    item('<span class="syft-legend-lane"></span>', "one colour per worker: its lane, its pointers' chips and arrows ('me' is the notebook)"),
    item('<span class="syft-share" style="--syft-group-hue:205">share 1/2</span>',
      "one share of a secret (its value is never shown: alone it reveals nothing); hover or click one to light up its siblings on the other workers"),
    item('<span class="syft-share syft-share-crypto" style="--syft-group-hue:205">crypto material</span>',
      "the crypto provider's correlated randomness (Beaver triples) for a shared secret, while it exists"),
    item('<span class="syft-lane-state syft-state-connected">connected</span>',
      "a worker process; <i>disconnected</i>: reconnects on the next call; <i>unreachable</i>, <i>closed</i>: down"),
    item('<span class="syft-legend-new">new</span><span class="syft-legend-changed">changed</span><span class="syft-ghost-sample">left</span>',
      "after a cell or a click: what appeared, changed, or left (and where it went)"),
  ].join("")}</ul>`;
}

// --- steps and their events (the kernel's world.step, syft_lab/widget/diff.py describe) --------

const EVENT_TEXT = {
  stored: (e) => `stored on ${e.worker}`,
  moved: (e) => `moved ${e.worker} → ${e.to}`,
  fetched: (e) => `fetched from ${e.worker}`,
  deleted: (e) => `deleted on ${e.worker}`,
  "plan run": (e) => `plan ran on ${e.worker}`,
  "worker added": (e) => `worker ${e.worker} added`,
  "worker down": (e) => `${e.worker} ${e.state || "down"}`,
  "worker back": (e) => `${e.worker} back`,
};

export function eventText(e) {
  const f = EVENT_TEXT[e.type];
  const what = f ? f(e) : `${e.type} ${e.worker ?? ""}`;
  return e.names && e.names.length ? `${what} (${e.names.join(", ")})` : what;
}

/** One line for a step: its events, counted by type. */
export function stepSummary(step) {
  const evs = step?.events || [];
  if (!evs.length) return "names or values changed";
  if (evs.length <= 2) return evs.map(eventText).join("; ");
  const counts = new Map();
  for (const e of evs) counts.set(e.type, (counts.get(e.type) || 0) + 1);
  return [...counts].map(([t, n]) => `${n} ${t}`).join(", ");
}

/** What a ghost says: where an object went; for a pointer, what became of its object (a
 * pointer whose object was fetched or moved is gone: the view shows it so before it goes). */
function ghostText(step, laneId, o) {
  const evs = step?.events || [];
  const e = evs.find((x) => x.worker === laneId && x.id === o.id);
  if (e?.type === "moved") return `moved to ${e.to}`;
  if (e?.type === "fetched") return "fetched to me";
  if (e?.type === "deleted") return "deleted";
  if (o.kind === "pointer") {
    const t = evs.find((x) => x.worker === o.location && x.id === o.id_at_location);
    if (t?.type === "fetched") return "gone: its object was fetched";
    if (t?.type === "moved") return `gone: its object moved to ${t.to}`;
    if (t?.type === "deleted") return "dropped: its object was deleted";
    return "pointer dropped";
  }
  return "left";
}

function pickOption(select, value) {
  for (const o of select.options) o.selected = o.value === value;
}

/** Row height in px: style.css gives .syft-obj exactly this height (border included). */
export const ROW_H = 26;
const BIG_ROW_H = 36; // classroom mode (style.css .syft-classroom)
const OVERSCAN = 8; // rows materialised above and below the visible band
const DEFAULT_VIEW_H = 520; // the scroller's max-height, when it has no layout yet
const GAP = 24; // px between lanes (style.css .syft-lanes gap): arrows run in the middle
const MARK_MS = 5000; // how long appeared and changed rows stay highlighted
const GHOST_MS = 7000; // how long a ghost of what left stays
const HISTORY = 200; // steps the timeline keeps
/** More workers than this (and no focus): their lanes fold into an overview, opened on demand. */
export const OVERVIEW_AT = 12;
const OVERVIEW_GROUPS = { kind: "kind", node: "node (host)", state: "state" };

/** What an overview groups a worker under. */
export function overviewKey(lane, by) {
  if (by === "node") return nodeOf(lane) || (lane.kind === "virtual" ? "this process" : "no node given");
  if (by === "state") return lane.gone ? "gone" : lane.state || "ok";
  return lane.kind || "?";
}

/**
 * A world view. ctx: {workers(), run(action, target, extra)}.
 * Returns {el, frame, update(world, focus), rowFor(lane, id), layoutChanged(), destroy(),
 * setDisabled(reason), showStep(i), history, filter(text, kind, worker)}.
 * `el` is the lanes' scroller; `frame` adds the toolbar, the legend and the timeline above it.
 */
export function createWorldView(ctx) {
  const arrows = s("svg", { class: "syft-arrows", "aria-hidden": "true" });
  const lanesEl = h("div", { class: "syft-lanes" }, arrows);
  const el = h("div", { class: "syft-world-scroll" }, lanesEl);
  const search = h("input", { class: "syft-search", type: "search", placeholder: "search: name, #tag, kind:pointer, worker:bob",
    "aria-label": "search the objects" });
  const kindSel = h("select", { class: "syft-filter-kind", "aria-label": "kind" },
    ["", "pointer", "tensor", "logging", "plan", "dataset", "gone"].map((k) => h("option", { value: k }, k || "every kind")));
  const workerSel = h("select", { class: "syft-filter-worker", "aria-label": "worker" }, h("option", { value: "" }, "every worker"));
  const legend = h("details", { class: "syft-legend-box" }, h("summary", {}, "Legend"));
  legend.insertAdjacentHTML("beforeend", legendHTML());
  const timelineList = h("ol", { class: "syft-timeline-list" });
  const timelineSummary = h("summary", {}, "History");
  const timeline = h("details", { class: "syft-timeline" }, timelineSummary, timelineList);
  const replayText = h("span", {});
  const replay = h("div", { class: "syft-replay", hidden: true, role: "status" }, replayText,
    h("button", { class: "syft-btn syft-replay-back", type: "button", onclick: () => showStep(-1) }, "Back to now"));
  const deadBanner = h("div", { class: "syft-dead-banner", hidden: true, role: "alert" });
  const explainBox = h("div", { class: "syft-explain-box", hidden: true });
  // many workers: an overview of them all (grouped, searchable); a click opens a worker's lane
  const groupSel = h("select", { class: "syft-ov-group-by", "aria-label": "group workers by" },
    Object.entries(OVERVIEW_GROUPS).map(([k, v]) => h("option", { value: k }, `by ${v}`)));
  const ovTitle = h("span", { class: "syft-ov-title" });
  const ovAll = h("button", { class: "syft-btn syft-ov-all", type: "button" }, "all lanes");
  const ovBody = h("div", { class: "syft-ov-body" });
  const overview = h("section", { class: "syft-overview", hidden: true, "aria-label": "workers overview" },
    h("div", { class: "syft-ov-head" }, ovTitle, groupSel, ovAll), ovBody);
  // classroom: hide what a lesson does not need (temporaries nobody names, ghosts, gone
  // pointers), step through the history, and a large font for a projector (issue 26.11)
  const tidyBox = h("input", { type: "checkbox", class: "syft-tidy" });
  const tidy = h("label", { class: "syft-tidy-label", title: "hide objects no variable names (intermediate results), ghosts and gone pointers" },
    tidyBox, " hide temporaries and ghosts");
  const bigBtn = h("button", { class: "syft-btn syft-big-toggle", type: "button", "aria-pressed": "false",
    title: "classroom mode: a large font for a projector" }, "Aa");
  const prevBtn = h("button", { class: "syft-btn syft-step-prev", type: "button", title: "the step before (←)",
    "aria-label": "previous step", onclick: () => stepBy(-1) }, "◀");
  const nextBtn = h("button", { class: "syft-btn syft-step-next", type: "button", title: "the step after (→); Esc: now",
    "aria-label": "next step", onclick: () => stepBy(1) }, "▶");
  const stepPos = h("span", { class: "syft-step-pos syft-muted" });
  const stepper = h("span", { class: "syft-stepper", role: "group", "aria-label": "history steps" }, prevBtn, stepPos, nextBtn);
  const tools = h("div", { class: "syft-world-tools" }, search, kindSel, workerSel, tidy, bigBtn, stepper);
  const frame = h("div", { class: "syft-world", tabindex: "-1" }, deadBanner, tools, h("div", { class: "syft-world-aside" }, legend, timeline),
    replay, explainBox, overview, el);
  frame.addEventListener("keydown", (ev) => {
    if (/^(INPUT|SELECT|TEXTAREA)$/.test(ev.target.tagName || "") || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    const d = { ArrowLeft: -1, ArrowRight: 1 }[ev.key];
    if (d) stepBy(d);
    else if (ev.key === "Escape" && replaying >= 0) showStep(-1);
    else return;
    ev.preventDefault();
  });
  tidyBox.addEventListener("change", () => onFilter());
  bigBtn.addEventListener("click", () => {
    const on = !frame.classList.contains("syft-classroom");
    frame.classList.toggle("syft-classroom", on);
    bigBtn.setAttribute("aria-pressed", String(on));
    rowH = on ? BIG_ROW_H : ROW_H;
    for (const L of lanes.values()) { for (const R of L.rows.values()) R.el.remove(); L.rows.clear(); L.lane = null; }
    if (world) update(world, focus, true);
  });

  const lanes = new Map(); // id -> {section, head, body, list, lane, items, index, rows, collapsed}
  let world = null; // the world shown (now, or a step of the history)
  let latest = null; // the newest world
  let worldIndex = new Map();
  let pointedBy = new Map(); // "bob:12" -> [names of the pointers to it]
  let colours = new Map();
  let laneById = new Map();
  let focus = [];
  let query = parseQuery("");
  let frameReq = 0;
  let disabled = "";
  let replaying = -1;
  let rowH = ROW_H; // BIG_ROW_H in classroom mode
  const history = []; // [{rev, step, world}]
  const marks = new Map(); // key -> {mark, until}
  const ghosts = new Map(); // lane id -> [{key, entry, at, text, until}]
  const pending = new Set(); // keys of rows whose action awaits its reply
  const collapsed = new Set();
  const ledgerOpen = new Set(); // lanes whose record (ledger) is open
  let explained = ""; // the key of the shared value whose reconstruction is explained
  const opened = new Set(); // workers whose lanes the overview opened
  let overviewOn = false; // the overview is shown (many workers)
  let showAll = false; // the user asked for every lane instead
  let groupKeys = new Map(); // share group -> keys of its entries (every lane)
  let keyGroup = new Map(); // key -> its share group
  const goneSeen = new Map(); // key of a gone pointer -> {how, to}: what the view saw happen
  let pinned = ""; // a row clicked: its highlight stays until another click
  let secretName = new Map(); // share group -> the name of its secret in the notebook
  let providers = new Map(); // worker -> names of the secrets it is the crypto provider of
  const markerId = `syft-arrowhead-${Math.random().toString(36).slice(2, 9)}`;
  const menuCtx = { ...ctx, workers: () => reachableWorkers(), layoutChanged: () => schedule() };
  const timings = {};
  let timer = 0;

  function reachableWorkers() {
    // the lanes' own states (the kernel tried to reach each one for this world), not a list
    // that may be older: an unreachable or closed worker is never offered
    const w = latest?.workers;
    if (w && w.length) return w.filter((l) => !isDown(l)).map((l) => ({ id: l.id, kind: l.kind, state: l.state }));
    return (ctx.workers?.() || []).filter((l) => !isDown(l));
  }

  groupSel.addEventListener("change", () => { if (world) update(world, focus, true); });
  ovAll.addEventListener("click", () => {
    showAll = !showAll;
    for (const L of lanes.values()) L.lane = null;
    if (world) update(world, focus, true);
  });
  ovBody.addEventListener("click", (ev) => {
    const chip = ev.target.closest?.(".syft-ov-worker");
    if (chip) openLane(chip.dataset.worker, !opened.has(chip.dataset.worker));
  });

  /** Open (or close) a worker's lane from the overview. */
  function openLane(id, on = true) {
    const t0 = performance.now();
    if (on) opened.add(id); else opened.delete(id);
    const L = lanes.get(id);
    if (L) L.lane = null;
    if (world) update(world, focus, true);
    if (on) lanes.get(id)?.section.scrollIntoView?.({ block: "nearest" });
    timings.open = performance.now() - t0;
  }

  // one listener for every row's buttons (and the lane toggles)
  lanesEl.addEventListener("click", (ev) => {
    const close = ev.target.closest?.(".syft-lane-close");
    if (close) {
      const id = close.closest(".syft-lane")?.dataset.worker;
      if (id !== undefined) openLane(id, false);
      return;
    }
    // in the overview, a pointer's worker chip opens the lane it points to
    const where = ev.target.closest?.(".syft-where");
    if (where && overviewOn) {
      const [l, i] = splitKey(where.closest(".syft-obj")?.dataset.key || "");
      const o = lanes.get(l)?.rows.get(i)?.entry;
      if (o?.kind === "pointer" && laneById.has(o.location) && !opened.has(o.location)) {
        openLane(o.location, true);
        return;
      }
    }
    const rec = ev.target.closest?.(".syft-ledger-toggle");
    if (rec) {
      const id = rec.closest(".syft-lane")?.dataset.worker;
      if (id === undefined) return;
      if (ledgerOpen.has(id)) ledgerOpen.delete(id); else ledgerOpen.add(id);
      const L = lanes.get(id);
      if (L) L.lane = null;
      update(world, focus, true);
      return;
    }
    const exBtn = ev.target.closest?.(".syft-explain-btn");
    if (exBtn) {
      ev.stopPropagation();
      const key = exBtn.closest(".syft-obj")?.dataset.key;
      if (key) showExplain(explained === key ? "" : key);
      return;
    }
    const toggle = ev.target.closest?.(".syft-lane-toggle");
    if (toggle) {
      const id = toggle.closest(".syft-lane")?.dataset.worker;
      if (id === undefined) return;
      if (collapsed.has(id)) collapsed.delete(id); else collapsed.add(id);
      const L = lanes.get(id);
      if (L) L.lane = null;
      update(world, focus, true);
      return;
    }
    const btn = ev.target.closest?.("button[data-action]");
    if (!btn) {
      // a click on a row pins its highlight (a share's siblings, a pointer's target); again: unpins
      const row = ev.target.closest?.(".syft-obj");
      if (row && !ev.target.closest?.(".syft-actions")) {
        if (pinned === row.dataset.key) { pinned = ""; unlight(); } else { pinned = ""; light(row.dataset.key); pinned = row.dataset.key; }
      }
      return;
    }
    if (btn.classList.contains("syft-menu-item")) return;
    const row = btn.closest(".syft-obj");
    const key = row?.dataset.key;
    if (!key) return;
    const [laneId, id] = splitKey(key);
    const R = lanes.get(laneId)?.rows.get(id);
    if (!R) return;
    ev.stopPropagation();
    if (disabled || replaying >= 0 || pending.has(key) || btn.disabled) return;
    const target = { worker: laneId, id: R.entry.id };
    const action = btn.dataset.action;
    if (btn.hasAttribute("aria-haspopup")) {
      toggleMenu(btn.closest(".syft-actions"), btn, action, target, { ...menuCtx, disablesRows: true, run: (a, t, x) => runPending(key, a, t, x) },
        laneId, R.entry);
    } else {
      runPending(key, action, target, {});
    }
  });

  /** Run an action with the row's buttons disabled until its reply (a double click sends once). */
  async function runPending(key, action, target, extra) {
    if (pending.has(key)) return undefined;
    pending.add(key);
    setRowDisabled(key, true);
    try {
      return await ctx.run(action, target, extra);
    } finally {
      pending.delete(key);
      setRowDisabled(key, !!disabled);
    }
  }

  function setRowDisabled(key, off) {
    const [laneId, id] = splitKey(key);
    const row = lanes.get(laneId)?.rows.get(id)?.el;
    for (const b of row?.querySelectorAll("button") || []) b.disabled = off;
  }

  // hover: a row lights up with its pointers, or its target, and the arrows between them
  // a share lights up its siblings (every share of its secret, the secret, its crypto material)
  let lit = [];
  let litSet = new Set();
  lanesEl.addEventListener("mouseover", (ev) => {
    if (pinned) return;
    const key = ev.target.closest?.(".syft-obj")?.dataset.key;
    if (key && lit[0] !== key) light(key);
  });
  lanesEl.addEventListener("mouseleave", () => { if (!pinned) unlight(); });

  function light(key) {
    unlight();
    const [laneId, id] = splitKey(key);
    const o = lanes.get(laneId)?.rows.get(id)?.entry ?? worldIndex.get(key)?.entry;
    const keys = [key];
    if (o?.kind === "pointer") keys.push(objKey(o.location, o.id_at_location));
    for (const p of pointersTo.get(key) || []) keys.push(p);
    const g = keyGroup.get(key);
    if (g !== undefined) {
      for (const k of groupKeys.get(g) || []) {
        if (!keys.includes(k)) keys.push(k);
        const e = worldIndex.get(k)?.entry; // a share pointer's share
        if (e?.kind === "pointer") keys.push(objKey(e.location, e.id_at_location));
      }
    }
    lit = keys;
    litSet = new Set(keys);
    for (const k of keys) {
      const [l, i] = splitKey(k);
      lanes.get(l)?.rows.get(i)?.el.classList.add("syft-lit");
    }
    for (const p of arrows.querySelectorAll("path.syft-arrow")) {
      if (litSet.has(p.dataset.from) && litSet.has(p.dataset.to)) p.classList.add("syft-lit");
    }
    // siblings on workers whose lanes are folded into the overview: their chips light up
    const where = new Set(keys.map((k) => splitKey(k)[0]));
    for (const c of ovBody.querySelectorAll(".syft-ov-worker")) c.classList.toggle("syft-lit", where.has(c.dataset.worker));
  }

  function unlight() {
    for (const k of lit) {
      const [l, i] = splitKey(k);
      lanes.get(l)?.rows.get(i)?.el.classList.remove("syft-lit");
    }
    for (const p of arrows.querySelectorAll(".syft-lit")) p.classList.remove("syft-lit");
    for (const c of ovBody.querySelectorAll(".syft-ov-worker.syft-lit")) c.classList.remove("syft-lit");
    lit = [];
    litSet = new Set();
  }

  el.addEventListener("scroll", () => schedule(), { passive: true });
  const onFilter = (ev, picked) => {
    query = picked || parseQuery(search.value, kindSel.value, workerSel.value);
    query.tidy = tidyBox.checked;
    const t0 = performance.now();
    if (world) update(world, focus, true);
    timings.filter = performance.now() - t0;
  };
  search.addEventListener("input", onFilter);
  kindSel.addEventListener("change", onFilter);
  workerSel.addEventListener("change", onFilter);

  function laneFor(lane) {
    let L = lanes.get(lane.id);
    if (!L) {
      const list = h("ol", { class: "syft-objects" });
      const body = h("div", { class: "syft-lane-body" }, list);
      const section = h("section", { class: "syft-lane", "data-worker": lane.id, "aria-label": `worker ${lane.id}` }, body);
      body.addEventListener("scroll", () => schedule(), { passive: true });
      L = { section, head: null, body, list, lane: null, items: [], index: new Map(), rows: new Map(), q: null };
      lanes.set(lane.id, L);
    }
    return L;
  }

  let pointersTo = new Map(); // "bob:12" -> keys of the pointer rows to it
  let namedTargets = new Set(); // "bob:12" of the objects a named pointer points to

  function indexPointers(w) {
    pointedBy = new Map();
    pointersTo = new Map();
    namedTargets = new Set();
    groupKeys = new Map();
    keyGroup = new Map();
    secretName = new Map();
    providers = new Map();
    setGroupOrder((w.workers || []).flatMap((l) => (l.objects || []).map((o) => o.group).filter((g) => g !== undefined && g !== null)));
    for (const o of (w.workers || []).find((l) => l.id === "me")?.objects || []) {
      const name = (o.names?.length ? o.names : o.held_in || [])[0];
      if (o.group !== undefined && o.group !== null && o.kind !== "pointer" && name && !secretName.has(o.group)) secretName.set(o.group, name);
      else if (o.secret && o.group !== undefined && o.group !== null && !secretName.has(o.group)) secretName.set(o.group, o.secret);
      if (o.crypto_provider) providers.set(o.crypto_provider, [...(providers.get(o.crypto_provider) || []), name || "a shared tensor"]);
    }
    for (const lane of w.workers || []) {
      for (const o of lane.objects || []) {
        if (o.group !== undefined && o.group !== null) {
          const k = objKey(lane.id, o.id);
          if (!groupKeys.has(o.group)) groupKeys.set(o.group, []);
          groupKeys.get(o.group).push(k);
          keyGroup.set(k, o.group);
        }
        if (o.kind !== "pointer" || o.state === "gone") continue;
        const to = objKey(o.location, o.id_at_location);
        const secret = o.group !== undefined && o.group !== null ? secretName.get(o.group) : undefined;
        const label = (o.names && o.names[0]) || (o.held_in && o.held_in[0]) || (secret && `${secret}'s share`)
          || o.description || (lane.id === "me" ? "a pointer" : `${lane.id}'s pointer`);
        if (o.names?.length || o.held_in?.length || o.group != null) namedTargets.add(to);
        if (!pointedBy.has(to)) { pointedBy.set(to, []); pointersTo.set(to, []); }
        pointedBy.get(to).push(label);
        pointersTo.get(to).push(objKey(lane.id, o.id));
      }
    }
  }

  /** Show `next`. From the kernel (not a replay), the rows that appeared or changed since the
   * last world are highlighted for a while, and what left stays as a ghost. */
  function update(next, nextFocus = focus, internal = false) {
    if (!next) return;
    if (!internal) {
      const prev = latest;
      latest = next;
      record(prev, next);
      if (replaying >= 0) { refreshWorkerSelect(next); return; } // the replayed world stays until "Back to now"
      if (prev && prev !== next && next.step) noteChanges(prev, next);
    }
    const t0 = performance.now();
    worldIndex = indexWorld(next);
    indexPointers(next);
    focus = nextFocus || [];
    const all = next.workers || [];
    colours = laneColours(all.map((l) => l.id));
    laneById = new Map(all.map((l) => [l.id, l]));
    const laneOrder = new Map(all.map((l, i) => [l.id, i]));
    let shown = all.filter((l) => (!focus.length || focus.includes(l.id)) && laneMatches(query, l.id));
    const others = shown.filter((l) => l.id !== "me");
    const many = !focus.length && others.length > OVERVIEW_AT;
    overviewOn = many && !showAll;
    if (overviewOn) shown = shown.filter((l) => l.id === "me" || opened.has(l.id));
    renderOverview(many ? others : []);
    const pins = pinnedTargets(all, query);
    const keep = new Set(shown.map((l) => l.id));
    for (const [id, L] of lanes) {
      if (!keep.has(id)) { L.section.remove(); lanes.delete(id); }
    }
    let prevEl = arrows;
    for (const lane of shown) {
      const L = laneFor(lane);
      const isCollapsed = collapsed.has(lane.id);
      const ghostList = ghosts.get(lane.id);
      const prevLane = L.lane;
      const provides = (providers.get(lane.id) || []).join(", ");
      const pinned = pins.get(lane.id);
      const pinSig = pinned ? [...pinned].join(",") : "";
      if (prevLane !== lane || L.ghosts !== ghostList || L.collapsed !== isCollapsed || L.q !== query || L.provides !== provides
        || L.pinSig !== pinSig) {
        let nShown = L.shown;
        if (!prevLane || prevLane.objects !== lane.objects || L.ghosts !== ghostList || L.q !== query || L.pinSig !== pinSig) {
          L.items = query.tidy ? laneItems(lane, query, laneOrder, pinned, namedTargets)
            : withGhosts(laneItems(lane, query, laneOrder, pinned), ghostList);
          L.pinSig = pinSig;
          L.index = new Map();
          nShown = 0;
          L.items.forEach((o, i) => {
            if (o.header === undefined && !o.ghost) { L.index.set(o.id, i); nShown++; }
          });
          L.list.style.height = `${L.items.length * rowH}px`;
          L.q = query;
        }
        const closable = overviewOn && lane.id !== "me";
        if (!L.head || !prevLane || headerChanged(prevLane, lane) || L.collapsed !== isCollapsed || L.shown !== nShown
          || (prevLane.objects || []).length !== (lane.objects || []).length || L.closable !== closable || L.provides !== provides
          || L.ledgerOpen !== ledgerOpen.has(lane.id)) {
          const head = laneHead(lane, nShown, isCollapsed, closable, provides, ledgerOpen.has(lane.id));
          L.ledgerOpen = ledgerOpen.has(lane.id);
          L.closable = closable;
          L.provides = provides;
          if (L.head) L.head.replaceWith(head);
          else L.section.prepend(head);
          L.head = head;
          L.shown = nShown;
        }
        const cls = `syft-lane${isDown(lane) ? " syft-lane-down" : ""}${isCollapsed ? " syft-lane-collapsed" : ""}`;
        if (L.section.className !== cls) L.section.className = cls;
        const style = colourStyle(colours.get(lane.id));
        if (L.style !== style) { L.section.setAttribute("style", style); L.style = style; }
        L.body.hidden = isCollapsed;
        L.lane = lane;
        L.ghosts = ghostList;
        L.collapsed = isCollapsed;
      }
      if (prevEl.nextSibling !== L.section) prevEl.after(L.section);
      prevEl = L.section;
    }
    world = next;
    if (explained) showExplain(explained, true);
    refreshWorkerSelect(latest || next);
    syncRows();
    schedule();
    timings.update = performance.now() - t0;
  }

  function withGhosts(items, ghostList) {
    if (!ghostList || !ghostList.length) return items;
    const out = items.slice();
    for (const g of [...ghostList].sort((a, b) => a.at - b.at)) out.splice(Math.min(g.at, out.length), 0, g);
    return out;
  }

  function refreshWorkerSelect(w) {
    const ids = (w.workers || []).map((l) => l.id);
    const have = [...workerSel.options].slice(1).map((o) => o.value);
    if (ids.join("\n") === have.join("\n")) return;
    const cur = workerSel.value;
    workerSel.replaceChildren(h("option", { value: "" }, "every worker"), ...ids.map((id) => h("option", { value: id }, id)));
    pickOption(workerSel, ids.includes(cur) ? cur : "");
  }

  function headerChanged(a, b) {
    return a.id !== b.id || a.kind !== b.kind || a.state !== b.state || a.error !== b.error || a.gone !== b.gone
      || nodeOf(a) !== nodeOf(b) || (a.ledger !== b.ledger && JSON.stringify(a.ledger) !== JSON.stringify(b.ledger));
  }

  /** Explain reconstructing the shared value of row `key` (its entry's `explain`): a panel above
   * the lanes, its shares lit. "" closes it. `refresh`: the world changed, keep it current. */
  function showExplain(key, refresh = false) {
    if (!key) {
      explained = "";
      explainBox.hidden = true;
      explainBox.replaceChildren();
      if (!refresh) { pinned = ""; unlight(); }
      return;
    }
    const [laneId, id] = splitKey(key);
    const entry = (world?.workers || []).find((l) => l.id === laneId)?.objects?.find((o) => String(o.id) === String(id));
    if (!entry?.explain) { if (!refresh) showExplain(""); return; }
    if (refresh && explainBox.dataset.sig === JSON.stringify(entry.explain)) return;
    explained = key;
    explainBox.dataset.sig = JSON.stringify(entry.explain);
    explainBox.replaceChildren(explainPanel(entry.explain, () => showExplain("")));
    explainBox.hidden = false;
    if (!refresh) { pinned = ""; light(key); pinned = key; }
  }

  /** The overview of many workers (`lanes`; none: hidden), grouped by kind, node or state; the
   * search narrows it to the workers it matches (by name, node, state) or that hold matches. */
  function renderOverview(list) {
    overview.hidden = !list.length;
    if (!list.length) { ovBody.replaceChildren(); ovBody.__html = ""; return; }
    ovAll.textContent = showAll ? "overview" : "all lanes";
    ovAll.title = showAll ? "fold the lanes into this overview" : `show all ${list.length} lanes`;
    groupSel.hidden = showAll;
    if (showAll) {
      ovTitle.textContent = `${list.length} workers, every lane shown`;
      ovBody.replaceChildren();
      ovBody.__html = "";
      return;
    }
    const by = [...groupSel.options].find((o) => o.selected)?.value || groupSel.value || "kind";
    const objQuery = query.words.length || query.tags.length || query.kinds.length;
    const groups = new Map();
    let shownN = 0;
    // a search for a variable finds the worker holding what it points to, too
    const pointed = new Map(); // worker -> ids of objects that matching pointers point to
    if (objQuery) {
      for (const o of laneById.get("me")?.objects || []) {
        if (o.kind !== "pointer" || o.state === "gone" || !matches(query, "me", o)) continue;
        if (!pointed.has(o.location)) pointed.set(o.location, new Set());
        pointed.get(o.location).add(o.id_at_location);
      }
    }
    for (const lane of list) {
      const objs = lane.objects || [];
      let n = objs.length;
      if (objQuery) {
        n = 0;
        const via = pointed.get(lane.id);
        for (const o of objs) if (matches(query, lane.id, o) || via?.has(o.id)) n++;
        const meta = [lane.id, lane.kind, nodeOf(lane), lane.state].filter(Boolean).join(" ").toLowerCase();
        const metaHit = !query.tags.length && !query.kinds.length && query.words.every((w) => meta.includes(w));
        if (!n && !metaHit) continue;
      }
      shownN++;
      const key = overviewKey(lane, by);
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push({ lane, n });
    }
    const keys = [...groups.keys()].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
    const html = [];
    for (const key of keys) {
      const items = groups.get(key);
      html.push(`<div class="syft-ov-group" data-group="${esc(key)}"><div class="syft-ov-label">${esc(key)}`
        + ` <span class="syft-muted">${items.length}</span></div><div class="syft-ov-items">`);
      for (const { lane, n } of items) {
        const down = isDown(lane);
        const state = lane.gone ? "gone" : lane.state;
        const total = (lane.objects || []).length;
        const count = objQuery ? `${n} of ${total}` : String(total);
        const node = by !== "node" && nodeOf(lane) ? `<span class="syft-ov-node">@${esc(nodeOf(lane))}</span>` : "";
        const st = by !== "state" && state && !["in-process", "local", "connected", "alive"].includes(state)
          ? `<span class="syft-lane-state syft-state-${esc(state)}">${esc(state)}</span>` : "";
        const open = opened.has(lane.id);
        html.push(`<button type="button" class="syft-ov-worker${open ? " syft-ov-open" : ""}${down ? " syft-ov-down" : ""}"`
          + ` data-worker="${esc(lane.id)}" aria-pressed="${open}" style="${rowColour(lane.id)}"`
          + ` title="${esc(`${lane.id} (${lane.kind ?? "?"}${nodeOf(lane) ? ` on ${nodeOf(lane)}` : ""}${state ? `, ${state}` : ""}): `
            + `${count} objects; click to ${open ? "close" : "open"} its lane`)}">`
          + `<span class="syft-ov-name">${esc(lane.id)}</span> <span class="syft-ov-count">${esc(count)}</span>${st}${node}</button>`);
      }
      html.push("</div></div>");
    }
    if (!shownN) html.push('<div class="syft-muted">no worker matches the search</div>');
    const text = html.join("");
    if (ovBody.__html !== text) { ovBody.innerHTML = text; ovBody.__html = text; }
    const nOpen = list.filter((l) => opened.has(l.id)).length;
    ovTitle.textContent = `${list.length} workers${shownN !== list.length ? ` (${shownN} match)` : ""}: `
      + `click one to open its lane${nOpen ? ` (${nOpen} open)` : ""}`;
    if (lit.length) {
      const where = new Set(lit.map((k) => splitKey(k)[0]));
      for (const c of ovBody.querySelectorAll(".syft-ov-worker")) c.classList.toggle("syft-lit", where.has(c.dataset.worker));
    }
  }

  // --- change and history ---------------------------------------------------------------------

  function record(prev, next) {
    if (history.length && history[history.length - 1].world === next) return;
    if (!history.length) history.push({ rev: prev?.rev ?? next.rev, step: null, world: prev || next });
    if (prev && next.step && next.rev !== prev.rev) history.push({ rev: next.rev, step: next.step, world: next });
    else if (prev && next.rev !== prev.rev) history.push({ rev: next.rev, step: { by: "event", code: "", events: [] }, world: next });
    else if (!prev) history[0].world = next;
    while (history.length > HISTORY) history.splice(1, 1);
    renderTimeline();
  }

  function noteChanges(prev, next) {
    const now = Date.now();
    const before = indexWorld(prev);
    const after = indexWorld(next);
    for (const [key, { entry }] of after) {
      const old = before.get(key);
      if (entry.kind === "pointer" && entry.state === "gone" && old && old.entry.state !== "gone" && !entry.gone_how) {
        const e = (next.step?.events || []).find((x) => x.worker === entry.location && x.id === entry.id_at_location);
        if (e && (e.type === "moved" || e.type === "fetched" || e.type === "deleted")) goneSeen.set(key, { how: e.type, to: e.to });
      }
      if (!old) marks.set(key, { mark: "new", until: now + MARK_MS });
      else if (old.entry !== entry && JSON.stringify(old.entry) !== JSON.stringify(entry)) marks.set(key, { mark: "changed", until: now + MARK_MS });
    }
    for (const lane of prev.workers || []) {
      const objs = lane.objects || [];
      const at = new Map();
      const L = lanes.get(lane.id);
      objs.forEach((o, i) => at.set(o.id, L?.index.get(o.id) ?? i));
      for (const o of objs) {
        const key = objKey(lane.id, o.id);
        if (after.has(key)) continue;
        const list = (ghosts.get(lane.id) || []).slice();
        list.push({ ghost: true, key, entry: o, at: at.get(o.id) ?? 0, text: ghostText(next.step, lane.id, o), until: now + GHOST_MS });
        ghosts.set(lane.id, list);
      }
    }
    armTimer();
  }

  function armTimer() {
    if (timer) return;
    const next = Math.min(...[...marks.values()].map((m) => m.until), ...[...ghosts.values()].flat().map((g) => g.until));
    if (!Number.isFinite(next)) return;
    timer = setTimeout(() => { timer = 0; expire(); }, Math.max(50, next - Date.now()));
  }

  function expire() {
    const now = Date.now();
    for (const [k, m] of marks) {
      if (m.until <= now) {
        marks.delete(k);
        const [l, i] = splitKey(k);
        lanes.get(l)?.rows.get(i)?.el.classList.remove("syft-mark-new", "syft-mark-changed");
      }
    }
    let changed = false;
    for (const [id, list] of ghosts) {
      const left = list.filter((g) => g.until > now);
      if (left.length !== list.length) {
        changed = true;
        if (left.length) ghosts.set(id, left); else ghosts.delete(id);
      }
    }
    if (changed && world && replaying < 0) update(world, focus, true);
    armTimer();
  }

  function stepLabel(entry) {
    const st = entry.step;
    if (!st) return "when the view opened";
    const where = st.by === "action" ? "button" : st.cell !== null && st.cell !== undefined ? `[${st.cell}]` : "event";
    return `${where} ${stepSummary(st)}`;
  }

  function renderTimeline() {
    const n = history.length - 1;
    timelineSummary.textContent = `History · ${n} step${n === 1 ? "" : "s"}`;
    const items = history.map((entry, i) => {
      const st = entry.step;
      const where = !st ? "start" : st.by === "action" ? "button" : st.cell !== null && st.cell !== undefined ? `[${st.cell}]` : "event";
      const code = st?.code ? st.code.split("\n").slice(0, 2).join("; ") : "";
      const types = [...new Set((st?.events || []).map((e) => e.type))];
      return h("li", { class: `syft-step${i === replaying ? " syft-step-shown" : ""}`, "data-step": String(i),
        "data-types": types.join(",") },
      h("button", { class: "syft-step-btn", type: "button", title: "show the world as it was after this step",
        onclick: () => showStep(i === history.length - 1 ? -1 : i) },
      h("span", { class: "syft-step-where" }, where),
      h("span", { class: "syft-step-what" }, st ? stepSummary(st) : "the world when this view opened"),
      code ? h("code", { class: "syft-step-code" }, code) : null));
    });
    timelineList.replaceChildren(...items.reverse());
    const at = replaying >= 0 ? replaying : n;
    stepper.hidden = n < 1;
    stepPos.textContent = `step ${at} of ${n}`;
    prevBtn.disabled = at <= 0;
    nextBtn.disabled = at >= n;
  }

  /** One step back (-1) or on (+1) in the history, from the step shown (or now). */
  function stepBy(d) {
    const last = history.length - 1;
    if (last < 1) return;
    const at = replaying >= 0 ? replaying : last;
    showStep(Math.max(0, Math.min(last, at + d)));
  }

  /** Show the world as it was after history step i (-1: now). */
  function showStep(i) {
    replaying = i >= 0 && i < history.length - 1 ? i : -1;
    frame.classList.toggle("syft-replaying", replaying >= 0);
    replay.hidden = replaying < 0;
    if (replaying >= 0) replayText.textContent = `Showing the world as it was after ${stepLabel(history[i])}${history[i].step?.code ? `: ${history[i].step.code.split("\n")[0]}` : ""} (buttons are off). `;
    for (const L of lanes.values()) L.lane = null;
    update(replaying >= 0 ? history[i].world : latest, focus, true);
    renderTimeline();
  }

  // --- rows -------------------------------------------------------------------------------------

  const targetOf = (o) => (o.kind === "pointer" ? worldIndex.get(objKey(o.location, o.id_at_location))?.entry : undefined);

  // a pointer row shows its target's shape: it is redrawn when that shape changes
  function stale(R, o, target, extra) {
    if (!R || R.entry !== o || R.extra !== extra) return true;
    return o.kind === "pointer" && R.target !== target && shapeText(R.target || {}) !== shapeText(target || {});
  }

  /** The band of rows to materialise in a lane: [first, last) item indices: what its own
   * scroll shows, within what the outer scroller shows. */
  function band(L) {
    const n = L.items.length;
    if (L.collapsed || !n) return [0, 0];
    const viewH = el.clientHeight || DEFAULT_VIEW_H;
    const scrolled = el.scrollTop || 0;
    const secTop = L.section.offsetTop || 0;
    const secH = L.section.offsetHeight;
    // a lane out of the scroller's view: nothing to make (it is made when a scroll shows it)
    if (secH && (secTop > scrolled + viewH || secTop + secH < scrolled)) return [0, 0];
    const bodyH = L.body.clientHeight || Infinity; // no layout (tests): the lane is as tall as its rows
    const listTop = secTop + (L.body.offsetTop || 0);
    const inner = L.body.scrollTop || 0;
    const top = Math.max(inner, (el.scrollTop || 0) - listTop + inner);
    const bottom = Math.min(inner + bodyH, (el.scrollTop || 0) + viewH - listTop + inner);
    if (bottom <= top) return [0, 0];
    const first = Math.max(0, Math.floor(top / rowH) - OVERSCAN);
    const last = Math.min(n, Math.ceil(bottom / rowH) + OVERSCAN);
    return [first, Math.max(first, last)];
  }

  const rowColour = (id) => colourStyle(colours.get(id));

  const danglingRow = (o) => o.kind === "pointer" && o.state !== "gone"
    && (laneById.has(o.location) ? isDown(laneById.get(o.location)) : !!o.dangling);

  function rowOpts(laneId, o) {
    const key = objKey(laneId, o.id);
    const m = replaying < 0 ? marks.get(key) : undefined;
    return { pointedBy: pointedBy.get(key), colour: rowColour, mark: m?.mark, dangling: danglingRow(o),
      pending: pending.has(key) || !!disabled || replaying >= 0, gone: goneSeen.get(key),
      shareOf: o.group !== undefined && o.group !== null && !o.crypto ? o.secret ?? secretName.get(o.group) : undefined };
  }

  /** What a row shows besides its entry: redrawn when it changes. */
  function rowExtra(laneId, o) {
    // not the highlight: it is a class that comes and goes on the row itself (redrawing the row
    // when it ends would close a menu the user is in)
    const opts = rowOpts(laneId, o);
    return `${(opts.pointedBy || []).join(",")}|${opts.dangling ? 1 : 0}|${opts.pending ? 1 : 0}|${opts.gone ? goneWhere({}, opts.gone) : ""}|${opts.shareOf ?? ""}`
      + `|${o.kind === "pointer" ? rowColour(o.location) : ""}`;
  }

  function itemHTML(L, item) {
    if (item.header !== undefined) {
      return `<li class="syft-group" style="${item.header ? rowColour(item.header) : ""}">`
        + `${item.header ? '<span class="syft-worker-chip">' + esc(item.header) + "</span> " : ""}${esc(item.label)}`
        + ` <span class="syft-muted">${item.count}</span></li>`;
    }
    return `<li class="syft-ghost" data-ghost="${esc(item.key)}" title="${esc(item.text)}"><span class="syft-ghost-what">`
      + `${esc((item.entry.names || [])[0] || item.entry.kind)} ${shortId(item.entry.id)}</span>`
      + ` <span class="syft-ghost-text">${esc(item.text)}</span></li>`;
  }

  /** Materialise the visible rows of every lane (reusing the rows that did not change). */
  function syncRows() {
    const t0 = performance.now();
    const jobs = [];
    for (const L of lanes.values()) {
      const items = L.items;
      const [first, last] = band(L);
      const want = new Set();
      const fresh = [];
      for (let i = first; i < last; i++) {
        const o = items[i];
        const id = o.header !== undefined ? `g:${o.header}` : o.ghost ? `x:${o.key}` : o.id;
        want.add(id);
        const target = o.kind === "pointer" ? targetOf(o) : undefined;
        const extra = o.header !== undefined || o.ghost ? "" : rowExtra(L.lane.id, o);
        const R = L.rows.get(id);
        if (o.header !== undefined || o.ghost ? !R || R.entry !== o : stale(R, o, target, extra)) fresh.push({ o, id, target, i, extra });
        else {
          R.target = target;
          if (R.i !== i) { R.i = i; R.el.style.top = `${i * rowH}px`; }
        }
      }
      for (const [id, R] of L.rows) {
        if (!want.has(id)) {
          R.el.remove();
          L.rows.delete(id);
        }
      }
      if (fresh.length) jobs.push({ L, fresh });
    }
    const html = [];
    for (const { L, fresh } of jobs) {
      for (const f of fresh) {
        html.push(f.o.header !== undefined || f.o.ghost ? itemHTML(L, f.o) : objectRowHTML(L.lane.id, f.o, f.target, rowOpts(L.lane.id, f.o)));
      }
    }
    const made = rowsFrom(html);
    let k = 0;
    for (const { L, fresh } of jobs) {
      const frag = document.createDocumentFragment();
      for (const f of fresh) {
        const row = made[k++];
        row.style.top = `${f.i * rowH}px`;
        const old = L.rows.get(f.id);
        if (old) old.el.remove();
        L.rows.set(f.id, { entry: f.o, el: row, target: f.target, i: f.i, extra: f.extra });
        if (litSet.size && litSet.has(objKey(L.lane.id, f.id))) row.classList.add("syft-lit");
        frag.append(row);
      }
      L.list.append(frag);
    }
    timings.rows = performance.now() - t0;
  }

  function schedule() {
    if (frameReq) return;
    const raf = globalThis.requestAnimationFrame || ((f) => setTimeout(f, 16));
    frameReq = raf(() => { frameReq = 0; syncRows(); drawArrows(); });
  }

  /** Lane geometry in the lanes' coordinates: sides, the grid row's top, where rows are. */
  function geometry() {
    const geo = new Map();
    // only the lanes an arrow in view starts or ends in are measured
    const wanted = new Set();
    for (const [laneId, L] of lanes) {
      for (const R of L.rows.values()) {
        if (R.entry.kind === "pointer" && R.entry.location !== undefined) { wanted.add(laneId); wanted.add(R.entry.location); }
      }
    }
    for (const [laneId, L] of lanes) {
      if (!wanted.has(laneId) || !L.section.offsetWidth) continue; // not laid out (hidden)
      const left = L.section.offsetLeft;
      const top = L.section.offsetTop;
      const headH = L.head?.offsetHeight || rowH;
      const bodyTop = top + (L.body.offsetTop || headH);
      const bodyH = L.collapsed ? 0 : L.body.clientHeight;
      geo.set(laneId, { left, right: left + L.section.offsetWidth, top, headY: top + headH / 2, bodyTop, bodyH,
        scroll: L.body.scrollTop || 0, index: L.index, collapsed: L.collapsed });
    }
    return geo;
  }

  /** Where a row's arrow starts or ends: its y, clamped to what its lane shows, and whether it
   * is scrolled out of its lane. */
  function rowY(g, id) {
    if (g.collapsed || !g.index.has(id)) return { y: g.headY, off: true };
    const y = g.bodyTop + rowH * g.index.get(id) + rowH / 2 - g.scroll;
    const lo = g.bodyTop + 4;
    const hi = g.bodyTop + g.bodyH - 4;
    return y < lo ? { y: lo, off: true } : y > hi ? { y: hi, off: true } : { y, off: false };
  }

  /** Arrows from the visible pointer rows to their targets, routed in gutters: out of the
   * pointer's lane to the gutter beside it, along the gutter to the channel above the
   * target's row of lanes, along the channel to the gutter beside the target, into its row. */
  function drawArrows() {
    if (!world || !lanesEl.isConnected) return;
    const t0 = performance.now();
    const geo = geometry();
    const w = lanesEl.scrollWidth;
    const hgt = lanesEl.scrollHeight;
    arrows.setAttribute("width", String(w));
    arrows.setAttribute("height", String(hgt));
    arrows.setAttribute("viewBox", `0 0 ${w} ${hgt}`);
    const viewTop = el.scrollTop || 0;
    const viewBottom = viewTop + (el.clientHeight || DEFAULT_VIEW_H);
    const parts = [];
    let total = 0;
    let k = 0;
    for (const [fl, L] of lanes) {
     const F = geo.get(fl);
     if (!F) continue;
     for (const [fid, R] of L.rows) {
      const o = R.entry;
      if (o.kind !== "pointer" || typeof fid !== "number") continue; // only the pointer rows in view
      const tl = o.location;
      const tid = o.id_at_location;
      const T = geo.get(tl);
      if (!T || !worldIndex.has(objKey(tl, tid)) || !T.index.has(tid)) continue; // no arrow to a row not shown
      total++;
      const a = { from: objKey(fl, fid), to: objKey(tl, tid), location: tl };
      const src = rowY(F, fid);
      if (src.off) continue;
      const dst = rowY(T, tid);
      if (Math.max(src.y, dst.y) < viewTop - 40 || Math.min(src.y, dst.y) > viewBottom + 40) continue;
      const entry = o;
      const off = ((k++ % 5) - 2) * 2.5; // arrows side by side in a gutter
      const leftward = T.left < F.left;
      const sameColumn = T.left === F.left;
      const x1 = leftward ? F.left : F.right;
      const x2 = leftward || sameColumn ? T.right : T.left;
      const g1 = leftward ? F.left - GAP / 2 : F.right + GAP / 2;
      const g2 = leftward || sameColumn ? T.right + GAP / 2 : T.left - GAP / 2;
      const d = Math.abs(g1 - g2) < 2
        ? `M ${x1} ${src.y} H ${g1 + off} V ${dst.y} H ${x2}` // one gutter: neighbours, or one column
        : `M ${x1} ${src.y} H ${g1 + off} V ${T.top - GAP / 2 + off / 2} H ${g2 + off} V ${dst.y} H ${x2}`;
      const cls = `syft-arrow${entry.owning === false ? " syft-arrow-weak" : ""}${dst.off ? " syft-arrow-off" : ""}`;
      parts.push(`<path class="${cls}" style="${colourStyle(colours.get(a.location))}" data-from="${esc(a.from)}" data-to="${esc(a.to)}"`
        + ` d="${d.replace(/-?\d+\.\d+/g, (m) => Number(m).toFixed(1))}" marker-end="url(#${markerId})"/>`);
     }
    }
    arrows.innerHTML = `<defs><marker id="${markerId}" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7"`
      + ` markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" class="syft-arrowhead"/></marker></defs>`
      + parts.join("");
    if (lit.length) {
      for (const p of arrows.querySelectorAll("path.syft-arrow")) {
        if (lit.includes(p.dataset.from) && lit.includes(p.dataset.to)) p.classList.add("syft-lit");
      }
    }
    Object.assign(timings, { arrows: performance.now() - t0, drawn: parts.length, total });
  }

  function splitKey(key) {
    const at = key.lastIndexOf(":");
    return [key.slice(0, at), Number(key.slice(at + 1))];
  }

  /** The view's kernel is gone (or back, with ""): say so, and turn every button off. */
  function setDisabled(reason) {
    disabled = reason || "";
    frame.classList.toggle("syft-disabled", !!disabled);
    deadBanner.hidden = !disabled;
    deadBanner.textContent = disabled;
    for (const b of lanesEl.querySelectorAll("button[data-action]")) b.disabled = !!disabled;
    for (const L of lanes.values()) L.lane = null;
    if (world) update(world, focus, true);
  }

  // the scroller resized, or the lanes' grid did (a lane grew or shrank): rows and arrows again
  const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => schedule()) : null;
  ro?.observe(el);
  ro?.observe(lanesEl);
  // a notebook skips the layout of cells out of view: draw again when it shows
  const io = typeof IntersectionObserver !== "undefined"
    ? new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) schedule(); })
    : null;
  io?.observe(lanesEl);

  return {
    el,
    frame,
    update: (w, f) => update(w, f),
    timings,
    history,
    showStep,
    setDisabled,
    filter(text = "", kind = "", worker = "") {
      search.value = text;
      pickOption(kindSel, kind);
      pickOption(workerSel, worker);
      onFilter(null, parseQuery(text, kind, worker));
    },
    collapse(id, on = true) {
      if (on) collapsed.add(id); else collapsed.delete(id);
      const L = lanes.get(id);
      if (L) L.lane = null;
      if (world) update(world, focus, true);
    },
    redrawArrows: drawArrows,
    layoutChanged: schedule,
    rowFor: (laneId, id) => lanes.get(laneId)?.rows.get(id)?.el ?? null,
    /** Open (or close) a worker's lane from the overview of many workers. */
    openLane,
    get overviewShown() { return overviewOn; },
    destroy() { ro?.disconnect(); io?.disconnect(); clearTimeout(timer); lanes.clear(); },
  };
}
