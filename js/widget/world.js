// The world view: one lane per worker, its objects, and an arrow from each pointer to its
// target. update(world) changes only the rows whose entries changed (patch.js keeps the
// identity of the others), so a live update costs a few DOM nodes, not the whole view.
//
// This file wires the parts in js/widget/world/ and keeps the view's state (the world shown,
// the newest one, the filter, the step replayed, pending actions):
//   lanes.js      the lanes: a grid of virtual lists (rows of ROW_H px, only rows in view exist)
//                 and the arrows' layer over them
//   arrows.js     which rows an arrow joins and its route in the gutters (pure)
//   links.js      who points to what, share groups (pure)
//   rows.js       one row's HTML, a lane's header
//   filter.js     the search and a lane's rows in order (pure)
//   overview.js   many workers folded into chips, a click opens a lane
//   highlight.js  hover or click a row: it lights up with its pointers, target or siblings
//   clicks.js     what a click in the lanes means (pure), the rows whose action awaits its reply
//   explain.js    the Explain panel: what reconstructing a shared value takes
//   history.js    steps, which step is shown, replay, marks and ghosts (pure)
//   timeline.js   the history's elements: the timeline, the stepper, the replay banner
//   toolbar.js    search, filters, hide temporaries, large font
//   legend.js     what the marks mean
//
// Rows are built as HTML text in batches and their buttons' clicks are delegated to the
// view: a world of thousands of objects renders in a few frames.

import { toggleMenu } from "./actions.js";
import { LOCAL, colourStyle, h, isEdge, laneColours, objKey, s } from "./dom.js";
import { indexWorld } from "./patch.js";
import { laneMatches, parseQuery, pinnedTargets } from "./world/filter.js";
import { clickIntent, createPending } from "./world/clicks.js";
import { createExplain } from "./world/explain.js";
import { changesBetween, expireChanges, mergeChanges, nextExpiry, recordStep, replayText, shownStep, stepFrom } from "./world/history.js";
import { createHighlight } from "./world/highlight.js";
import { BIG_ROW_H, ROW_H, createLanes } from "./world/lanes.js";
import { legendHTML } from "./world/legend.js";
import { litKeys, worldLinks } from "./world/links.js";
import { OVERVIEW_AT, createOverview } from "./world/overview.js";
import { isDown, setGroupOrder, splitKey } from "./world/rows.js";
import { createTimeline } from "./world/timeline.js";
import { createToolbar } from "./world/toolbar.js";

export { isDown, nodeOf, objectRowHTML, goneWhere, setGroupOrder, groupHue } from "./world/rows.js";
export { parseQuery, matches, pinnedTargets, isTemporary, laneItems } from "./world/filter.js";
export { legendHTML } from "./world/legend.js";
export { eventText, stepSummary } from "./world/history.js";
export { OVERVIEW_AT, overviewKey } from "./world/overview.js";
export { ROW_H } from "./world/lanes.js";

/**
 * A world view. ctx: {workers(), run(action, target, extra)}.
 * Returns {el, frame, update(world, focus), rowFor(lane, id), layoutChanged(), destroy(),
 * setDisabled(reason), showStep(i), history, filter(text, kind, worker), collapse(id, on)}.
 * `el` is the lanes' scroller; `frame` adds the toolbar, the legend and the timeline above it.
 */
