// The world view's "Explain" panel: what reconstructing a shared value takes (its row's
// `explain` entry, from the kernel: names, ids and counts, never a value), above the lanes,
// its shares lit while it is open.

import { explainPanel } from "../ledger.js";

/**
 * box: the panel's element; entryOf(key): the row's entry in the world shown; pin(key): light
 * (or with "", unlight) the row's shares. Returns {el, show(key, refresh), key}: show("")
 * closes it; refresh: the world changed, keep it current (redrawn only if its text changed).
 */
export function createExplain({ box, entryOf, pin }) {
  let key = "";
  function show(next, refresh = false) {
    if (!next) {
      key = "";
      box.hidden = true;
      box.replaceChildren();
      if (!refresh) pin("");
      return;
    }
    const entry = entryOf(next);
    if (!entry?.explain) { if (!refresh) show(""); return; }
    const sig = JSON.stringify(entry.explain);
    if (refresh && box.dataset.sig === sig) return;
    key = next;
    box.dataset.sig = sig;
    box.replaceChildren(explainPanel(entry.explain, () => show("")));
    box.hidden = false;
    if (!refresh) pin(next);
  }
  return {
    el: box,
    show,
    /** The key of the row explained ("" when closed). */
    get key() { return key; },
  };
}
