import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { layoutPlan, renderPlan, planViewer, labelSpot, clip, subLabel, nodeDetails } = await import("../../js/widget/plan.js");
const { renderChains, filterLog, phaseOf } = await import("../../js/widget/chain.js");
const train = JSON.parse(readFileSync(new URL("./fixtures/plan_train_node.json", import.meta.url)));

test("a training step is grouped into forward, backward and update regions, each around its ops", () => {
  const laid = layoutPlan(train.graph);
  assert.deepEqual(laid.clusters.map((c) => c.region).sort(), ["backward", "forward", "update"]);
  for (const n of laid.nodes.filter((m) => m.node.region)) {
    const c = laid.clusters.find((k) => k.region === n.node.region);
    assert.ok(Math.abs(n.x - c.x) <= (c.width - n.width) / 2 + 0.5 && Math.abs(n.y - c.y) <= (c.height - n.height) / 2 + 0.5,
      `${n.id} inside its ${n.node.region} region`);
  }
  // regions follow the step: forward ops come before backward ones, the updates last
  const y = (r) => laid.clusters.find((c) => c.region === r).y;
  assert.ok(y("forward") < y("backward") && y("backward") < y("update"));
});

test("the in-place updates are marked and say which state they overwrite", () => {
  const el = renderPlan(train, { idPrefix: "t" });
  const inplace = [...el.querySelectorAll(".syft-plan-inplace")];
  assert.equal(inplace.length, 2);
  const subs = inplace.map((g) => g.querySelector(".syft-plan-sub").textContent).sort();
  assert.deepEqual(subs, ["in-place → bias", "in-place → weight"]);
  assert.ok(inplace.every((g) => g.getAttribute("data-region") === "update"));
  assert.ok(el.querySelector(".syft-legend-inplace"));
  assert.deepEqual([...el.querySelectorAll(".syft-legend-region")].map((s) => s.textContent),
    ["forward", "backward", "optimizer update"]);
});

test("scalar operands are constant nodes with an edge into their op", () => {
  const laid = layoutPlan(train.graph);
  const scalars = laid.nodes.filter((n) => n.node.scalar);
  assert.ok(scalars.length >= 3);
  const lr = scalars.filter((n) => n.node.label === "0.1");
  assert.equal(lr.length, 2); // p.sub_(0.1 * g), once per parameter
  for (const n of lr) assert.ok(laid.edges.some((e) => e.from === n.id && train.graph.nodes.find((m) => m.id === e.to).op === "aten.mul.Tensor"));
});

test("labels are clipped with an ellipsis and boxes are as wide as their text", () => {
  assert.equal(clip("observations_of_the_environment", 12), "observation…");
  assert.equal(clip("x", 12), "x");
  const graph = { nodes: [{ id: "in0", role: "input", label: "a_rather_long_input_name_here", shape: [4, 3], dtype: "float32" },
    { id: "in1", role: "input", label: "x", shape: [4, 3], dtype: "float32" }], edges: [] };
  const laid = layoutPlan(graph);
  const [long, short] = laid.nodes;
  assert.ok(long.width > short.width);
  assert.ok(long.width >= 2 * 10 + long.label.length * 12 * 0.62 - 1);
  assert.equal(subLabel({ role: "op", inplace: true, writes: ["in0"], writesLabels: ["w"] }), "in-place → w");
});

test("an edge label sits beside its line, never on it", () => {
  const vertical = { x: 50, y: 50, points: [{ x: 40, y: 0 }, { x: 40, y: 50 }, { x: 40, y: 100 }] };
  assert.deepEqual(labelSpot(vertical), { x: 45, anchor: "start" });
  const leaning = { x: 50, y: 50, points: [{ x: 0, y: 0 }, { x: 40, y: 50 }, { x: 140, y: 100 }] };
  const spot = labelSpot(leaning);
  assert.equal(spot.anchor, "end");
  assert.ok(spot.x < 40);
  for (const e of layoutPlan(train.graph).edges.filter((d) => d.label)) {
    const at = labelSpot(e);
    assert.notEqual(at.anchor, "middle", `${e.from}->${e.to} has a side`);
  }
});

