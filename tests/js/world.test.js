// The world view's teaching parts (issue 18), without a browser: rows grouped and sorted,
// search and filters, colours for many workers, highlights and ghosts of a step, the timeline's
// replay, buttons off while a request is pending or when the kernel is gone, dangling pointers.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { createWorldView, laneItems, parseQuery, matches, stepSummary, objectRowHTML } = await import("../../js/widget/world.js");
const { laneColours, colourStyle } = await import("../../js/widget/dom.js");
const { applyWorldPatch } = await import("../../js/widget/patch.js");
const { createClient } = await import("../../js/widget/actions.js");

// entries carry the actions the kernel offers on them (syft_lab.tensors.nodes.entry_actions)
const tensor = (id, extra = {}) => ({ id, kind: "tensor", type: "Tensor", shape: [2], dtype: "float32", tags: [], refcount: 1, names: [],
  actions: ["get", "move"], ...extra });
const ptr = (id, location, at, names, extra = {}) => ({ id, kind: "pointer", type: "PointerTensor", location, id_at_location: at,
  owning: true, state: "ok", names, actions: extra.state === "gone" ? [] : ["get", "move"], ...extra });

function world() {
  return { rev: 0, workers: [
    { id: "me", kind: "local", state: "in-process", objects: [
      ptr(31, "alice", 3, ["zeta"]), ptr(12, "bob", 1, ["b_ptr"]), ptr(5, "alice", 4, ["alpha"]), ptr(7, "bob", 2, []),
      { ...tensor(40), refcount: undefined, names: ["x"], actions: ["send"] }] },
    { id: "bob", kind: "virtual", state: "in-process", objects: [tensor(1, { tags: ["#data"] }), tensor(2)] },
    { id: "alice", kind: "virtual", state: "in-process", objects: [tensor(3), tensor(4, { tags: ["#data", "#boston"] })] },
  ] };
}

function view(run = () => Promise.resolve({ ok: true })) {
  const wv = createWorldView({ workers: () => [], run, request: run });
  document.body.append(wv.frame);
  return wv;
}

test("'me' groups pointers by target worker in lane order, sorted by name (unnamed last), then local objects", () => {
  const w = world();
  const order = new Map(w.workers.map((l, i) => [l.id, i]));
  const items = laneItems(w.workers[0], parseQuery(""), order);
  assert.deepEqual(items.map((o) => (o.header !== undefined ? `[${o.header}]` : o.names[0] ?? `#${o.id}`)),
    ["[bob]", "b_ptr", "#7", "[alice]", "alpha", "zeta", "[]", "x"]);
  const wv = view();
  wv.update(w);
  assert.deepEqual([...wv.el.querySelectorAll(".syft-lane[data-worker=me] .syft-group")].map((g) => g.textContent.trim()),
    ["bob pointers to bob 2", "alice pointers to alice 2", "here, in the notebook 1"]);
  assert.match(wv.rowFor("me", 7).textContent, /unnamed/);
  wv.destroy();
  wv.frame.remove();
});

test("search words, #tags, kind: and worker: filter the rows; lane counts say how many of all", () => {
  const q = parseQuery("#data kind:tensor worker:ali");
  assert.deepEqual([q.tags, q.kinds, q.workers], [["#data"], ["tensor"], ["ali"]]);
  assert.ok(matches(q, "alice", tensor(4, { tags: ["#data"] })) && !matches(q, "alice", tensor(3)));
  const wv = view();
  wv.update(world());
  wv.filter("#boston");
  assert.equal(wv.el.querySelector(".syft-lane[data-worker=alice] .syft-lane-count").textContent, "1 of 2 objects");
  assert.ok(wv.rowFor("alice", 4) && !wv.rowFor("alice", 3));
  wv.filter("", "", "bob");
  assert.deepEqual([...wv.el.querySelectorAll(".syft-lane")].map((l) => l.dataset.worker), ["bob"]);
  wv.filter("alp");
  assert.ok(wv.rowFor("me", 5) && !wv.rowFor("me", 31));
  wv.filter("");
  assert.equal(wv.el.querySelectorAll(".syft-lane").length, 3);
  wv.destroy();
  wv.frame.remove();
});

test("50 workers get 50 distinct colours; a worker keeps its hash colour when it is free", () => {
  const ids = Array.from({ length: 50 }, (_, i) => `w${i}`);
  const c = laneColours(["me", ...ids]);
  assert.equal(c.has("me"), false);
  assert.equal(new Set(ids.map((id) => colourStyle(c.get(id)))).size, 50);
  assert.equal(laneColours(["bob"]).get("bob").light, 50);
});

