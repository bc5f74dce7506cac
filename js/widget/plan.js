// The plan view: the op graph of a plan laid out with dagre (top to bottom), inputs, state,
// constants (scalar operands too) and outputs marked by role, forward / backward / update
// regions grouped, in-place writes marked, output shapes beside the edges, and where the plan
// is now. The graph opens fitted (never below a readable scale); drag pans, Ctrl+wheel and the
// buttons zoom (a viewBox, no library), a minimap shows where you are in a large graph, and a
// click on a node opens its details.

import { Graph, layout } from "@dagrejs/dagre";
import { LOCAL, h, hueClass, s, shapeText, shortId } from "./dom.js";

export const ROLES = ["input", "state", "constant", "op", "output"];
export const REGIONS = { forward: "forward", backward: "backward", update: "optimizer update" };
const LABEL_PX = 12; // the node label's font size (style.css .syft-plan-label)
const SUB_PX = 10; // the second line's, and the edge labels'
const MAX_LABEL = 30; // characters; longer labels end in "…" (the full text is in the details)
const MAX_SUB = 36;
const NODE_H = 40;
const SCALAR_H = 22;
const PAD_X = 10; // each side of a node's text
export const READABLE = 0.75; // the smallest scale a graph opens at: 12px labels stay >= 9px
const MAX_SCALE = 2.5;
const VIEW_H = 560; // the most height the view takes in a notebook
const UPDATE_COLS = 4; // a big graph's optimizer updates fill rows of this many
const ORDER_MAX = 220; // nodes; a band of a big graph up to this size is ordered to cut crossings
const MAX_GAP = 40; // px: the widest gap a rank of a big graph keeps between two of its nodes
const BAND_GAP = 36; // px between the bands of a big training step
const BIG = 150; // nodes; a larger graph is laid out faster (one ordering pass, no edge labels:
// the shape an edge carries is on the box it comes from)

export function nodeLabel(n) {
  return n.label ?? (n.op ? String(n.op).replace(/^aten\./, "").replace(/\.default$/, "") : n.id);
}

