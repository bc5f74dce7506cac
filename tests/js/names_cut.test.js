// Names a projector can show (issue 39.3), without a browser: where a cut name keeps what tells
// it apart from the other names of its lane (dom.js), and what a closed lane's state says.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { cutName, distinctFrom, nameParts, nameTail, nameHTML } = await import("../../js/widget/dom.js");
const { laneHead, objectRowHTML } = await import("../../js/widget/world/rows.js");

const MARY = "data['st_mary_hospital'][0]";
const MARTIN = "data['st_martin_hospital'][0]";

test("a name's tail is its last index or attribute", () => {
  assert.equal(nameTail(MARY), "[0]");
  assert.equal(nameTail("segment_1.0.weight"), ".weight");
  assert.equal(nameTail("global_model_round_3"), "_3");
  assert.equal(nameTail("x"), "");
});

test("names differ where their bodies part: two hospitals at 'y_h' / 'tin', two indices by their tail", () => {
  const at = distinctFrom([MARY, "data['st_mary_hospital'][1]", MARTIN, "w"]);
  assert.equal(at.get(MARY), "data['st_mar".length); // [0] and [1] differ in the tail, kept anyway
  assert.equal(at.get(MARTIN), "data['st_mar".length);
  assert.equal(at.get("w"), 0);
  assert.deepEqual(nameParts(MARY, at.get(MARY)), ["data['st_mar", "y_ho", "spital']", "[0]"]);
});

test("a cut name keeps where it differs and its tail, whatever the room", () => {
  const at = "data['st_mar".length;
  for (const n of [20, 14, 10, 9, 8, 7]) {
    const mary = cutName(MARY, n, at);
    const martin = cutName(MARTIN, n, at);
    assert.ok(mary.endsWith("[0]") && martin.endsWith("[0]"), `${n}: ${mary} ${martin}`);
    assert.ok(mary.includes("y_") && martin.includes("ti"), `${n}: ${mary} ${martin}`);
    assert.notEqual(mary, martin);
    assert.ok(mary.length <= Math.max(n, 7), `${n}: ${mary}`);
  }
  assert.equal(cutName(MARY, 40, at), MARY); // room for all of it: whole
  assert.equal(cutName(MARY, 14, at), "data[…y_ho…[0]");
  // the tightest room (a large-font row beside its marks): one differing character still tells them apart
  const T = "fds['st_mary_hospital'].targets";
  const tAt = "fds['st_mar".length;
  assert.equal(cutName(T, 11, tAt), "…y….targets");
  assert.equal(cutName(T, 10, tAt), "y….targets");
});

test("a row carries the whole name for the fitting, its title and its text", () => {
  const html = objectRowHTML("me", { id: 3, kind: "pointer", type: "PointerTensor", location: "st_mary_hospital",
    id_at_location: 4, owning: true, state: "ok", names: [], held_in: [MARY], actions: ["get"] }, undefined,
  { distinct: new Map([[MARY, 12]]) });
  const el = document.createElement("div");
  el.innerHTML = html;
  const cut = el.querySelector(".syft-names .syft-cut");
  assert.equal(cut.dataset.full, MARY);
  assert.equal(cut.dataset.at, "12");
  assert.equal(cut.textContent, MARY); // cut only in a laid-out page, to the room it has
  assert.ok(el.querySelector(".syft-names").getAttribute("title").startsWith(MARY));
  assert.equal(el.querySelector(".syft-chip-long").getAttribute("title"), "st_mary_hospital");
  assert.equal(nameHTML("a<b", 0), '<span class="syft-cut" data-full="a&#60;b" data-at="0">a&#60;b</span>');
});

test("a closed lane says it refuses requests and keeps what it lists until released", () => {
  const head = laneHead({ id: "county", kind: "virtual", state: "closed", objects: [{ id: 1 }, { id: 2 }] }, 2, false, false, "");
  const state = head.querySelector(".syft-lane-state");
  assert.equal(state.textContent, "closed");
  const title = state.getAttribute("title");
  assert.match(title, /refuses every request/);
  assert.match(title, /keeps the objects its lane lists until their pointers release them/);
  assert.doesNotMatch(title, /objects are gone/);
});
