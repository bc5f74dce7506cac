// The world view: one lane per worker, its objects, and an arrow from each pointer to its
// target. update(world) changes only the rows whose entries changed (patch.js keeps the
// identity of the others), so a live update costs a few DOM nodes, not the whole view.

import { actionBar } from "./actions.js";
import { h, objKey, s, shapeText, shortId, workerStyle } from "./dom.js";
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

/** One row of a lane. `target` is the pointed-to entry for pointers (for its shape). */
export function objectRow(laneId, o, ctx, target) {
  const shape = shapeText(o) || (target ? shapeText(target) : "");
  const names = o.names || [];
  const row = h("li", {
    class: `syft-obj syft-obj-${o.kind}`, "data-key": objKey(laneId, o.id), "data-kind": o.kind,
    "data-names": names.join(","),
  },
  h("span", { class: `syft-kind syft-kind-${o.kind}` }, o.kind),
  h("span", { class: "syft-type" }, o.type ?? o.kind),
  h("span", { class: "syft-id", title: `id ${o.id}` }, shortId(o.id)),
  shape ? h("span", { class: "syft-shape" }, shape) : null,
  o.kind === "plan" && o.name ? h("span", { class: "syft-shape" }, o.name) : null,
  o.kind === "pointer"
    ? h("span", { class: "syft-where", style: workerStyle(o.location) }, "→ ",
      h("span", { class: "syft-worker-chip" }, o.location),
      h("span", { class: "syft-id", title: `id ${o.id_at_location}` }, `:${shortId(o.id_at_location)}`),
      o.owning === false ? h("span", { class: "syft-muted" }, " weak") : null)
    : null,
  ...(o.tags || []).map((t) => h("span", { class: "syft-tag" }, t)),
  names.length ? h("span", { class: "syft-names", title: "notebook variables" }, "= " + names.join(", ")) : null,
  o.refcount > 1 ? h("span", { class: "syft-muted", title: "owning pointers" }, ` ×${o.refcount}`) : null,
  actionBar(laneId, o, ctx, names[0]));
  if (o.description) row.title = o.description;
  return row;
}

/**
 * A world view bound to a container. ctx: {workers(), run(), layoutChanged?}.
 * Returns {el, update(world, focus), destroy()}.
 */
