// The world view's filters list what the world holds: the kind filter offers the kinds of the
// objects in the lanes (named by each layer in the kernel's model, never a list of the front
// end's own) plus "dataset" and "gone", and a pick survives a world that no longer has it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { createToolbar, worldKinds } = await import("../../js/widget/world/toolbar.js");

const world = (...lanes) => ({ workers: lanes.map(([id, kinds]) => ({ id, objects: kinds.map((kind, i) => ({ id: i, kind })) })) });
function bar() {
  const t = createToolbar({ onFilter() {}, onBig() {}, stepper: document.createElement("span") });
  return t;
}
// linkedom's select.value misses options made by createElement: read the selected option itself
const picked = (el) => [...el.querySelector(".syft-filter-kind").options].find((o) => o.selected)?.value;
const options = (el, cls) => [...el.querySelector(cls).options].map((o) => o.value);

test("the kind filter offers the kinds the lanes hold, each once, then dataset and gone", () => {
  const t = bar();
  assert.deepEqual(options(t.el, ".syft-filter-kind"), ["", "dataset", "gone"]);
  t.refresh(world(["me", ["tensor", "pointer", "tensor"]], ["bob", ["split", "tensor"]]));
  assert.deepEqual(options(t.el, ".syft-filter-kind"), ["", "pointer", "split", "tensor", "dataset", "gone"]);
  assert.deepEqual(options(t.el, ".syft-filter-worker"), ["", "me", "bob"]);
  assert.deepEqual(worldKinds(world(["me", []])), []);
});

test("a picked kind stays picked, and stays offered, when the world stops holding it", () => {
  const t = bar();
  t.refresh(world(["me", ["tensor", "plan"]]));
  t.set("", "plan", "");
  assert.equal(picked(t.el), "plan");
  t.refresh(world(["me", ["tensor"]]));
  assert.deepEqual(options(t.el, ".syft-filter-kind"), ["", "plan", "tensor", "dataset", "gone"]);
  assert.equal(picked(t.el), "plan");
  t.set("", "", "");
  t.refresh(world(["me", ["tensor"]]));
  assert.deepEqual(options(t.el, ".syft-filter-kind"), ["", "tensor", "dataset", "gone"]);
});
