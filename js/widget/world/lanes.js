// The world view's lanes: one per worker, in a grid that wraps to the width, each a virtual
// list with its own scroll (rows of rowH px at index * rowH; only the rows in view exist, built
// as HTML in one batch and reused while their entry is unchanged), and the arrows' layer over
// them (arrows.js routes, this measures and draws).

import { LOCAL, colourStyle, cutName, distinctFrom, esc, h, isEdge, objKey, shapeText, shortId } from "../dom.js";
import { arrowsInView, arrowsSVG, lanesToMeasure } from "./arrows.js";
import { laneItems } from "./filter.js";
import { withGhosts } from "./history.js";
import { goneWhere, isDown, laneHead, nodeOf, objectRowHTML, pointedLabel, rowLabel, rowsFrom, splitKey } from "./rows.js";

/** Row height in px: style.css gives .syft-obj exactly this height (border included). */
export const ROW_H = 26;
export const BIG_ROW_H = 36; // classroom mode (style.css .syft-classroom)
const OVERSCAN = 8; // rows materialised above and below the visible band
const DISTINCT_MAX = 2000; // a lane's rows whose "pointed at by" labels are compared (names: all)
export const DEFAULT_VIEW_H = 520; // the scroller's max-height, when it has no layout yet

function headerChanged(a, b) {
  return a.id !== b.id || a.kind !== b.kind || a.state !== b.state || a.error !== b.error || a.gone !== b.gone
    || nodeOf(a) !== nodeOf(b) || (a.ledger !== b.ledger && JSON.stringify(a.ledger) !== JSON.stringify(b.ledger));
}

// a pointer row shows its target's shape: it is redrawn when that shape changes
function stale(R, o, target, extra) {
  if (!R || R.entry !== o || R.extra !== extra) return true;
  return isEdge(o) && R.target !== target && shapeText(R.target || {}) !== shapeText(target || {});
}

/** A group header's or a ghost's row. */
function itemHTML(item, colour) {
  if (item.header !== undefined) {
    return `<li class="syft-group" style="${item.header ? colour(item.header) : ""}">`
      + `${item.header ? '<span class="syft-worker-chip">' + esc(item.header) + "</span> " : ""}${esc(item.label)}`
      + ` <span class="syft-muted">${item.count}</span></li>`;
  }
  return `<li class="syft-ghost" data-ghost="${esc(item.key)}" title="${esc(item.text)}"><span class="syft-ghost-what">`
    + `${esc((item.entry.names || [])[0] || item.entry.kind)} ${shortId(item.entry.id)}</span>`
    + ` <span class="syft-ghost-text">${esc(item.text)}</span></li>`;
}

/**
 * The lanes inside `lanesEl` (after the arrows' SVG `arrows`), scrolled by `el`. rows: {opts(laneId,
 * o) (objectRowHTML's opts), targetOf(o), isLit(key), colour(worker) -> inline style};
 * schedule(): rows and arrows on the next frame; timings: rows, arrows, drawn, total (ms, counts).
 */
