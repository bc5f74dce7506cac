// The world view's history as pure functions (js/widget/world/history.js): which steps are
// kept, which step is shown and the replay order, the timeline's rows, what changed between
// two worlds (marks, ghosts, gone pointers) and when it ends. No DOM, no clock.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  GHOST_MS, MARK_MS, changesBetween, expireChanges, ghostText, mergeChanges, nextExpiry, recordStep, replayText, shownStep, stepFrom,
  stepLabel, stepSummary, stepperState, timelineRows, withGhosts,
} from "../../js/widget/world/history.js";

const t = (id, extra = {}) => ({ id, kind: "tensor", names: [], ...extra });
const ptr = (id, location, at, extra = {}) => ({ id, kind: "pointer", location, id_at_location: at, state: "ok", names: [], ...extra });
const w = (rev, workers, step) => ({ rev, workers, ...(step ? { step } : {}) });

test("recording: the first world is the start; each new revision is a step (an event when it carries none); the same world is kept once", () => {
  const w0 = w(0, []);
  const w1 = w(1, [], { by: "cell", cell: 3, code: "x.send(bob)", events: [{ type: "stored", worker: "bob" }] });
  const w2 = w(2, []);
  let h = recordStep([], null, w0);
  assert.deepEqual(h, [{ rev: 0, step: null, world: w0 }]);
  const h0 = h;
  h = recordStep(h, w0, w1);
  assert.notEqual(h, h0); // a new array: the old history is untouched
  assert.equal(h0.length, 1);
  h = recordStep(h, w1, w2);
  assert.deepEqual(h.map((e) => [e.rev, e.step?.by ?? null]), [[0, null], [1, "cell"], [2, "event"]]);
  assert.deepEqual(h[2].step, { by: "event", code: "", events: [] });
  assert.equal(recordStep(h, w1, w2), h); // already its last world
  // the same revision again (a resync): no step
  assert.equal(recordStep(h, w2, w(2, [])).length, 3);
});

test("a view opened on a world that then changes records the world before as its start", () => {
  const before = w(4, []);
  const after = w(5, [], { by: "action", events: [] });
  const h = recordStep([], before, after);
  assert.deepEqual(h.map((e) => [e.rev, e.world]), [[4, before], [5, after]]);
  // a first world replaced before any step: the start is the newest one
  const h2 = recordStep([{ rev: 0, step: null, world: before }], null, after);
  assert.equal(h2[0].world, after);
  assert.equal(h2[0].step, null);
});

test("the history keeps its start and the newest steps", () => {
  let h = [];
  let prev = null;
  for (let rev = 0; rev < 8; rev++) {
    const next = w(rev, [], rev ? { by: "cell", cell: rev, events: [] } : undefined);
    h = recordStep(h, prev, next, 4);
    prev = next;
  }
  assert.deepEqual(h.map((e) => e.rev), [0, 5, 6, 7]);
});

test("which step is shown, and stepping back and on from it (clamped; none without steps)", () => {
  assert.equal(shownStep(0, 4), 0);
  assert.equal(shownStep(2, 4), 2);
  assert.equal(shownStep(3, 4), -1); // the last step is now
  assert.equal(shownStep(-1, 4), -1);
  assert.equal(shownStep(9, 4), -1);
  // from now (-1) back one: the step before the last
  assert.equal(stepFrom(4, -1, -1), 2);
  assert.equal(stepFrom(4, 2, -1), 1);
  assert.equal(stepFrom(4, 0, -1), 0);
  assert.equal(stepFrom(4, 2, 1), 3);
  assert.equal(stepFrom(4, -1, 1), 3);
  assert.equal(stepFrom(1, -1, -1), null);
  // replay order: stepping back from now visits every step down to the start
  const seen = [];
  for (let at = -1, i; (i = stepFrom(4, at, -1)) !== at && i !== null;) { seen.push(i); at = i; }
  assert.deepEqual(seen, [2, 1, 0]);
});

