// The world's edges are the rows with a `location` (dom.js isEdge, as the kernel's
// tensors/nodes.py is_edge): the views link, light and draw a row that refers elsewhere by that
// field, whatever its layer's kind, so a new layer that points to an object on a worker needs
// no change in the front end.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { isEdge } = await import("../../js/widget/dom.js");
const { litKeys, worldLinks } = await import("../../js/widget/world/links.js");
const { objectRowHTML } = await import("../../js/widget/world/rows.js");
const { indexWorld } = await import("../../js/widget/patch.js");

const target = { id: 3, kind: "tensor", type: "Tensor", refcount: 1, names: [], actions: ["get", "move"] };
const ref = (kind) => ({ id: 7, kind, type: "RefTensor", location: "bob", id_at_location: 3, state: "ok", names: ["r"], actions: [] });
const world = (row) => ({ workers: [{ id: "me", objects: [row] }, { id: "bob", objects: [target] }] });

test("isEdge: a row or node with a location refers elsewhere; nothing else does", () => {
  assert.equal(isEdge(ref("pointer")), true);
  assert.equal(isEdge(ref("toy_ref")), true);
  assert.equal(isEdge(target), false);
  assert.equal(isEdge({ kind: "pointer" }), false); // no location: no edge to draw
  assert.equal(isEdge(undefined), false);
});

test("a row of any kind with a location is linked, lit with its target and drawn pointing there", () => {
  for (const kind of ["pointer", "toy_ref"]) {
    const w = world(ref(kind));
    const links = worldLinks(w);
    assert.deepEqual(links.pointedBy.get("bob:3"), ["r"], kind);
    assert.deepEqual(litKeys("me:7", ref(kind), links, indexWorld(w)), ["me:7", "bob:3"], kind);
    const html = objectRowHTML("me", ref(kind), target, {});
    assert.match(html, /class="syft-where"/, kind);
    assert.match(html, /syft-worker-chip">bob</, kind);
  }
  // the same row without its location is a plain row: nothing points to bob:3
  const { location: _gone, ...plain } = ref("toy_ref");
  assert.equal(worldLinks(world(plain)).pointedBy.has("bob:3"), false);
  assert.doesNotMatch(objectRowHTML("me", plain, undefined, {}), /syft-where/);
});
