// The world view's arrows as pure functions (js/widget/world/arrows.js, links.js): which rows
// an arrow joins, its route in the gutters between lanes, what is drawn and what is counted.
// No DOM: lane geometry in, paths out.
import assert from "node:assert/strict";
import { test } from "node:test";
import { GAP, arrowsInView, arrowsSVG, gutterRoute, lanesToMeasure, rowY } from "../../js/widget/world/arrows.js";
import { litKeys, worldLinks } from "../../js/widget/world/links.js";
import { indexWorld } from "../../js/widget/patch.js";

const ROW = 26;
const ptr = (id, location, at, extra = {}) => ({ id, kind: "pointer", location, id_at_location: at, owning: true, state: "ok", names: [], ...extra });
const tensor = (id, extra = {}) => ({ id, kind: "tensor", names: [], ...extra });
// a lane's geometry: 200 px wide at `left`, its body 100 px below `top`, rows by id
const lane = (left, top, ids, extra = {}) => ({ left, right: left + 200, top, headY: top + 13, bodyTop: top + 30, bodyH: 300, scroll: 0,
  index: new Map(ids.map((id, i) => [id, i])), collapsed: false, ...extra });

test("a row's arrow end sits in the middle of its row, clamped to what its lane shows", () => {
  const g = lane(0, 0, [7, 8, 9]);
  assert.deepEqual(rowY(g, 7, ROW), { y: 30 + 13, off: false });
  assert.deepEqual(rowY(g, 9, ROW), { y: 30 + 2 * ROW + 13, off: false });
  // scrolled 60 px: row 0 is above the lane's top edge, so the arrow starts at the edge, off
  assert.deepEqual(rowY({ ...g, scroll: 60 }, 7, ROW), { y: 34, off: true });
  // below the lane's bottom
  assert.deepEqual(rowY({ ...g, bodyH: 40 }, 9, ROW), { y: 30 + 40 - 4, off: true });
  // collapsed, or a row the lane does not show: the lane's head
  assert.deepEqual(rowY({ ...g, collapsed: true }, 7, ROW), { y: 13, off: true });
  assert.deepEqual(rowY(g, 99, ROW), { y: 13, off: true });
});

test("an arrow to the next lane right runs in the one gutter between them", () => {
  const F = lane(0, 0, [1]);
  const T = lane(224, 0, [2]);
  assert.equal(gutterRoute(F, T, 43, 69), `M 200 43 H ${200 + GAP / 2} V 69 H 224`);
  // leftward: out of the left side, into the target's right side
  assert.equal(gutterRoute(T, F, 69, 43), `M 224 69 H ${224 - GAP / 2} V 43 H 200`);
  // one column (the target below): out of the right side, back in on the right side
  assert.equal(gutterRoute(F, lane(0, 400, [2]), 43, 443), "M 200 43 H 212 V 443 H 200");
});

test("an arrow to a far lane goes down a gutter, along the channel above the target's row of lanes, down the gutter beside it", () => {
  const F = lane(0, 0, [1]);
  const T = lane(448, 400, [2]); // two columns right, the next row of lanes
  const d = gutterRoute(F, T, 43, 443, 2.5);
  // out at x 200, the gutter at 212 (+2.5 beside), the channel 12 px above the target's row of
  // lanes (+1.25), the gutter 12 px left of the target (+2.5), into it at 448
  assert.equal(d, "M 200 43 H 214.5 V 389.3 H 438.5 V 443 H 448");
  // every number to one decimal
  assert.ok(d.match(/\d+\.\d+/g).every((n) => /^\d+\.\d$/.test(n)));
});

test("arrows join the pointer rows in view to their targets' rows; five abreast in a gutter; weak and off-target marked", () => {
  const geo = new Map([["me", lane(0, 0, [10, 11, 12, 13])], ["bob", lane(224, 0, [1, 2])]]);
  const world = new Set(["bob:1", "bob:2"]);
  const rows = [
    { lane: "me", id: "g:bob", entry: { header: "bob" } }, // a group header: no arrow
    { lane: "me", id: 10, entry: ptr(10, "bob", 1) },
    { lane: "me", id: 11, entry: ptr(11, "bob", 2, { owning: false }) },
    { lane: "me", id: 12, entry: ptr(12, "bob", 9) }, // its target is not in the world
    { lane: "me", id: 13, entry: ptr(13, "carol", 1) }, // its target's lane is not shown
    { lane: "bob", id: 1, entry: tensor(1) },
  ];
  assert.deepEqual([...lanesToMeasure(rows)].sort(), ["bob", "carol", "me"]);
  const { arrows, total } = arrowsInView(rows, geo, (k) => world.has(k), { top: 0, bottom: 500 }, ROW);
  assert.equal(total, 2);
  assert.deepEqual(arrows.map((a) => [a.from, a.to, a.location, a.weak, a.off]),
    [["me:10", "bob:1", "bob", false, false], ["me:11", "bob:2", "bob", true, false]]);
  // side by side: the first arrow 5 px left of the gutter's middle, the next 2.5 px right of it
  assert.equal(arrows[0].d, "M 200 43 H 207 V 43 H 224");
  assert.equal(arrows[1].d, "M 200 69 H 209.5 V 69 H 224");
});