test("the viewer zooms around a point, pans, and selects a node with its details", () => {
  const laid = layoutPlan(train.graph);
  const v = planViewer(laid, { idPrefix: "z" });
  document.body.append(v.el);
  v.fit(false);
  const s0 = v.view().scale;
  v.zoomBy(2, 0, 0);
  assert.equal(v.view().scale, s0 * 2);
  assert.equal(v.el.querySelector(".syft-plan-zoom").textContent, `${Math.round(s0 * 200)}%`);
  const target = laid.nodes.find((n) => n.node.inplace);
  v.select(target.id);
  assert.equal(v.selected(), target.id);
  const detail = v.el.querySelector(".syft-plan-detail");
  assert.equal(detail.hidden, false);
  assert.match(detail.textContent, /aten\.sub_\.Tensor/);
  assert.match(detail.textContent, /optimizer update/);
  assert.match(detail.textContent, /overwrites/);
  assert.ok([...v.el.querySelectorAll(".syft-plan-on")].some((e) => e.getAttribute("data-to") === target.id));
  // a link in the details selects the node it names
  detail.querySelector(".syft-plan-ref").dispatchEvent(new window.Event("click"));
  assert.notEqual(v.selected(), target.id);
  v.select(null);
  assert.equal(v.el.querySelector(".syft-plan-detail").hidden, true);
  v.el.remove();
});

test("details of a node: op, output shape, what it reads, its arguments", () => {
  const byId = new Map(train.graph.nodes.map((n) => [n.id, n]));
  const expand = train.graph.nodes.find((n) => n.op === "aten.expand.default");
  const text = nodeDetails(expand, byId, () => {}).map((e) => e.textContent).join(" | ");
  assert.match(text, /op aten\.expand\.default/);
  assert.match(text, /region backward/);
  assert.match(text, /output float32\[4, 2\]/);
  assert.match(text, /arguments size=\[4, 2\]/);
});

test("sent to lists the workers holding the plan now, and the ones it left", () => {
  const el = renderPlan({ ...train, sent_to: ["alice"], left: ["bob", "alice"] }, { idPrefix: "s" });
  const sent = el.querySelector(".syft-plan-sent");
  assert.deepEqual([...sent.querySelectorAll("[data-worker]")].map((c) => c.textContent), ["alice"]);
  assert.match(sent.textContent, /no longer on bob$/);
  const none = renderPlan({ ...train, sent_to: [], left: ["bob"] }, { idPrefix: "s" }).querySelector(".syft-plan-sent");
  assert.match(none.textContent, /not sent to any worker · no longer on bob/);
});

// --- the op log ---------------------------------------------------------------------------------
const records = [
  { op: "aten.mm.default", inputs: [{ shape: [3, 3], dtype: "float32" }], backward: false, cell: 2 },
  { op: "aten.relu.default", inputs: [{ shape: [3, 3], dtype: "float32" }], backward: false, cell: 2 },
  { op: "aten.threshold_backward.default", inputs: [], backward: true, cell: 3 },
  { op: "aten.mm.default", inputs: [], backward: true, cell: 3 },
];

test("filterLog keeps ops by text and by phase, with their place in the log", () => {
  assert.deepEqual(filterLog(records, { text: "MM" }).map((r) => r.index), [1, 4]);
  assert.deepEqual(filterLog(records, { phase: "backward" }).map((r) => r.index), [3, 4]);
  assert.deepEqual(filterLog(records, { text: "mm", phase: "forward", start: 10 }).map((r) => r.index), [11]);
  assert.equal(phaseOf("aten.mm.default"), null);
  assert.equal(phaseOf({ op: "x" }), null);
  assert.equal(phaseOf(records[2]), "backward");
});

const logChain = (log, extra = {}) => ({ names: ["w"], nodes: [{ kind: "logging", type: "LoggingTensor", id: 7, owner: "me",
  shape: [3, 3], dtype: "float32", log_length: log.length, log_tail: log.slice(-2).map((r) => r.op), ...extra }] });

async function openLog(chain, reply) {
  const ctx = { workers: () => [], run: () => {}, request: () => Promise.resolve(reply), layoutChanged: () => {} };
  const el = renderChains([chain], ctx);
  el.querySelector(".syft-log-toggle").dispatchEvent(new window.Event("click"));
  await new Promise((r) => setTimeout(r, 0));
  return el;
}

const ops = (el) => [...el.querySelectorAll(".syft-log li:not(.syft-log-section):not(.syft-more):not(.syft-empty)")];