test("the stepper says which step is shown and turns its ends off; hidden with no step", () => {
  assert.deepEqual(stepperState(4, -1), { hidden: false, at: 3, n: 3, text: "step 3 of 3", prevOff: false, nextOff: true });
  assert.deepEqual(stepperState(4, 0), { hidden: false, at: 0, n: 3, text: "step 0 of 3", prevOff: true, nextOff: false });
  assert.equal(stepperState(1, -1).hidden, true);
});

test("the timeline lists steps newest first, with where, what, two lines of code, event types; a click on the last shows now", () => {
  const h = [
    { rev: 0, step: null, world: {} },
    { rev: 1, step: { by: "cell", cell: 2, code: "a = 1\nb = 2\nc = 3", events: [{ type: "stored", worker: "bob" }, { type: "stored", worker: "alice" }, { type: "moved", worker: "bob", to: "alice" }] }, world: {} },
    { rev: 2, step: { by: "action", code: "", events: [{ type: "fetched", worker: "bob", names: ["x"] }] }, world: {} },
  ];
  const rows = timelineRows(h, 1);
  assert.deepEqual(rows.map((r) => [r.i, r.where, r.what, r.code, r.types, r.shown, r.show]), [
    [2, "button", "fetched from bob (x)", "", ["fetched"], false, -1],
    [1, "[2]", "2 stored, 1 moved", "a = 1; b = 2", ["stored", "moved"], true, 1],
    [0, "start", "the world when this view opened", "", [], false, 0],
  ]);
  assert.equal(stepLabel(h[0]), "when the view opened");
  assert.equal(stepLabel(h[1]), "[2] 2 stored, 1 moved");
  assert.equal(replayText(h[1]), "Showing the world as it was after [2] 2 stored, 1 moved: a = 1 (buttons are off). ");
  assert.equal(stepSummary({ events: [] }), "nothing changed in the world");
  assert.equal(stepSummary({ events: [{ type: "worker down", worker: "bob", state: "closed" }] }), "bob closed");
});

test("what changed: new and changed rows are marked until now + MARK_MS; what left is a ghost where it was; a pointer whose object went is gone with how", () => {
  const prev = w(1, [
    { id: "me", objects: [ptr(10, "bob", 1, { names: ["x_ptr"] }), t(11, { names: ["y"] })] },
    { id: "bob", objects: [t(1), t(2), t(3)] },
  ]);
  const next = w(2, [
    { id: "me", objects: [ptr(10, "bob", 1, { names: ["x_ptr"], state: "gone" }), t(11, { names: ["y"] }), t(12)] },
    { id: "alice", objects: [t(1)] },
    { id: "bob", objects: [t(2), t(3, { names: ["z"] })] },
  ], { by: "cell", cell: 4, events: [{ type: "moved", worker: "bob", id: 1, to: "alice" }] });
  next.workers[0].objects[1] = prev.workers[0].objects[1]; // untouched: the same entry
  const c = changesBetween(prev, next, 1000, new Map([["bob", new Map([[1, 5]])]]));
  assert.deepEqual([...c.marks], [
    ["me:10", { mark: "changed", until: 1000 + MARK_MS }], ["me:12", { mark: "new", until: 1000 + MARK_MS }],
    ["alice:1", { mark: "new", until: 1000 + MARK_MS }], ["bob:3", { mark: "changed", until: 1000 + MARK_MS }]]);
  assert.deepEqual([...c.gone], [["me:10", { how: "moved", to: "alice" }]]);
  assert.deepEqual([...c.ghosts.keys()], ["bob"]);
  const [g] = c.ghosts.get("bob");
  assert.deepEqual({ ...g, entry: g.entry.id }, { ghost: true, key: "bob:1", entry: 1, at: 5, text: "moved to alice", until: 1000 + GHOST_MS });
});

test("ghosts say what became of an object or of a pointer's object", () => {
  const step = { events: [{ type: "fetched", worker: "bob", id: 1 }, { type: "deleted", worker: "bob", id: 2 }] };
  assert.equal(ghostText(step, "bob", t(1)), "fetched to me");
  assert.equal(ghostText(step, "bob", t(2)), "deleted");
  assert.equal(ghostText(step, "me", ptr(9, "bob", 1)), "gone: its object was fetched");
  assert.equal(ghostText(step, "me", ptr(9, "bob", 2)), "dropped: its object was deleted");
  assert.equal(ghostText(step, "me", ptr(9, "bob", 7)), "pointer dropped");
  assert.equal(ghostText(null, "bob", t(5)), "left");
});

