import assert from "node:assert/strict";
import { test } from "node:test";
import { applyWorldPatch, indexWorld, worldArrows } from "../../js/widget/patch.js";

const t = (id, extra = {}) => ({ id, kind: "tensor", type: "Tensor", shape: [2], dtype: "float32", names: [], ...extra });
const world = () => ({
  schema: "syft_lab.world", version: 1, rev: 3,
  workers: [
    { id: "me", kind: "local", state: "in-process", objects: [
      { id: 10, kind: "pointer", type: "PointerTensor", location: "bob", id_at_location: 1, owning: true, state: "ok", names: ["x_ptr"] },
      t(11, { names: ["x"] })] },
    { id: "bob", kind: "virtual", state: "in-process", objects: [t(1, { refcount: 1 }), t(2, { refcount: 1 })] },
    { id: "alice", kind: "virtual", state: "in-process", objects: [] },
  ],
});

test("put replaces one entry and keeps the identity of everything else", () => {
  const w = world();
  const changed = t(2, { refcount: 2 });
  const next = applyWorldPatch(w, { type: "world_patch", base: 3, rev: 4, ops: [["put", "bob", 1, changed]] });
  assert.equal(next.rev, 4);
  assert.equal(next.workers[0], w.workers[0]); // untouched lane: same object
  assert.notEqual(next.workers[1], w.workers[1]);
  assert.equal(next.workers[1].objects[0], w.workers[1].objects[0]); // untouched entry: same object
  assert.equal(next.workers[1].objects[1], changed);
  assert.equal(w.workers[1].objects[1].refcount, 1); // the old world is left as it was
});

test("del, insert at an index, and a move (put of an existing id)", () => {
  const w = world();
  let next = applyWorldPatch(w, { base: 3, rev: 4, ops: [["del", "bob", 1], ["put", "alice", 0, t(7)]] });
  assert.deepEqual(next.workers[1].objects.map((o) => o.id), [2]);
  assert.deepEqual(next.workers[2].objects.map((o) => o.id), [7]);
  next = applyWorldPatch(next, { base: 4, rev: 5, ops: [["put", "alice", 0, t(8)], ["put", "alice", 0, t(7, { names: ["y"] })]] });
  assert.deepEqual(next.workers[2].objects.map((o) => o.id), [7, 8]);
  assert.deepEqual(next.workers[2].objects[0].names, ["y"]);
});

test("lane headers: a new lane starts empty, a gone lane goes, objects of kept lanes stay", () => {
  const w = world();
  const lanes = [{ id: "me", kind: "local", state: "in-process" }, { id: "bob", kind: "virtual", state: "in-process" },
    { id: "carol", kind: "websocket", state: "connected" }];
  const next = applyWorldPatch(w, { base: 3, rev: 4, lanes, ops: [["put", "carol", 0, t(9)]] });
  assert.deepEqual(next.workers.map((l) => l.id), ["me", "bob", "carol"]);
  assert.equal(next.workers[0], w.workers[0]);
  assert.equal(next.workers[1].objects, w.workers[1].objects);
  assert.deepEqual(next.workers[2].objects.map((o) => o.id), [9]);
  assert.equal(next.workers[2].state, "connected");
});

test("a patch that does not follow this revision asks for a resync (null)", () => {
  assert.equal(applyWorldPatch(world(), { base: 2, rev: 3, ops: [] }), null);
  assert.equal(applyWorldPatch(world(), { base: 3, rev: 4, ops: [["frobnicate", "bob"]] }), null);
  assert.equal(applyWorldPatch(world(), { base: 3 }), null);
  assert.equal(applyWorldPatch(null, { base: 3, ops: [] }), null);
});

test("arrows go from each pointer to a shown target", () => {
  const w = world();
  assert.deepEqual(worldArrows(w), [{ from: "me:10", to: "bob:1", location: "bob" }]);
  const gone = applyWorldPatch(w, { base: 3, rev: 4, ops: [["del", "bob", 1]] });
  assert.deepEqual(worldArrows(gone), []);
  assert.equal(indexWorld(w).get("bob:2").lane, "bob");
});

test("a lane's ledger grows by its new records, keeps the newest, and survives a header change", () => {
  const rec = (seq) => ({ seq, kind: "op", direction: "in", peer: "me", bytes: 8 });
  const w = world();
  w.workers[1] = { ...w.workers[1], ledger: { records: [rec(0), rec(1), rec(2)], seq: 3, totals: { "op in": [3, 24] } } };
  const grown = applyWorldPatch(w, { type: "world_patch", base: 3, rev: 4, ops: [],
    ledgers: { bob: { append: [rec(3), rec(4)], keep: 4, seq: 5, totals: { "op in": [5, 40] } } } });
  assert.deepEqual(grown.workers[1].ledger.records.map((r) => r.seq), [1, 2, 3, 4]);
  assert.deepEqual(grown.workers[1].ledger.totals, { "op in": [5, 40] });
  assert.equal(grown.workers[1].objects, w.workers[1].objects);
  assert.equal(grown.workers[0], w.workers[0]);
  // a header change (bob's state) comes without ledgers: bob keeps his
  const headers = grown.workers.map(({ objects, ledger, ...h }) => h);
  headers[1] = { ...headers[1], state: "closed" };
  const closed = applyWorldPatch(grown, { type: "world_patch", base: 4, rev: 5, ops: [], lanes: headers });
  assert.equal(closed.workers[1].state, "closed");
  assert.equal(closed.workers[1].ledger, grown.workers[1].ledger);
  // null: the lane has no ledger any more
  const none = applyWorldPatch(closed, { type: "world_patch", base: 5, rev: 6, ops: [], ledgers: { bob: null } });
  assert.equal("ledger" in none.workers[1], false);
});
