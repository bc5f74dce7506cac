// Issue 26.3: a search keeps the targets of the pointers it shows (no arrow into an empty
// lane); the op log files the gradient seed (`ones_like`, issued before autograd's engine
// starts) under backward; a plan a worker holds does not say "not sent to any worker".
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { createWorldView, parseQuery, pinnedTargets } = await import("../../js/widget/world.js");
const { filterLog } = await import("../../js/widget/chain.js");
const { renderPlan } = await import("../../js/widget/plan.js");

const tensor = (id, extra = {}) => ({ id, kind: "tensor", type: "Tensor", shape: [2], dtype: "float32", tags: [], refcount: 1,
  names: [], actions: ["get", "move"], ...extra });
const ptr = (id, location, at, names) => ({ id, kind: "pointer", type: "PointerTensor", location, id_at_location: at, owning: true,
  state: "ok", names, actions: ["get", "move"] });

test("searching a pointer's name keeps its target in view, and nothing else", () => {
  const world = { rev: 0, workers: [
    { id: "me", kind: "local", state: "in-process", objects: [ptr(10, "bob", 1, ["x_ptr"]), ptr(11, "bob", 2, ["y_ptr"])] },
    { id: "bob", kind: "virtual", state: "in-process", objects: [tensor(1), tensor(2), tensor(3)] }] };
  assert.deepEqual([...pinnedTargets(world.workers, parseQuery("x_ptr")).get("bob")], [1]);
  const wv = createWorldView({ workers: () => [], run: async () => ({ ok: true }) });
  document.body.append(wv.frame);
  wv.update(world);
  wv.filter("x_ptr");
  assert.ok(wv.rowFor("me", 10) && !wv.rowFor("me", 11));
  assert.ok(wv.rowFor("bob", 1), "the target of x_ptr stays");
  assert.ok(!wv.rowFor("bob", 2) && !wv.rowFor("bob", 3));
  assert.match(wv.el.querySelector(".syft-lane[data-worker=bob] .syft-lane-count").textContent, /1 of 3 objects/);
  wv.destroy();
  wv.frame.remove();
});

test("the op log files backward's gradient seed under backward", () => {
  const records = [
    { op: "aten.mul.Tensor", inputs: [], backward: false },
    { op: "aten.sum.default", inputs: [], backward: false },
    { op: "aten.ones_like.default", inputs: [], backward: false }, // backward() seeds the gradient
    { op: "aten.expand.default", inputs: [], backward: true },
    { op: "aten.ones_like.default", inputs: [], backward: false }, // a forward ones_like stays forward
    { op: "aten.add.Tensor", inputs: [], backward: false },
  ];
  assert.deepEqual(filterLog(records, { phase: "backward" }).map((r) => r.index), [3, 4]);
  assert.deepEqual(filterLog(records, { phase: "forward" }).map((r) => r.index), [1, 2, 5, 6]);
});

test("the plan a worker holds says it is that worker's copy, not that it was never sent", () => {
  const plan = (owner) => ({ kind: "plan", name: "train_step", owner, built: true, sent_to: [], left: [],
    graph: { nodes: [], edges: [] }, signatures: [] });
  const remote = renderPlan(plan("lab_server"), { idPrefix: "t1" });
  assert.doesNotMatch(remote.textContent, /not sent to any worker/);
  assert.match(remote.textContent, /on lab_server/);
  assert.match(remote.textContent, /the copy lab_server holds/);
  assert.match(renderPlan(plan("me"), { idPrefix: "t2" }).textContent, /not sent to any worker/);
});