test("changes merge (ghosts add up per lane, other lanes keep their list) and end at their time", () => {
  const ga = { ghost: true, key: "a:1", at: 0, until: 50 };
  const gb = { ghost: true, key: "b:1", at: 0, until: 200 };
  const state = { marks: new Map([["a:2", { mark: "new", until: 100 }]]), ghosts: new Map([["a", [ga]], ["b", [gb]]]), gone: new Map() };
  const ga2 = { ghost: true, key: "a:3", at: 1, until: 300 };
  const merged = mergeChanges(state, { marks: new Map([["a:4", { mark: "changed", until: 400 }]]), ghosts: new Map([["a", [ga2]]]),
    gone: new Map([["me:1", { how: "fetched" }]]) });
  assert.deepEqual(merged.ghosts.get("a"), [ga, ga2]);
  assert.equal(merged.ghosts.get("b"), state.ghosts.get("b"));
  assert.deepEqual([...merged.marks.keys()], ["a:2", "a:4"]);
  assert.equal(state.marks.size, 1); // the state given is untouched
  assert.equal(nextExpiry(merged), 50);

  const at120 = expireChanges(merged, 120);
  assert.deepEqual(at120.expired, ["a:2"]);
  assert.equal(at120.ghostsChanged, true);
  assert.deepEqual(at120.state.ghosts.get("a"), [ga2]);
  assert.equal(at120.state.ghosts.get("b"), merged.ghosts.get("b"));
  assert.equal(nextExpiry(at120.state), 200);
  const at500 = expireChanges(at120.state, 500);
  assert.deepEqual(at500.expired, ["a:4"]);
  assert.equal(at500.state.ghosts.size, 0);
  assert.equal(nextExpiry(at500.state), Infinity);
  assert.equal(expireChanges(at500.state, 600).ghostsChanged, false);
});

test("ghosts go back into a lane's rows where they were, oldest place first", () => {
  const rows = [t(1), t(2), t(3)];
  const out = withGhosts(rows, [{ ghost: true, key: "x", at: 9 }, { ghost: true, key: "y", at: 1 }]);
  assert.deepEqual(out.map((o) => o.key ?? o.id), [1, "y", 2, 3, "x"]);
  assert.equal(withGhosts(rows, undefined), rows);
  assert.equal(rows.length, 3);
});

test("one run of a cell is one step: a refresh while it ran and the one at its end join, their events kept", () => {
  const w0 = w(0, []);
  const mid = w(1, [], { by: "cell", cell: 3, code: "x_ptr = x.send(bob)", events: [{ type: "stored", worker: "bob" }] });
  const end = w(2, [], { by: "cell", cell: 3, code: "x_ptr = x.send(bob)", events: [] });
  let h = recordStep(recordStep(recordStep([], null, w0), w0, mid), mid, end);
  assert.deepEqual(h.map((e) => [e.rev, e.step?.cell ?? null]), [[0, null], [2, 3]]);
  assert.equal(h[1].world, end);
  assert.deepEqual(h[1].step.events, [{ type: "stored", worker: "bob" }]);
  assert.equal(stepLabel(h[1]), "[3] stored on bob");
  // the next run of the cell (a new In[] number), an action and an event are steps of their own
  const again = w(3, [], { by: "cell", cell: 4, code: "x_ptr = x.send(bob)", events: [] });
  const button = w(4, [], { by: "action", cell: null, code: "x_ptr.get()", events: [] });
  const button2 = w(5, [], { by: "action", cell: null, code: "y.get()", events: [] });
  h = recordStep(recordStep(recordStep(h, end, again), again, button), button, button2);
  assert.deepEqual(h.map((e) => e.rev), [0, 2, 3, 4, 5]);
});
