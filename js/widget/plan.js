// The plan view: the op graph of a plan laid out with dagre (top to bottom), inputs, state,
// constants and outputs marked by role, output shapes on the edges, and where it was sent.

import { Graph, layout } from "@dagrejs/dagre";
import { h, hueClass, s, shapeText, shortId } from "./dom.js";

export const ROLES = ["input", "state", "constant", "op", "output"];
const CHAR_W = 7; // px per character of the 11-12px monospace labels
const NODE_H = 40;

export function nodeLabel(n) {
  return n.label ?? (n.op ? String(n.op).replace(/^aten\./, "").replace(/\.default$/, "") : n.id);
}

function shapeLabel(shape) {
  return Array.isArray(shape) ? `[${shape.join(", ")}]` : "";
}

/**
 * Lay out a plan graph ({nodes:[{id, op|label, shape, dtype, role}], edges:[{from, to, shape}]}).
 * Pure: returns {width, height, nodes:[{id, x, y, width, height, node}], edges:[{from, to,
 * points:[{x,y}], label, x, y}]}, where x, y are centres (dagre's convention).
 */
export function layoutPlan(graph, { rankdir = "TB" } = {}) {
  const g = new Graph({ multigraph: true });
  g.setGraph({ rankdir, nodesep: 22, ranksep: 34, edgesep: 12, marginx: 10, marginy: 10 });
  g.setDefaultEdgeLabel(() => ({}));
  const nodes = graph?.nodes || [];
  const known = new Set();
  for (const n of nodes) {
    const text = Math.max(nodeLabel(n).length, shapeText(n).length + 2);
    g.setNode(n.id, { width: Math.max(72, 18 + CHAR_W * Math.min(text, 28)), height: NODE_H });
    known.add(n.id);
  }
  (graph?.edges || []).forEach((e, i) => {
    if (!known.has(e.from) || !known.has(e.to)) return;
    const label = shapeLabel(e.shape);
    g.setEdge(e.from, e.to, label ? { width: CHAR_W * label.length, height: 14, labelpos: "c", label } : {}, `e${i}`);
  });
  layout(g);
  const info = g.graph();
  return {
    width: Math.ceil(info.width || 0),
    height: Math.ceil(info.height || 0),
    nodes: nodes.map((n) => ({ id: n.id, ...pick(g.node(n.id)), node: n })),
    edges: g.edges().map((e) => {
      const d = g.edge(e);
      return { from: e.v, to: e.w, points: d.points || [], label: d.label || "", x: d.x, y: d.y };
    }),
  };
}

function pick(d) {
  return { x: d.x, y: d.y, width: d.width, height: d.height };
}

function pathOf(points) {
  if (!points.length) return "";
  return points.map((p, i) => `${i ? "L" : "M"} ${p.x.toFixed(1)} ${p.y.toFixed(1)}`).join(" ");
}

/** The SVG drawing of a laid-out plan graph. */
export function planSvg(laid, idPrefix = "syft-plan") {
  const marker = `${idPrefix}-arrow`;
  const svg = s("svg", {
    class: "syft-plan-graph", width: laid.width, height: laid.height,
    viewBox: `0 0 ${laid.width} ${laid.height}`, role: "img", "aria-label": "plan graph",
  }, s("defs", null, s("marker", {
    id: marker, viewBox: "0 0 8 8", refX: "7", refY: "4", markerWidth: "7", markerHeight: "7", orient: "auto",
  }, s("path", { d: "M0,0 L8,4 L0,8 z", class: "syft-arrowhead" }))));
  for (const e of laid.edges) {
    svg.append(s("path", { class: "syft-plan-edge", d: pathOf(e.points), "marker-end": `url(#${marker})`,
      "data-from": e.from, "data-to": e.to }));
    if (e.label) {
      svg.append(s("text", { class: "syft-plan-edge-label", x: e.x, y: e.y + 4, "text-anchor": "middle" }, e.label));
    }
  }
  for (const n of laid.nodes) {
    const role = n.node.role || "op";
    const x = n.x - n.width / 2;
    const y = n.y - n.height / 2;
    const title = [n.node.op, shapeText(n.node), role].filter(Boolean).join(" · ");
    svg.append(s("g", { class: `syft-plan-node syft-role-${role}`, "data-id": n.id, "data-role": role },
      s("title", null, title),
      s("rect", { x, y, width: n.width, height: n.height, rx: 6 }),
      s("text", { x: n.x, y: y + 16, "text-anchor": "middle", class: "syft-plan-label" }, nodeLabel(n.node)),
      s("text", { x: n.x, y: y + 31, "text-anchor": "middle", class: "syft-plan-sub" },
        role === "op" ? shapeText(n.node) || "" : `${role} ${shapeText(n.node)}`.trim())));
  }
  return svg;
}

/** The plan view of a plan node (kind "plan"): header, sent-to chips, legend, graph, code. */
export function renderPlan(node, { idPrefix, actions = null } = {}) {
  if (!node) return h("div", { class: "syft-empty" }, "no plan to show");
  const graph = node.graph || { nodes: [], edges: [] };
  const nOps = graph.nodes.filter((n) => (n.role || "op") === "op").length;
  const header = h("div", { class: "syft-plan-head" },
    h("span", { class: "syft-kind syft-kind-plan" }, "plan"),
    h("span", { class: "syft-type" }, node.name || "plan"),
    node.id ? h("span", { class: "syft-id", title: `id ${node.id}` }, shortId(node.id)) : null,
    h("span", { class: "syft-meta" }, node.built === false ? "not built yet" : `${nOps} op${nOps === 1 ? "" : "s"}`),
    node.owner && node.owner !== "me" ? h("span", { class: "syft-owner" }, `on ${node.owner}`) : null, actions);
  const sent = (node.sent_to || []);
  const sentLine = h("div", { class: "syft-plan-sent" },
    sent.length ? ["sent to ", ...sent.map((w) => h("span", { class: `syft-worker-chip ${hueClass(w)}`, "data-worker": w }, w))]
      : h("span", { class: "syft-muted" }, "not sent to any worker"));
  const legend = h("div", { class: "syft-plan-legend" },
    ROLES.map((r) => h("span", { class: `syft-legend syft-role-${r}` }, r)));
  const body = [];
  if (graph.nodes.length) {
    const laid = layoutPlan(graph);
    body.push(h("div", { class: "syft-plan-scroll" }, planSvg(laid, idPrefix)));
  } else body.push(h("div", { class: "syft-empty" }, "the plan has no graph yet: call it once, or build it"));
  if (node.code) {
    body.push(h("details", { class: "syft-plan-code" }, h("summary", null, "code"), h("pre", null, node.code)));
  }
  return h("div", { class: "syft-plan" }, header, sentLine, legend, body);
}

/** The first plan node of a chain (a plan, or what a plan pointer points to). */
export function planNodeOf(chains) {
  for (const c of chains || []) for (const n of c.nodes || []) if (n.kind === "plan") return n;
  return null;
}