export function createWorldView(ctx) {
  const arrows = s("svg", { class: "syft-arrows", "aria-hidden": "true" });
  const lanesEl = h("div", { class: "syft-lanes" }, arrows);
  const el = h("div", { class: "syft-world-scroll" }, lanesEl);
  const lanes = new Map(); // id -> {section, head, list, lane, rows: Map(id -> {entry, el, target})}
  let world = null;
  let focus = [];
  let frame = 0;
  const markerId = `syft-arrowhead-${Math.random().toString(36).slice(2, 9)}`;

  function laneFor(lane) {
    let L = lanes.get(lane.id);
    if (!L) {
      const list = h("ol", { class: "syft-objects" });
      const section = h("section", {
        class: "syft-lane", "data-worker": lane.id, style: workerStyle(lane.id), "aria-label": `worker ${lane.id}`,
      }, list);
      L = { section, head: null, list, lane: null, rows: new Map() };
      lanes.set(lane.id, L);
    }
    return L;
  }

  function update(next, nextFocus = focus) {
    const index = indexWorld(next);
    const targetOf = (o) => (o.kind === "pointer" ? index.get(objKey(o.location, o.id_at_location))?.entry : undefined);
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
        if (!L.lane || L.lane.objects !== lane.objects) syncRows(L, lane, targetOf);
        else refreshPointerRows(L, lane, targetOf);
        L.lane = lane;
      } else {
        refreshPointerRows(L, lane, targetOf);
      }
      if (prev.nextSibling !== L.section) prev.after(L.section);
      prev = L.section;
    }
    world = next;
    scheduleArrows();
  }

  function headerChanged(a, b) {
    return a.id !== b.id || a.kind !== b.kind || a.state !== b.state || a.error !== b.error;
  }

  function syncRows(L, lane, targetOf) {
    const objs = lane.objects || [];
    const seen = new Set();
    let prevEl = null;
    for (const o of objs) {
      seen.add(o.id);
      const target = targetOf(o);
      let R = L.rows.get(o.id);
      if (!R || R.entry !== o || R.target !== target) {
        const row = objectRow(lane.id, o, ctx, target);
        if (R) R.el.replaceWith(row);
        R = { entry: o, el: row, target };
        L.rows.set(o.id, R);
      }
      const want = prevEl ? prevEl.nextSibling : L.list.firstChild;
      if (want !== R.el) L.list.insertBefore(R.el, want);
      prevEl = R.el;
    }
    for (const [id, R] of L.rows) {
      if (!seen.has(id)) { R.el.remove(); L.rows.delete(id); }
    }
  }

  // a pointer row shows its target's shape: redraw it if the target changed elsewhere
  function refreshPointerRows(L, lane, targetOf) {
    for (const o of lane.objects || []) {
      if (o.kind !== "pointer") continue;
      const R = L.rows.get(o.id);
      const target = targetOf(o);
      if (R && R.target !== target && shapeText(R.target || {}) !== shapeText(target || {})) {
        const row = objectRow(lane.id, o, ctx, target);
        R.el.replaceWith(row);
        L.rows.set(o.id, { entry: o, el: row, target });
      } else if (R) R.target = target;
    }
  }

  function scheduleArrows() {
    if (frame) return;
    const raf = globalThis.requestAnimationFrame || ((f) => setTimeout(f, 16));
    frame = raf(() => { frame = 0; drawArrows(); });
  }

  function drawArrows() {
    if (!world || !lanesEl.isConnected) return;
    const rowsByKey = new Map();
    for (const [laneId, L] of lanes) for (const [id, R] of L.rows) rowsByKey.set(objKey(laneId, id), R.el);
    const w = lanesEl.scrollWidth;
    const hgt = lanesEl.scrollHeight;
    arrows.setAttribute("width", String(w));
    arrows.setAttribute("height", String(hgt));
    arrows.setAttribute("viewBox", `0 0 ${w} ${hgt}`);
    const base = lanesEl.getBoundingClientRect();
    const paths = [];
    const rectOf = new Map();
    const box = (el) => {
      let r = rectOf.get(el);
      if (!r) { r = el.getBoundingClientRect(); rectOf.set(el, r); }
      return r;
    };
    for (const a of worldArrows(world)) {
      const from = rowsByKey.get(a.from);
      const to = rowsByKey.get(a.to);
      if (!from || !to) continue;
      const fr = box(from);
      const tr = box(to);
      if (!fr.width || !tr.width) continue; // not laid out (hidden)
      const y1 = fr.top - base.top + fr.height / 2;
      const y2 = tr.top - base.top + tr.height / 2;
      const rightward = tr.left >= fr.right - 1;
      const x1 = (rightward ? fr.right : fr.left) - base.left;
      const x2 = (rightward ? tr.left : tr.right) - base.left;
      const dx = Math.max(16, Math.abs(x2 - x1) / 2) * (rightward ? 1 : -1);
      paths.push(s("path", {
        class: "syft-arrow", "data-from": a.from, "data-to": a.to, style: workerStyle(a.location),
        d: `M ${x1.toFixed(1)} ${y1.toFixed(1)} C ${(x1 + dx).toFixed(1)} ${y1.toFixed(1)}, ${(x2 - dx).toFixed(1)} ${y2.toFixed(1)}, ${x2.toFixed(1)} ${y2.toFixed(1)}`,
        "marker-end": `url(#${markerId})`,
      }));
    }
    const defs = s("defs", null, s("marker", {
      id: markerId, viewBox: "0 0 8 8", refX: "7", refY: "4", markerWidth: "7", markerHeight: "7", orient: "auto",
    }, s("path", { d: "M0,0 L8,4 L0,8 z", class: "syft-arrowhead" })));
    arrows.replaceChildren(defs, ...paths);
  }

  const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => scheduleArrows()) : null;
  ro?.observe(lanesEl);
  // a notebook skips the layout of cells out of view: draw the arrows again when it shows
  const io = typeof IntersectionObserver !== "undefined"
    ? new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) scheduleArrows(); })
    : null;
  io?.observe(lanesEl);

  return {
    el,
    update,
    redrawArrows: drawArrows,
    layoutChanged: scheduleArrows,
    rowFor: (laneId, id) => lanes.get(laneId)?.rows.get(id)?.el ?? null,
    destroy() { ro?.disconnect(); io?.disconnect(); lanes.clear(); },
  };
}
