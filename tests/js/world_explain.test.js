// The world view's Explain panel (js/widget/world/explain.js): it shows what the kernel says
// reconstructing a row's shared value takes, lights that row's shares while open, follows the
// world (redrawn only when its text changed) and closes with its button or a second click.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { createExplain } = await import("../../js/widget/world/explain.js");

const ex = (sent = false) => ({ secret: "sx", crypto_provider: "carol", lines: ["sx is held by nobody", "sx = (share 1 + share 2) mod 2^64"],
  parties: [{ worker: "bob", share: 1, of: 2, sent }, { worker: "alice", share: 2, of: 2, sent }] });

function panel(rows) {
  const box = document.createElement("div");
  box.hidden = true;
  const pins = [];
  const view = createExplain({ box, entryOf: (key) => rows[key], pin: (key) => pins.push(key) });
  return { box, pins, view };
}

test("a row's Explain shows its lines and parties, lights its shares; closing unlights them", () => {
  const rows = { "me:9": { id: 9, explain: ex() } };
  const { box, pins, view } = panel(rows);
  view.show("me:9");
  assert.equal(box.hidden, false);
  assert.equal(view.key, "me:9");
  assert.deepEqual([...box.querySelectorAll(".syft-explain-lines li")].map((li) => li.textContent), ex().lines);
  assert.deepEqual([...box.querySelectorAll(".syft-explain-party")].map((p) => p.textContent),
    ["bob: share 1/2", "alice: share 2/2", "carol: no share"]);
  assert.deepEqual(pins, ["me:9"]);
  box.querySelector(".syft-explain-close").click();
  assert.equal(box.hidden, true);
  assert.equal(view.key, "");
  assert.equal(box.children.length, 0);
  assert.deepEqual(pins, ["me:9", ""]);
});

test("a new world keeps the panel; it is redrawn only when what it says changed", () => {
  const rows = { "me:9": { id: 9, explain: ex() } };
  const { box, pins, view } = panel(rows);
  view.show("me:9");
  const first = box.firstChild;
  rows["me:9"] = { id: 9, explain: ex() }; // the same text in a new world
  view.show("me:9", true);
  assert.equal(box.firstChild, first);
  rows["me:9"] = { id: 9, explain: ex(true) }; // the shares were sent: it says so
  view.show("me:9", true);
  assert.notEqual(box.firstChild, first);
  assert.deepEqual([...box.querySelectorAll(".syft-sent")].map((p) => p.dataset.worker), ["bob", "alice"]);
  assert.deepEqual(pins, ["me:9"]); // a refresh does not pin again
});

test("a row with nothing to explain opens nothing", () => {
  const { box, view } = panel({ "bob:3": { id: 3 } });
  view.show("bob:3");
  assert.equal(box.hidden, true);
  assert.equal(view.key, "");
});