test("target rows name their pointers; a pointer held in a container is named by its path", () => {
  const w = world();
  w.workers[0].objects.push(ptr(9, "bob", 2, [], { held_in: ["data['bob']"] }));
  const wv = view();
  wv.update(w);
  assert.match(wv.rowFor("bob", 1).querySelector(".syft-pointed").textContent, /← b_ptr/);
  assert.match(wv.rowFor("bob", 2).querySelector(".syft-pointed").textContent, /data\['bob'\]/);
  assert.match(wv.rowFor("me", 9).querySelector(".syft-held-in").textContent, /data\['bob'\]/);
  wv.destroy();
  wv.frame.remove();
});

test("a step highlights what appeared and changed, leaves a ghost saying where an object went, and is in the timeline", () => {
  const wv = view();
  const w0 = world();
  wv.update(w0);
  const w1 = applyWorldPatch(w0, { base: 0, rev: 1, ops: [["del", "bob", 2], ["put", "alice", 2, tensor(8)],
    ["put", "me", 3, ptr(7, "alice", 8, ["moved"])]],
  step: { cell: 4, by: "cell", code: "moved = p.move(alice)", events: [{ type: "moved", worker: "bob", id: 2, to: "alice", to_id: 8 }] } });
  wv.update(w1);
  assert.ok(wv.rowFor("alice", 8).classList.contains("syft-mark-new"));
  assert.ok(wv.rowFor("me", 7).classList.contains("syft-mark-changed"));
  assert.match(wv.el.querySelector(".syft-lane[data-worker=bob] .syft-ghost").textContent, /moved to alice/);
  assert.equal(wv.el.querySelectorAll(".syft-lane[data-worker=bob] .syft-obj").length, 1); // a ghost is not a row
  const steps = [...wv.frame.querySelectorAll(".syft-step")].map((s) => s.textContent);
  assert.equal(steps.length, 2);
  assert.match(steps[0], /\[4\].*moved bob → alice.*moved = p\.move\(alice\)/);
  assert.equal(stepSummary({ events: [] }), "nothing changed in the world");
  // replay: the world as it was when the view opened, buttons off; then back to now
  wv.showStep(0);
  assert.ok(wv.rowFor("bob", 2) && !wv.rowFor("alice", 8));
  assert.ok(wv.frame.classList.contains("syft-replaying"));
  assert.ok([...wv.rowFor("bob", 2).querySelectorAll("button")].every((b) => b.disabled));
  wv.showStep(-1);
  assert.ok(wv.rowFor("alice", 8) && !wv.rowFor("bob", 2));
  wv.destroy();
  wv.frame.remove();
});

test("a row's buttons are off while its request is pending: a double click sends once", async () => {
  let calls = 0;
  let release;
  const wv = view(() => { calls++; return new Promise((r) => { release = r; }); });
  wv.update(world());
  const get = () => wv.rowFor("me", 12).querySelector("[data-action=get]");
  get().dispatchEvent(new window.Event("click", { bubbles: true }));
  get().dispatchEvent(new window.Event("click", { bubbles: true }));
  assert.equal(calls, 1);
  assert.equal(get().disabled, true);
  release({ ok: true });
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(get().disabled, false);
  wv.destroy();
  wv.frame.remove();
});

test("a view whose kernel is gone says so and turns every button off", () => {
  let calls = 0;
  const wv = view(() => { calls++; return Promise.resolve({ ok: true }); });
  wv.update(world());
  wv.setDisabled("The kernel of this view is gone");
  assert.equal(wv.frame.querySelector(".syft-dead-banner").textContent, "The kernel of this view is gone");
  const buttons = [...wv.el.querySelectorAll("button[data-action]")];
  assert.ok(buttons.length && buttons.every((b) => b.disabled));
  wv.rowFor("me", 12).querySelector("[data-action=get]").dispatchEvent(new window.Event("click", { bubbles: true }));
  assert.equal(calls, 0);
  wv.destroy();
  wv.frame.remove();
});

