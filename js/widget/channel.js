// The world channel: the browser's end of the kernel's world protocol, one copy for every view.
// The notebook widget (index.js, over anywidget's custom messages) and the JupyterLab sidebar
// (js/lab/comm.ts, over a comm to syft_lab/sidebar.py) both feed it what the kernel sends:
//
//   {type: "snapshot", world}       the sidebar's first message and its answer to a resync
//   {type: "world_reset", world}    the widget's answer to a resync
//   {type: "world_patch", base, rev, ops, lanes?, step?}   per-object changes (diff.py, tracker.py)
//
// A patch applies only to the world of revision `base` (patch.js); one that does not follow
// (a message lost, a view that joined late) makes the channel ask for a resync, once, and drop
// patches until the fresh world arrives. Requests and replies of actions ride the same channel
// (actions.js createClient).

import { createClient } from "./actions.js";
import { applyWorldPatch } from "./patch.js";

/**
 * `send(msg)` sends to the kernel; `get()`/`set(world)` read and store the current world (the
 * widget keeps it in its model's `world` trait, the sidebar in the channel: omit them).
 * `onWorld(world)` is called after every snapshot or applied patch.
 */
export function createWorldChannel({ send, get, set, onWorld, timeout } = {}) {
  let own = null;
  const read = get ?? (() => own);
  const write = set ?? ((w) => { own = w; });
  const counts = { snapshots: 0, patches: 0, resyncs: 0 };
  const handlers = new Set();
  let waiting = false; // a resync was asked for: patches wait for the world it brings

  const adopt = (world) => {
    waiting = false;
    counts.snapshots++;
    write(world);
    onWorld?.(world);
  };

  const channel = {
    counts,
    get world() { return read(); },
    /** Feed one message from the kernel; true if it was part of the world protocol. */
    receive(msg) {
      if (!msg || typeof msg !== "object") return false;
      let mine = true;
      if ((msg.type === "snapshot" || msg.type === "world_reset") && msg.world && Array.isArray(msg.world.workers)) {
        adopt(msg.world);
      } else if (msg.type === "world_patch") {
        const next = waiting ? null : applyWorldPatch(read(), msg);
        if (next) {
          counts.patches++;
          write(next);
          onWorld?.(next);
        } else if (!waiting) {
          waiting = true;
          counts.resyncs++;
          channel.resync();
        }
      } else {
        mine = false;
      }
      for (const fn of Array.from(handlers)) fn(msg); // replies (and the rest) for the clients
      return mine;
    },
    /** Ask the kernel for the whole world again. */
    resync() {
      try { send({ type: "resync" }); } catch { /* the kernel is gone: the view says so */ }
    },
    /** A request/reply client of named actions on this channel (see actions.js). */
    client(opts = {}) {
      return createClient({ send, on: (fn) => handlers.add(fn), off: (fn) => handlers.delete(fn),
        ...(timeout !== undefined ? { timeout } : {}), ...opts });
    },
    dispose() { handlers.clear(); },
  };
  return channel;
}