test("an arrow is counted but not drawn when its pointer row is scrolled out of its lane or it runs outside the view", () => {
  const geo = new Map([["me", lane(0, 0, [10])], ["bob", lane(224, 0, [1])]]);
  const rows = [{ lane: "me", id: 10, entry: ptr(10, "bob", 1) }];
  const has = () => true;
  const scrolled = new Map([["me", lane(0, 0, [10], { scroll: 100 })], ["bob", geo.get("bob")]]);
  assert.deepEqual(arrowsInView(rows, scrolled, has, { top: 0, bottom: 500 }, ROW), { arrows: [], total: 1 });
  assert.deepEqual(arrowsInView(rows, geo, has, { top: 1000, bottom: 1500 }, ROW), { arrows: [], total: 1 });
  // the target scrolled out of its lane: drawn to the lane's edge, marked off
  const tgtOff = new Map([["me", geo.get("me")], ["bob", lane(224, 0, [1], { scroll: 100 })]]);
  const { arrows } = arrowsInView(rows, tgtOff, has, { top: 0, bottom: 500 }, ROW);
  assert.equal(arrows.length, 1);
  assert.equal(arrows[0].off, true);
  assert.equal(arrows[0].d, "M 200 43 H 207 V 34 H 224");
});

test("the arrows' SVG: one marker, a path per arrow in its worker's colour, lit when both ends are lit", () => {
  const arrows = [{ from: "me:10", to: "bob:1", location: "bob", d: "M 0 0 H 1", weak: true, off: false },
    { from: "me:11", to: "bob:2", location: "bob", d: "M 0 1 H 1", weak: false, off: true }];
  const svg = arrowsSVG(arrows, "m1", (w) => `--c:${w}`, new Set(["me:11", "bob:2"]));
  assert.equal((svg.match(/<marker id="m1"/g) || []).length, 1);
  const paths = svg.match(/<path class="[^"]*" style="[^"]*" data-from="[^"]*" data-to="[^"]*" d="[^"]*" marker-end="url\(#m1\)"\/>/g);
  assert.equal(paths.length, 2);
  assert.match(paths[0], /class="syft-arrow syft-arrow-weak" style="--c:bob" data-from="me:10" data-to="bob:1" d="M 0 0 H 1"/);
  assert.match(paths[1], /class="syft-arrow syft-arrow-off syft-lit"/);
});

const sharedWorld = () => ({ workers: [
  { id: "me", objects: [
    ptr(10, "bob", 1, { names: ["x_ptr"] }),
    ptr(11, "bob", 1, { names: [], description: "a search result" }),
    ptr(12, "alice", 5, { state: "gone", names: ["old"] }),
    { id: 20, kind: "fixed_precision", names: ["secret_x"], group: 7, crypto_provider: "carol" },
    ptr(21, "alice", 2, { group: 7 }), ptr(22, "bob", 3, { group: 7 })] },
  { id: "bob", objects: [tensor(1), tensor(3, { group: 7 }), ptr(4, "alice", 9)] },
  { id: "alice", objects: [tensor(2, { group: 7 }), tensor(9)] },
] });

test("links: who points to what (labels, pointer keys), what a named pointer keeps, share groups, the secret's name, the provider", () => {
  const L = worldLinks(sharedWorld());
  assert.deepEqual(L.pointedBy.get("bob:1"), ["x_ptr", "a search result"]);
  assert.deepEqual(L.pointersTo.get("bob:1"), ["me:10", "me:11"]);
  assert.deepEqual(L.pointedBy.get("alice:2"), ["secret_x's share"]);
  assert.deepEqual(L.pointedBy.get("alice:9"), ["bob's pointer"]);
  assert.equal(L.pointedBy.has("alice:5"), false); // a gone pointer points nowhere
  assert.deepEqual([...L.namedTargets].sort(), ["alice:2", "bob:1", "bob:3"]);
  assert.deepEqual(L.groupKeys.get(7), ["me:20", "me:21", "me:22", "bob:3", "alice:2"]);
  assert.equal(L.keyGroup.get("bob:3"), 7);
  assert.equal(L.secretName.get(7), "secret_x");
  assert.deepEqual(L.providers.get("carol"), ["secret_x"]);
  assert.deepEqual(L.groups, [7, 7, 7, 7, 7]);
});

test("what lights up with a row: a pointer and its target; a target and its pointers; a share and every sibling", () => {
  const w = sharedWorld();
  const L = worldLinks(w);
  const index = indexWorld(w);
  const entry = (k) => index.get(k).entry;
  assert.deepEqual(litKeys("me:10", entry("me:10"), L, index), ["me:10", "bob:1"]);
  assert.deepEqual(litKeys("bob:1", entry("bob:1"), L, index), ["bob:1", "me:10", "me:11"]);
  const share = litKeys("bob:3", entry("bob:3"), L, index);
  assert.deepEqual(share.slice(0, 2), ["bob:3", "me:22"]); // itself, then the pointer to it
  // the secret, every share and share pointer, and the shares those point to; nothing else
  assert.deepEqual([...new Set(share)].sort(), ["alice:2", "bob:3", "me:20", "me:21", "me:22"]);
});
