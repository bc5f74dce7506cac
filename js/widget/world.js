// The world view: one lane per worker, its objects, and an arrow from each pointer to its
// target. update(world) changes only the rows whose entries changed (patch.js keeps the
// identity of the others), so a live update costs a few DOM nodes, not the whole view.
//
// Rows are built as HTML text in batches and their buttons' clicks are delegated to the
// view: a world of thousands of objects renders in a few frames.

import { actionBarHTML, toggleMenu } from "./actions.js";
import { esc, h, hueClass, objKey, s, shapeText, shortId } from "./dom.js";
import { indexWorld, worldArrows } from "./patch.js";

function laneHead(lane) {
  const n = (lane.objects || []).length;
  return h("header", { class: "syft-lane-head" },
    h("span", { class: "syft-lane-name" }, lane.id),
    h("span", { class: "syft-lane-kind" }, lane.kind ?? ""),
    lane.state && lane.state !== "in-process" && lane.state !== "local"
      ? h("span", { class: `syft-lane-state syft-state-${lane.state}` }, lane.state) : null,
    h("span", { class: "syft-lane-count" }, `${n} object${n === 1 ? "" : "s"}`),
    lane.error ? h("div", { class: "syft-error-text" }, lane.error) : null);
}

const DEFAULT_TYPE = { tensor: "Tensor", pointer: "PointerTensor", logging: "LoggingTensor", plan: "Plan" };

/** The HTML of one row: kind, names, id, shape, target, tags, then the buttons. The type is
 * shown only where the kind does not say it (a Parameter, a PlanPointer); the full text is
 * the row's tooltip, as a narrow lane cuts it. `target` is a pointer's target entry. */