export function createLanes({ el, lanesEl, arrows, rows, schedule, timings, markerId }) {
  const lanes = new Map(); // id -> {section, head, body, list, lane, items, index, rows, collapsed, ...}
  let rowH = ROW_H;

  function laneFor(lane) {
    let L = lanes.get(lane.id);
    if (!L) {
      const list = h("ol", { class: "syft-objects" });
      const body = h("div", { class: "syft-lane-body" }, list);
      // a lane taller than its body (--syft-lane-h) says how many rows are below: a scroll bar
      // alone went unseen (issue 39.3); a click shows the next page of rows
      const more = h("button", { class: "syft-lane-more", type: "button", hidden: true,
        onclick: () => body.scrollBy({ top: Math.max(rowH, body.clientHeight - rowH) }) });
      const section = h("section", { class: "syft-lane", "data-worker": lane.id, "aria-label": `worker ${lane.id}` }, body, more);
      body.addEventListener("scroll", () => schedule(), { passive: true });
      L = { section, head: null, body, more, moreText: "", list, lane: null, items: [], index: new Map(), rows: new Map(), q: null };
      lanes.set(lane.id, L);
    }
    return L;
  }

  /**
   * Show the lanes `shown`, in order, and no other. s: {query, laneOrder, pins: lane id -> ids
   * a search keeps, namedTargets, ghosts: lane id -> ghosts, collapsed, providers, closable,
   * ledgerOpen, colours}. A lane is redrawn only when its lane, ghosts or state changed.
   */
  function show(shown, s) {
    const { query, collapsed, ledgerOpen } = s;
    const keep = new Set(shown.map((l) => l.id));
    for (const [id, L] of lanes) {
      if (!keep.has(id)) { L.section.remove(); lanes.delete(id); }
    }
    let prevEl = arrows;
    for (const lane of shown) {
      const L = laneFor(lane);
      const isCollapsed = collapsed.has(lane.id);
      const ghostList = s.ghosts.get(lane.id);
      const prevLane = L.lane;
      const provides = (s.providers.get(lane.id) || []).join(", ");
      const pinned = s.pins.get(lane.id);
      const pinSig = pinned ? [...pinned].join(",") : "";
      if (prevLane !== lane || L.ghosts !== ghostList || L.collapsed !== isCollapsed || L.q !== query || L.provides !== provides
        || L.pinSig !== pinSig) {
        let nShown = L.shown;
        if (!prevLane || prevLane.objects !== lane.objects || L.ghosts !== ghostList || L.q !== query || L.pinSig !== pinSig) {
          L.items = query.tidy ? laneItems(lane, query, s.laneOrder, pinned, s.namedTargets)
            : withGhosts(laneItems(lane, query, s.laneOrder, pinned), ghostList);
          L.pinSig = pinSig;
          L.index = new Map();
          nShown = 0;
          L.items.forEach((o, i) => {
            if (o.header === undefined && !o.ghost) { L.index.set(o.id, i); nShown++; }
          });
          L.list.style.height = `${L.items.length * rowH}px`;
          L.q = query;
          L.distinct = distinctOf(lane.id, L.items);
        }
        const closable = s.closable && lane.id !== LOCAL;
        if (!L.head || !prevLane || headerChanged(prevLane, lane) || L.collapsed !== isCollapsed || L.shown !== nShown
          || (prevLane.objects || []).length !== (lane.objects || []).length || L.closable !== closable || L.provides !== provides
          || L.ledgerOpen !== ledgerOpen.has(lane.id)) {
          const head = laneHead(lane, nShown, isCollapsed, closable, provides, ledgerOpen.has(lane.id));
          L.ledgerOpen = ledgerOpen.has(lane.id);
          L.closable = closable;
          L.provides = provides;
          if (L.head) L.head.replaceWith(head);
          else L.section.prepend(head);
          L.head = head;
          L.shown = nShown;
        }
        const cls = `syft-lane${isDown(lane) ? " syft-lane-down" : ""}${isCollapsed ? " syft-lane-collapsed" : ""}`;
        if (L.section.className !== cls) L.section.className = cls;
        const style = colourStyle(s.colours.get(lane.id));
        if (L.style !== style) { L.section.setAttribute("style", style); L.style = style; }
        L.body.hidden = isCollapsed;
        L.lane = lane;
        L.ghosts = ghostList;
        L.collapsed = isCollapsed;
      }
      if (prevEl.nextSibling !== L.section) prevEl.after(L.section);
      prevEl = L.section;
    }
  }

  /** The band of rows to materialise in a lane: [first, last) item indices: what its own
   * scroll shows, within what the outer scroller shows. */
  function band(L) {
    const n = L.items.length;
    if (L.collapsed || !n) return [0, 0];
    const viewH = el.clientHeight || DEFAULT_VIEW_H;
    const scrolled = el.scrollTop || 0;
    const secTop = L.section.offsetTop || 0;
    const secH = L.section.offsetHeight;
    // a lane out of the scroller's view: nothing to make (it is made when a scroll shows it)
    if (secH && (secTop > scrolled + viewH || secTop + secH < scrolled)) return [0, 0];
    const bodyH = L.body.clientHeight || Infinity; // no layout (tests): the lane is as tall as its rows
    const listTop = secTop + (L.body.offsetTop || 0);
    const inner = L.body.scrollTop || 0;
    const top = Math.max(inner, (el.scrollTop || 0) - listTop + inner);
    const bottom = Math.min(inner + bodyH, (el.scrollTop || 0) + viewH - listTop + inner);
    if (bottom <= top) return [0, 0];
    const first = Math.max(0, Math.floor(top / rowH) - OVERSCAN);
    const last = Math.min(n, Math.ceil(bottom / rowH) + OVERSCAN);
    return [first, Math.max(first, last)];
  }

  /** Where each name of a lane starts to differ from the others (dom.js distinctFrom): a row
   * cut to fit keeps that part (issue 39.3). Names and "pointed at by" labels. */
  function distinctOf(laneId, items) {
    const texts = [];
    const withOpts = items.length <= DISTINCT_MAX;
    for (const o of items) {
      if (o.header !== undefined || o.ghost) continue;
      const opts = withOpts ? rows.opts(laneId, o) : {};
      texts.push(rowLabel(o, opts.shareOf));
      if (opts.pointedBy?.length) texts.push(pointedLabel(opts.pointedBy));
    }
    return distinctFrom(texts);
  }

  /** A row's options: the world's (rows.opts) and where its lane's names differ. */
  const rowOpts = (L, o) => ({ ...rows.opts(L.lane.id, o), distinct: L.distinct });

  /** What a row shows besides its entry: redrawn when it changes. */
  function rowExtra(L, o) {
    // not the highlight: it is a class that comes and goes on the row itself (redrawing the row
    // when it ends would close a menu the user is in)
    const opts = rows.opts(L.lane.id, o);
    const at = L.distinct?.get(rowLabel(o, opts.shareOf)) ?? 0;
    const atBy = opts.pointedBy?.length ? L.distinct?.get(pointedLabel(opts.pointedBy)) ?? 0 : 0;
    return `${at}/${atBy}|${(opts.pointedBy || []).join(",")}|${opts.dangling ? 1 : 0}|${opts.pending ? 1 : 0}|${opts.gone ? goneWhere({}, opts.gone) : ""}|${opts.shareOf ?? ""}`
      + `|${isEdge(o) ? rows.colour(o.location) : ""}`;
  }

  /** How many rows of a lane are below what its body shows (0 without layout, or collapsed). */
  function rowsBelow(L) {
    const shownH = L.collapsed ? 0 : L.body.clientHeight;
    const n = L.items.length;
    if (!shownH || n * rowH <= shownH + 1) return 0;
    return Math.max(0, n - Math.floor(((L.body.scrollTop || 0) + shownH) / rowH));
  }

  /** A lane's "N more" line, said again when it changed. */
  function sayMore(L) {
    const below = rowsBelow(L);
    const text = below ? `▾ ${below} more` : "";
    if (L.moreText === text) return;
    L.moreText = text;
    L.more.hidden = !below;
    L.more.textContent = text;
    L.more.setAttribute("aria-label", `${below} more row${below === 1 ? "" : "s"} in ${L.lane?.id ?? "this lane"}: show them`);
    L.more.title = `${below} more below: scroll the lane, or click for the next rows`;
  }

  /** How many pixels of a cut name's label do not show: what its own box clips, or what runs
   * past the box that holds it (a fitted label keeps its width and may overflow the row's main). */
  function overflowOf(box) {
    const clipped = box.scrollWidth - box.clientWidth;
    const outer = box.parentElement;
    const past = outer ? box.getBoundingClientRect().right - outer.getBoundingClientRect().right : 0;
    return Math.max(clipped, past);
  }

  /**
   * Cut the names of `rowEls` that do not fit their label to the characters that do (dom.js
   * cutName: where each differs from its lane's other names, and its tail, stay). All widths
   * are read, then all texts written (one layout per pass), until every label fits or its name
   * cannot be cut further: a label in a proportional font, or a row whose other chips moved, may
   * need more looks. `again`: rows fitted before (a lane's width changed).
   */
  function fitNames(rowEls, again = false) {
    let cuts = [...rowEls].flatMap((r) => [...r.querySelectorAll(".syft-cut")]);
    if (again) {
      for (const c of cuts) {
        if (c.textContent !== c.dataset.full) c.textContent = c.dataset.full;
        c.parentElement.classList.remove("syft-fitted");
      }
    }
    for (let pass = 0; pass < 8 && cuts.length; pass++) {
      const jobs = [];
      for (const c of cuts) {
        const box = c.parentElement;
        if (!(box.clientWidth > 0)) continue; // not laid out (hidden, or a DOM without layout)
        const over = overflowOf(box);
        const text = c.textContent;
        if (!(over > 1) || !text) continue;
        const charW = c.getBoundingClientRect().width / text.length || 7;
        const n = Math.max(1, Math.min(text.length - 1, text.length - Math.ceil(over / charW) - (pass ? 1 : 0)));
        const cut = cutName(c.dataset.full, n, Number(c.dataset.at) || 0);
        if (cut !== text) jobs.push([c, cut]); // else: as short as it gets (its tail and key stay)
      }
      // a cut label keeps its width (style.css .syft-fitted): what it gave up goes to no one else
      for (const [c, cut] of jobs) {
        c.textContent = cut;
        c.parentElement.classList.add("syft-fitted");
      }
      cuts = jobs.map(([c]) => c);
    }
  }

  /** Materialise the visible rows of every lane (reusing the rows that did not change). */
  function syncRows() {
    const t0 = performance.now();
    const jobs = [];
    for (const L of lanes.values()) {
      sayMore(L);
      const width = L.body.clientWidth;
      if (width && L.fitWidth !== width) { // shown, wider or narrower: the rows' names are cut again
        if (L.rows.size) fitNames([...L.rows.values()].map((R) => R.el), true);
        L.fitWidth = width;
      }
      const items = L.items;
      const [first, last] = band(L);
      const want = new Set();
      const fresh = [];
      for (let i = first; i < last; i++) {
        const o = items[i];
        const id = o.header !== undefined ? `g:${o.header}` : o.ghost ? `x:${o.key}` : o.id;
        want.add(id);
        const target = isEdge(o) ? rows.targetOf(o) : undefined;
        const extra = o.header !== undefined || o.ghost ? "" : rowExtra(L, o);
        const R = L.rows.get(id);
        if (o.header !== undefined || o.ghost ? !R || R.entry !== o : stale(R, o, target, extra)) fresh.push({ o, id, target, i, extra });
        else {
          R.target = target;
          if (R.i !== i) { R.i = i; R.el.style.top = `${i * rowH}px`; }
        }
      }
      for (const [id, R] of L.rows) {
        if (!want.has(id)) {
          R.el.remove();
          L.rows.delete(id);
        }
      }
      if (fresh.length) jobs.push({ L, fresh });
    }
    const html = [];
    for (const { L, fresh } of jobs) {
      for (const f of fresh) {
        html.push(f.o.header !== undefined || f.o.ghost ? itemHTML(f.o, rows.colour) : objectRowHTML(L.lane.id, f.o, f.target, rowOpts(L, f.o)));
      }
    }
    const made = rowsFrom(html);
    let k = 0;
    const refocus = [];  // a row redrawn under the keyboard's focus keeps it (a patch mid-menu)
    for (const { L, fresh } of jobs) {
      const frag = document.createDocumentFragment();
      for (const f of fresh) {
        const row = made[k++];
        row.style.top = `${f.i * rowH}px`;
        const old = L.rows.get(f.id);
        if (old) {
          const focused = old.el.contains(document.activeElement) ? document.activeElement : null;
          if (focused) refocus.push([row, focused.closest("[data-action]")?.dataset.action]);
          old.el.remove();
        }
        L.rows.set(f.id, { entry: f.o, el: row, target: f.target, i: f.i, extra: f.extra });
        if (rows.isLit(objKey(L.lane.id, f.id))) row.classList.add("syft-lit");
        frag.append(row);
      }
      L.list.append(frag);
    }
    if (made.length) fitNames(made); // in the page now: they can be measured
    for (const [row, action] of refocus) {
      const el = (action && /^[\w-]+$/.test(action) && row.querySelector(`[data-action="${action}"]`))
        || row.querySelector("button, [tabindex]");
      el?.focus();
    }
    timings.rows = performance.now() - t0;
  }

  /** The rows in view, lane by lane: [{lane, id, entry}]. */
  function rowsInView() {
    const out = [];
    for (const [lane, L] of lanes) for (const [id, R] of L.rows) out.push({ lane, id, entry: R.entry });
    return out;
  }

  /** Geometry of the lanes `wanted`, in the lanes' coordinates: sides, the grid row's top,
   * where rows are (arrows.js rowY). A lane not laid out (hidden) has none. */
  function measure(wanted) {
    const geo = new Map();
    for (const [laneId, L] of lanes) {
      if (!wanted.has(laneId) || !L.section.offsetWidth) continue;
      const left = L.section.offsetLeft;
      const top = L.section.offsetTop;
      const headH = L.head?.offsetHeight || rowH;
      const bodyTop = top + (L.body.offsetTop || headH);
      const bodyH = L.collapsed ? 0 : L.body.clientHeight;
      geo.set(laneId, { left, right: left + L.section.offsetWidth, top, headY: top + headH / 2, bodyTop, bodyH,
        scroll: L.body.scrollTop || 0, index: L.index, collapsed: L.collapsed });
    }
    return geo;
  }

  /** Arrows from the visible pointer rows to their targets (has(key): the target exists; lit:
   * the keys lit now). */
  function drawArrows(has, lit) {
    if (!lanesEl.isConnected) return;
    const t0 = performance.now();
    const inView = rowsInView();
    const geo = measure(lanesToMeasure(inView));
    const w = lanesEl.scrollWidth;
    const hgt = lanesEl.scrollHeight;
    arrows.setAttribute("width", String(w));
    arrows.setAttribute("height", String(hgt));
    arrows.setAttribute("viewBox", `0 0 ${w} ${hgt}`);
    const top = el.scrollTop || 0;
    const view = { top, bottom: top + (el.clientHeight || DEFAULT_VIEW_H) };
    const { arrows: list, total } = arrowsInView(inView, geo, has, view, rowH);
    arrows.innerHTML = arrowsSVG(list, markerId, rows.colour, lit);
    Object.assign(timings, { arrows: performance.now() - t0, drawn: list.length, total });
  }

  const row = (key) => {
    const [laneId, id] = splitKey(key);
    return lanes.get(laneId)?.rows.get(id);
  };

  return {
    lanes,
    show,
    syncRows,
    drawArrows,
    /** The row of key "lane:id" in view ({entry, el, ...}), or undefined. */
    row,
    rowEl: (key) => row(key)?.el,
    /** Redraw lane `id` (every lane without it) on the next show. */
    invalidate(id) {
      if (id === undefined) { for (const L of lanes.values()) L.lane = null; return; }
      const L = lanes.get(id);
      if (L) L.lane = null;
    },
    /** Lane id -> (object id -> row index) of the rows shown. */
    positions: () => new Map([...lanes].map(([id, L]) => [id, L.index])),
    get rowH() { return rowH; },
    /** A new row height (classroom mode): every row is built again. */
    setRowH(px) {
      rowH = px;
      for (const L of lanes.values()) { for (const R of L.rows.values()) R.el.remove(); L.rows.clear(); L.lane = null; }
    },
  };
}
