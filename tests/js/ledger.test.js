// A worker's record in its lane (#26.8) and a shared value's Explain (#26.9), without a browser:
// the header button opens the list (kind, direction, peer, bytes, cell), it follows the world,
// a provider's material is counted by item; Explain shows the lines and closes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { createWorldView } = await import("../../js/widget/world.js");
const { ledgerRowHTML, sizeText } = await import("../../js/widget/ledger.js");

const rec = (seq, kind, direction, peer, bytes, extra = {}) => ({ seq, kind, direction, peer, peer_kind: "client", bytes, cell: 4, id: 9, ...extra });

function world(aliceRecords, extra = {}) {
  const ledger = (records, more = {}) => ({ records, seq: records.length, dropped: 0, cap: 2000, scope: "all",
    totals: Object.fromEntries(records.map((r) => [`${r.kind} ${r.direction}`, [1, r.bytes]])), material: {}, ...more });
  return { workers: [
    { id: "me", kind: "local", state: "in-process", ledger: ledger([]), objects: [
      { id: 50, kind: "fixed_precision", type: "FixedPrecisionTensor", shape: [3], dtype: "float32", names: ["sx"], actions: ["get"],
        distributed: ["alice", "bob"], group: 1, explain: { secret: "sx", parties: [{ worker: "alice", share: 1, of: 2, sent: false },
          { worker: "bob", share: 2, of: 2, sent: false }], crypto_provider: "carol",
        lines: ["sx is held by nobody", "sx = (share 1 (on alice) + share 2 (on bob)) mod 2^64"] } }] },
    { id: "alice", kind: "virtual", state: "in-process", ledger: ledger(aliceRecords), objects: [] },
    { id: "carol", kind: "virtual", state: "in-process", objects: [],
      ledger: ledger([rec(0, "dealer material", "out", "me", 768, { items: { "Beaver triple (mul)": 16 } })],
        { material: { "Beaver triple (mul)": 16 } }) },
    ...(extra.workers || [])] };
}

function view() {
  const wv = createWorldView({ workers: () => [], run: () => Promise.resolve({ ok: true }), request: () => Promise.resolve({ ok: false }) });
  document.body.append(wv.frame);
  return wv;
}

test("a lane's record button opens its ledger inside the lane, newest first, and follows the world", () => {
  const wv = view();
  const records = [rec(0, "stored", "in", "me", 24), rec(1, "dealer material", "in", "carol", 72, { peer_kind: "crypto provider", op: "sub" }),
    rec(2, "opened value", "out", "me", 48)];
  wv.update(world(records));
  const lane = () => wv.el.querySelector(".syft-lane[data-worker=alice]");
  const btn = () => lane().querySelector(".syft-ledger-toggle");
  assert.equal(btn().textContent, "record ↓2 ↑1");
  assert.equal(wv.el.querySelector(".syft-lane[data-worker=me] .syft-ledger-toggle"), null); // an unused "me" shows none
  assert.equal(lane().querySelector(".syft-ledger"), null);
  btn().click();
  const rows = [...lane().querySelectorAll(".syft-ledger-rec")];
  assert.deepEqual(rows.map((r) => r.dataset.kind), ["opened value", "dealer material", "stored"]);
  assert.equal(rows[1].querySelector(".syft-ledger-peer").textContent, "carol");
  assert.equal(rows[1].querySelector(".syft-ledger-dir").textContent, "↓ from");
  assert.equal(rows[1].querySelector(".syft-ledger-cell").textContent, "[4]");
  assert.equal(rows[0].querySelector(".syft-ledger-dir").textContent, "↑ to");
  assert.equal(btn().getAttribute("aria-expanded"), "true");
  wv.update(world([...records, rec(3, "fetched", "out", "me", 24)])); // a new record: the open list shows it
  assert.equal(lane().querySelectorAll(".syft-ledger-rec").length, 4);
  assert.equal(lane().querySelector(".syft-ledger-rec").dataset.kind, "fetched");
  assert.equal(btn().textContent, "record ↓2 ↑2");
  btn().click();
  assert.equal(lane().querySelector(".syft-ledger"), null);
  const carol = wv.el.querySelector(".syft-lane[data-worker=carol]");
  carol.querySelector(".syft-ledger-toggle").click();
  assert.equal(wv.el.querySelector(".syft-lane[data-worker=carol] .syft-ledger-material").textContent,
    "material made: 16 Beaver triple (mul)");
  wv.destroy();
  wv.frame.remove();
});

test("Explain on a shared value's row shows its reconstruction and closes", () => {
  const wv = view();
  wv.update(world([]));
  const btn = wv.rowFor("me", 50).querySelector(".syft-explain-btn");
  assert.ok(btn, "a shared value offers Explain");
  btn.click();
  const box = wv.frame.querySelector(".syft-explain");
  assert.equal(box.querySelector("b").textContent, "Reconstructing sx");
  assert.deepEqual([...box.querySelectorAll(".syft-explain-party")].map((p) => p.textContent),
    ["alice: share 1/2", "bob: share 2/2", "carol: no share"]);
  assert.match(box.textContent, /mod 2\^64/);
  box.querySelector(".syft-explain-close").click();
  assert.equal(wv.frame.querySelector(".syft-explain"), null);
  wv.destroy();
  wv.frame.remove();
});

test("a record names kind, peer, size and cell as text, escaped", () => {
  assert.equal(sizeText(72), "72 B");
  assert.equal(sizeText(2300), "2.2 KB");
  const html = ledgerRowHTML(rec(5, "op", "in", "<client 2>", 0, { op: "add" }));
  assert.ok(html.includes("&#60;client 2&#62;") && !html.includes("<client 2>"));
});