export function objectRowHTML(laneId, o, target) {
  const shape = shapeText(o) || (target ? shapeText(target) : "");
  const names = o.names || [];
  const kind = esc(o.kind);
  const type = o.type && o.type !== DEFAULT_TYPE[o.kind] ? o.type : "";
  let main = `<span class="syft-kind syft-kind-${kind}">${kind}</span>`;
  if (names.length) main += `<span class="syft-names" title="notebook variables">${esc(names.join(", "))}</span>`;
  if (type) main += `<span class="syft-type">${esc(type)}</span>`;
  main += `<span class="syft-id" title="id ${esc(o.id)}">${shortId(o.id)}</span>`;
  if (shape) main += `<span class="syft-shape">${esc(shape)}</span>`;
  if (o.kind === "plan" && o.name) main += `<span class="syft-shape">${esc(o.name)}</span>`;
  if (o.kind === "pointer") {
    main += `<span class="syft-where ${hueClass(o.location)}">→ <span class="syft-worker-chip">${esc(o.location)}</span>`
      + `<span class="syft-id" title="id ${esc(o.id_at_location)}">:${shortId(o.id_at_location)}</span>`
      + `${o.owning === false ? '<span class="syft-muted" title="does not own its target: dropping it deletes nothing"> weak</span>' : ""}</span>`;
  }
  if (o.held) main += '<span class="syft-held" title="held by the worker itself (worker.load): no pointer owns it">held</span>';
  const ds = o.dataset;
  if (ds) main += datasetHTML(ds);
  const shownTags = ds ? (o.tags || []).filter((t) => !datasetTags(ds).includes(t)) : o.tags || [];
  for (const t of shownTags) main += `<span class="syft-tag">${esc(t)}</span>`;
  if (o.refcount > 1) main += `<span class="syft-muted" title="owning pointers">×${o.refcount}</span>`;
  const tip = [names.length ? names.join(", ") + " =" : "", o.type ?? o.kind, shortId(o.id), shape,
    o.kind === "pointer" ? `→ ${o.location}:${shortId(o.id_at_location)}` : "", ...(o.tags || []),
    o.description ? `— ${o.description}` : ""].filter(Boolean).join(" ");
  return `<li class="syft-obj syft-obj-${kind}${ds ? " syft-obj-dataset" : ""}" data-key="${esc(objKey(laneId, o.id))}" data-kind="${kind}"`
    + ` data-names="${esc(names.join(","))}"><span class="syft-obj-main" title="${esc(tip)}">${main}</span>`
    + `${actionBarHTML(laneId, o, names[0])}</li>`;
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

/** Row height in px: style.css gives .syft-obj exactly this height (border included). */
export const ROW_H = 26;
const OVERSCAN = 12; // rows materialised above and below the visible band
const DEFAULT_VIEW_H = 520; // the scroller's max-height, when it has no layout yet

/**
 * A world view. ctx: {workers(), run(action, target, extra)}.
 * Returns {el, update(world, focus), rowFor(lane, id), layoutChanged(), destroy()}.
 *
 * Lanes are virtual lists: a lane of n objects is n * ROW_H px tall, and only the rows in the
 * scroller's visible band (plus a margin) exist in the DOM. Arrows are computed from row
 * indices, and drawn for the visible band only.
 */
export function createWorldView(ctx) {
  const arrows = s("svg", { class: "syft-arrows", "aria-hidden": "true" });
  const lanesEl = h("div", { class: "syft-lanes" }, arrows);
  const el = h("div", { class: "syft-world-scroll" }, lanesEl);
  const lanes = new Map(); // id -> {section, head, list, lane, index: Map(id -> i), rows: Map(id -> {entry, el, target, i})}
  let world = null;
  let worldIndex = new Map();
  let focus = [];
  let frame = 0;
  const markerId = `syft-arrowhead-${Math.random().toString(36).slice(2, 9)}`;
  const menuCtx = { ...ctx, layoutChanged: () => schedule() };
  const timings = {};

  // one listener for every row's buttons
  lanesEl.addEventListener("click", (ev) => {
    const btn = ev.target.closest?.("button[data-action]");
    if (!btn || btn.classList.contains("syft-menu-item")) return;
    const row = btn.closest(".syft-obj");
    const key = row?.dataset.key;
    if (!key) return;
    const [laneId, id] = splitKey(key);
    const R = lanes.get(laneId)?.rows.get(id);
    if (!R) return;
    ev.stopPropagation();
    const target = { worker: laneId, id: R.entry.id };
    const action = btn.dataset.action;
    if (btn.hasAttribute("aria-haspopup")) {
      toggleMenu(btn.closest(".syft-actions"), btn, action, target, menuCtx, laneId, R.entry);
    } else {
      ctx.run(action, target, {});
    }
  });
  el.addEventListener("scroll", () => schedule(), { passive: true });

  function laneFor(lane) {
    let L = lanes.get(lane.id);
    if (!L) {
      const list = h("ol", { class: "syft-objects" });
      const section = h("section", {
        class: `syft-lane ${hueClass(lane.id)}`, "data-worker": lane.id, "aria-label": `worker ${lane.id}`,
      }, list);
      L = { section, head: null, list, lane: null, index: new Map(), rows: new Map() };
      lanes.set(lane.id, L);
    }
    return L;
  }

  function update(next, nextFocus = focus) {
    worldIndex = indexWorld(next);
    focus = nextFocus || [];
    const shown = (next.workers || []).filter((l) => !focus.length || focus.includes(l.id));
    const keep = new Set(shown.map((l) => l.id));
    for (const [id, L] of lanes) {
      if (!keep.has(id)) { L.section.remove(); lanes.delete(id); }
    }
    let prev = arrows;
    for (const lane of shown) {
      const L = laneFor(lane);
      if (L.lane !== lane) {
        if (!L.lane || L.lane.objects !== lane.objects || headerChanged(L.lane, lane)) {
          const head = laneHead(lane);
          if (L.head) L.head.replaceWith(head);
          else L.section.prepend(head);
          L.head = head;
        }
        if (!L.lane || L.lane.objects !== lane.objects) {
          L.index = new Map();
          (lane.objects || []).forEach((o, i) => L.index.set(o.id, i));
          L.list.style.height = `${(lane.objects || []).length * ROW_H}px`;
        }
        L.lane = lane;
      }
      if (prev.nextSibling !== L.section) prev.after(L.section);
      prev = L.section;
    }
    world = next;
    paint();
  }

  function headerChanged(a, b) {
    return a.id !== b.id || a.kind !== b.kind || a.state !== b.state || a.error !== b.error;
  }

  const targetOf = (o) => (o.kind === "pointer" ? worldIndex.get(objKey(o.location, o.id_at_location))?.entry : undefined);

  // a pointer row shows its target's shape: it is redrawn when that shape changes
  function stale(R, o, target) {
    if (!R || R.entry !== o) return true;
    return o.kind === "pointer" && R.target !== target && shapeText(R.target || {}) !== shapeText(target || {});
  }

  /** The band of rows to materialise in each lane: [first, last) row indices. */
  function band(L) {
    const viewH = el.clientHeight || DEFAULT_VIEW_H;
    const top = (el.scrollTop || 0) - (L.list.offsetTop || 0);
    const n = L.lane?.objects?.length || 0;
    const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const last = Math.min(n, Math.ceil((top + viewH) / ROW_H) + OVERSCAN);
    return [first, Math.max(first, last)];
  }

  /** Materialise the visible rows of every lane (reusing the rows that did not change). */
  function syncRows() {
    const t0 = performance.now();
    const jobs = [];
    for (const L of lanes.values()) {
      const objs = L.lane?.objects || [];
      const [first, last] = band(L);
      const want = new Set();
      const fresh = [];
      for (let i = first; i < last; i++) {
        const o = objs[i];
        want.add(o.id);
        const target = o.kind === "pointer" ? targetOf(o) : undefined;
        const R = L.rows.get(o.id);
        if (stale(R, o, target)) fresh.push({ o, target, i });
        else {
          R.target = target;
          if (R.i !== i) { R.i = i; R.el.style.top = `${i * ROW_H}px`; }
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
    for (const { L, fresh } of jobs) for (const f of fresh) html.push(objectRowHTML(L.lane.id, f.o, f.target));
    const made = rowsFrom(html);
    let k = 0;
    for (const { L, fresh } of jobs) {
      const frag = document.createDocumentFragment();
      for (const f of fresh) {
        const row = made[k++];
        row.style.top = `${f.i * ROW_H}px`;
        const old = L.rows.get(f.o.id);
        if (old) old.el.remove();
        L.rows.set(f.o.id, { entry: f.o, el: row, target: f.target, i: f.i });
        frag.append(row);
      }
      L.list.append(frag);
    }
    timings.rows = performance.now() - t0;
  }

  function paint() {
    syncRows();
    schedule();
  }

  function schedule() {
    if (frame) return;
    const raf = globalThis.requestAnimationFrame || ((f) => setTimeout(f, 16));
    frame = raf(() => { frame = 0; syncRows(); drawArrows(); });
  }

  /** Arrows from pointer rows to their targets, for the scroller's visible band only. */
  function drawArrows() {
    if (!world || !lanesEl.isConnected) return;
    const t0 = performance.now();
    const viewTop = el.scrollTop || 0;
    const viewH = el.clientHeight || DEFAULT_VIEW_H;
    const geo = new Map();
    for (const [laneId, L] of lanes) {
      if (!L.list.offsetWidth) continue; // not laid out (hidden)
      const left = L.section.offsetLeft;
      geo.set(laneId, { left, right: left + L.section.offsetWidth, top: L.list.offsetTop, index: L.index });
    }
    const w = lanesEl.scrollWidth;
    arrows.style.top = `${viewTop}px`;
    arrows.setAttribute("width", String(w));
    arrows.setAttribute("height", String(viewH));
    arrows.setAttribute("viewBox", `0 0 ${w} ${viewH}`);
    const parts = [];
    let total = 0;
    for (const a of worldArrows(world)) {
      const [fl, fid] = splitKey(a.from);
      const [tl, tid] = splitKey(a.to);
      const F = geo.get(fl);
      const T = geo.get(tl);
      if (!F || !T || !F.index.has(fid) || !T.index.has(tid)) continue;
      total++;
      const y1 = F.top + ROW_H * F.index.get(fid) + ROW_H / 2 - viewTop;
      const y2 = T.top + ROW_H * T.index.get(tid) + ROW_H / 2 - viewTop;
      if ((y1 < 0 && y2 < 0) || (y1 > viewH && y2 > viewH)) continue; // outside the band
      const rightward = T.left >= F.right - 1;
      const x1 = rightward ? F.right : F.left;
      const x2 = rightward ? T.left : T.right;
      const dx = Math.max(16, Math.abs(x2 - x1) / 2) * (rightward ? 1 : -1);
      parts.push(`<path class="syft-arrow ${hueClass(a.location)}" data-from="${esc(a.from)}" data-to="${esc(a.to)}"`
        + ` d="M ${x1.toFixed(1)} ${y1.toFixed(1)} C ${(x1 + dx).toFixed(1)} ${y1.toFixed(1)}, ${(x2 - dx).toFixed(1)}`
        + ` ${y2.toFixed(1)}, ${x2.toFixed(1)} ${y2.toFixed(1)}" marker-end="url(#${markerId})"/>`);
    }
    arrows.innerHTML = `<defs><marker id="${markerId}" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7"`
      + ` markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" class="syft-arrowhead"/></marker></defs>`
      + parts.join("");
    Object.assign(timings, { arrows: performance.now() - t0, drawn: parts.length, total });
  }

  function splitKey(key) {
    const at = key.indexOf(":");
    return [key.slice(0, at), Number(key.slice(at + 1))];
  }

  const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => schedule()) : null;
  ro?.observe(el);
  // a notebook skips the layout of cells out of view: draw again when it shows
  const io = typeof IntersectionObserver !== "undefined"
    ? new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) schedule(); })
    : null;
  io?.observe(lanesEl);

  return {
    el,
    update,
    timings,
    redrawArrows: drawArrows,
    layoutChanged: schedule,
    rowFor: (laneId, id) => lanes.get(laneId)?.rows.get(id)?.el ?? null,
    destroy() { ro?.disconnect(); io?.disconnect(); lanes.clear(); },
  };
}
