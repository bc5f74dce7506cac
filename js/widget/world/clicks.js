// The world view's clicks: what a click inside the lanes means (clickIntent, pure: it reads the
// clicked element and its ancestors, nothing else), and the rows whose action awaits its reply
// (createPending: a double click sends once, the row's buttons are off until the reply).

import { splitKey } from "./rows.js";

/**
 * What a click on `target` (an element inside the lanes) asks for, or null for nothing:
 *   {do: "close", lane}               a lane's close button (the overview opened it)
 *   {do: "openTarget", key, otherwise} a pointer's worker chip: world.js opens the lane it points
 *                                     to when the overview folds it, else does `otherwise` (the
 *                                     click's meaning as a click on the row)
 *   {do: "ledger", lane}              a lane's record toggle
 *   {do: "explain", key}              a shared value's Explain button
 *   {do: "collapse", lane}            a lane's collapse toggle
 *   {do: "pin", key}                  a row itself (not its buttons): pin or unpin its highlight
 *   {do: "run", key, lane, action, menu, disabled}
 *                                     a row's action button (menu: it opens a menu of workers)
 * A menu's own items answer for themselves (null here), as do clicks outside any row.
 */
export function clickIntent(target) {
  const up = (sel) => target?.closest?.(sel) ?? null;
  const laneOf = (el) => el.closest(".syft-lane")?.dataset.worker;
  const rowKey = (el) => el.closest(".syft-obj")?.dataset.key;
  const close = up(".syft-lane-close");
  if (close) return laneIntent("close", laneOf(close));
  const chip = up(".syft-where");
  if (chip && rowKey(chip)) return { do: "openTarget", key: rowKey(chip), otherwise: afterChip(target) };
  return afterChip(target);
}

/** The meaning of a click once a worker chip did not take it. */
function afterChip(target) {
  const up = (sel) => target?.closest?.(sel) ?? null;
  const laneOf = (el) => el.closest(".syft-lane")?.dataset.worker;
  const ledger = up(".syft-ledger-toggle");
  if (ledger) return laneIntent("ledger", laneOf(ledger));
  const ex = up(".syft-explain-btn");
  if (ex) {
    const key = ex.closest(".syft-obj")?.dataset.key;
    return key ? { do: "explain", key } : null;
  }
  const toggle = up(".syft-lane-toggle");
  if (toggle) return laneIntent("collapse", laneOf(toggle));
  const btn = up("button[data-action]");
  if (!btn) {
    const row = up(".syft-obj");
    return row && !up(".syft-actions") && row.dataset.key ? { do: "pin", key: row.dataset.key } : null;
  }
  if (btn.classList.contains("syft-menu-item")) return null;
  const key = btn.closest(".syft-obj")?.dataset.key;
  if (!key) return null;
  return { do: "run", key, lane: splitKey(key)[0], action: btn.dataset.action, menu: btn.hasAttribute("aria-haspopup"),
    disabled: !!btn.disabled, button: btn };
}

function laneIntent(what, lane) {
  return lane === undefined ? null : { do: what, lane };
}

/**
 * The rows whose action awaits its reply. rowEl(key): the row's element when in view;
 * off(): whether every button is off anyway (the kernel is gone). run(key, fn) runs fn() once
 * at a time per row, the row's buttons disabled until it settles.
 */
export function createPending({ rowEl, off }) {
  const keys = new Set();
  function setButtons(key, disabled) {
    for (const b of rowEl(key)?.querySelectorAll("button") || []) b.disabled = disabled;
  }
  return {
    has: (key) => keys.has(key),
    async run(key, fn) {
      if (keys.has(key)) return undefined;
      keys.add(key);
      setButtons(key, true);
      try {
        return await fn();
      } finally {
        keys.delete(key);
        setButtons(key, off());
      }
    },
  };
}