test("pointers to a closed or unreachable worker dangle (no buttons); a fetched pointer shows gone", () => {
  const w = world();
  w.workers[2] = { ...w.workers[2], state: "unreachable" };
  w.workers[0].objects.push(ptr(50, "bob", 99, ["old"], { state: "gone" }));
  const wv = view();
  wv.update(w);
  const row = wv.rowFor("me", 5);
  assert.ok(row.classList.contains("syft-obj-dangling"));
  assert.equal(row.querySelectorAll("[data-action]").length, 0);
  assert.ok(wv.el.querySelector(".syft-lane[data-worker=alice]").classList.contains("syft-lane-down"));
  assert.match(wv.rowFor("me", 50).querySelector(".syft-badge-gone").textContent, /gone/);
  assert.equal(wv.rowFor("me", 50).querySelectorAll("[data-action]").length, 0);
  // the Move menu offers only the workers that can be reached
  wv.rowFor("me", 12).querySelector("[data-action=move]").dispatchEvent(new window.Event("click", { bubbles: true }));
  const items = [...wv.rowFor("me", 12).querySelectorAll(".syft-menu-item")].map((b) => b.dataset.worker);
  assert.deepEqual(items, []);
  assert.match(wv.rowFor("me", 12).querySelector(".syft-menu").textContent, /no other reachable worker/);
  wv.destroy();
  wv.frame.remove();
});

test("an action that cannot be sent (the kernel is gone) fails at once with a clear message", async () => {
  const client = createClient({ send: () => { throw new Error("Cannot send"); }, on: () => {}, off: () => {}, timeout: 50 });
  const reply = await client.request("get", { worker: "me", id: 1 });
  assert.equal(reply.ok, false);
  assert.equal(reply.gone, true);
  assert.match(reply.error, /kernel is gone.*run its cell again/);
  const slow = createClient({ send: () => {}, on: () => {}, off: () => {}, timeout: 20 });
  assert.match((await slow.request("get", { worker: "me", id: 1 })).error, /no answer from the kernel in 0 s/);
});

test("a collapsed lane shows its header only", () => {
  const wv = view();
  wv.update(world());
  wv.collapse("bob");
  const lane = wv.el.querySelector(".syft-lane[data-worker=bob]");
  assert.ok(lane.classList.contains("syft-lane-collapsed"));
  assert.equal(lane.querySelectorAll(".syft-obj").length, 0);
  assert.equal(lane.querySelectorAll(".syft-lane-head").length, 1);
  wv.collapse("bob", false);
  assert.equal(lane.querySelectorAll(".syft-obj").length, 2);
  assert.ok(!objectRowHTML("bob", tensor(1)).includes("disabled"));
  wv.destroy();
  wv.frame.remove();
});

test("a gone pointer a name still holds stays as a row saying where its object went; an unbound one leaves a ghost", () => {
  const wv = view();
  const w0 = world();
  wv.update(w0);
  // the snapshot says how: moved to alice (gone_how/gone_to); no buttons, no arrow
  const w1 = applyWorldPatch(w0, { base: 0, rev: 1, ops: [["del", "bob", 1], ["put", "alice", 2, tensor(9)],
    ["put", "me", 1, ptr(12, "bob", 1, ["b_ptr"], { state: "gone", gone_how: "moved", gone_to: "alice" })]],
  step: { cell: 5, by: "cell", code: "on_alice = b_ptr.move(alice)", events: [{ type: "moved", worker: "bob", id: 1, to: "alice", to_id: 9 }] } });
  wv.update(w1);
  const row = wv.rowFor("me", 12);
  assert.ok(row.classList.contains("syft-obj-gone"));
  assert.equal(row.querySelector(".syft-badge-gone").textContent, "gone: moved to alice");
  assert.equal(row.querySelectorAll("[data-action]").length, 0);
  assert.equal(wv.el.querySelectorAll(".syft-lane[data-worker=me] .syft-ghost").length, 0); // a row, not a ghost
  // without the fields, the view says what it saw happen (the step's event on its target)
  const w2 = applyWorldPatch(w1, { base: 1, rev: 2, ops: [["del", "alice", 3],
    ["put", "me", 0, ptr(31, "alice", 3, ["zeta"], { state: "gone" })]],
  step: { cell: 6, by: "cell", code: "z = zeta.get()", events: [{ type: "fetched", worker: "alice", id: 3 }] } });
  wv.update(w2);
  assert.equal(wv.rowFor("me", 31).querySelector(".syft-badge-gone").textContent, "gone: fetched");
  // once no name holds it (the snapshot drops it), the brief ghost is what is left
  const w3 = applyWorldPatch(w2, { base: 2, rev: 3, ops: [["del", "me", 31]], step: { cell: 7, by: "cell", code: "del zeta", events: [] } });
  wv.update(w3);
  assert.equal(wv.rowFor("me", 31), null);
  assert.match(wv.el.querySelector(".syft-lane[data-worker=me] .syft-ghost").textContent, /zeta/);
  wv.destroy();
  wv.frame.remove();
});

