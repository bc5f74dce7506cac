// The world view's arrows, one from each pointer row in view to its target's row: which rows
// an arrow joins and its route in the gutters between lanes (out of the pointer's lane to the
// gutter beside it, along the gutter to the channel above the target's row of lanes, along the
// channel to the gutter beside the target, into its row), so it never crosses a row it does
// not point to. Pure: lane geometry in (measured by lanes.js), paths out (no DOM).

import { esc, isEdge, objKey } from "../dom.js";

export const GAP = 24; // px between lanes (style.css .syft-lanes gap): arrows run in the middle

/** The lanes to measure: those an arrow from the rows in view ({lane, id, entry}) starts or ends in. */
export function lanesToMeasure(rows) {
  const wanted = new Set();
  for (const { lane, entry } of rows) {
    if (isEdge(entry) && entry.location !== undefined) { wanted.add(lane); wanted.add(entry.location); }
  }
  return wanted;
}

/** Where a row's arrow starts or ends in lane geometry `g` ({headY, bodyTop, bodyH, scroll,
 * index: object id -> row index, collapsed}): its y, clamped to what its lane shows, and
 * whether it is scrolled out of its lane (off; a collapsed lane or a row not in it: its head). */
export function rowY(g, id, rowH) {
  if (g.collapsed || !g.index.has(id)) return { y: g.headY, off: true };
  const y = g.bodyTop + rowH * g.index.get(id) + rowH / 2 - g.scroll;
  const lo = g.bodyTop + 4;
  const hi = g.bodyTop + g.bodyH - 4;
  return y < lo ? { y: lo, off: true } : y > hi ? { y: hi, off: true } : { y, off: false };
}

/** The SVG path from lane F's side at y1 to lane T's side at y2 ({left, right, top} each),
 * `off` px beside the other arrows in the same gutter: one gutter when the lanes are neighbours
 * or in one column, else down a gutter, along the channel above T's row of lanes, down the
 * gutter beside T. Numbers to one decimal. */
export function gutterRoute(F, T, y1, y2, off = 0, gap = GAP) {
  const leftward = T.left < F.left;
  const sameColumn = T.left === F.left;
  const x1 = leftward ? F.left : F.right;
  const x2 = leftward || sameColumn ? T.right : T.left;
  const g1 = leftward ? F.left - gap / 2 : F.right + gap / 2;
  const g2 = leftward || sameColumn ? T.right + gap / 2 : T.left - gap / 2;
  const d = Math.abs(g1 - g2) < 2
    ? `M ${x1} ${y1} H ${g1 + off} V ${y2} H ${x2}`
    : `M ${x1} ${y1} H ${g1 + off} V ${T.top - gap / 2 + off / 2} H ${g2 + off} V ${y2} H ${x2}`;
  return d.replace(/-?\d+\.\d+/g, (m) => Number(m).toFixed(1));
}

/**
 * The arrows to draw. rows: the rows in view, in order ({lane, id, entry}; only pointer rows
 * with a numeric id count); geo: lane id -> geometry (rowY, gutterRoute; lanes not measured
 * have none); has(key): the target exists in the world; view: {top, bottom} of the scroller.
 * Returns {arrows: [{from, to, location, d, weak, off}], total}: total counts every arrow whose
 * both rows are in shown lanes; an arrow whose pointer row is scrolled out of its lane, or
 * that runs wholly outside the view (40 px margin), is not drawn. Arrows share a gutter five
 * abreast, 2.5 px apart.
 */
export function arrowsInView(rows, geo, has, view, rowH, gap = GAP) {
  const out = [];
  let total = 0;
  let k = 0;
  for (const { lane, id, entry: o } of rows) {
    if (!isEdge(o) || typeof id !== "number") continue;
    const F = geo.get(lane);
    if (!F) continue;
    const tl = o.location;
    const tid = o.id_at_location;
    const T = geo.get(tl);
    if (!T || !has(objKey(tl, tid)) || !T.index.has(tid)) continue; // no arrow to a row not shown
    total++;
    const src = rowY(F, id, rowH);
    if (src.off) continue;
    const dst = rowY(T, tid, rowH);
    if (Math.max(src.y, dst.y) < view.top - 40 || Math.min(src.y, dst.y) > view.bottom + 40) continue;
    const off = ((k++ % 5) - 2) * 2.5;
    out.push({ from: objKey(lane, id), to: objKey(tl, tid), location: tl, d: gutterRoute(F, T, src.y, dst.y, off, gap),
      weak: o.owning === false, off: dst.off });
  }
  return { arrows: out, total };
}

/** The arrows layer's SVG text: the arrowhead marker `markerId`, then one path per arrow in
 * its target worker's colour (colour(worker) -> inline style), lit when both its ends are in `lit`. */
export function arrowsSVG(arrows, markerId, colour, lit = new Set()) {
  const parts = arrows.map((a) => {
    const cls = `syft-arrow${a.weak ? " syft-arrow-weak" : ""}${a.off ? " syft-arrow-off" : ""}`
      + `${lit.has(a.from) && lit.has(a.to) ? " syft-lit" : ""}`;
    return `<path class="${cls}" style="${colour(a.location)}" data-from="${esc(a.from)}" data-to="${esc(a.to)}"`
      + ` d="${a.d}" marker-end="url(#${markerId})"/>`;
  });
  return `<defs><marker id="${markerId}" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7"`
    + ` markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" class="syft-arrowhead"/></marker></defs>`
    + parts.join("");
}
