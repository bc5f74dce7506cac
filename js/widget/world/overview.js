// The overview of many workers: more than OVERVIEW_AT lanes (and no focus) fold into chips,
// grouped by kind, node or state and narrowed by the search; a click on a chip opens its
// worker's lane. overviewGroups and overviewHTML are pure; createOverview is the element.

import { esc, h } from "../dom.js";
import { matches, pinnedTargets } from "./filter.js";
import { isDown, nodeOf } from "./rows.js";

/** More workers than this (and no focus): their lanes fold into an overview, opened on demand. */
export const OVERVIEW_AT = 12;
export const OVERVIEW_GROUPS = { kind: "kind", node: "node (host)", state: "state" };

/** What an overview groups a worker under. */
export function overviewKey(lane, by) {
  if (by === "node") return nodeOf(lane) || (lane.kind === "virtual" ? "this process" : "no node given");
  if (by === "state") return lane.gone ? "gone" : lane.state || "ok";
  return lane.kind || "?";
}

/** Whether query `q` looks into objects (words, tags or kinds), not only at workers. */
export const objectQuery = (q) => !!(q.words.length || q.tags.length || q.kinds.length);

/**
 * The overview's groups of the workers `list` under query `q`, grouped `by` (kind, node, state),
 * sorted by name: {groups: [[key, [{lane, n}]]], shown}. With an object query a worker is in it
 * when it holds matches (n counts them, with the objects that matching pointers of the notebook's
 * lane `me` point to) or its name, kind, node or state has every word; n is its object count else.
 */
export function overviewGroups(list, q, by, me) {
  const objQuery = objectQuery(q);
  const groups = new Map();
  let shown = 0;
  // a search for a variable finds the worker holding what it points to, too: worker -> ids of
  // the objects that matching pointers of the notebook point to
  const pointed = objQuery && me ? pinnedTargets([me], q) : new Map();
  for (const lane of list) {
    const objs = lane.objects || [];
    let n = objs.length;
    if (objQuery) {
      n = 0;
      const via = pointed.get(lane.id);
      for (const o of objs) if (matches(q, lane.id, o) || via?.has(o.id)) n++;
      const meta = [lane.id, lane.kind, nodeOf(lane), lane.state].filter(Boolean).join(" ").toLowerCase();
      const metaHit = !q.tags.length && !q.kinds.length && q.words.every((w) => meta.includes(w));
      if (!n && !metaHit) continue;
    }
    shown++;
    const key = overviewKey(lane, by);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push({ lane, n });
  }
  const keys = [...groups.keys()].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  return { groups: keys.map((k) => [k, groups.get(k)]), shown };
}

/** The overview's HTML: a labelled group of worker chips per group. opts: {by, objQuery,
 * opened: Set of open lanes, colour(worker) -> inline style}. */
export function overviewHTML({ groups, shown }, { by, objQuery, opened, colour }) {
  const html = [];
  for (const [key, items] of groups) {
    html.push(`<div class="syft-ov-group" data-group="${esc(key)}"><div class="syft-ov-label">${esc(key)}`
      + ` <span class="syft-muted">${items.length}</span></div><div class="syft-ov-items">`);
    for (const { lane, n } of items) {
      const down = isDown(lane);
      const state = lane.gone ? "gone" : lane.state;
      const total = (lane.objects || []).length;
      const count = objQuery ? `${n} of ${total}` : String(total);
      const node = by !== "node" && nodeOf(lane) ? `<span class="syft-ov-node">@${esc(nodeOf(lane))}</span>` : "";
      const st = by !== "state" && state && !["in-process", "local", "connected", "alive"].includes(state)
        ? `<span class="syft-lane-state syft-state-${esc(state)}">${esc(state)}</span>` : "";
      const open = opened.has(lane.id);
      html.push(`<button type="button" class="syft-ov-worker${open ? " syft-ov-open" : ""}${down ? " syft-ov-down" : ""}"`
        + ` data-worker="${esc(lane.id)}" aria-pressed="${open}" style="${colour(lane.id)}"`
        + ` title="${esc(`${lane.id} (${lane.kind ?? "?"}${nodeOf(lane) ? ` on ${nodeOf(lane)}` : ""}${state ? `, ${state}` : ""}): `
          + `${count} objects; click to ${open ? "close" : "open"} its lane`)}">`
        + `<span class="syft-ov-name">${esc(lane.id)}</span> <span class="syft-ov-count">${esc(count)}</span>${st}${node}</button>`);
    }
    html.push("</div></div>");
  }
  if (!shown) html.push('<div class="syft-muted">no worker matches the search</div>');
  return html.join("");
}

/**
 * The overview's element. onChip(id): a worker's chip was clicked; onAll(): "all lanes" (or
 * back to the overview); onGroupBy(): the grouping changed. Returns {el, chips(),
 * render(list, {showAll, query, me, opened, colour})} (an empty list hides it).
 */
export function createOverview({ onChip, onAll, onGroupBy }) {
  const groupSel = h("select", { class: "syft-ov-group-by", "aria-label": "group workers by" },
    Object.entries(OVERVIEW_GROUPS).map(([k, v]) => h("option", { value: k }, `by ${v}`)));
  const title = h("span", { class: "syft-ov-title" });
  const all = h("button", { class: "syft-btn syft-ov-all", type: "button" }, "all lanes");
  const body = h("div", { class: "syft-ov-body" });
  const el = h("section", { class: "syft-overview", hidden: true, "aria-label": "workers overview" },
    h("div", { class: "syft-ov-head" }, title, groupSel, all), body);
  groupSel.addEventListener("change", () => onGroupBy());
  all.addEventListener("click", () => onAll());
  body.addEventListener("click", (ev) => {
    const chip = ev.target.closest?.(".syft-ov-worker");
    if (chip) onChip(chip.dataset.worker);
  });
  let html = "";

  /** Show the workers `list` (none: hide): every lane shown (showAll), or their chips. */
  function render(list, { showAll, query, me, opened, colour }) {
    el.hidden = !list.length;
    if (!list.length) { body.replaceChildren(); html = ""; return; }
    all.textContent = showAll ? "overview" : "all lanes";
    all.title = showAll ? "fold the lanes into this overview" : `show all ${list.length} lanes`;
    groupSel.hidden = showAll;
    if (showAll) {
      title.textContent = `${list.length} workers, every lane shown`;
      body.replaceChildren();
      html = "";
      return;
    }
    const by = [...groupSel.options].find((o) => o.selected)?.value || groupSel.value || "kind";
    const grouped = overviewGroups(list, query, by, me);
    const text = overviewHTML(grouped, { by, objQuery: objectQuery(query), opened, colour });
    if (html !== text) { body.innerHTML = text; html = text; }
    const nOpen = list.filter((l) => opened.has(l.id)).length;
    title.textContent = `${list.length} workers${grouped.shown !== list.length ? ` (${grouped.shown} match)` : ""}: `
      + `click one to open its lane${nOpen ? ` (${nOpen} open)` : ""}`;
  }

  return { el, render, chips: () => body.querySelectorAll(".syft-ov-worker") };
}
