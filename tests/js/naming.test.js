// Every row named as a person would (issue 26.4-26.6): a share by its secret (wherever the
// secret is held: the kernel sends `secret`), a plan's state by its plan, an unnamed object by
// its description; a share offers no button alone.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { createWorldView, objectRowHTML } = await import("../../js/widget/world.js");

const share = (id, index, extra = {}) => ({ id, kind: "tensor", type: "Tensor", shape: [2], dtype: "int64", tags: [],
  refcount: 1, names: [], actions: [], group: 9, share: { index, of: 2 }, secret: "cnn.0.weight", ...extra });

function row(html) {
  const t = document.createElement("template");
  t.innerHTML = html;
  return t.content.firstElementChild;
}

test("a share held as a module's parameter is named by its secret, with its badge and no buttons", () => {
  const r = row(objectRowHTML("bob", share(1, 0), undefined, { shareOf: "cnn.0.weight" }));
  assert.match(r.textContent, /share of cnn\.0\.weight/);
  assert.equal(r.querySelector(".syft-share").textContent, "share 1/2");
  assert.equal(r.querySelectorAll("button").length, 0);
});

test("the world view names shares and the pointers to them by the secret the kernel names", () => {
  const wv = createWorldView({ workers: () => [], run: async () => ({ ok: true }) });
  document.body.append(wv.frame);
  wv.update({ rev: 0, workers: [
    { id: "me", kind: "local", state: "in-process", objects: [
      { id: 50, kind: "pointer", type: "PointerTensor", location: "bob", id_at_location: 1, owning: true, state: "ok",
        names: [], actions: [], group: 9, share: { index: 0, of: 2 }, secret: "cnn.0.weight" }] },
    { id: "bob", kind: "virtual", state: "in-process", objects: [share(1, 0),
      { id: 2, kind: "tensor", type: "Tensor", shape: [3], dtype: "float32", tags: [], refcount: 1, names: [],
        actions: ["get", "move"], state_of: "train_step", state_of_id: 3 },
      { id: 4, kind: "tensor", type: "Tensor", shape: [3], dtype: "float32", tags: [], refcount: 1, names: [],
        actions: ["get", "move"], description: "fl: client model of bob" }] },
  ] });
  assert.match(wv.rowFor("me", 50).textContent, /share of cnn\.0\.weight/);
  assert.doesNotMatch(wv.rowFor("me", 50).textContent, /unnamed/);
  assert.match(wv.rowFor("bob", 1).textContent, /share of cnn\.0\.weight/);
  assert.match(wv.rowFor("bob", 1).textContent, /← cnn\.0\.weight's share/);
  assert.match(wv.rowFor("bob", 2).textContent, /state of train_step/);
  assert.match(wv.rowFor("bob", 4).textContent, /fl: client model of bob/);
  wv.destroy();
  wv.frame.remove();
});
