// The world view's toolbar: the search box, the kind and worker filters, "hide temporaries"
// (classroom), the large-font toggle, and the history's stepper (timeline.js) beside them.

import { h } from "../dom.js";
import { parseQuery } from "./filter.js";

export function pickOption(select, value) {
  // only the picked option is set (a browser unselects the rest; setting each to false would
  // unselect the picked one again in linkedom, the DOM of the JS tests)
  for (const o of select.options) if (o.value === value) o.selected = true; else if (o.selected) o.selected = false;
}

/** The value of the option picked in `select` ("" for none). */
const pickedValue = (select) => [...select.options].find((o) => o.selected)?.value ?? "";

/**
 * onFilter(): the search, a filter or "hide temporaries" changed; onBig(on): the large font was
 * turned on or off; stepper: an element placed last. Returns {el, search, query(picked?) (the
 * filter the toolbar says, or `picked`, with its tidy flag), set(text, kind, worker) (its
 * query), refresh(world)}.
 */
/** Filters that are not an object's kind (filter.js matches them by the dataset / state fields). */
const FILTERS = ["dataset", "gone"];

/** The kinds of the objects in world `w`'s lanes, each once. */
export function worldKinds(w) {
  const kinds = new Set();
  for (const lane of w.workers || []) for (const o of lane.objects || []) if (o.kind) kinds.add(o.kind);
  return [...kinds];
}

const kindOptions = (kinds) => ["", ...kinds, ...FILTERS].map((k) => h("option", { value: k }, k || "every kind"));

export function createToolbar({ onFilter, onBig, stepper }) {
  const search = h("input", { class: "syft-search", type: "search", placeholder: "search: name, #tag, kind:pointer, worker:bob",
    "aria-label": "search the objects" });
  // the kinds come from the world itself (every layer names its own kind in the model), plus the
  // two filters that are not kinds: datasets and gone objects
  const kindSel = h("select", { class: "syft-filter-kind", "aria-label": "kind" }, ...kindOptions([]));
  const workerSel = h("select", { class: "syft-filter-worker", "aria-label": "worker" }, h("option", { value: "" }, "every worker"));
  // classroom: hide what a lesson does not need (temporaries nobody names, ghosts, gone
  // pointers), step through the history, and a large font for a projector (issue 26.11)
  const tidyBox = h("input", { type: "checkbox", class: "syft-tidy" });
  const tidy = h("label", { class: "syft-tidy-label", title: "hide objects no variable names (intermediate results), ghosts and gone pointers" },
    tidyBox, " hide temporaries and ghosts");
  const bigBtn = h("button", { class: "syft-btn syft-big-toggle", type: "button", "aria-pressed": "false",
    title: "classroom mode: a large font for a projector" }, "Aa");
  const el = h("div", { class: "syft-world-tools" }, search, kindSel, workerSel, tidy, bigBtn, stepper);
  const changed = () => onFilter();
  tidyBox.addEventListener("change", changed);
  search.addEventListener("input", changed);
  kindSel.addEventListener("change", changed);
  workerSel.addEventListener("change", changed);
  bigBtn.addEventListener("click", () => {
    const on = bigBtn.getAttribute("aria-pressed") !== "true";
    bigBtn.setAttribute("aria-pressed", String(on));
    onBig(on);
  });

  return {
    el,
    search,
    query(picked) {
      const q = picked || parseQuery(search.value, pickedValue(kindSel), pickedValue(workerSel));
      q.tidy = tidyBox.checked;
      return q;
    },
    set(text = "", kind = "", worker = "") {
      search.value = text;
      pickOption(kindSel, kind);
      pickOption(workerSel, worker);
      return parseQuery(text, kind, worker);
    },
    /** The filters list the workers and the kinds of world `w` (keeping the ones picked). */
    refresh(w) {
      const ids = (w.workers || []).map((l) => l.id);
      const have = [...workerSel.options].slice(1).map((o) => o.value);
      if (ids.join("\n") !== have.join("\n")) {
        const cur = pickedValue(workerSel);
        workerSel.replaceChildren(h("option", { value: "" }, "every worker"), ...ids.map((id) => h("option", { value: id }, id)));
        pickOption(workerSel, ids.includes(cur) ? cur : "");
      }
      const kinds = worldKinds(w);
      const cur = pickedValue(kindSel);
      if (cur && !kinds.includes(cur) && !FILTERS.includes(cur)) kinds.push(cur); // a pick stays while it matches nothing
      kinds.sort();
      const haveKinds = [...kindSel.options].slice(1, -FILTERS.length).map((o) => o.value);
      if (kinds.join("\n") === haveKinds.join("\n")) return;
      kindSel.replaceChildren(...kindOptions(kinds));
      pickOption(kindSel, cur);
    },
  };
}
