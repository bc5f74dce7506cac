// The chain view draws trees (docs/inspection-model.md version 2): a plain chain as a column,
// a shared tensor as one branch per share coloured by its worker, any layer type from its
// `display` alone (the NoteTensor of tests/tensors/note_layer.py: no renderer knows it).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { renderChains, treeFromList, flattenTree } = await import("../../js/widget/chain.js");
const { hueClass } = await import("../../js/widget/dom.js");

const fixture = (name) => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8"));
const workers = [{ id: "me", kind: "local", state: "in-process" }, { id: "bob", kind: "virtual", state: "in-process" }];
const calls = [];
const ctx = { workers: () => workers, run: (...a) => { calls.push(a); return Promise.resolve({ ok: true }); },
  request: () => Promise.resolve({ ok: false }) };

test("a shared tensor: one branch per share, each in its worker's colour, the provider named, no values", () => {
  const { root } = fixture("shared_chain.json");
  const el = renderChains([{ names: ["sx"], root }], ctx);
  const kinds = [...el.querySelectorAll(".syft-box")].map((b) => b.getAttribute("data-kind"));
  assert.deepEqual(kinds, ["fixed_precision", "shared", "pointer", "tensor", "pointer", "tensor", "pointer", "tensor"]);
  const branches = [...el.querySelectorAll(".syft-branches > .syft-branch")];
  assert.deepEqual(branches.map((b) => b.getAttribute("data-worker")), ["bob", "alice", "dan"]);
  for (const b of branches) {
    assert.ok(b.classList.contains(hueClass(b.getAttribute("data-worker"))), "a branch has its worker's colour");
    assert.equal(b.getAttribute("data-group"), "g-7");
    assert.equal(b.querySelectorAll(".syft-box-pointer").length, 1);
    // the share's data is drawn in its worker's block, without values
    assert.match(b.querySelector(".syft-remote").textContent, new RegExp(`on ${b.getAttribute("data-worker")}`));
    assert.match(b.textContent, /values stay on/);
  }
  assert.equal(el.querySelectorAll(".syft-values").length, 0); // no share value anywhere
  const shared = el.querySelector(".syft-box-shared");
  assert.match(shared.querySelector(".syft-annotation").textContent, /crypto provider: carol/);
  assert.equal(shared.querySelector(".syft-badge").textContent, "secret");
  assert.match(shared.textContent, /3 shares, field 2\^62/);
  // the buttons are the root's own actions (the layer's names), none on the shares
  assert.deepEqual([...el.querySelectorAll("[data-action]")].map((b) => b.getAttribute("data-action")),
    ["float_precision", "get"]);
  assert.equal(el.querySelector(".syft-box-fixed_precision [data-action]").closest(".syft-box").getAttribute("data-id"), "4");
});

test("a layer type no renderer knows is drawn from its display: the NoteTensor", () => {
  const { root } = fixture("note_chain.json");
  const el = renderChains([{ names: ["nx"], root }], ctx);
  const [note, leaf] = el.querySelectorAll(".syft-box");
  assert.equal(note.getAttribute("data-kind"), "note");
  assert.equal(note.querySelector(".syft-type").textContent, root.display.label);
  assert.deepEqual([...note.querySelectorAll(".syft-display-line")].map((l) => l.textContent), root.display.lines);
  assert.equal(note.querySelector(".syft-badge").textContent, root.display.badge);
  assert.equal(leaf.querySelector(".syft-values").textContent, root.children[0].preview.text);
  assert.equal(el.querySelectorAll(".syft-branches").length, 0); // one child: a plain column
  assert.deepEqual([...el.querySelectorAll("[data-action]")].map((b) => b.getAttribute("data-action")), root.actions);
});

test("a layer with several children no renderer knows: the SplitTensor, its parts marked by what it tells them", () => {
  // the kernel's model of tests/tensors/test_layer_hooks.py's toy layer (tests/inspection/test_split_chain_fixture.py)
  const { root } = fixture("split_chain.json");
  const el = renderChains([{ names: ["sp"], root }], ctx);
  const split = el.querySelector(".syft-box-toy_split");
  assert.equal(split.querySelector(".syft-type").textContent, "SplitTensor");
  assert.equal(split.querySelector(".syft-badge").textContent, "split");
  assert.deepEqual([...split.querySelectorAll(".syft-annotation")].map((a) => a.textContent), ["cut: dim 0"]);
  // one branch per part, in order, each with the part's mark from the layer (child_fields)
  const branches = [...el.querySelectorAll(".syft-branches > .syft-branch")];
  assert.equal(branches.length, 3);
  const marks = branches.map((b) => [...b.querySelectorAll(".syft-annotation[data-label=part]")].map((a) => a.textContent));
  assert.deepEqual(marks, [["part: 1 of 3 (2 rows)"], ["part: 2 of 3 (1 rows)"], ["part: 3 of 3 (1 rows)"]]);
  // the remote parts are drawn on their workers, without values; the local part shows its values
  assert.match(branches[0].textContent, /values stay on bob/);
  assert.match(branches[1].textContent, /values stay on alice/);
  assert.equal(branches[2].querySelector(".syft-values").textContent, root.children[2].preview.text);
  assert.deepEqual([...el.querySelectorAll("[data-action]")].map((b) => b.getAttribute("data-action")), ["get"]);
});

test("a plain chain is the one-child case and looks as before; v1 lists still render", () => {
  const nodes = [
    { kind: "pointer", type: "PointerTensor", id: 1, owner: "me", location: "bob", id_at_location: 2, state: "ok",
      actions: ["get", "move"] },
    { kind: "logging", type: "LoggingTensor", id: 2, owner: "bob", log_length: 1, log_tail: ["aten.add.Tensor"] },
    { kind: "tensor", type: "Tensor", id: 3, owner: "bob", preview: null }];
  const tree = treeFromList(nodes);
  assert.deepEqual(flattenTree(tree).map((n) => n.id), [1, 2, 3]);
  for (const chain of [{ names: ["p"], nodes }, { names: ["p"], root: tree }]) {
    const el = renderChains([chain], ctx);
    const block = el.querySelector(".syft-chain-block");
    assert.deepEqual([...block.children].map((c) => c.className.split(" ")[0]),
      ["syft-chain-title", "syft-box", "syft-remote"]);
    assert.equal(el.querySelector(".syft-remote").querySelectorAll(".syft-box").length, 2);
    assert.equal(el.querySelectorAll(".syft-link").length, 2);
    assert.equal(el.querySelectorAll(".syft-branches").length, 0);
  }
});
