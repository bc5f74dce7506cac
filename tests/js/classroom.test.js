// Classroom (issue 26.11): previous/next step controls (buttons and arrow keys) for the history,
// a "hide temporaries and ghosts" filter, and a large-font mode with taller rows.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { createWorldView, isTemporary } = await import("../../js/widget/world.js");
const { applyWorldPatch } = await import("../../js/widget/patch.js");

const tensor = (id, extra = {}) => ({ id, kind: "tensor", type: "Tensor", shape: [2], dtype: "float32", tags: [], refcount: 1,
  names: [], actions: ["get", "move"], ...extra });
const ptr = (id, location, at, names, extra = {}) => ({ id, kind: "pointer", type: "PointerTensor", location, id_at_location: at,
  owning: true, state: "ok", names, actions: ["get", "move"], ...extra });

function start() {
  return { rev: 1, workers: [
    { id: "me", kind: "local", state: "in-process", objects: [ptr(10, "bob", 1, ["x_ptr"]), ptr(11, "bob", 2, [])] },
    { id: "bob", kind: "virtual", state: "in-process", objects: [tensor(1), tensor(2), tensor(3, { tags: ["#data"] }),
      tensor(4, { group: 8, share: { index: 0, of: 2 } })] }] };
}

function view() {
  const wv = createWorldView({ workers: () => [], run: async () => ({ ok: true }) });
  document.body.append(wv.frame);
  return wv;
}

function withSteps(wv) {
  const w1 = start();
  wv.update(w1);
  const w2 = applyWorldPatch(w1, { base: 1, rev: 2, ops: [["put", "bob", 4, tensor(5)]],
    step: { cell: 3, by: "cell", code: "y = x_ptr * 2", events: [{ type: "stored", worker: "bob", id: 5 }] } });
  wv.update(w2);
  const w3 = applyWorldPatch(w2, { base: 2, rev: 3, ops: [["del", "bob", 2]],
    step: { cell: 4, by: "cell", code: "del y", events: [{ type: "deleted", worker: "bob", id: 2 }] } });
  wv.update(w3);
}

function key(el, k) {
  const ev = new window.Event("keydown", { bubbles: true, cancelable: true });
  Object.defineProperty(ev, "key", { value: k });
  el.dispatchEvent(ev);
}

test("previous and next step through the history, by buttons and by arrow keys; Esc is now", () => {
  const wv = view();
  withSteps(wv);
  const pos = () => wv.frame.querySelector(".syft-step-pos").textContent;
  const prev = wv.frame.querySelector(".syft-step-prev");
  const next = wv.frame.querySelector(".syft-step-next");
  assert.equal(pos(), "step 2 of 2");
  assert.ok(next.disabled && !prev.disabled);
  prev.click();
  assert.equal(pos(), "step 1 of 2");
  assert.ok(wv.frame.classList.contains("syft-replaying"));
  assert.ok(wv.rowFor("bob", 2), "the world after step 1 still had bob's object 2");
  key(wv.frame, "ArrowLeft");
  assert.equal(pos(), "step 0 of 2");
  assert.ok(prev.disabled);
  assert.ok(!wv.rowFor("bob", 5), "before step 1 there was no object 5");
  key(wv.frame, "ArrowRight");
  assert.equal(pos(), "step 1 of 2");
  key(wv.frame, "Escape");
  assert.equal(pos(), "step 2 of 2");
  assert.ok(!wv.frame.classList.contains("syft-replaying") && !wv.rowFor("bob", 2));
  // arrow keys in the search box move its cursor, not the history
  key(wv.frame.querySelector(".syft-search"), "ArrowLeft");
  assert.equal(pos(), "step 2 of 2");
  wv.destroy();
  wv.frame.remove();
});

test("hide temporaries and ghosts keeps what a person named or would look for", () => {
  const w = start();
  const named = new Set(["bob:1"]);
  assert.deepEqual(w.workers[1].objects.map((o) => isTemporary("bob", o, named)), [false, true, false, false]);
  assert.deepEqual(w.workers[0].objects.map((o) => isTemporary("me", o, named)), [false, true]);
  assert.equal(isTemporary("me", ptr(12, "bob", 1, ["gone_ptr"], { state: "gone" }), named), true);
  const wv = view();
  wv.update(w);
  const box = wv.frame.querySelector(".syft-tidy");
  box.checked = true;
  box.dispatchEvent(new window.Event("change"));
  assert.ok(wv.rowFor("me", 10) && !wv.rowFor("me", 11));
  assert.ok(wv.rowFor("bob", 1) && !wv.rowFor("bob", 2) && wv.rowFor("bob", 3) && wv.rowFor("bob", 4));
  box.checked = false;
  box.dispatchEvent(new window.Event("change"));
  assert.ok(wv.rowFor("me", 11) && wv.rowFor("bob", 2));
  wv.destroy();
  wv.frame.remove();
});

test("classroom mode: a large font and taller rows, laid out again", () => {
  const wv = view();
  wv.update(start());
  const big = wv.frame.querySelector(".syft-big-toggle");
  assert.equal(wv.rowFor("bob", 2).style.top, "26px");
  big.click();
  assert.ok(wv.frame.classList.contains("syft-classroom"));
  assert.equal(big.getAttribute("aria-pressed"), "true");
  assert.equal(wv.rowFor("bob", 2).style.top, "36px");
  assert.equal(wv.el.querySelector(".syft-lane[data-worker=bob] .syft-objects").style.height, `${4 * 36}px`);
  big.click();
  assert.equal(wv.rowFor("bob", 2).style.top, "26px");
  wv.destroy();
  wv.frame.remove();
});
