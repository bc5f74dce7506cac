// What a click in the world view's lanes means (js/widget/world/clicks.js clickIntent), read
// from the rows and lane headers the view really draws (rows.js), and the rows whose action
// awaits its reply (createPending): one request per row at a time, its buttons off meanwhile.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { clickIntent, createPending } = await import("../../js/widget/world/clicks.js");
const { laneHead, objectRowHTML, rowsFrom } = await import("../../js/widget/world/rows.js");

const ptr = { id: 7, kind: "pointer", type: "PointerTensor", location: "bob", id_at_location: 3, state: "ok", owning: true,
  names: ["x_ptr"], actions: ["get", "move"], shape: [2], dtype: "float32" };
const stored = { id: 3, kind: "tensor", type: "Tensor", refcount: 1, names: [], actions: ["get", "move"], shape: [2], dtype: "float32" };
const shared = { id: 9, kind: "shared", type: "AdditiveSharingTensor", names: ["sx"], actions: ["get"], distributed: ["bob", "alice"],
  explain: { secret: "sx", lines: ["sx is held by nobody"] } };

/** A lane as the view draws it: its header (closable: the overview opened it) and its rows. */
function lane(id, objects, closable = false, ledger = undefined) {
  const section = document.createElement("section");
  section.className = "syft-lane";
  section.dataset.worker = id;
  section.append(laneHead({ id, kind: "virtual", state: "ok", objects, ledger }, objects.length, false, closable, "", false));
  const list = document.createElement("ol");
  list.append(...rowsFrom(objects.map((o) => objectRowHTML(id, o, undefined, {}))));
  section.append(list);
  document.body.append(section);
  return section;
}

test("a lane's header buttons: close, record (ledger), collapse, each for its own lane", () => {
  const bob = lane("bob", [stored], true, { seq: 2, records: [], totals: { "stored in": [1, 8] } });
  assert.deepEqual(clickIntent(bob.querySelector(".syft-lane-close")), { do: "close", lane: "bob" });
  assert.deepEqual(clickIntent(bob.querySelector(".syft-lane-toggle")), { do: "collapse", lane: "bob" });
  assert.deepEqual(clickIntent(bob.querySelector(".syft-ledger-toggle")), { do: "ledger", lane: "bob" });
  const alice = lane("alice", [], false);
  assert.equal(alice.querySelector(".syft-lane-close"), null); // only a lane the overview opened closes
  assert.deepEqual(clickIntent(alice.querySelector(".syft-lane-toggle")), { do: "collapse", lane: "alice" });
  bob.remove(); alice.remove();
});

test("a row's action buttons run that action on that row; a send/move button opens its menu", () => {
  const me = lane("me", [ptr]);
  const get = me.querySelector('button[data-action="get"]');
  const it = clickIntent(get);
  assert.equal(it.do, "run");
  assert.deepEqual([it.key, it.lane, it.action, it.menu, it.disabled], ["me:7", "me", "get", false, false]);
  assert.equal(it.button, get);
  const move = clickIntent(me.querySelector('button[data-action="move"]'));
  assert.deepEqual([move.do, move.action, move.menu], ["run", "move", true]);
  // a click inside the button (its text) means the same
  const inner = document.createElement("span");
  get.append(inner);
  assert.equal(clickIntent(inner).action, "get");
  get.disabled = true;
  assert.equal(clickIntent(get).disabled, true); // the view sends nothing for a disabled button
  me.remove();
});

test("a click on a row itself pins its highlight; a menu's items and clicks outside rows mean nothing here", () => {
  const bob = lane("bob", [stored]);
  const row = bob.querySelector(".syft-obj");
  assert.deepEqual(clickIntent(row.querySelector(".syft-id")), { do: "pin", key: "bob:3" });
  const bar = row.querySelector(".syft-actions");
  assert.equal(clickIntent(bar), null); // the gap between two buttons
  const item = document.createElement("button");
  item.className = "syft-btn syft-menu-item";
  item.dataset.action = "move";
  bar.append(item);
  assert.equal(clickIntent(item), null); // the menu item runs its action itself
  assert.equal(clickIntent(bob.querySelector(".syft-lane-name")), null);
  assert.equal(clickIntent(document.body), null);
  assert.equal(clickIntent(null), null);
  bob.remove();
});

test("a pointer's worker chip asks to open its target's lane, else means a click on the row", () => {
  const me = lane("me", [ptr]);
  const chip = me.querySelector(".syft-where .syft-worker-chip");
  assert.deepEqual(clickIntent(chip), { do: "openTarget", key: "me:7", otherwise: { do: "pin", key: "me:7" } });
  me.remove();
});

test("a shared value's Explain button explains that row", () => {
  const me = lane("me", [shared]);
  assert.deepEqual(clickIntent(me.querySelector(".syft-explain-btn")), { do: "explain", key: "me:9" });
  me.remove();
});

test("pending: one request per row at a time; its buttons are off until the reply, then as the view is", async () => {
  const me = lane("me", [ptr]);
  const row = me.querySelector(".syft-obj");
  let off = false;
  const pending = createPending({ rowEl: (k) => (k === "me:7" ? row : undefined), off: () => off });
  let release;
  let calls = 0;
  const first = pending.run("me:7", () => { calls++; return new Promise((r) => { release = r; }); });
  assert.equal(pending.has("me:7"), true);
  assert.ok([...row.querySelectorAll("button")].every((b) => b.disabled));
  assert.equal(await pending.run("me:7", () => { calls++; return "again"; }), undefined); // a double click sends once
  assert.equal(calls, 1);
  release({ ok: true });
  assert.deepEqual(await first, { ok: true });
  assert.equal(pending.has("me:7"), false);
  assert.ok([...row.querySelectorAll("button")].every((b) => !b.disabled));
  // the kernel went away meanwhile: the buttons stay off after the reply
  off = true;
  await pending.run("me:7", async () => { throw new Error("no kernel"); }).catch((e) => e.message);
  assert.ok([...row.querySelectorAll("button")].every((b) => b.disabled));
  assert.equal(pending.has("me:7"), false);
  me.remove();
});