function manyWorkers(n, extra = (i) => ({})) {
  const w = { rev: 0, workers: [{ id: "me", kind: "local", state: "in-process", objects: [] }] };
  for (let i = 0; i < n; i++) {
    w.workers.push({ id: `w${String(i).padStart(2, "0")}`, kind: i % 3 ? "ray" : "virtual", state: "in-process",
      objects: [tensor(i * 10 + 1, { tags: [`#b${i % 4}`] }), tensor(i * 10 + 2)], ...extra(i) });
    w.workers[0].objects.push(ptr(1000 + i, w.workers[i + 1].id, i * 10 + 1, [`p${i}`]));
  }
  return w;
}

test("more than 12 workers fold into an overview grouped by kind, node or state; a lane opens on demand", () => {
  const wv = view();
  const w = manyWorkers(30, (i) => (i % 3 ? { node: `10.0.0.${i % 2}`, state: i === 4 ? "dead" : "alive" } : {}));
  wv.update(w);
  assert.ok(wv.overviewShown);
  assert.deepEqual([...wv.el.querySelectorAll(".syft-lane")].map((l) => l.dataset.worker), ["me"]);
  const ov = wv.frame.querySelector(".syft-overview");
  assert.equal(ov.hidden, false);
  assert.equal(ov.querySelectorAll(".syft-ov-worker").length, 30);
  assert.deepEqual([...ov.querySelectorAll(".syft-ov-group")].map((g) => g.dataset.group), ["ray", "virtual"]);
  // a Ray worker shows its node and a state that is not fine
  assert.match(ov.querySelector(".syft-ov-worker[data-worker=w04]").textContent, /w04 2dead@10\.0\.0\.0/);
  const by = ov.querySelector(".syft-ov-group-by");
  const pick = (v) => { for (const o of by.options) { if (o.value === v) o.setAttribute("selected", ""); else o.removeAttribute("selected"); } };
  pick("node");
  by.dispatchEvent(new window.Event("change"));
  assert.deepEqual([...ov.querySelectorAll(".syft-ov-group")].map((g) => g.dataset.group), ["10.0.0.0", "10.0.0.1", "this process"]);
  pick("state");
  by.dispatchEvent(new window.Event("change"));
  assert.deepEqual([...ov.querySelectorAll(".syft-ov-group")].map((g) => g.dataset.group), ["alive", "dead", "in-process"]);
  // search narrows the overview to the workers holding matches, with counts
  wv.filter("#b1");
  const chips = [...ov.querySelectorAll(".syft-ov-worker")];
  assert.equal(chips.length, 8);
  assert.match(chips[0].textContent, /1 of 2/);
  wv.filter("10.0.0.1");
  assert.equal(ov.querySelectorAll(".syft-ov-worker").length, 10);
  wv.filter("");
  // a click opens a lane (with a close button); the arrow's pair is there now
  ov.querySelector(".syft-ov-worker[data-worker=w07]").dispatchEvent(new window.Event("click", { bubbles: true }));
  assert.deepEqual([...wv.el.querySelectorAll(".syft-lane")].map((l) => l.dataset.worker), ["me", "w07"]);
  assert.equal(ov.querySelector(".syft-ov-worker[data-worker=w07]").getAttribute("aria-pressed"), "true");
  assert.ok(wv.rowFor("w07", 71));
  wv.el.querySelector(".syft-lane[data-worker=w07] .syft-lane-close").dispatchEvent(new window.Event("click", { bubbles: true }));
  assert.deepEqual([...wv.el.querySelectorAll(".syft-lane")].map((l) => l.dataset.worker), ["me"]);
  // a pointer's worker chip opens the lane it points to
  wv.rowFor("me", 1011).querySelector(".syft-where").dispatchEvent(new window.Event("click", { bubbles: true }));
  assert.deepEqual([...wv.el.querySelectorAll(".syft-lane")].map((l) => l.dataset.worker), ["me", "w11"]);
  // a worker filter that leaves 12 or fewer shows their lanes directly; "all lanes" shows every lane
  wv.filter("worker:w2");
  assert.equal(wv.overviewShown, false);
  assert.equal(wv.el.querySelectorAll(".syft-lane").length, 10);
  wv.filter("");
  ov.querySelector(".syft-ov-all").dispatchEvent(new window.Event("click", { bubbles: true }));
  assert.equal(wv.el.querySelectorAll(".syft-lane").length, 31);
  assert.equal(wv.el.querySelectorAll(".syft-lane-close").length, 0);
  // 12 workers: plain lanes
  const small = view();
  small.update(manyWorkers(12));
  assert.equal(small.overviewShown, false);
  assert.equal(small.frame.querySelector(".syft-overview").hidden, true);
  for (const v of [wv, small]) { v.destroy(); v.frame.remove(); }
});

