// One object's row and one lane's header, as the world view draws them: the row is HTML text
// (a world of thousands of objects is parsed in one go, rowsFrom), the header an element.
// Marks for shares of a secret (a hue per share group), parts of a federated dataset, gone and
// dangling pointers. Nothing here keeps state but the share groups' order (setGroupOrder).

import { actionBarHTML } from "../actions.js";
import { LOCAL, esc, h, isEdge, nameHTML, objKey, shapeText, shortId } from "../dom.js";
import { ledgerButton, ledgerPanel } from "../ledger.js";

const DOWN = new Set(["unreachable", "closed", "gone", "error", "stopped", "dead"]);
export const isDown = (lane) => !!lane && (lane.gone === true || DOWN.has(lane.state));

/** The machine (Ray node, host) a worker runs on, when the snapshot says. */
export const nodeOf = (lane) => lane.node ?? lane.host ?? "";

/** The lane id and object id of a row key ("bob:12" -> ["bob", 12]; objKey's inverse). */
export function splitKey(key) {
  const at = key.lastIndexOf(":");
  return [key.slice(0, at), Number(key.slice(at + 1))];
}

/** A lane's header: toggle, name, kind, node, state, role, count, record button, notes. */
export function laneHead(lane, shown, collapsed, closable, provides, ledgerOpen = false) {
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


// a closed worker refuses every request but releases, and keeps what its lane lists until then
// (tests/contract/test_lifecycle.py)
export const CLOSED_TEXT = "closed: it refuses every request and still takes releases; it keeps the objects "
  + "its lane lists until their pointers release them";

const STATE_TEXT = {
  connected: "a worker process, connected",
  alive: "a Ray actor, alive",
  restarting: "restarting (Ray restarts the actor): it comes back empty",
  dead: "dead: its pointers dangle",
  disconnected: "the connection dropped: the next call reconnects",
  unreachable: "cannot be reached: its pointers dangle until it is back",
  closed: CLOSED_TEXT,
  gone: CLOSED_TEXT,
  unknown: "not known: the kernel that followed this worker is gone",
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
  // a name too long for the row is cut in the middle (its end tells it apart); the whole of it
  // is the title of its label and of the row
  const at = opts.distinct?.get(rowLabel(o, opts.shareOf)) ?? 0;
  const label = (cls, title, text) => `<span class="syft-names${cls}" title="${esc(`${text}: ${title}`)}">${nameHTML(text, at)}</span>`;
  if (names.length) main += label("", "notebook variables", names.join(", "));
  else if (held.length) main += label(" syft-held-in", "held in a notebook container", held.join(", "));
  else if (opts.shareOf) main += label(" syft-held-in", `one share of the secret ${opts.shareOf}`, `share of ${opts.shareOf}`);
  else if (o.state_of) main += label(" syft-held-in", `a copy of the state (parameters) plan ${o.state_of} runs on, sent with it; it goes with the plan`, `state of ${o.state_of}`);
  else if (o.description) main += label(" syft-held-in", "its description", o.description);
  else if (isEdge(o) && laneId === LOCAL) main += '<span class="syft-muted" title="no notebook variable or container names it">unnamed</span>';
  if (o.group !== undefined && o.group !== null) main += shareHTML(o); // before the rest: a narrow row keeps it
  if (o.distributed?.length && !isEdge(o)) {
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
  if (isEdge(o)) {
    const style = opts.colour ? ` style="${opts.colour(o.location)}"` : "";
    const long = o.location.length > 8 ? ` syft-chip-long" title="${esc(o.location)}` : "";
    side += `<span class="syft-where"${style}>→ <span class="syft-worker-chip${long}">${esc(o.location)}</span>`
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
    side += `<span class="syft-pointed" title="pointed at by ${esc(by.join(", "))}">← `
      + `${nameHTML(pointedLabel(by), opts.distinct?.get(pointedLabel(by)) ?? 0)}${by.length > 2 ? ` +${by.length - 2}` : ""}</span>`;
  }
  const tip = [names.length ? names.join(", ") + " =" : held.length ? held.join(", ") + " =" : "", o.type ?? o.kind,
    shortId(o.id), shape, isEdge(o) ? `→ ${o.location}:${shortId(o.id_at_location)}` : "",
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

/** The text of a row's name label (what objectRowHTML shows first), or "" for none. */
export function rowLabel(o, shareOf) {
  if (o.names?.length) return o.names.join(", ");
  if (o.held_in?.length) return o.held_in.join(", ");
  if (shareOf) return `share of ${shareOf}`;
  if (o.state_of) return `state of ${o.state_of}`;
  return o.description || "";
}

/** The text of a target row's "← names" label. */
export const pointedLabel = (by) => (by || []).slice(0, 2).join(", ");

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
  const label = isEdge(o) || o.kind === "tensor" || sh ? `share${sh ? ` ${sh.index + 1}/${sh.of}` : ""}` : "secret";
  const tip = isEdge(o) || o.kind === "tensor" || sh
    ? `one share of secret ${o.group}: alone it reveals nothing about the secret (its value is never shown); hover to light up its siblings`
    : `a secret shared as group ${o.group}: hover to light up its shares`;
  return `<span class="syft-share" style="--syft-group-hue:${groupHue(o.group)}"`
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
export function rowsFrom(htmls) {
  if (!htmls.length) return [];
  const tpl = document.createElement("template");
  tpl.innerHTML = htmls.join("");
  return Array.from(tpl.content.children);
}
