// The anywidget entry: one module for the chain, world and plan views (model trait `view`).
//
// The kernel never draws: it syncs model dicts (traits `chains`, `world`, `workers`) and,
// after the first render, sends the world's changes as small patches (patch.js). Buttons
// send named action requests and show the reply in a status line.

import css from "./style.css";
import { actionBar, createClient, statusLine } from "./actions.js";
import { chainBlock, flattenTree, renderChains, rootOf } from "./chain.js";
import { createWorldChannel } from "./channel.js";
import { createHost } from "./host.js";
import { LOCAL, h, isEdge } from "./dom.js";
import { planNodeOf, renderPlan } from "./plan.js";
import { createWorldView } from "./world.js";

const STYLE_ID = "syft-lab-widget-style";

/** Add the stylesheet once per document (the lab sidebar does the same with its own copy). */
export function injectStyle(doc = document) {
  if (doc.getElementById(STYLE_ID)) return;
  const style = doc.createElement("style");
  style.id = STYLE_ID;
  style.textContent = css;
  doc.head.append(style);
}

// Once per model: the world channel (channel.js, the same as the lab sidebar's) applies the
// kernel's patches to the front-end copy of `world` (not sent back to the kernel: no
// save_changes), and every view of the model re-renders what changed.
function initialize({ model }) {
  const channel = createWorldChannel({
    send: (msg) => model.send(msg),
    get: () => model.get("world"),
    set: (world) => model.set("world", world),
  });
  const onMsg = (msg) => channel.receive(msg);
  model.on("msg:custom", onMsg);
  return () => { model.off("msg:custom", onMsg); channel.dispose(); };
}

function render({ model, el }) {
  injectStyle();
  const client = createClient({
    send: (msg) => model.send(msg),
    on: (fn) => model.on("msg:custom", fn),
    off: (fn) => model.off("msg:custom", fn),
  });
  const status = statusLine();
  const root = h("div", { class: "syft-root", "data-view": model.get("view") }, status.el);
  el.append(root);

  let layoutChanged = () => {};
  let gone = "";
  let wv = null;
  // A view whose kernel went away (a restart, a shutdown) says so and turns its buttons off:
  // JupyterLab's widget manager marks the view's element when its comm is no longer live.
  const markGone = (why) => {
    if (gone) return;
    gone = why;
    root.classList.add("syft-disabled");
    for (const b of root.querySelectorAll("button[data-action], .syft-menu-item")) b.disabled = true;
    // said once: a world view's own banner, or else the status line (not both)
    if (wv) wv.setDisabled(why);
    else status.error(why);
  };
  const KERNEL_GONE = "The kernel of this view is gone (restarted or shut down): it shows the world as it was, "
    + "and its buttons are off. Run its cell again to get a live view.";
  // what only the host knows (is the kernel still there?), behind js/widget/host.js
  const host = createHost(model, el);
  const ctx = {
    workers: () => model.get("workers") || [],
    request: (action, target, extra) => client.request(action, target, extra),
    async run(action, target, extra = {}) {
      if (!gone && host.kernelReplaced()) markGone(KERNEL_GONE); // the notebook changed kernel
      if (gone) {
        if (!wv) status.error(gone);
        return { ok: false, error: gone };
      }
      status.pending(`${action}…`);
      const reply = await client.request(action, target, extra);
      if (reply.gone) markGone(KERNEL_GONE);
      else status.show(reply);
      return reply;
    },
    layoutChanged: () => layoutChanged(),
  };

  const view = model.get("view");
  const cleanups = [];
  const on = (event, fn) => { model.on(event, fn); cleanups.push(() => model.off(event, fn)); };

  // a restart or a dead kernel takes the view's comm with it (where the host can tell)
  cleanups.push(host.watch(() => markGone(KERNEL_GONE)));

  if (view === "world") {
    wv = createWorldView(ctx);
    layoutChanged = wv.layoutChanged;
    root.append(wv.frame);
    root.__syftWorld = wv; // for benchmarks and tests
    const update = () => wv.update(model.get("world") || { workers: [] }, model.get("focus") || []);
    update();
    on("change:world", update);
    on("change:focus", update);
    cleanups.push(() => wv.destroy());
  } else {
    const body = h("div", { class: "syft-body" });
    root.append(body);
    const draw = () => {
      const chains = model.get("chains") || [];
      if (view === "plan") {
        const head = rootOf(chains[0]);
        const plan = planNodeOf([{ nodes: flattenTree(head) }]);
        const parts = [];
        if (head && isEdge(head)) parts.push(chainBlock({ ...chains[0], root: { ...head, children: [] } }, ctx));
        const local = head && head.kind === "plan" && (head.owner ?? LOCAL) === LOCAL;
        const buttons = local ? actionBar(LOCAL, head, ctx, chains[0].names?.[0] || head.name) : null;
        parts.push(renderPlan(plan, { idPrefix: `syft-plan-${client.viewId}`, actions: buttons }));
        parts.push(renderChains(chains.slice(1), ctx));
        body.replaceChildren(...parts);
      } else {
        body.replaceChildren(renderChains(chains, ctx));
      }
    };
    draw();
    on("change:chains", draw);
    on("change:workers", draw);
  }

  try {
    model.send({ type: "hello", view: client.viewId });
  } catch {
    markGone(KERNEL_GONE); // rendered again (a reload) after its kernel went away
  }
  if (host.isGone()) markGone(KERNEL_GONE);
  return () => {
    for (const c of cleanups) c();
    client.dispose();
    try { model.send({ type: "bye", view: client.viewId }); } catch { /* the kernel may be gone */ }
    root.remove();
  };
}

export default { initialize, render };