export function createWorldView(ctx) {
  const arrows = s("svg", { class: "syft-arrows", "aria-hidden": "true" });
  const lanesEl = h("div", { class: "syft-lanes" }, arrows);
  const el = h("div", { class: "syft-world-scroll" }, lanesEl);
  const legend = h("details", { class: "syft-legend-box" }, h("summary", {}, "Legend"));
  legend.insertAdjacentHTML("beforeend", legendHTML());
  const deadBanner = h("div", { class: "syft-dead-banner", hidden: true, role: "alert" });
  const explainBox = h("div", { class: "syft-explain-box", hidden: true });

  let world = null; // the world shown (now, or a step of the history)
  let latest = null; // the newest world
  let worldIndex = new Map();
  let links = worldLinks({});
  let colours = new Map();
  let laneById = new Map();
  let focus = [];
  let query = parseQuery("");
  let frameReq = 0;
  let disabled = "";
  let replaying = -1;
  let history = []; // [{rev, step, world}]
  let changes = { marks: new Map(), ghosts: new Map(), gone: new Map() }; // history.js changesBetween
  const collapsed = new Set();
  const ledgerOpen = new Set(); // lanes whose record (ledger) is open
  const opened = new Set(); // workers whose lanes the overview opened
  let overviewOn = false; // the overview is shown (many workers)
  let showAll = false; // the user asked for every lane instead
  const markerId = `syft-arrowhead-${Math.random().toString(36).slice(2, 9)}`;
  const menuCtx = { ...ctx, workers: () => reachableWorkers(), layoutChanged: () => schedule() };
  const timings = {};
  let timer = 0;

  const timeline = createTimeline({ onShow: (i) => showStep(i), onStep: (d) => stepBy(d) });
  const toolbar = createToolbar({ onFilter: () => onFilter(), onBig: (on) => setBig(on), stepper: timeline.stepper });
  const overview = createOverview({
    onChip: (id) => openLane(id, !opened.has(id)),
    onAll: () => { showAll = !showAll; lanesView.invalidate(); redraw(); },
    onGroupBy: () => redraw(),
  });
  const frame = h("div", { class: "syft-world", tabindex: "-1" }, deadBanner, toolbar.el,
    h("div", { class: "syft-world-aside" }, legend, timeline.timeline), timeline.replay, explainBox, overview.el, el);

  const rowColour = (id) => colourStyle(colours.get(id));
  const danglingRow = (o) => isEdge(o) && o.state !== "gone"
    && (laneById.has(o.location) ? isDown(laneById.get(o.location)) : !!o.dangling);
  const lanesView = createLanes({
    el, lanesEl, arrows, schedule: () => schedule(), timings, markerId,
    rows: {
      targetOf: (o) => (isEdge(o) ? worldIndex.get(objKey(o.location, o.id_at_location))?.entry : undefined),
      isLit: (key) => hl.has(key),
      colour: rowColour,
      opts(laneId, o) {
        const key = objKey(laneId, o.id);
        const m = replaying < 0 ? changes.marks.get(key) : undefined;
        return { pointedBy: links.pointedBy.get(key), colour: rowColour, mark: m?.mark, dangling: danglingRow(o),
          pending: pending.has(key) || !!disabled || replaying >= 0, gone: changes.gone.get(key),
          shareOf: o.group !== undefined && o.group !== null ? o.secret ?? links.secretName.get(o.group) : undefined };
      },
    },
  });
  const hl = createHighlight({
    rowEl: lanesView.rowEl,
    keysFor: (key) => litKeys(key, lanesView.row(key)?.entry ?? worldIndex.get(key)?.entry, links, worldIndex),
    arrows,
    chips: overview.chips,
  });
  hl.listen(lanesEl);
  const explain = createExplain({
    box: explainBox,
    entryOf(key) {
      const [laneId, id] = splitKey(key);
      return (world?.workers || []).find((l) => l.id === laneId)?.objects?.find((o) => String(o.id) === String(id));
    },
    pin: (key) => hl.pin(key),
  });
  const pending = createPending({ rowEl: lanesView.rowEl, off: () => !!disabled }); // actions awaiting their reply

  const redraw = () => { if (world) update(world, focus, true); };

  frame.addEventListener("keydown", (ev) => {
    if (/^(INPUT|SELECT|TEXTAREA)$/.test(ev.target.tagName || "") || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    const d = { ArrowLeft: -1, ArrowRight: 1 }[ev.key];
    if (d) stepBy(d);
    else if (ev.key === "Escape" && replaying >= 0) showStep(-1);
    else return;
    ev.preventDefault();
  });

  /** Classroom mode: a large font for a projector, and taller rows. */
  function setBig(on) {
    frame.classList.toggle("syft-classroom", on);
    lanesView.setRowH(on ? BIG_ROW_H : ROW_H);
    redraw();
  }

  function reachableWorkers() {
    // the lanes' own states (the kernel tried to reach each one for this world), not a list
    // that may be older: an unreachable or closed worker is never offered
    const w = latest?.workers;
    if (w && w.length) return w.filter((l) => !isDown(l)).map((l) => ({ id: l.id, kind: l.kind, state: l.state }));
    return (ctx.workers?.() || []).filter((l) => !isDown(l));
  }

  /** Open (or close) a worker's lane from the overview. */
  function openLane(id, on = true) {
    const t0 = performance.now();
    if (on) opened.add(id); else opened.delete(id);
    lanesView.invalidate(id);
    redraw();
    if (on) lanesView.lanes.get(id)?.section.scrollIntoView?.({ block: "nearest" });
    timings.open = performance.now() - t0;
  }

  /** A lane's own toggle (collapsed, ledgerOpen): flip it for lane `id` and redraw it. */
  function flip(set, id) {
    if (set.has(id)) set.delete(id); else set.add(id);
    lanesView.invalidate(id);
    update(world, focus, true);
  }

  // one listener for every row's buttons (and the lane toggles): clicks.js says what a click means
  lanesEl.addEventListener("click", (ev) => {
    let it = clickIntent(ev.target);
    if (it?.do === "openTarget") {
      // in the overview, a pointer's worker chip opens the lane it points to
      const o = lanesView.row(it.key)?.entry;
      if (overviewOn && isEdge(o) && laneById.has(o.location) && !opened.has(o.location)) {
        openLane(o.location, true);
        return;
      }
      it = it.otherwise;
    }
    if (!it) return;
    if (it.do === "close") openLane(it.lane, false);
    else if (it.do === "ledger") flip(ledgerOpen, it.lane);
    else if (it.do === "collapse") flip(collapsed, it.lane);
    else if (it.do === "pin") hl.togglePin(it.key);
    else if (it.do === "explain") {
      ev.stopPropagation();
      explain.show(explain.key === it.key ? "" : it.key);
    } else if (it.do === "run") {
      const R = lanesView.row(it.key);
      if (!R) return;
      ev.stopPropagation();
      if (disabled || replaying >= 0 || pending.has(it.key) || it.disabled) return;
      const target = { worker: it.lane, id: R.entry.id };
      const run = (a, t, x) => pending.run(it.key, () => ctx.run(a, t, x));
      if (it.menu) {
        toggleMenu(it.button.closest(".syft-actions"), it.button, it.action, target, { ...menuCtx, disablesRows: true, run },
          it.lane, R.entry);
      } else {
        run(it.action, target, {});
      }
    }
  });

  el.addEventListener("scroll", () => schedule(), { passive: true });

  function onFilter(picked) {
    query = toolbar.query(picked);
    const t0 = performance.now();
    redraw();
    timings.filter = performance.now() - t0;
  }

  /** Show `next`. From the kernel (not a replay), the rows that appeared or changed since the
   * last world are highlighted for a while, and what left stays as a ghost. */
  function update(next, nextFocus = focus, internal = false) {
    if (!next) return;
    if (!internal) {
      const prev = latest;
      latest = next;
      const h2 = recordStep(history, prev, next);
      if (h2 !== history) { history = h2; timeline.render(history, replaying); }
      if (replaying >= 0) { toolbar.refresh(next); return; } // the replayed world stays until "Back to now"
      if (prev && prev !== next && next.step) {
        changes = mergeChanges(changes, changesBetween(prev, next, Date.now(), lanesView.positions()));
        armTimer();
      }
    }
    const t0 = performance.now();
    worldIndex = indexWorld(next);
    links = worldLinks(next);
    setGroupOrder(links.groups);
    focus = nextFocus || [];
    const all = disabled ? (next.workers || []).map(frozenLane) : next.workers || [];
    colours = laneColours(all.map((l) => l.id));
    laneById = new Map(all.map((l) => [l.id, l]));
    let shown = all.filter((l) => (!focus.length || focus.includes(l.id)) && laneMatches(query, l.id));
    const others = shown.filter((l) => l.id !== LOCAL);
    const many = !focus.length && others.length > OVERVIEW_AT;
    overviewOn = many && !showAll;
    if (overviewOn) shown = shown.filter((l) => l.id === LOCAL || opened.has(l.id));
    overview.render(many ? others : [], { showAll, query, me: laneById.get(LOCAL), opened, colour: rowColour });
    hl.lightChips();
    lanesView.show(shown, { query, laneOrder: new Map(all.map((l, i) => [l.id, i])), pins: pinnedTargets(all, query),
      namedTargets: links.namedTargets, ghosts: changes.ghosts, collapsed, providers: links.providers, closable: overviewOn, ledgerOpen,
      colours });
    world = next;
    if (explain.key) explain.show(explain.key, true);
    toolbar.refresh(latest || next);
    lanesView.syncRows();
    schedule();
    timings.update = performance.now() - t0;
  }

  // --- marks and ghosts end after a while (history.js MARK_MS, GHOST_MS) -----------------------

  function armTimer() {
    if (timer) return;
    const next = nextExpiry(changes);
    if (!Number.isFinite(next)) return;
    timer = setTimeout(() => { timer = 0; expire(); }, Math.max(50, next - Date.now()));
  }

  function expire() {
    const { state, expired, ghostsChanged } = expireChanges(changes, Date.now());
    changes = state;
    for (const k of expired) lanesView.rowEl(k)?.classList.remove("syft-mark-new", "syft-mark-changed");
    if (ghostsChanged && world && replaying < 0) update(world, focus, true);
    armTimer();
  }

  // --- replay -----------------------------------------------------------------------------------

  /** One step back (-1) or on (+1) in the history, from the step shown (or now). */
  function stepBy(d) {
    const i = stepFrom(history.length, replaying, d);
    if (i !== null) showStep(i);
  }

  /** Show the world as it was after history step i (-1: now). */
  function showStep(i) {
    replaying = shownStep(i, history.length);
    frame.classList.toggle("syft-replaying", replaying >= 0);
    timeline.showReplay(replaying >= 0 ? replayText(history[i]) : "");
    lanesView.invalidate();
    update(replaying >= 0 ? history[i].world : latest, focus, true);
    timeline.render(history, replaying);
  }

  function schedule() {
    if (frameReq) return;
    const raf = globalThis.requestAnimationFrame || ((f) => setTimeout(f, 16));
    frameReq = raf(() => { frameReq = 0; lanesView.syncRows(); drawArrows(); });
  }

  function drawArrows() {
    if (world) lanesView.drawArrows((key) => worldIndex.has(key), hl.lit);
  }

  /** A lane of a view whose kernel is gone: what its worker is now is not known (an
   * in-process one went with the kernel; a worker process may be up), so it never says
   * "connected" under the banner. The rows stay as they were, their buttons off. */
  function frozenLane(l) {
    if (l.id === LOCAL || isDown(l)) return l;
    return { ...l, state: "unknown" };
  }

  /** Forget the history and the world shown (a new kernel: nothing of the old one's steps holds). */
  function reset() {
    history = [];
    latest = null;
    replaying = -1;
    changes = { marks: new Map(), ghosts: new Map(), gone: new Map() };
    frame.classList.remove("syft-replaying");
    timeline.showReplay("");
    timeline.render(history, replaying);
    lanesView.invalidate();
    update({ workers: [] }, [], true);
    world = null;
  }

  /** The view's kernel is gone (or back, with ""): say so, and turn every button off. */
  function setDisabled(reason) {
    disabled = reason || "";
    frame.classList.toggle("syft-disabled", !!disabled);
    deadBanner.hidden = !disabled;
    deadBanner.textContent = disabled;
    for (const b of lanesEl.querySelectorAll("button[data-action]")) b.disabled = !!disabled;
    lanesView.invalidate();
    redraw();
  }

  // the scroller resized, or the lanes' grid did (a lane grew or shrank): rows and arrows again
  const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => schedule()) : null;
  ro?.observe(el);
  ro?.observe(lanesEl);
  // a notebook skips the layout of cells out of view: draw again when it shows
  const io = typeof IntersectionObserver !== "undefined"
    ? new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) schedule(); })
    : null;
  io?.observe(lanesEl);

  return {
    el,
    frame,
    update: (w, f) => update(w, f),
    timings,
    /** The steps seen: [{rev, step, world}], the first the world when the view opened. */
    get history() { return history; },
    showStep,
    setDisabled,
    reset,
    filter(text = "", kind = "", worker = "") {
      onFilter(toolbar.set(text, kind, worker));
    },
    collapse(id, on = true) {
      if (on) collapsed.add(id); else collapsed.delete(id);
      lanesView.invalidate(id);
      redraw();
    },
    redrawArrows: drawArrows,
    layoutChanged: schedule,
    rowFor: (laneId, id) => lanesView.lanes.get(laneId)?.rows.get(id)?.el ?? null,
    /** Open (or close) a worker's lane from the overview of many workers. */
    openLane,
    get overviewShown() { return overviewOn; },
    destroy() { ro?.disconnect(); io?.disconnect(); clearTimeout(timer); lanesView.lanes.clear(); },
  };
}
