import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { renderChains, ownerRuns } = await import("../../js/widget/chain.js");
const { createWorldView } = await import("../../js/widget/world.js");
const { actionsFor, destinations, createClient } = await import("../../js/widget/actions.js");
const { applyWorldPatch } = await import("../../js/widget/patch.js");

const workers = [{ id: "me", kind: "local", state: "in-process" }, { id: "bob", kind: "virtual", state: "in-process" },
  { id: "alice", kind: "virtual", state: "in-process" }, { id: "gone", kind: "websocket", state: "closed" }];
const calls = [];
const ctx = { workers: () => workers, run: (...a) => { calls.push(a); return Promise.resolve({ ok: true }); },
  request: () => Promise.resolve({ ok: false }) };

const ptrChain = {
  names: ["x_ptr"],
  nodes: [
    { kind: "pointer", type: "PointerTensor", id: 1001, owner: "me", shape: [2], dtype: "float32", requires_grad: false,
      grad_fn: null, tags: [], description: null, location: "bob", id_at_location: 2002, owning: true, state: "ok",
      actions: ["get", "move"] },
    { kind: "logging", type: "LoggingTensor", id: 2002, owner: "bob", shape: [2], dtype: "float32", log_length: 7,
      log_tail: ["aten.mul.Tensor", "aten.sum.default"], tags: ["#x"] },
    { kind: "tensor", type: "Tensor", id: 3003, owner: "bob", shape: [2], dtype: "float32", preview: null, tags: [] },
  ],
};

test("a pointer chain: head box with buttons, remote part inside bob's colour, no values", () => {
  const el = renderChains([ptrChain], ctx);
  const boxes = el.querySelectorAll(".syft-box");
  assert.deepEqual([...boxes].map((b) => b.getAttribute("data-kind")), ["pointer", "logging", "tensor"]);
  const remote = el.querySelector(".syft-remote");
  assert.equal(remote.getAttribute("data-worker"), "bob");
  assert.equal(remote.querySelectorAll(".syft-box").length, 2);
  assert.match(boxes[0].textContent, /→ bob:/);
  assert.equal(boxes[0].querySelector(".syft-id").getAttribute("title"), "id 1001");
  assert.deepEqual([...el.querySelectorAll("[data-action]")].map((b) => b.getAttribute("data-action")), ["get", "move"]);
  assert.match(boxes[2].textContent, /values stay on bob/);
  assert.match(boxes[1].textContent, /log: 7 ops/);
  assert.equal(el.querySelector(".syft-names").textContent, "x_ptr");
});

test("the op log opens from the LoggingTensor's box", async () => {
  const el = renderChains([ptrChain], ctx);
  const btn = el.querySelector(".syft-log-toggle");
  const list = el.querySelector(".syft-log");
  assert.equal(list.hidden, true);
  btn.dispatchEvent(new window.Event("click"));
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(list.hidden, false);
  const items = [...list.querySelectorAll("li")].map((li) => li.textContent);
  assert.deepEqual(items, ["… 5 earlier", "aten.mul.Tensor", "aten.sum.default"]);
});

test("a local tensor's chain shows its preview and a Send menu of live workers", () => {
  const chain = { names: ["x"], nodes: [{ kind: "tensor", type: "Tensor", id: 5, owner: "me", shape: [3], dtype: "float32",
    actions: ["send"],
    preview: { numel: 3, values: [1, 2, 3], truncated: false, text: "tensor([1., 2., 3.])", min: 1, max: 3, mean: 2 } }] };
  const el = renderChains([chain], ctx);
  assert.equal(el.querySelector(".syft-values").textContent, "tensor([1., 2., 3.])");
  assert.match(el.querySelector(".syft-stats").textContent, /3 values · min 1 · max 3 · mean 2/);
  const send = el.querySelector("[data-action=send]");
  document.body.append(el);
  send.dispatchEvent(new window.Event("click"));
  const items = [...el.querySelectorAll(".syft-menu-item")].map((b) => b.getAttribute("data-worker"));
  assert.deepEqual(items, ["bob", "alice"]); // not me, not a closed worker
  el.querySelector(".syft-menu-item[data-worker=alice]").dispatchEvent(new window.Event("click"));
  assert.deepEqual(calls.at(-1), ["send", { worker: "me", id: 5 }, { worker: "alice" }]);
  assert.equal(el.querySelector(".syft-menu"), null);
  el.remove();
});