/** ``text`` cut to ``max`` characters, ending in "…" when cut. */
export function clip(text, max) {
  const t = String(text ?? "");
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/** The second line of a node: its shape, what it overwrites, or its role. */
export function subLabel(n) {
  const role = n.role || "op";
  if (n.scalar) return "";
  if (n.proxyOf) return `↺ ${n.region && role === "op" ? "from earlier" : role} ${shapeText(n)}`.trim();
  if (role === "op") return n.inplace ? `in-place → ${(n.writesLabels || n.writes || []).join(", ")}` : shapeText(n);
  return `${role} ${shapeText(n)}`.trim();
}

function shapeLabel(shape) {
  return Array.isArray(shape) ? `[${shape.join(", ")}]` : "";
}

// Text widths: the canvas measures with the page's monospace font; without a canvas (node
// tests) a monospace character is taken as 0.62 em, a little wider than common mono fonts.
let measureCtx;
function textWidth(text, px, weight = 400) {
  if (measureCtx === undefined) {
    measureCtx = null;
    try {
      const c = globalThis.document?.createElement("canvas");
      const ctx = c && typeof c.getContext === "function" ? c.getContext("2d") : null;
      if (ctx && typeof ctx.measureText === "function") measureCtx = ctx;
    } catch { /* no canvas */ }
  }
  if (!measureCtx) return text.length * px * 0.62;
  const fam = (globalThis.getComputedStyle?.(document.documentElement)
    ?.getPropertyValue("--jp-code-font-family") || "").trim() || "monospace";
  measureCtx.font = `${weight} ${px}px ${fam}`;
  return measureCtx.measureText(text).width * 1.04 + 1; // a margin for hinting differences
}

/**
 * Lay out a plan graph ({nodes:[{id, op|label, shape, dtype, role, region?, scalar?}], edges:
 * [{from, to, shape}]}). Pure: returns {width, height, nodes:[{id, x, y, width, height, node,
 * label, sub}], edges:[{from, to, points:[{x,y}], label, x, y}], clusters:[{region, x, y,
 * width, height}]}; x, y are centres (dagre's convention). Each box is as wide as its text;
 * edge labels sit to the right of their edge, not on it; ops of a training step are grouped
 * by region when the graph has more than one.
 */
/**
 * Values read in another region than the one they are made in (a parameter read in forward,
 * backward and by its update; a forward value saved for backward) get a copy next to each
 * such reader instead of an edge across the whole graph: {nodes, edges}, copies carry
 * {proxyOf: id}. The first edge into each region stays, so the regions follow each other.
 */
export function withProxies(graph) {
  const nodes = graph?.nodes || [];
  const edges = graph?.edges || [];
  if (!nodes.some((n) => n.region)) return { nodes, edges };
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const order = new Map(nodes.map((n, i) => [n.id, i]));
  const home = new Map(); // a source without a region (an input) lives where it is first read
  for (const e of [...edges].sort((x, y) => order.get(x.to) - order.get(y.to))) {
    if (!byId.get(e.from)?.region && !home.has(e.from)) home.set(e.from, byId.get(e.to)?.region ?? null);
  }
  const regionOf = (id) => byId.get(id)?.region ?? home.get(id) ?? null;
  const entered = new Set();
  const copies = new Map(); // target id -> its copies
  const out = [];
  for (const e of [...edges].sort((x, y) => order.get(x.to) - order.get(y.to))) {
    const from = regionOf(e.from);
    const to = byId.get(e.to)?.region ?? null;
    const scalar = byId.get(e.from)?.scalar;
    if (scalar || !to || !from || from === to || !entered.has(to)) {
      if (to && from && from !== to) entered.add(to);
      out.push(e);
      continue;
    }
    const pid = `${e.from}~${e.to}`;
    if (!copies.has(e.to)) copies.set(e.to, []);
    copies.get(e.to).push({ ...byId.get(e.from), id: pid, proxyOf: e.from, region: to });
    out.push({ ...e, from: pid });
  }
  const list = [];
  for (const n of nodes) list.push(...(copies.get(n.id) || []), n);
  return { nodes: list, edges: out };
}

export function layoutPlan(graph, { rankdir = "TB" } = {}) {
  graph = withProxies(graph);
  const nodes = graph?.nodes || [];
  const present = new Set(nodes.map((n) => n.region).filter(Boolean));
  if (nodes.length > BIG && present.size > 1) return layoutBands(graph, rankdir);
  return layoutOne(graph, { rankdir, big: nodes.length > BIG });
}

/**
 * A big training step: each region (forward, backward, optimizer update) laid out on its own,
 * then stacked top to bottom, centred on one axis. One dagre layout of the whole graph lets
 * the regions push each other sideways (a 318-node step came out 11,000 px wide); on its own
 * each region is as wide as its widest rank. The few edges between regions (withProxies keeps
 * one into each region) run straight from one band to the next.
 */
function layoutBands(graph, rankdir) {
  const nodes = graph.nodes;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const order = ["forward", "backward", "update"];
  const regions = [...new Set(nodes.map((n) => n.region).filter(Boolean))]
    .sort((a, b) => (order.indexOf(a) + 1 || 9) - (order.indexOf(b) + 1 || 9));
  // a node without a region (an input, an output) goes with its first reader, else its producer
  const home = new Map();
  for (const e of graph.edges) if (!byId.get(e.from)?.region && byId.get(e.to)?.region && !home.has(e.from)) home.set(e.from, byId.get(e.to).region);
  for (const e of graph.edges) if (!byId.get(e.to)?.region && byId.get(e.from)?.region && !home.has(e.to)) home.set(e.to, byId.get(e.from).region);
  const bandOf = (n) => n.region || home.get(n.id) || regions[0];
  const parts = regions.map((r) => {
    const mine = nodes.filter((n) => bandOf(n) === r);
    const ids = new Set(mine.map((n) => n.id));
    return { region: r, laid: layoutOne({ nodes: mine, edges: graph.edges.filter((e) => ids.has(e.from) && ids.has(e.to)) },
      { rankdir, big: true, order: mine.length <= ORDER_MAX }) };
  });
  const width = Math.max(...parts.map((p) => p.laid.width));
  const out = { width, height: 0, nodes: [], edges: [], clusters: [] };
  let y = 0;
  const at = new Map();
  for (const { region, laid } of parts) {
    const dx = (width - laid.width) / 2;
    for (const n of laid.nodes) { n.x += dx; n.y += y; out.nodes.push(n); at.set(n.id, n); }
    for (const e of laid.edges) {
      for (const p of e.points) { p.x += dx; p.y += y; }
      if (e.x !== undefined) { e.x += dx; e.y += y; }
      out.edges.push(e);
    }
    out.clusters.push(boundsOf(region, laid.nodes.filter((n) => n.node.region === region)));
    y += laid.height + BAND_GAP;
  }
  out.height = Math.ceil(y - BAND_GAP);
  graph.edges.forEach((e) => {
    const a = at.get(e.from);
    const b = at.get(e.to);
    if (!a || !b || bandOf(byId.get(e.from)) === bandOf(byId.get(e.to))) return;
    const y0 = a.y + a.height / 2;
    const y1 = b.y - b.height / 2;
    out.edges.push({ from: e.from, to: e.to, label: "", x: (a.x + b.x) / 2, y: (y0 + y1) / 2,
      points: [{ x: a.x, y: y0 }, { x: a.x, y: y0 + 8 }, { x: b.x, y: y1 - 8 }, { x: b.x, y: y1 }] });
  });
  // the region boxes reach a little above their nodes: keep them inside the graph
  const top = Math.min(0, ...out.clusters.map((c) => c.y - c.height / 2));
  if (top < 0) {
    for (const n of out.nodes) n.y -= top;
    for (const e of out.edges) { for (const p of e.points) p.y -= top; if (e.y !== undefined) e.y -= top; }
    for (const c of out.clusters) c.y -= top;
    out.height -= top;
  }
  out.width = Math.ceil(Math.max(out.width, ...out.clusters.map((c) => c.x + c.width / 2 + 1)));
  return out;
}

function layoutOne(graph, { rankdir = "TB", big = false, order = false } = {}) {
  const nodes = graph?.nodes || [];
  const present = new Set(nodes.map((n) => n.region).filter(Boolean));
  const grouped = present.size > 1 && !big; // dagre clusters; a big graph gets boxes around its regions after layout
  const g = new Graph({ multigraph: true, compound: grouped });
  g.setGraph({ rankdir, nodesep: 24, ranksep: 30, edgesep: 14, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  const known = new Map();
  const labelOf = Object.fromEntries(nodes.map((n) => [n.id, nodeLabel(n)]));
  if (grouped) for (const r of present) g.setNode(`region:${r}`, { label: r, clusterLabelPos: "top" });
  for (const n of nodes) {
    const view = n.writes?.length ? { ...n, writesLabels: n.writes.map((w) => labelOf[w] ?? w) } : n;
    const label = clip(nodeLabel(n), MAX_LABEL);
    const sub = clip(subLabel(view), MAX_SUB);
    const width = Math.max(n.scalar ? 28 : 56,
      2 * PAD_X + Math.max(textWidth(label, n.scalar ? SUB_PX + 1 : LABEL_PX, 600), textWidth(sub, SUB_PX)));
    g.setNode(n.id, { width: Math.ceil(width), height: n.scalar ? SCALAR_H : NODE_H });
    if (grouped && n.region) g.setParent(n.id, `region:${n.region}`);
    known.set(n.id, { label, sub });
  }
  const linked = new Set();
  (graph?.edges || []).forEach((e, i) => {
    if (!known.has(e.from) || !known.has(e.to)) return;
    linked.add(`${e.from}>${e.to}`);
    const label = big ? "" : shapeLabel(e.shape);
    g.setEdge(e.from, e.to, label
      ? { width: Math.ceil(textWidth(label, SUB_PX)) + 4, height: 14, labelpos: "r", labeloffset: 6, label }
      : {}, `e${i}`);
  });
  // the updates of an optimizer step (one per parameter) follow each other in program order,
  // not side by side: an invisible edge from each to the next (a big graph: to the one
  // UPDATE_COLS later, so they fill rows of a grid instead of one long column)
  const ups = nodes.filter((n) => n.region === "update" && (n.role || "op") === "op").map((n) => n.id);
  const step = big ? UPDATE_COLS : 1;
  for (let i = step; i < ups.length; i++) {
    const a = ups[i - step];
    const b = ups[i];
    if (!linked.has(`${a}>${b}`)) g.setEdge(a, b, { weight: 0, minlen: 1, invisible: true }, `order-${b}`);
  }
  layout(g, big && !order ? { disableOptimalOrderHeuristic: true } : {});
  const info = g.graph();
  const laid = {
    width: Math.ceil(info.width || 0),
    height: Math.ceil(info.height || 0),
    nodes: nodes.map((n) => ({ id: n.id, ...pick(g.node(n.id)), node: n, ...known.get(n.id) })),
    edges: g.edges().filter((e) => !g.edge(e).invisible).map((e) => {
      const d = g.edge(e);
      return { from: e.v, to: e.w, points: (d.points || []).map((p) => ({ x: p.x, y: p.y })), label: d.label || "", x: d.x, y: d.y };
    }),
    clusters: [],
  };
  if (big) compactRanks(laid);
  laid.clusters = grouped ? [...present].map((r) => ({ region: r, ...pick(g.node(`region:${r}`)) }))
    : present.size > 1 ? [...present].map((r) => boundsOf(r, laid.nodes.filter((n) => n.node.region === r))) : [];
  return laid;
}

/**
 * A big graph's layout without its drift: dagre, ordering a long chain whose every step has
 * side inputs (a layer's weight and bias), places each step a little right of the one before,
 * and leaves wide gaps in ranks to keep long edges straight, so a deep network comes out many
 * times wider than any of its ranks. Here every rank (the nodes and the edge bends at one
 * height) keeps its order but closes its gaps to at most MAX_GAP, and is centred on one axis;
 * edge ends move with their nodes. The order within each rank is dagre's, so an edge still
 * passes a rank between the same two nodes.
 */
export function compactRanks(laid) {
  const key = (y) => Math.round(y * 2);
  const ranks = new Map(); // y key -> [{x, half, set(x)}]
  const add = (y, item) => {
    const k = key(y);
    if (!ranks.has(k)) ranks.set(k, []);
    ranks.get(k).push(item);
  };
  for (const n of laid.nodes) add(n.y, { x: n.x, half: n.width / 2, node: n });
  const ends = [];
  for (const e of laid.edges) {
    const pts = e.points;
    pts.forEach((p, i) => {
      if (i === 0 || i === pts.length - 1) ends.push({ p, id: i === 0 ? e.from : e.to });
      else add(p.y, { x: p.x, half: 2, point: p });
    });
    e.x = undefined; // a big graph's edges have no labels
  }
  const dx = new Map();
  for (const items of ranks.values()) {
    items.sort((a, b) => a.x - b.x);
    const xs = [items[0].x];
    for (let i = 1; i < items.length; i++) {
      const a = items[i - 1];
      const b = items[i];
      const gap = b.x - b.half - (a.x + a.half);
      xs.push(xs[i - 1] + a.half + Math.min(gap, b.point || a.point ? MAX_GAP / 2 : MAX_GAP) + b.half);
    }
    const mid = (xs[0] - items[0].half + xs[xs.length - 1] + items[items.length - 1].half) / 2;
    items.forEach((it, i) => {
      const x = xs[i] - mid;
      if (it.node) { dx.set(it.node.id, x - it.node.x); it.node.x = x; } else it.point.x = x;
    });
  }
  for (const { p, id } of ends) p.x += dx.get(id) ?? 0;
  // back into positive coordinates, with dagre's margin
  const margin = 12;
  let x0 = Infinity;
  let x1 = -Infinity;
  for (const n of laid.nodes) { x0 = Math.min(x0, n.x - n.width / 2); x1 = Math.max(x1, n.x + n.width / 2); }
  for (const e of laid.edges) for (const p of e.points) { x0 = Math.min(x0, p.x); x1 = Math.max(x1, p.x); }
  const shift = margin - x0;
  for (const n of laid.nodes) n.x += shift;
  for (const e of laid.edges) for (const p of e.points) p.x += shift;
  laid.width = Math.ceil(x1 - x0 + 2 * margin);
  return laid;
}

/** A region's box around its laid-out nodes (centre convention, like dagre's clusters). */
function boundsOf(region, boxes, pad = 14) {
  const x0 = Math.min(...boxes.map((b) => b.x - b.width / 2)) - pad;
  const x1 = Math.max(...boxes.map((b) => b.x + b.width / 2)) + pad;
  const y0 = Math.min(...boxes.map((b) => b.y - b.height / 2)) - pad - 10;
  const y1 = Math.max(...boxes.map((b) => b.y + b.height / 2)) + pad;
  return { region, x: (x0 + x1) / 2, y: (y0 + y1) / 2, width: x1 - x0, height: y1 - y0 };
}

function pick(d) {
  return { x: d.x, y: d.y, width: d.width, height: d.height };
}

function pathOf(points) {
  if (!points.length) return "";
  return points.map((p, i) => `${i ? "L" : "M"} ${p.x.toFixed(1)} ${p.y.toFixed(1)}`).join(" ");
}

/** Where an edge's label goes: beside the part of its line at the label's height, on the side
 * the line does not lean to (dagre keeps that space free of other nodes and edges). */
export function labelSpot(e, half = 8, gap = 5) {
  const xs = [];
  const pts = e.points || [];
  for (let i = 1; i < pts.length; i++) {
    const a = pts[i - 1];
    const b = pts[i];
    const lo = Math.max(Math.min(a.y, b.y), e.y - half);
    const hi = Math.min(Math.max(a.y, b.y), e.y + half);
    if (lo > hi) continue;
    for (const y of [lo, hi]) xs.push(a.y === b.y ? a.x : a.x + ((b.x - a.x) * (y - a.y)) / (b.y - a.y));
    if (a.y === b.y) xs.push(b.x);
  }
  if (!xs.length) return { x: e.x, anchor: "middle" };
  const min = Math.min(...xs);
  const max = Math.max(...xs);
  const first = pts.find((p) => p.y >= e.y - half) || pts[0];
  const last = [...pts].reverse().find((p) => p.y <= e.y + half) || pts[pts.length - 1];
  const leansRight = (pts[pts.length - 1].x - last.x) + (first.x - pts[0].x) > 0 && max - min > 1;
  return leansRight ? { x: min - gap, anchor: "end" } : { x: max + gap, anchor: "start" };
}

function nodeClass(n) {
  const role = n.role || "op";
  return ["syft-plan-node", `syft-role-${role}`, n.region ? `syft-region-${n.region}` : "",
    n.inplace ? "syft-plan-inplace" : "", n.scalar ? "syft-plan-scalar" : "",
    n.proxyOf ? "syft-plan-proxy" : ""].filter(Boolean).join(" ");
}

/** The SVG drawing of a laid-out plan graph (its viewBox is the whole graph). */
export function planSvg(laid, idPrefix = "syft-plan") {
  const marker = `${idPrefix}-arrow`;
  const svg = s("svg", {
    class: "syft-plan-graph", width: laid.width, height: laid.height,
    viewBox: `0 0 ${laid.width} ${laid.height}`, role: "group", "aria-label": "plan graph",
  }, s("defs", null, s("marker", {
    id: marker, viewBox: "0 0 8 8", refX: "7", refY: "4", markerWidth: "7", markerHeight: "7", orient: "auto",
  }, s("path", { d: "M0,0 L8,4 L0,8 z", class: "syft-arrowhead" }))));
  for (const c of laid.clusters || []) {
    svg.append(s("g", { class: `syft-plan-region syft-region-${c.region}`, "data-region": c.region },
      s("rect", { x: c.x - c.width / 2, y: c.y - c.height / 2, width: c.width, height: c.height, rx: 8 }),
      s("text", { x: c.x - c.width / 2 + 8, y: c.y - c.height / 2 + 12, class: "syft-plan-region-label" },
        REGIONS[c.region] || c.region)));
  }
  const labels = [];
  for (const e of laid.edges) {
    svg.append(s("path", { class: "syft-plan-edge", d: pathOf(e.points), "marker-end": `url(#${marker})`,
      "data-from": e.from, "data-to": e.to }));
    if (e.label) {
      const at = labelSpot(e);
      labels.push(s("text", { class: "syft-plan-edge-label", x: at.x.toFixed(1), y: (e.y + 4).toFixed(1),
        "text-anchor": at.anchor, "data-from": e.from, "data-to": e.to }, e.label));
    }
  }
  svg.append(...labels); // above every edge, so no other line runs through them
  for (const n of laid.nodes) {
    const role = n.node.role || "op";
    const x = n.x - n.width / 2;
    const y = n.y - n.height / 2;
    const label = n.label ?? clip(nodeLabel(n.node), MAX_LABEL);
    const sub = n.sub ?? clip(subLabel(n.node), MAX_SUB);
    const title = [n.node.op || nodeLabel(n.node), shapeText(n.node), role, n.node.region].filter(Boolean).join(" · ");
    const parts = [s("title", null, title), s("rect", { x, y, width: n.width, height: n.height, rx: n.node.scalar ? 11 : 6 })];
    if (n.node.scalar) {
      parts.push(s("text", { x: n.x, y: n.y + 4, "text-anchor": "middle", class: "syft-plan-label" }, label));
    } else {
      parts.push(s("text", { x: n.x, y: y + 16, "text-anchor": "middle", class: "syft-plan-label" }, label),
        s("text", { x: n.x, y: y + 31, "text-anchor": "middle", class: "syft-plan-sub" }, sub));
    }
    svg.append(s("g", { class: nodeClass(n.node), "data-id": n.id, "data-role": role, tabindex: n.node.proxyOf ? "-1" : "0",
      ...(n.node.proxyOf ? { "data-proxy-of": n.node.proxyOf } : {}),
      role: "button", "aria-label": `${label} ${sub}`.trim(), ...(n.node.region ? { "data-region": n.node.region } : {}) },
    parts));
  }
  return svg;
}

function minimapSvg(laid) {
  const svg = s("svg", { class: "syft-plan-minimap", viewBox: `0 0 ${laid.width} ${laid.height}`,
    preserveAspectRatio: "xMidYMid meet", "aria-hidden": "true" });
  for (const c of laid.clusters || []) {
    svg.append(s("rect", { class: `syft-mini-region syft-region-${c.region}`, x: c.x - c.width / 2,
      y: c.y - c.height / 2, width: c.width, height: c.height }));
  }
  for (const n of laid.nodes) {
    svg.append(s("rect", { class: `syft-mini-node syft-role-${n.node.role || "op"}`, x: n.x - n.width / 2,
      y: n.y - n.height / 2, width: n.width, height: n.height }));
  }
  const port = s("rect", { class: "syft-mini-view", x: 0, y: 0, width: 0, height: 0 });
  svg.append(port);
  return { svg, port };
}

/** The source line a plan node came from: a string, or {file, cell, line, code}. */
export function sourceText(src) {
  if (!src) return "";
  if (typeof src === "string") return src;
  // a notebook cell's code is compiled to a file of ipykernel's (/tmp/ipykernel_123/456.py)
  const cellFile = /(^|\/)ipykernel_\d+\/[^/]+\.py$|^<ipython-input-/.test(String(src.file ?? ""));
  const where = src.cell !== undefined && src.cell !== null ? `cell [${src.cell}]`
    : cellFile ? "a notebook cell" : src.file ? String(src.file).split("/").pop() : "";
  const at = [where, src.line !== undefined && src.line !== null ? `line ${src.line}` : ""].filter(Boolean).join(", ");
  return [at, src.code ? String(src.code).trim() : ""].filter(Boolean).join(": ");
}

/** Node details: op, shapes, arguments, in-place writes, region, the values it reads and feeds. */
export function nodeDetails(node, byId, select) {
  const ref = (id) => {
    const n = byId.get(id);
    const text = n ? `${nodeLabel(n)}${shapeText(n) ? ` ${shapeText(n)}` : ""}` : id;
    return h("button", { class: "syft-btn syft-plan-ref", type: "button", "data-ref": id, onclick: () => select(id) }, text);
  };
  const row = (name, ...value) => h("div", { class: "syft-plan-detail-row" }, h("span", { class: "syft-muted" }, name), " ", ...value);
  const rows = [
    h("div", { class: "syft-plan-detail-title" }, h("b", null, nodeLabel(node)),
      h("button", { class: "syft-btn syft-plan-detail-close", type: "button", "aria-label": "close the details",
        onclick: () => select(null) }, "×")),
    row("role", node.scalar ? "constant (a number in the op's arguments)" : node.role || "op"),
  ];
  if (node.op) rows.push(row("op", h("code", null, node.op)));
  if (node.region) rows.push(row("region", REGIONS[node.region] || node.region));
  if (node.dtype || node.shape) rows.push(row(node.role === "op" ? "output" : "value", shapeText(node) || String(node.dtype)));
  if (node.arg) rows.push(row("argument", h("code", null, node.arg)));
  if (node.inputs?.length) rows.push(row("reads", ...node.inputs.map(ref)));
  if (node.args?.length) rows.push(row("arguments", h("code", null, node.args.join(", "))));
  if (node.inplace) rows.push(row("in-place", "overwrites ", ...(node.writes || []).map(ref)));
  if (node.consumers?.length) rows.push(row("used by", ...node.consumers.map(ref)));
  const src = sourceText(node.source);
  if (src) rows.push(row("source", h("code", { class: "syft-plan-source" }, src)));
  return rows;
}

/**
 * The navigable graph: {el, fit(whole), zoomBy(f, cx, cy), select(id), view()}. The SVG's viewBox
 * is the visible part of the graph; its size is the container's.
 */
export function planViewer(laid, { idPrefix = "syft-plan", onFitted } = {}) {
  const svg = planSvg(laid, idPrefix);
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  svg.setAttribute("preserveAspectRatio", "xMinYMin meet");
  const byId = new Map(laid.nodes.filter((n) => !n.node.proxyOf).map((n) => [n.id, n.node]));
  const original = (id) => laid.nodes.find((n) => n.id === id)?.node.proxyOf ?? id;
  const zoomText = h("span", { class: "syft-plan-zoom", "aria-live": "polite" }, "");
  const tool = (label, title, fn) => h("button", { class: "syft-btn", type: "button", title, "aria-label": title,
    "data-tool": label, onclick: fn }, label);
  const tools = h("div", { class: "syft-plan-tools" },
    tool("−", "zoom out", () => zoomBy(1 / 1.25)), tool("+", "zoom in", () => zoomBy(1.25)),
    tool("fit", "fit the whole graph", () => fit(true)), tool("1:1", "actual size", () => setScale(1)), zoomText,
    h("span", { class: "syft-muted syft-plan-hint" }, "drag to pan · Ctrl+wheel to zoom · click a node"));
  const mini = minimapSvg(laid);
  const detail = h("aside", { class: "syft-plan-detail", hidden: true, "aria-label": "node details" });
  const canvas = h("div", { class: "syft-plan-canvas", tabindex: "0", "aria-label": "plan graph: arrow keys pan, + and − zoom, 0 fits" },
    svg);
  // the minimap has a column of its own beside the graph (never over it), there while it is needed
  const mapCol = h("div", { class: "syft-plan-mapcol", hidden: true }, mini.svg);
  const stage = h("div", { class: "syft-plan-stage" }, canvas, mapCol, detail);
  const el = h("div", { class: "syft-plan-viewer", "data-fitted": "false", "data-nodes": String(byId.size) }, tools, stage);
  const view = { x: 0, y: 0, scale: 1 };
  let fitted = false;

  const size = () => ({ w: canvas.clientWidth || 600, h: canvas.clientHeight || VIEW_H });
  function apply() {
    let { w, h: hh } = size();
    // most of the graph in view: no map needed; else its column narrows the canvas (once: a
    // narrower canvas shows less, so the map stays)
    const needMap = (vw) => (Math.min(vw, laid.width) * Math.min(hh / view.scale, laid.height)) / (laid.width * laid.height) <= 0.85;
    const want = needMap(w / view.scale);
    if (mapCol.hidden === want) {
      mapCol.hidden = !want;
      w = size().w;
    }
    const vw = w / view.scale;
    const vh = hh / view.scale;
    // keep some of the graph in view: pan no further than its edges
    view.x = Math.min(Math.max(view.x, Math.min(0, laid.width - vw)), Math.max(0, laid.width - vw));
    view.y = Math.min(Math.max(view.y, Math.min(0, laid.height - vh)), Math.max(0, laid.height - vh));
    svg.setAttribute("viewBox", `${view.x.toFixed(1)} ${view.y.toFixed(1)} ${vw.toFixed(1)} ${vh.toFixed(1)}`);
    zoomText.textContent = `${Math.round(view.scale * 100)}%`;
    for (const [k, v] of Object.entries({ x: view.x, y: view.y, width: vw, height: vh })) mini.port.setAttribute(k, v.toFixed(1));
    el.dataset.scale = view.scale.toFixed(3);
  }
  function setScale(scale, cx, cy) {
    const { w, h: hh } = size();
    const px = cx ?? w / 2;
    const py = cy ?? hh / 2;
    const gx = view.x + px / view.scale;
    const gy = view.y + py / view.scale;
    view.scale = Math.min(MAX_SCALE, Math.max(0.05, scale));
    view.x = gx - px / view.scale;
    view.y = gy - py / view.scale;
    apply();
  }
  function zoomBy(f, cx, cy) { setScale(view.scale * f, cx, cy); }
  /** Fit the graph; on open (whole = false) never below READABLE: then the top is shown. */
  function fit(whole = false) {
    mapCol.hidden = true;
    let { w } = size();
    const all = Math.min(w / laid.width, VIEW_H / laid.height, 1.5); // the whole graph in view
    if (!whole && all < READABLE) { // only a part fits: the map takes its column, the graph the rest
      mapCol.hidden = false;
      w = size().w;
    }
    view.scale = whole || all >= READABLE ? all : Math.max(READABLE, Math.min(1, w / laid.width));
    if (!whole) canvas.style.height = `${Math.max(120, Math.min(VIEW_H, Math.ceil(laid.height * view.scale) + 2))}px`;
    const { h: hh } = size();
    const vw = w / view.scale;
    const vh = hh / view.scale;
    view.x = (laid.width - vw) / 2;
    view.y = laid.height <= vh ? (laid.height - vh) / 2 : 0;
    if (laid.width > vw) { // too wide: start where the graph starts, its top nodes in the middle
      const top = laid.nodes.filter((n) => n.y - n.height / 2 < vh);
      const xs = top.map((n) => n.x);
      if (xs.length) view.x = (Math.min(...xs) + Math.max(...xs)) / 2 - vw / 2;
    }
    apply();
    if (!fitted && canvas.clientWidth) {
      fitted = true;
      el.dataset.fitted = "true";
      onFitted?.();
    }
  }

  // --- panning: drag on the graph (a click without movement selects a node) ----------------
  let drag = null;
  canvas.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0) return;
    // the node under the pointer now: with the pointer captured, pointerup targets the canvas
    drag = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y, moved: false,
      node: original(ev.target.closest?.(".syft-plan-node")?.dataset.id ?? null) };
    canvas.setPointerCapture?.(ev.pointerId);
  });
  canvas.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x;
    const dy = ev.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    drag.moved = true;
    el.classList.add("syft-plan-panning");
    view.x = drag.vx - dx / view.scale;
    view.y = drag.vy - dy / view.scale;
    apply();
  });
  const endDrag = (ev) => {
    if (!drag) return;
    const { moved, node } = drag;
    drag = null;
    el.classList.remove("syft-plan-panning");
    if (!moved && ev.type === "pointerup") select(node);
  };
  canvas.addEventListener("pointerup", endDrag);
  canvas.addEventListener("pointercancel", endDrag);
  canvas.addEventListener("wheel", (ev) => {
    if (!ev.ctrlKey && !ev.metaKey) return; // a plain wheel scrolls the notebook
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    zoomBy(Math.exp(-ev.deltaY * 0.002), ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  canvas.addEventListener("keydown", (ev) => {
    const step = 60 / view.scale;
    const keys = {
      "+": () => zoomBy(1.25), "=": () => zoomBy(1.25), "-": () => zoomBy(1 / 1.25), 0: () => fit(true),
      ArrowLeft: () => { view.x -= step; apply(); }, ArrowRight: () => { view.x += step; apply(); },
      ArrowUp: () => { view.y -= step; apply(); }, ArrowDown: () => { view.y += step; apply(); },
      Escape: () => select(null),
      Enter: () => ev.target.dataset?.id && select(ev.target.dataset.id),
      " ": () => ev.target.dataset?.id && select(ev.target.dataset.id),
    };
    const fn = keys[ev.key];
    if (!fn || (ev.target !== canvas && !["Enter", " ", "Escape"].includes(ev.key))) return;
    ev.preventDefault();
    fn();
  });
  // --- the minimap: a click or drag centres the view there -----------------------------------
  const fromMini = (ev) => {
    const r = mini.svg.getBoundingClientRect();
    const k = Math.min(r.width / laid.width, r.height / laid.height);
    const ox = (r.width - laid.width * k) / 2;
    const oy = (r.height - laid.height * k) / 2;
    const { w, h: hh } = size();
    view.x = (ev.clientX - r.left - ox) / k - w / view.scale / 2;
    view.y = (ev.clientY - r.top - oy) / k - hh / view.scale / 2;
    apply();
  };
  let miniDrag = false;
  mini.svg.addEventListener("pointerdown", (ev) => { miniDrag = true; mini.svg.setPointerCapture?.(ev.pointerId); fromMini(ev); ev.stopPropagation(); });
  mini.svg.addEventListener("pointermove", (ev) => miniDrag && fromMini(ev));
  mini.svg.addEventListener("pointerup", () => { miniDrag = false; });

  // --- selection: the node, its edges, and the detail panel ----------------------------------
  let selected = null;
  function select(id) {
    for (const e of svg.querySelectorAll(".syft-plan-on")) e.classList.remove("syft-plan-on");
    selected = id && byId.has(id) ? id : null;
    el.dataset.selected = selected ?? "";
    if (!selected) {
      detail.hidden = true;
      detail.replaceChildren();
      return;
    }
    const mine = (id) => id !== undefined && original(id) === selected; // the node or a copy of it
    for (const e of svg.querySelectorAll("[data-id], [data-from]")) {
      const d = e.dataset;
      if (mine(d.id) || mine(d.from) || mine(d.to)) e.classList.add("syft-plan-on");
    }
    detail.replaceChildren(...nodeDetails(byId.get(selected), byId, select));
    detail.hidden = false;
    const n = laid.nodes.find((m) => m.id === selected);
    const { w, h: hh } = size();
    const vw = w / view.scale;
    const vh = hh / view.scale;
    if (n.x < view.x || n.x > view.x + vw || n.y < view.y || n.y > view.y + vh) {
      view.x = n.x - vw / 2;
      view.y = n.y - vh / 2;
      apply();
    }
  }

  // Fit once the view has a size (it is not in the page yet when rendered), and again when
  // its width changes before the user moved it.
  if (typeof ResizeObserver !== "undefined") {
    let lastW = 0;
    // the stage's width, not the canvas's: the map column coming and going is no resize
    const ro = new ResizeObserver(() => {
      if (!el.isConnected) return;
      const w = stage.clientWidth;
      if (w && w !== lastW && (!fitted || el.dataset.touched !== "true")) fit(false);
      lastW = w;
    });
    ro.observe(stage);
  }
  for (const evName of ["pointerdown", "wheel", "keydown"]) canvas.addEventListener(evName, () => { if (fitted) el.dataset.touched = "true"; });
  return { el, fit, zoomBy, setScale, select, view: () => ({ ...view, ...size() }), selected: () => selected };
}

/** "built for ..." and, when the node carries every signature's graph, a picker of them. */
function signaturesLine(node, pick) {
  const sigs = node.signatures || [];
  if (!sigs.length) return null;
  const graphs = node.graphs || [];
  if (graphs.length < 2) {
    return h("div", { class: "syft-plan-sigs syft-muted" },
      sigs.length === 1 ? `built for ${sigs[0]}` : `built for ${sigs.join(" or ")}`);
  }
  const select = h("select", { class: "syft-plan-sig-pick", "aria-label": "the graph of which signature" },
    graphs.map((g, i) => h("option", { value: String(i), selected: i === (node.shown ?? graphs.length - 1) },
      `${g.signature} · ${g.n_nodes} op${g.n_nodes === 1 ? "" : "s"}`)));
  select.addEventListener("change", () => pick(Number(select.value)));
  return h("div", { class: "syft-plan-sigs" },
    h("span", { class: "syft-muted" }, `built for ${graphs.length} signatures; showing `), select);
}

function legendOf(graph) {
  const regions = [...new Set(graph.nodes.map((n) => n.region).filter(Boolean))];
  return h("div", { class: "syft-plan-legend" },
    ROLES.map((r) => h("span", { class: `syft-legend syft-role-${r}` }, r)),
    regions.length > 1 ? regions.map((r) => h("span", { class: `syft-legend syft-legend-region syft-region-${r}` }, REGIONS[r] || r)) : null,
    graph.nodes.some((n) => n.inplace) ? h("span", { class: "syft-legend syft-legend-inplace" }, "in-place") : null);
}

/** The plan view of a plan node (kind "plan"): header, where it is, signatures, legend, graph, code. */
export function renderPlan(node, { idPrefix, actions = null, onFitted } = {}) {
  if (!node) return h("div", { class: "syft-empty" }, "no plan to show");
  const graph = node.graph || { nodes: [], edges: [] };
  const nOps = graph.nodes.filter((n) => (n.role || "op") === "op").length;
  const header = h("div", { class: "syft-plan-head" },
    h("span", { class: "syft-kind syft-kind-plan" }, "plan"),
    h("span", { class: "syft-type" }, node.name || "plan"),
    node.id ? h("span", { class: "syft-id", title: `id ${node.id}` }, shortId(node.id)) : null,
    h("span", { class: "syft-meta syft-plan-nops" }, node.built === false ? "not built yet" : `${nOps} op${nOps === 1 ? "" : "s"}`),
    node.owner && node.owner !== LOCAL ? h("span", { class: "syft-owner" }, `on ${node.owner}`) : null, actions);
  const sent = node.sent_to || [];
  const left = (node.left || []).filter((w) => !sent.includes(w));
  // a copy a worker holds (the plan of a PlanPointer) was sent there: it is not "not sent"
  const remote = node.owner && node.owner !== LOCAL;
  const sentLine = h("div", { class: "syft-plan-sent" },
    sent.length ? ["sent to ", ...sent.map((w) => h("span", { class: `syft-worker-chip ${hueClass(w)}`, "data-worker": w }, w))]
      : remote ? h("span", { class: "syft-muted" }, `the copy ${node.owner} holds: it runs there on its state and your pointers' data`)
        : h("span", { class: "syft-muted" }, "not sent to any worker"),
    left.length ? h("span", { class: "syft-muted syft-plan-left", title: "it came back (get), or its pointer was dropped" },
      ` · no longer on ${left.join(", ")}`) : null);
  const area = h("div", { class: "syft-plan-area" });
  const el = h("div", { class: "syft-plan" }, header, sentLine, null, area);
  function show(g, code) {
    const parts = [legendOf(g)];
    el.__syftPlan = null; // for tests and benchmarks: the viewer of the graph shown
    if (g.nodes.length) {
      el.__syftPlan = planViewer(layoutPlan(g), { idPrefix, onFitted });
      parts.push(el.__syftPlan.el);
    } else parts.push(h("div", { class: "syft-empty" }, "the plan has no graph yet: call it once, or build it"));
    if (code) parts.push(h("details", { class: "syft-plan-code" }, h("summary", null, "code"), h("pre", null, code)));
    area.replaceChildren(...parts);
    const ops = g.nodes.filter((n) => (n.role || "op") === "op").length;
    if (node.built !== false) header.querySelector(".syft-plan-nops").textContent = `${ops} op${ops === 1 ? "" : "s"}`;
  }
  const sigs = signaturesLine(node, (i) => show(node.graphs[i].graph, node.graphs[i].code));
  if (sigs) el.insertBefore(sigs, area);
  show(graph, node.code);
  return el;
}

/** The first plan node of a chain (a plan, or what a plan pointer points to). */
export function planNodeOf(chains) {
  const find = (n) => {
    if (!n) return null;
    if (n.kind === "plan") return n;
    for (const c of n.children || []) { const f = find(c); if (f) return f; }
    return null;
  };
  for (const c of chains || []) {
    for (const n of c.nodes || []) if (n.kind === "plan") return n; // chain model v1: a list
    const f = find(c.root); // v2: a tree
    if (f) return f;
  }
  return null;
}
