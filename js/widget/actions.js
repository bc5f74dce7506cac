// Buttons and the request/reply client for the kernel's named actions (syft_lab/actions.py).
//
// A button never sends code: only an action name, the target's ids from the model, and
// (for send and move) a worker id. The kernel checks everything and replies.

import { LOCAL, esc, h, isEdge, isStored, shortId } from "./dom.js";

const DOWN = new Set(["unreachable", "closed", "gone", "error", "stopped"]); // "disconnected" reconnects
let seq = 0;

/** How long an action may wait for the kernel's reply before the view says it got none. */
export const ACTION_TIMEOUT_MS = 30000;

/** Request/reply over the widget's custom messages. `send(msg)` and `on(handler)` are injected.
 * Every request resolves: with the kernel's reply, with an error at once when the message
 * cannot be sent (the kernel is gone), or with a timeout error after `timeout` ms. */
export function createClient({ send, on, off, timeout = ACTION_TIMEOUT_MS }) {
  const viewId = "v" + Math.random().toString(36).slice(2, 10);
  const pending = new Map();
  const onMsg = (msg) => {
    if (!msg || msg.type !== "reply" || !pending.has(msg.req)) return;
    const p = pending.get(msg.req);
    pending.delete(msg.req);
    clearTimeout(p.timer);
    p.resolve(msg);
  };
  on(onMsg);
  return {
    viewId,
    request(action, target, extra = {}) {
      const req = `${viewId}-${++seq}`;
      const msg = { type: "action", req, action, target: { worker: target.worker, id: target.id } };
      if (extra.worker !== undefined) msg.worker = extra.worker;
      if (extra.name !== undefined && extra.name !== "") msg.name = extra.name;
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          pending.delete(req);
          resolve({ ok: false, req, action, timeout: true, error: `no answer from the kernel in ${Math.round(timeout / 1000)} s `
            + "(is it busy, or stopped?); the action still runs if the kernel gets to it" });
        }, timeout);
        pending.set(req, { resolve, timer });
        try {
          send(msg);
        } catch (e) {
          clearTimeout(timer);
          pending.delete(req);
          resolve({ ok: false, req, action, gone: true, error: `the kernel is gone (${e?.message || e}): `
            + "this view is stale; run its cell again in a running kernel" });
        }
      });
    },
    dispose() {
      off(onMsg);
      for (const p of pending.values()) clearTimeout(p.timer);
      pending.clear();
    },
  };
}

// How an action the model offers is shown: its label, and whether it asks for a worker. The
// model decides which actions an object offers (`actions` of every node and world entry,
// computed once by the kernel: syft_lab/tensors/nodes.py); a view never recomputes that.
// "oplog" is a read the op log of a LoggingTensor makes itself (chain.js), not a button.
const ACTION_UI = {
  get: { label: "Get" },
  move: { label: "Move…", menu: true },
  send: { label: "Send…", menu: true },
};
const NOT_BUTTONS = new Set(["oplog"]);

/** The buttons a view shows for an object: [{action, label, menu}], from `entry.actions`. */
export function actionsFor(_worker, entry) {
  if (!entry || !Array.isArray(entry.actions)) return [];
  return entry.actions.filter((a) => typeof a === "string" && !NOT_BUTTONS.has(a))
    .map((a) => ({ action: a, label: ACTION_UI[a]?.label ?? a.replace(/_/g, " "), menu: !!ACTION_UI[a]?.menu }));
}

/** The workers an object can be sent or moved to. */
export function destinations(action, worker, entry, workers) {
  const here = isStored(worker, entry) ? worker : isEdge(entry) ? entry.location : LOCAL;
  return (workers || [])
    .filter((w) => w.id !== LOCAL && w.id !== here && !DOWN.has(w.state))
    .map((w) => w.id);
}

/**
 * The buttons for one object. ctx: {workers(): [{id, kind, state}], run(action, target, extra)}.
 * Keyboard: every control is a <button>; a menu opens below with its first worker focused,
 * arrows move, Escape closes and gives focus back.
 */
export function actionBar(worker, entry, ctx, label = "") {
  const acts = actionsFor(worker, entry);
  if (!acts.length) return null;
  const target = { worker, id: entry.id };
  const bar = h("span", { class: "syft-actions" });
  for (const a of acts) {
    const what = `${a.action} ${label || `${entry.type || entry.kind} ${shortId(entry.id)}`}`;
    if (!a.menu) {
      // getting a value no one holds reconstructs it from every share (issue 26.7)
      const rebuild = a.action === "get" && entry.distributed?.length;
      bar.append(
        h("button", {
          class: "syft-btn", type: "button", "data-action": a.action, "aria-label": what,
          title: rebuild ? `reconstruct the value here: ${entry.distributed.join(" and ")} each send their share` : null,
          onclick: (ev) => { ev.stopPropagation(); runDisabled(bar, () => ctx.run(a.action, target, {})); },
        }, rebuild ? "Reconstruct" : a.label),
      );
      continue;
    }
    const btn = h("button", {
      class: "syft-btn", type: "button", "data-action": a.action, "aria-haspopup": "menu",
      "aria-expanded": "false", "aria-label": what,
    }, a.label);
    btn.addEventListener("click", (ev) => {
      ev.stopPropagation();
      toggleMenu(bar, btn, a.action, target, ctx, worker, entry);
    });
    bar.append(btn);
  }
  return bar;
}

