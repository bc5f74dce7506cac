import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

installDom();
const { h, s, shortId, shapeText, workerHue, workerStyle, fmtNumber, isStored, objKey } = await import("../../js/widget/dom.js");

test("shortId is the last 6 hex digits, as syft_lab.ids.short", () => {
  assert.equal(shortId(0xabcdef123456), "123456");
  assert.equal(shortId(255), "ff");
  assert.equal(shortId(2 ** 53 - 1), "ffffff");
});

test("shapeText formats dtype and shape", () => {
  assert.equal(shapeText({ dtype: "float32", shape: [2, 3] }), "float32[2, 3]");
  assert.equal(shapeText({ dtype: "int64", shape: [] }), "int64[]");
  assert.equal(shapeText({ kind: "plan" }), "");
  assert.equal(shapeText({ dtype: "float32", shape: null }), "float32");
});

test("worker hues match the Python hash (svg.worker_hue)", () => {
  // values printed by syft_lab.widget.svg.worker_hue
  assert.deepEqual(["bob", "alice", "carol", "dave", "w0"].map(workerHue), [205, 150, 30, 150, 30]);
  assert.equal(workerHue("me"), null);
  assert.deepEqual(workerStyle("me"), { "--syft-hue": "0", "--syft-sat": "0%" });
  assert.equal(workerStyle("bob")["--syft-hue"], "205");
});

test("h builds elements with attributes, styles, listeners and nested children", () => {
  let clicked = 0;
  const el = h("div", { class: "a", title: "t", hidden: false, style: { "--x": 1 }, onclick: () => clicked++ },
    "text", [h("span", null, "in"), null, false], 3);
  assert.equal(el.getAttribute("class"), "a");
  assert.equal(el.hasAttribute("hidden"), false);
  assert.equal(el.textContent, "textin3");
  el.dispatchEvent(new window.Event("click"));
  assert.equal(clicked, 1);
  const svg = s("svg", { width: 10 }, s("path", { d: "M0 0" }));
  assert.equal(svg.namespaceURI, "http://www.w3.org/2000/svg");
  assert.equal(svg.firstChild.getAttribute("d"), "M0 0");
});

test("numbers, keys and stored objects", () => {
  assert.equal(fmtNumber(3), "3");
  assert.equal(fmtNumber(0.123456), "0.1235");
  assert.equal(fmtNumber(1e-7), "1.000e-7");
  assert.equal(fmtNumber("nan"), "nan");
  assert.equal(objKey("bob", 5), "bob:5");
  assert.equal(isStored("bob", { id: 1 }), true);
  assert.equal(isStored("me", { id: 1 }), false);
  assert.equal(isStored("me", { id: 1, refcount: 1 }), true);
});
