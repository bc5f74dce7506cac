// The widget's host adapter (js/widget/host.js): Jupyter's widget manager reports a kernel that
// went away (its status, a new kernel, the disconnected class); any other anywidget host gets the
// portable fallback, which reports nothing by itself and never throws.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom } from "./setup-dom.js";

const document = installDom();
const { createHost } = await import("../../js/widget/host.js");

function signal() {
  const fns = new Set();
  return { connect: (f) => fns.add(f), disconnect: (f) => fns.delete(f), emit: (...a) => fns.forEach((f) => f(...a)), fns };
}

function jupyterModel(kernel) {
  const handlers = {};
  return {
    widget_manager: { kernel },
    on: (name, fn) => { (handlers[name] ||= new Set()).add(fn); },
    off: (name, fn) => handlers[name]?.delete(fn),
    fire: (name) => handlers[name]?.forEach((fn) => fn()),
    handlers,
  };
}

test("in Jupyter: a restarting or dead kernel is reported, an idle or busy one is not", () => {
  const kernel = { status: "idle", statusChanged: signal() };
  const host = createHost(jupyterModel(kernel), document.createElement("div"));
  assert.equal(host.name, "jupyter");
  const seen = [];
  const stop = host.watch(() => seen.push("gone"));
  kernel.statusChanged.emit(kernel, "busy");
  kernel.statusChanged.emit(kernel, "idle");
  assert.deepEqual(seen, []);
  kernel.statusChanged.emit(kernel, "restarting");
  kernel.statusChanged.emit(kernel, "dead");
  assert.deepEqual(seen, ["gone", "gone"]);
  stop();
  assert.equal(kernel.statusChanged.fns.size, 0); // the cleanup lets go of the kernel's signal
  kernel.statusChanged.emit(kernel, "dead");
  assert.equal(seen.length, 2);
});

test("in Jupyter: the disconnected class on the view (or around it) means the kernel is gone", async () => {
  const kernel = { status: "idle", statusChanged: signal() };
  const outer = document.createElement("div");
  const el = document.createElement("div");
  outer.append(el);
  document.body.append(outer);
  const model = jupyterModel(kernel);
  const host = createHost(model, el);
  const seen = [];
  host.watch(() => seen.push("gone"));
  assert.equal(host.isGone(), false);
  outer.classList.add("jupyter-widgets-disconnected");
  model.fire("comm_live_update"); // the widget manager's event: checked on the next turn
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(host.isGone(), true);
  assert.ok(seen.length >= 1);
});

test("in Jupyter: a dead or disposed kernel at render, and a kernel replaced since", () => {
  const dead = { status: "dead", statusChanged: signal() };
  assert.equal(createHost(jupyterModel(dead), document.createElement("div")).isGone(), true);
  const disposed = { status: "idle", isDisposed: true, statusChanged: signal() };
  assert.equal(createHost(jupyterModel(disposed), document.createElement("div")).isGone(), true);
  const first = { status: "idle", statusChanged: signal() };
  const model = jupyterModel(first);
  const host = createHost(model, document.createElement("div"));
  assert.equal(host.kernelReplaced(), false);
  model.widget_manager.kernel = { status: "idle", statusChanged: signal() }; // the notebook changed kernel
  assert.equal(host.kernelReplaced(), true);
});

test("another anywidget host (no widget manager; a model that refuses unknown events): the fallback", () => {
  const model = {
    on: (name) => { if (!name.startsWith("change:") && name !== "msg:custom") throw new Error(`unknown event ${name}`); },
    off: () => {},
  };
  const host = createHost(model, document.createElement("div"));
  assert.equal(host.name, "anywidget");
  const seen = [];
  const stop = host.watch(() => seen.push("gone"));
  assert.equal(typeof stop, "function");
  stop();
  assert.equal(host.isGone(), false);
  assert.equal(host.kernelReplaced(), false);
  assert.deepEqual(seen, []);
  // no element at all (a host that renders elsewhere first) is no error either
  assert.equal(createHost(model, null).isGone(), false);
});