test("the shares of one secret light up together across lanes, with the secret; values are never drawn", () => {
  const w = world();
  w.workers.push({ id: "carol", kind: "virtual", state: "in-process", objects: [] });
  w.workers[1].objects.push(tensor(20, { dtype: "int64", group: "g1", share: { index: 0, of: 2 } }));
  w.workers[2].objects.push(tensor(21, { dtype: "int64", group: "g1", share: { index: 1, of: 2 } }));
  w.workers[2].objects.push(tensor(22, { dtype: "int64", group: "g2", share: { index: 1, of: 2 } }));
  w.workers[0].objects.push({ id: 70, kind: "fixed_precision", type: "FixedPrecisionTensor", shape: [3], dtype: "float32",
    names: ["sx"], group: "g1", crypto_provider: "carol" });
  w.workers[0].objects.push(ptr(71, "bob", 20, [], { group: "g1", share: { index: 0, of: 2 } }));
  const wv = view();
  wv.update(w);
  // the crypto provider's lane says so; unnamed share pointers are named by their secret
  assert.match(wv.el.querySelector(".syft-lane[data-worker=carol] .syft-lane-role").textContent, /crypto provider/);
  assert.equal(wv.el.querySelectorAll(".syft-lane-role").length, 1);
  const bobShare = wv.rowFor("bob", 20);
  assert.equal(bobShare.querySelector(".syft-share").textContent, "share 1/2");
  assert.match(bobShare.querySelector(".syft-share").title, /alone it reveals nothing/);
  assert.match(wv.rowFor("me", 70).textContent, /crypto: carol/);
  assert.match(wv.rowFor("me", 71).textContent, /share of sx/);
  assert.match(wv.rowFor("bob", 20).querySelector(".syft-pointed").textContent, /← sx's share/);
  bobShare.dispatchEvent(new window.Event("mouseover", { bubbles: true }));
  const lit = [...wv.el.querySelectorAll(".syft-obj.syft-lit")].map((r) => r.dataset.key).sort();
  assert.deepEqual(lit, ["alice:21", "bob:20", "me:70", "me:71"]);
  // a click pins it: moving over another row does not change it; a second click unpins
  bobShare.dispatchEvent(new window.Event("click", { bubbles: true }));
  wv.rowFor("alice", 22).dispatchEvent(new window.Event("mouseover", { bubbles: true }));
  assert.ok(wv.rowFor("alice", 21).classList.contains("syft-lit") && !wv.rowFor("alice", 22).classList.contains("syft-lit"));
  bobShare.dispatchEvent(new window.Event("click", { bubbles: true }));
  assert.equal(wv.el.querySelectorAll(".syft-obj.syft-lit").length, 0);
  wv.destroy();
  wv.frame.remove();
});

test("the overview comes back whole after a filter hid it", () => {
  const wv = view();
  wv.update(manyWorkers(20));
  wv.filter("", "", "w03");
  assert.equal(wv.overviewShown, false);
  wv.filter("");
  assert.equal(wv.frame.querySelectorAll(".syft-overview .syft-ov-worker").length, 20);
  wv.destroy();
  wv.frame.remove();
});

test("a row redrawn by a patch keeps the keyboard's focus on the same button", () => {
  const wv = view();
  const w0 = world();
  wv.update(w0);
  wv.rowFor("me", 40).querySelector("[data-action=send]").focus();
  assert.equal(document.activeElement.dataset.action, "send");
  // x's row changes (a new name): the row is drawn again, and its Send button has the focus
  const w1 = applyWorldPatch(w0, { type: "world_patch", base: 0, rev: 1,
    ops: [["put", "me", 4, { ...w0.workers[0].objects[4], names: ["x", "y"] }]] });
  wv.update(w1);
  const row = wv.rowFor("me", 40);
  assert.match(row.textContent, /y/);
  assert.equal(document.activeElement, row.querySelector("[data-action=send]"));
  wv.destroy();
  wv.frame.remove();
});