test("the op log separates forward from backward ops and filters them", async () => {
  const el = await openLog(logChain(records), { ok: true, total: 4, log: records });
  assert.deepEqual([...el.querySelectorAll(".syft-log-section")].map((s) => s.dataset.section), ["forward", "backward"]);
  assert.deepEqual(ops(el).map((li) => li.dataset.phase), ["forward", "forward", "backward", "backward"]);
  const input = el.querySelector(".syft-log-filter");
  input.value = "mm";
  input.dispatchEvent(new window.Event("input"));
  assert.deepEqual(ops(el).map((li) => li.getAttribute("value")), ["1", "4"]);
  assert.equal(el.querySelector(".syft-log-count").textContent, "2 of 4 shown");
  el.querySelector(".syft-log-phase[data-phase=backward]").dispatchEvent(new window.Event("click"));
  assert.deepEqual(ops(el).map((li) => li.getAttribute("value")), ["4"]);
  assert.equal(el.querySelector(".syft-log-phase[data-phase=backward]").getAttribute("aria-pressed"), "true");
  input.value = "conv";
  input.dispatchEvent(new window.Event("input"));
  assert.equal(ops(el).length, 0);
  assert.match(el.querySelector(".syft-log").textContent, /no op matches/);
});

test("an op links to the cell that ran it", async () => {
  const el = await openLog(logChain(records), { ok: true, total: 4, log: records });
  const links = [...el.querySelectorAll(".syft-log-cell")];
  assert.deepEqual(links.map((b) => b.dataset.cell), ["2", "2", "3", "3"]);
  assert.ok(links.every((b) => /\[\d\]/.test(b.textContent)), links.map((b) => b.textContent).join());
  // in a notebook, the link scrolls to the cell with that prompt
  const nb = document.createElement("div");
  nb.className = "jp-Notebook";
  nb.innerHTML = '<div class="jp-Cell"><div class="jp-InputArea-prompt">[3]:</div></div>';
  let scrolled = null;
  nb.querySelector(".jp-Cell").scrollIntoView = function () { scrolled = this; };
  nb.append(el);
  document.body.append(nb);
  el.querySelectorAll(".syft-log-cell")[2].dispatchEvent(new window.Event("click"));
  assert.equal(scrolled, nb.querySelector(".jp-Cell"));
  assert.ok(scrolled.classList.contains("syft-cell-flash"));
  nb.remove();
});

test("an op log without phases shows no phase buttons, and no links without cells", async () => {
  const plain = records.map(({ op, inputs }) => ({ op, inputs }));
  const el = await openLog(logChain(plain), { ok: true, total: 4, log: plain });
  assert.equal(el.querySelector(".syft-log-phases").hidden, true);
  assert.equal(el.querySelectorAll(".syft-log-section").length, 0);
  assert.equal(el.querySelectorAll(".syft-log-cell").length, 0);
  assert.equal(ops(el).length, 4);
});

test("a plan built for several signatures lets one pick the graph shown", () => {
  const small = { nodes: [{ id: "in0", role: "input", label: "x", shape: [3], dtype: "float32" },
    { id: "v0", role: "op", label: "abs", op: "aten.abs.default", shape: [3], dtype: "float32", inputs: ["in0"] }],
  edges: [{ from: "in0", to: "v0", shape: [3] }] };
  const node = { ...train, signatures: ["(X: float32[4, 3], Y: float32[4, 2])", "(x: float32[3])"], shown: 0,
    graphs: [{ signature: "(X: float32[4, 3], Y: float32[4, 2])", graph: train.graph, code: train.code, n_nodes: train.n_nodes },
      { signature: "(x: float32[3])", graph: small, code: "def f(x):\n    v0 = abs(x)", n_nodes: 1 }] };
  const el = renderPlan(node, { idPrefix: "g" });
  const pick = el.querySelector(".syft-plan-sig-pick");
  assert.deepEqual([...pick.querySelectorAll("option")].map((o) => o.textContent),
    [`(X: float32[4, 3], Y: float32[4, 2]) · ${train.n_nodes} ops`, "(x: float32[3]) · 1 op"]);
  assert.equal(el.querySelectorAll(".syft-plan-node").length > 2, true);
  for (const o of pick.querySelectorAll("option")) o.toggleAttribute("selected", o.value === "1");
  pick.dispatchEvent(new window.Event("change"));
  assert.deepEqual([...el.querySelectorAll(".syft-plan-node")].map((g) => g.getAttribute("data-id")), ["in0", "v0"]);
  assert.match(el.querySelector(".syft-plan-head").textContent, /1 op/);
  assert.match(el.querySelector(".syft-plan-code pre").textContent, /abs\(x\)/);
  assert.equal(el.querySelectorAll(".syft-plan-legend").length, 1);
});