test("ownerRuns splits a chain where it changes worker", () => {
  assert.deepEqual(ownerRuns(ptrChain.nodes).map((r) => [r.owner, r.nodes.length]), [["me", 1], ["bob", 2]]);
});

test("the buttons are the actions the model offers, never recomputed", () => {
  const ptr = ptrChain.nodes[0];
  assert.deepEqual(actionsFor("me", ptr).map((a) => [a.action, a.label, a.menu]),
    [["get", "Get", false], ["move", "Move…", true]]);
  assert.deepEqual(actionsFor("me", { ...ptr, actions: [] }), []); // e.g. a gone pointer
  assert.deepEqual(actionsFor("me", { kind: "tensor", id: 1 }), []); // no actions field: no buttons
  assert.deepEqual(actionsFor("bob", { kind: "plan", id: 1, actions: ["get"] }).map((a) => a.action), ["get"]);
  // an action a new layer offers shows with its name; the op log read is no button
  assert.deepEqual(actionsFor("me", { kind: "fixed_precision", actions: ["float_precision", "oplog"] })
    .map((a) => [a.action, a.label]), [["float_precision", "float precision"]]);
  assert.deepEqual(destinations("move", "me", ptr, workers), ["alice"]);
  assert.deepEqual(destinations("move", "bob", { kind: "tensor", refcount: 1 }, workers), ["alice"]);
});

const entry = (id, extra = {}) => ({ id, kind: "tensor", type: "Tensor", shape: [2], dtype: "float32", tags: [], names: [], refcount: 1, ...extra });
function bigWorld() {
  return { rev: 0, workers: [
    { id: "me", kind: "local", state: "in-process", objects: [
      { id: 9, kind: "pointer", type: "PointerTensor", location: "bob", id_at_location: 1, owning: true, state: "ok", names: ["x_ptr"],
        actions: ["get", "move"] },
      { id: 8, kind: "tensor", type: "Tensor", shape: [2], dtype: "float32", tags: [], names: ["x"] }] },
    { id: "bob", kind: "virtual", state: "in-process", objects: [entry(1), entry(2), entry(3)] },
    { id: "alice", kind: "virtual", state: "in-process", objects: [] },
  ] };
}

test("world view: one lane per worker, rows, names, pointer rows show their target's shape", () => {
  const wv = createWorldView(ctx);
  document.body.append(wv.el);
  wv.update(bigWorld());
  const lanes = [...wv.el.querySelectorAll(".syft-lane")].map((l) => l.getAttribute("data-worker"));
  assert.deepEqual(lanes, ["me", "bob", "alice"]);
  assert.equal(wv.el.querySelectorAll(".syft-lane[data-worker=bob] .syft-obj").length, 3);
  const ptrRow = wv.rowFor("me", 9);
  assert.match(ptrRow.textContent, /x_ptr.*float32\[2\].*→ bob:/);
  assert.deepEqual([...ptrRow.querySelectorAll("[data-action]")].map((b) => b.getAttribute("data-action")), ["get", "move"]);
  assert.match(wv.el.querySelector(".syft-lane[data-worker=bob] .syft-lane-count").textContent, /3 objects/);
  wv.destroy();
  wv.el.remove();
});

