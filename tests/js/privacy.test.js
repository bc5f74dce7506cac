// "No one holds the secret" made obvious (issue 26.7): a shared value's head says it is held by
// nobody, one line says reconstructing needs every share, its Get reads "Reconstruct", the
// share branches are laid out evenly, and share groups get clearly distinct colours.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { renderChains } = await import("../../js/widget/chain.js");
const { groupHue, setGroupOrder, objectRowHTML } = await import("../../js/widget/world.js");

const ctx = { workers: () => [], run: () => Promise.resolve({ ok: true }), request: () => Promise.resolve({ ok: false }) };

function sharedChain(parties) {
  const share = (w, i) => ({ kind: "pointer", type: "PointerTensor", id: 100 + i, owner: "me", location: w, id_at_location: 200 + i,
    state: "ok", owning: true, group: 5, share: { index: i, of: parties.length }, actions: [], annotations: [],
    display: { label: "PointerTensor", lines: [], badge: null },
    children: [{ kind: "tensor", type: "Tensor", id: 200 + i, owner: w, preview: null, actions: [], annotations: [], children: [],
      display: { label: "Tensor", lines: [], badge: null } }] });
  const shared = { kind: "shared", type: "AdditiveSharingTensor", id: 2, owner: "me", group: 5, distributed: parties,
    actions: [], annotations: [{ label: "crypto provider", value: "carol" }], display: { label: "AdditiveSharingTensor", lines: [], badge: "secret" },
    children: parties.map(share) };
  return { kind: "fixed_precision", type: "FixedPrecisionTensor", id: 1, owner: "me", distributed: parties, shape: [2], dtype: "float32",
    actions: ["get", "float_precision"], annotations: [], display: { label: "FixedPrecisionTensor", lines: [], badge: null }, children: [shared] };
}

test("a shared tensor's head is held by nobody, says reconstructing needs every share, and offers Reconstruct", () => {
  const el = renderChains([{ names: ["sx"], root: sharedChain(["alice", "bob"]) }], ctx);
  const head = el.querySelector(".syft-box-fixed_precision");
  assert.match(head.querySelector(".syft-meta").textContent, /held by nobody/);
  assert.doesNotMatch(head.textContent, /on me/);
  assert.doesNotMatch(el.querySelector(".syft-box-shared").textContent, /on me/);
  const notes = [...el.querySelectorAll(".syft-reconstruct-note")].map((n) => n.textContent);
  assert.deepEqual(notes, ["reconstructing needs every share: alice + bob (alone, each reveals nothing)"]);
  const get = head.querySelector("[data-action=get]");
  assert.equal(get.textContent, "Reconstruct");
  assert.match(get.getAttribute("title"), /alice and bob each send their share/);
});

test("share branches are laid out evenly: one row for up to four, rows of equal length beyond", () => {
  const cols = (n) => renderChains([{ names: ["s"], root: sharedChain(Array.from({ length: n }, (_, i) => `w${i}`)) }], ctx)
    .querySelector(".syft-branches").style.getPropertyValue("grid-template-columns");
  assert.equal(cols(2), "repeat(2, minmax(0, 1fr))");
  assert.equal(cols(3), "repeat(3, minmax(0, 1fr))"); // a third party's share is not alone on a row
  assert.equal(cols(5), "repeat(3, minmax(0, 1fr))"); // 3 + 2, not 4 + 1
  assert.equal(cols(8), "repeat(4, minmax(0, 1fr))");
});

test("share groups get hues far apart, in the order the world lists them", () => {
  setGroupOrder([11, 22, 11, 33, 44]);
  const hues = [11, 22, 33, 44].map(groupHue);
  for (let i = 0; i < hues.length; i++) {
    for (let j = i + 1; j < hues.length; j++) {
      const d = Math.abs(hues[i] - hues[j]);
      assert.ok(Math.min(d, 360 - d) >= 60, `groups ${i} and ${j}: hues ${hues[i]} and ${hues[j]}`);
    }
  }
  setGroupOrder([]);
});

test("the notebook's row of a shared value says it is held by nobody", () => {
  const html = objectRowHTML("me", { id: 1, kind: "fixed_precision", type: "FixedPrecisionTensor", names: ["sx"], group: 5,
    distributed: ["alice", "bob"], actions: ["get"] });
  assert.match(html, /held by nobody/);
  assert.match(html, /data-action="get"[^>]*>Reconstruct</);
});