test("a big training step does not drift wide: each region is laid out on its own, its ranks closed up", async () => {
  const { layoutPlan } = await import("../../js/widget/plan.js");
  // a deep chain whose every step has side inputs (a weight and a bias), as an MLP's forward,
  // then a backward chain and updates: a whole-graph dagre layout of this drifts into a staircase
  const nodes = [{ id: "x", role: "input", label: "X", shape: [4, 8], dtype: "float32" }];
  const edges = [];
  let prev = "x";
  for (let i = 0; i < 60; i++) {
    nodes.push({ id: `w${i}`, role: "state", label: `${i}.weight`, shape: [8, 8], dtype: "float32" },
      { id: `b${i}`, role: "state", label: `${i}.bias`, shape: [8], dtype: "float32" },
      { id: `f${i}`, role: "op", label: "addmm", op: "aten.addmm.default", region: "forward", shape: [4, 8], dtype: "float32" });
    edges.push({ from: prev, to: `f${i}` }, { from: `w${i}`, to: `f${i}` }, { from: `b${i}`, to: `f${i}` });
    prev = `f${i}`;
  }
  nodes.push({ id: "seed", role: "op", label: "ones_like", region: "backward", shape: [], dtype: "float32" });
  edges.push({ from: prev, to: "seed" });
  prev = "seed";
  for (let i = 59; i >= 0; i--) {
    nodes.push({ id: `g${i}`, role: "op", label: "mm", region: "backward", shape: [8, 8], dtype: "float32" },
      { id: `u${i}`, role: "op", label: "sub_", region: "update", inplace: true, writes: [`w${i}`], shape: [8, 8], dtype: "float32" });
    edges.push({ from: prev, to: `g${i}` }, { from: `f${i}`, to: `g${i}` }, { from: `g${i}`, to: `u${i}` }, { from: `w${i}`, to: `u${i}` });
    prev = `g${i}`;
  }
  const laid = layoutPlan({ nodes, edges });
  assert.ok(laid.nodes.length > 300);
  const ranks = new Map();
  for (const n of laid.nodes) ranks.set(Math.round(n.y), (ranks.get(Math.round(n.y)) || 0) + n.width + 24);
  const widest = Math.max(...ranks.values());
  assert.ok(laid.width <= 1.6 * widest, `${laid.width} px wide, widest rank ${widest} px`);
  // the regions follow each other top to bottom, and no two boxes overlap
  const band = (r) => laid.clusters.find((c) => c.region === r);
  assert.ok(band("forward").y < band("backward").y && band("backward").y < band("update").y);
  const boxes = laid.nodes;
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i];
      const b = boxes[j];
      assert.ok(!(Math.abs(a.x - b.x) < (a.width + b.width) / 2 - 0.5 && Math.abs(a.y - b.y) < (a.height + b.height) / 2 - 0.5),
        `${a.id} overlaps ${b.id}`);
    }
  }
  // every node and edge point lies inside the graph
  for (const n of laid.nodes) assert.ok(n.x - n.width / 2 >= 0 && n.x + n.width / 2 <= laid.width + 0.5 && n.y >= 0 && n.y <= laid.height);
  for (const e of laid.edges) for (const p of e.points) assert.ok(p.x >= -0.5 && p.x <= laid.width + 0.5, `${e.from}->${e.to}`);
});

test("a plan node's details show the source line it came from", async () => {
  const { nodeDetails, sourceText } = await import("../../js/widget/plan.js");
  assert.equal(sourceText({ cell: 3, line: 2, code: "  y = x * 2\n" }), "cell [3], line 2: y = x * 2");
  assert.equal(sourceText({ file: "/home/me/train.py", line: 12, code: "loss = f(x)" }), "train.py, line 12: loss = f(x)");
  assert.equal(sourceText("cell 3, line 2: y = x * 2"), "cell 3, line 2: y = x * 2");
  assert.equal(sourceText({ file: "/tmp/ipykernel_4242/1234567.py", line: 3, code: "    return 2 * x" }), "a notebook cell, line 3: return 2 * x");
  const rows = nodeDetails({ id: "v0", role: "op", op: "aten.mul.Tensor", source: { cell: 3, line: 2, code: "y = x * 2" } }, new Map(), () => {});
  assert.ok(rows.some((r) => /source\s+cell \[3\], line 2: y = x \* 2/.test(r.textContent)));
  const none = nodeDetails({ id: "v0", role: "op", op: "aten.mul.Tensor" }, new Map(), () => {});
  assert.ok(!none.some((r) => /source/.test(r.textContent)));
});
