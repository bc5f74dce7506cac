// The world view's highlight: hovering a row lights it up with its pointers or its target (and
// a share with its siblings: links.js litKeys), the arrows between them, and the overview's chips
// of the workers they are on. A click pins it until the next click.

import { splitKey } from "./rows.js";

/**
 * rowEl(key): the row's element if it is in view; keysFor(key): the keys lit with row `key`;
 * arrows: the arrows' SVG; chips(): the overview's worker chips. Returns {light(key), unlight(),
 * togglePin(key), pin(key) ("": none), pinned, has(key), any, lightChips(), listen(lanesEl)}.
 */
export function createHighlight({ rowEl, keysFor, arrows, chips }) {
  let lit = [];
  let litSet = new Set();
  let pinned = ""; // a row clicked: its highlight stays until another click

  /** Light the overview's chips of the workers a lit key is on. */
  function lightChips() {
    if (!lit.length) return;
    const where = new Set(lit.map((k) => splitKey(k)[0]));
    for (const c of chips()) c.classList.toggle("syft-lit", where.has(c.dataset.worker));
  }

  function light(key) {
    unlight();
    const keys = keysFor(key);
    lit = keys;
    litSet = new Set(keys);
    for (const k of keys) rowEl(k)?.classList.add("syft-lit");
    for (const p of arrows.querySelectorAll("path.syft-arrow")) {
      if (litSet.has(p.dataset.from) && litSet.has(p.dataset.to)) p.classList.add("syft-lit");
    }
    // siblings on workers whose lanes are folded into the overview: their chips light up
    lightChips();
  }

  function unlight() {
    for (const k of lit) rowEl(k)?.classList.remove("syft-lit");
    for (const p of arrows.querySelectorAll(".syft-lit")) p.classList.remove("syft-lit");
    for (const c of chips()) c.classList.remove("syft-lit");
    lit = [];
    litSet = new Set();
  }

  /** Pin row `key`'s highlight ("": unpin and clear). */
  function pin(key) {
    pinned = "";
    if (!key) { unlight(); return; }
    light(key);
    pinned = key;
  }

  return {
    light,
    unlight,
    pin,
    /** A click on a row: pins its highlight, or unpins it when it is the pinned one. */
    togglePin: (key) => pin(pinned === key ? "" : key),
    get pinned() { return pinned; },
    get lit() { return litSet; },
    has: (key) => litSet.has(key),
    lightChips,
    listen(lanesEl) {
      lanesEl.addEventListener("mouseover", (ev) => {
        if (pinned) return;
        const key = ev.target.closest?.(".syft-obj")?.dataset.key;
        if (key && lit[0] !== key) light(key);
      });
      lanesEl.addEventListener("mouseleave", () => { if (!pinned) unlight(); });
    },
  };
}