test("world view updates only the rows a patch touched", () => {
  const wv = createWorldView(ctx);
  const w0 = bigWorld();
  wv.update(w0);
  const keep = wv.rowFor("bob", 1);
  const change = wv.rowFor("bob", 2);
  const w1 = applyWorldPatch(w0, { base: 0, rev: 1, ops: [["put", "bob", 1, entry(2, { tags: ["#new"] })], ["del", "bob", 3],
    ["put", "alice", 0, entry(4)]] });
  wv.update(w1);
  assert.equal(wv.rowFor("bob", 1), keep); // same DOM node
  assert.notEqual(wv.rowFor("bob", 2), change);
  assert.match(wv.rowFor("bob", 2).textContent, /#new/);
  assert.equal(wv.rowFor("bob", 3), null);
  assert.equal(wv.el.querySelectorAll(".syft-lane[data-worker=bob] .syft-obj").length, 2);
  assert.ok(wv.rowFor("alice", 4));
  // a focused view (a worker's display) shows only that lane
  wv.update(w1, ["alice"]);
  assert.deepEqual([...wv.el.querySelectorAll(".syft-lane")].map((l) => l.getAttribute("data-worker")), ["alice"]);
  wv.destroy();
});

test("the client pairs replies with requests and times out", async () => {
  const handlers = new Set();
  const sent = [];
  const client = createClient({ send: (m) => sent.push(m), on: (f) => handlers.add(f), off: (f) => handlers.delete(f), timeout: 30 });
  const p = client.request("get", { worker: "me", id: 9, extra: "dropped" }, { name: "x" });
  assert.deepEqual(Object.keys(sent[0]).sort(), ["action", "name", "req", "target", "type"]);
  assert.deepEqual(sent[0].target, { worker: "me", id: 9 });
  for (const f of handlers) f({ type: "reply", req: "other", ok: true });
  for (const f of handlers) f({ type: "reply", req: sent[0].req, ok: true, code: "x = x_ptr.get()" });
  assert.equal((await p).code, "x = x_ptr.get()");
  const late = await client.request("get", { worker: "me", id: 9 });
  assert.equal(late.ok, false);
  assert.match(late.error, /no answer/);
  client.dispose();
  assert.equal(handlers.size, 0);
});

test("lanes are virtual: only the rows in view exist, scrolling brings the others", async () => {
  const { ROW_H } = await import("../../js/widget/world.js");
  const many = Array.from({ length: 500 }, (_, i) => entry(i + 1));
  const w = { rev: 0, workers: [{ id: "bob", kind: "virtual", state: "in-process", objects: many }] };
  const wv = createWorldView(ctx);
  wv.update(w);
  const list = wv.el.querySelector(".syft-objects");
  assert.equal(list.style.height, `${500 * ROW_H}px`);
  const rows = () => [...wv.el.querySelectorAll(".syft-obj")].map((r) => Number(r.dataset.key.split(":")[1]));
  assert.ok(rows().length < 60 && rows().includes(1) && !rows().includes(300));
  assert.equal(wv.rowFor("bob", 2).style.top, `${ROW_H}px`);
  wv.el.scrollTop = 300 * ROW_H;
  wv.layoutChanged();
  await new Promise((r) => setTimeout(r, 30));
  assert.ok(rows().includes(301) && !rows().includes(1));
  assert.equal(wv.rowFor("bob", 301).style.top, `${300 * ROW_H}px`);
  wv.destroy();
});

test("world view rows mark data the worker holds itself and pointers that do not own their target", () => {
  const wv = createWorldView(ctx);
  document.body.append(wv.el);
  wv.update({ schema: "syft_lab.world", version: 1, workers: [
    { id: "me", kind: "local", state: "in-process", objects: [
      { id: 7, kind: "pointer", type: "PointerTensor", location: "bob", id_at_location: 70, owning: false, state: "ok",
        names: ["found"] },
      { id: 8, kind: "pointer", type: "PointerTensor", location: "bob", id_at_location: 80, owning: true, state: "ok",
        names: ["mine"] }] },
    { id: "bob", kind: "virtual", state: "in-process", objects: [
      { id: 70, kind: "tensor", type: "Tensor", shape: [2], dtype: "float32", tags: ["#boston"], refcount: 0, held: true,
        names: [] },
      { id: 80, kind: "tensor", type: "Tensor", shape: [2], dtype: "float32", tags: [], refcount: 1, names: [] }] }] });
  assert.match(wv.rowFor("bob", 70).querySelector(".syft-held").textContent, /held/);
  assert.equal(wv.rowFor("bob", 80).querySelector(".syft-held"), null);
  assert.match(wv.rowFor("me", 7).textContent, /→ bob:.*weak/);
  assert.doesNotMatch(wv.rowFor("me", 8).textContent, /weak/);
  wv.destroy();
  wv.el.remove();
});
