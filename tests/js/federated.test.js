import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { createWorldView, objectRowHTML } = await import("../../js/widget/world.js");
const { default: chart, chartHTML, seriesOf } = await import("../../syft_lab/federated/chart.mjs");

const ctx = { workers: () => [], run: () => Promise.resolve({ ok: true }), request: () => Promise.resolve({ ok: false }) };

function part(id, p, samples, sampleShape) {
  return { id, kind: "tensor", type: "Tensor", shape: [samples, ...sampleShape], dtype: p === "data" ? "float32" : "int64",
    tags: ["#dataset", "#digits", p === "data" ? "#data" : "#target", "#extra"], refcount: 0, held: true, names: [],
    dataset: { name: "digits", part: p, samples, sample_shape: sampleShape } };
}

test("world view: each part of a worker's dataset is a row with its name, part, samples and sample shape", () => {
  const wv = createWorldView(ctx);
  document.body.append(wv.el);
  wv.update({ schema: "syft_lab.world", version: 1, workers: [
    { id: "bob", kind: "virtual", state: "in-process", objects: [part(1, "data", 599, [8, 8]), part(2, "targets", 599, []),
      { id: 3, kind: "tensor", type: "Tensor", shape: [2], dtype: "float32", tags: ["#x"], refcount: 1, names: [] }] },
    { id: "alice", kind: "virtual", state: "in-process", objects: [part(4, "data", 598, [64])] }] });
  const data = wv.rowFor("bob", 1);
  assert.ok(data.classList.contains("syft-obj-dataset"));
  assert.equal(data.querySelector(".syft-dataset").textContent, "digits data · 599 × 8×8");
  assert.equal(data.querySelector(".syft-dataset-name").textContent, "digits");
  assert.match(data.querySelector(".syft-dataset").getAttribute("title"), /599 samples of shape \[8, 8\]/);
  // the convention's tags make way for the badge; other tags stay
  assert.deepEqual([...data.querySelectorAll(".syft-tag")].map((t) => t.textContent), ["#extra"]);
  assert.ok(data.querySelector(".syft-held"));
  assert.equal(wv.rowFor("bob", 2).querySelector(".syft-dataset").textContent, "digits targets · 599");
  assert.equal(wv.rowFor("alice", 4).querySelector(".syft-dataset").textContent, "digits data · 598 × 64");
  const plain = wv.rowFor("bob", 3);
  assert.equal(plain.querySelector(".syft-dataset"), null);
  assert.ok(!plain.classList.contains("syft-obj-dataset"));
  wv.destroy();
  wv.el.remove();
});

test("a dataset name is escaped in the row", () => {
  const o = part(9, "data", 3, [2]);
  o.dataset.name = "<b>x</b>";
  const html = objectRowHTML("bob", o);
  assert.ok(!html.includes("<b>") && html.includes("&#60;b&#62;x&#60;/b&#62;"));
});

const rounds = [
  { round: 1, clients: { bob: { loss: 2.0, accuracy: 0.2 }, alice: { loss: 1.8, accuracy: 0.3 } }, global: { loss: 1.9, accuracy: 0.25 } },
  { round: 2, clients: { bob: { loss: 1.0, accuracy: 0.6 }, alice: { loss: 0.9, accuracy: 0.7 } }, global: { loss: 0.8, accuracy: 0.75 } },
];

test("round chart: one series per client and the global model, per metric", () => {
  assert.deepEqual(seriesOf(rounds, "loss"), { bob: [[1, 2.0], [2, 1.0]], alice: [[1, 1.8], [2, 0.9]], global: [[1, 1.9], [2, 0.8]] });
  assert.deepEqual(seriesOf(rounds, "accuracy").global, [[1, 0.25], [2, 0.75]]);
  const box = document.createElement("div");
  box.innerHTML = chartHTML(rounds);
  assert.equal(box.querySelectorAll("svg").length, 2);
  const lines = [...box.querySelectorAll("svg")[0].querySelectorAll("polyline")].map((p) => p.getAttribute("data-series"));
  assert.deepEqual(lines, ["bob", "alice", "global"]);
  assert.equal(box.querySelectorAll("svg")[0].querySelector("polyline").getAttribute("points").split(" ").length, 2);
  assert.match(box.querySelector(".syft-chart-summary").textContent, /round 2 · global loss 0.8000 · accuracy 75.0%/);
  assert.match(chartHTML([]), /no rounds yet/);
});

test("round chart redraws when the kernel adds a round, and stops listening when removed", () => {
  const handlers = {};
  let value = [];
  const model = { get: () => value, on: (ev, fn) => { handlers[ev] = fn; }, off: (ev) => { delete handlers[ev]; } };
  const el = document.createElement("div");
  const cleanup = chart.render({ model, el });
  assert.match(el.textContent, /no rounds yet/);
  value = rounds.slice(0, 1);
  handlers["change:rounds"]();
  assert.match(el.querySelector(".syft-chart-summary").textContent, /^round 1 · global loss 1.9000/);
  value = rounds;
  handlers["change:rounds"]();
  assert.match(el.querySelector(".syft-chart-summary").textContent, /^round 2/);
  cleanup();
  assert.equal(handlers["change:rounds"], undefined);
});