/** Run an action with a bar's buttons disabled until its reply: a double click sends it once. */
export async function runDisabled(bar, fn) {
  if (bar.dataset.pending) return undefined;
  bar.dataset.pending = "1";
  const buttons = [...bar.querySelectorAll("button")];
  for (const b of buttons) b.disabled = true;
  try {
    return await fn();
  } finally {
    delete bar.dataset.pending;
    const off = !!bar.closest?.(".syft-disabled"); // the view's kernel went away meanwhile
    for (const b of buttons) b.disabled = off;
  }
}

/** The same buttons as HTML text, with no listeners (the world view delegates their clicks). */
export function actionBarHTML(worker, entry, label = "") {
  const acts = actionsFor(worker, entry);
  if (!acts.length) return "";
  const what = label || `${entry.type || entry.kind} ${shortId(entry.id)}`;
  return `<span class="syft-actions">${acts.map((a) => `<button class="syft-btn" type="button" data-action="${a.action}"`
    + `${a.menu ? ' aria-haspopup="menu" aria-expanded="false"' : ""} aria-label="${esc(`${a.action} ${what}`)}">`
    + `${a.action === "get" && entry.distributed?.length ? "Reconstruct" : a.label}</button>`).join("")}</span>`;
}

/** Open (or close, if open) the worker menu of a send/move button. */
export function toggleMenu(bar, btn, action, target, ctx, worker, entry) {
  const open = bar.querySelector(".syft-menu");
  if (open) {
    const same = open.dataset.action === action;
    closeMenu(bar);
    if (same) return;
  }
  const dests = destinations(action, worker, entry, ctx.workers());
  const items = dests.map((id) =>
    h("button", {
      class: "syft-btn syft-menu-item", type: "button", role: "menuitem", "data-worker": id,
      onclick: (ev) => {
        ev.stopPropagation();
        closeMenu(bar);
        // the world view's run disables its row itself; elsewhere the bar is disabled here
        if (ctx.disablesRows) ctx.run(action, target, { worker: id });
        else runDisabled(bar, () => ctx.run(action, target, { worker: id }));
      },
    }, id),
  );
  const menu = h("span", { class: "syft-menu", role: "menu", "data-action": action, tabindex: "-1",
    "aria-label": `${action} to which worker` },
  items.length ? items : h("span", { class: "syft-muted" }, "no other reachable worker"));
  menu.addEventListener("keydown", (ev) => {
    const i = items.indexOf(document.activeElement);
    if (ev.key === "Escape") { ev.preventDefault(); closeMenu(bar); btn.focus(); }
    else if (ev.key === "ArrowDown" || ev.key === "ArrowRight") { ev.preventDefault(); items[(i + 1) % items.length]?.focus(); }
    else if (ev.key === "ArrowUp" || ev.key === "ArrowLeft") { ev.preventDefault(); items[(i - 1 + items.length) % items.length]?.focus(); }
  });
  btn.setAttribute("aria-expanded", "true");
  bar.append(menu);
  bar.closest(".syft-obj")?.classList.add("syft-menu-open");
  (items[0] || menu).focus();
  ctx.layoutChanged?.();
}

function closeMenu(bar) {
  bar.querySelector(".syft-menu")?.remove();
  bar.closest(".syft-obj")?.classList.remove("syft-menu-open");
  for (const b of bar.querySelectorAll("[aria-expanded=true]")) b.setAttribute("aria-expanded", "false");
}

/** A status line showing the last action: "x_ptr = x.send(bob)" or the error. */
export function statusLine() {
  const el = h("div", { class: "syft-status", role: "status", "aria-live": "polite" });
  return {
    el,
    pending(text) { el.className = "syft-status syft-pending"; el.textContent = text; },
    error(text) { el.className = "syft-status syft-error"; el.textContent = text; },
    show(reply) {
      if (reply.ok) {
        el.className = "syft-status syft-ok";
        el.textContent = reply.code ? reply.code : `${reply.action}: done`;
      } else {
        el.className = "syft-status syft-error";
        el.textContent = `Error: ${reply.error}`;
      }
    },
  };
}
