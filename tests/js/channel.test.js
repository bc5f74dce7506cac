// The world channel (js/widget/channel.js): the one copy of the snapshot / revision / patch
// protocol that the notebook widget and the lab sidebar both use.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { createWorldChannel } = await import("../../js/widget/channel.js");

const world0 = { rev: 0, workers: [{ id: "bob", kind: "virtual", state: "in-process", objects: [{ id: 1, kind: "tensor" }] }] };
const patch = (base, ops) => ({ type: "world_patch", base, rev: base + 1, ops });

test("a snapshot, then patches that follow it; one that does not asks for one resync", () => {
  const sent = [];
  const seen = [];
  const ch = createWorldChannel({ send: (m) => sent.push(m), onWorld: (w) => seen.push(w.rev) });
  assert.equal(ch.receive({ type: "snapshot", protocol: 1, world: world0 }), true);
  ch.receive(patch(0, [["put", "bob", 1, { id: 2, kind: "tensor" }]]));
  assert.deepEqual(ch.world.workers[0].objects.map((o) => o.id), [1, 2]);
  assert.equal(ch.world.rev, 1);
  // a patch on another revision (one was lost): resync, once, and nothing applies until it comes
  ch.receive(patch(5, [["del", "bob", 1]]));
  ch.receive(patch(6, [["del", "bob", 2]]));
  assert.deepEqual(sent, [{ type: "resync" }]);
  assert.deepEqual(ch.world.workers[0].objects.map((o) => o.id), [1, 2]);
  ch.receive({ type: "world_reset", world: { ...world0, rev: 7 } });
  ch.receive(patch(7, [["del", "bob", 1]]));
  assert.deepEqual(ch.world.workers[0].objects, []);
  assert.deepEqual(seen, [0, 1, 7, 8]);
  assert.deepEqual(ch.counts, { snapshots: 2, patches: 2, resyncs: 1 });
});

test("the widget keeps the world in its model: the channel reads and writes it there", () => {
  const model = { world: { ...world0 } };
  const ch = createWorldChannel({ send: () => {}, get: () => model.world, set: (w) => { model.world = w; } });
  ch.receive(patch(0, [["put", "bob", 0, { id: 9, kind: "tensor" }]]));
  assert.deepEqual(model.world.workers[0].objects.map((o) => o.id), [9, 1]);
  assert.equal(ch.world, model.world);
});

test("action replies come through the same channel to its clients", async () => {
  const sent = [];
  const ch = createWorldChannel({ send: (m) => sent.push(m) });
  const client = ch.client();
  const reply = client.request("get", { worker: "me", id: 3 });
  assert.equal(ch.receive({ type: "reply", req: sent[0].req, ok: true, code: "x = x_ptr.get()" }), false);
  assert.equal((await reply).code, "x = x_ptr.get()");
  client.dispose();
});
