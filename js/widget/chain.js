// The chain view: a chain is a tree (docs/inspection-model.md, version 2). One box per node,
// the root first, down to the data; a plain chain (one child per node) is a column of boxes, and
// the part that lives on another worker is drawn inside that worker's colour. A node with
// several children (the shares of a secret, each on its own worker) opens one branch per child,
// side by side, each in its worker's colour. Every box is drawn from the node's `display`
// ({label, lines, badge}) and `annotations`, so a new layer type needs no change here; pointers,
// LoggingTensors and data leaves add their richer parts (target chip, op log, values).

import { actionBar } from "./actions.js";
import { LOCAL, fmtNumber, h, hueClass, isEdge, shapeText, shortId } from "./dom.js";

/** A version 1 list of nodes (head first) as a tree; a tree is returned as it is. */
export function treeFromList(nodes) {
  if (!Array.isArray(nodes)) return nodes ?? null;
  if (!nodes.length) return null;
  const copies = nodes.map((n) => ({ ...n }));
  copies.forEach((n, i) => { if (!Array.isArray(n.children) || !n.children.length) n.children = copies[i + 1] ? [copies[i + 1]] : []; });
  return copies[0];
}

/** Every node of a tree, depth first, the root first (a plain chain: head first). */
export function flattenTree(root) {
  const out = [];
  const stack = root ? [root] : [];
  while (stack.length) {
    const n = stack.pop();
    out.push(n);
    for (const c of [...(n.children || [])].reverse()) stack.push(c);
  }
  return out;
}

/** The root of a chain entry of the widget ({root} in version 2, {nodes} in version 1). */
export function rootOf(chain) {
  return chain?.root ?? treeFromList(chain?.nodes || []);
}

/** Split a chain's nodes into runs by owner: [{owner, nodes:[{node, index}]}]. */
export function ownerRuns(nodes) {
  const runs = [];
  nodes.forEach((node, index) => {
    const owner = node.owner ?? LOCAL;
    const last = runs[runs.length - 1];
    if (last && last.owner === owner) last.nodes.push({ node, index });
    else runs.push({ owner, nodes: [{ node, index }] });
  });
  return runs;
}

function idChip(id) {
  return h("span", { class: "syft-id", title: `id ${id}` }, shortId(id));
}

function kindBadge(kind) {
  return h("span", { class: `syft-kind syft-kind-${kind}` }, kind);
}

/** The summary line of a node: dtype[shape], grad info. */
function metaLine(node) {
  const parts = [];
  const shape = shapeText(node);
  if (shape) parts.push(h("span", { class: "syft-shape" }, shape));
  if (node.grad_fn) parts.push(h("span", { class: "syft-grad" }, `grad_fn=${node.grad_fn}`));
  else if (node.requires_grad) parts.push(h("span", { class: "syft-grad" }, "requires_grad"));
  if (node.distributed?.length) {
    // a shared value: its box lives in the notebook, its value on no worker (issue 26.7)
    parts.push(h("span", { class: "syft-owner syft-nobody", title: `no one holds this value: it exists only as shares`
      + ` on ${node.distributed.join(", ")}, each of which alone reveals nothing` }, "held by nobody"));
  } else if (!isEdge(node) && node.owner) parts.push(h("span", { class: "syft-owner" }, `on ${node.owner}`));
  return parts.length ? h("div", { class: "syft-meta" }, parts) : null;
}

function tagsLine(node) {
  const tags = (node.tags || []).map((t) => h("span", { class: "syft-tag" }, t));
  const desc = node.description ? h("span", { class: "syft-desc" }, node.description) : null;
  return tags.length || desc ? h("div", { class: "syft-tags" }, tags, desc) : null;
}

function previewBlock(node) {
  const p = node.preview;
  if (p === null || p === undefined) {
    return h("div", { class: "syft-novalues" }, `values stay on ${node.owner}`);
  }
  const stats = ["min", "max", "mean"].filter((k) => p[k] !== undefined)
    .map((k) => `${k} ${fmtNumber(p[k])}`).join(" · ");
  return h("div", { class: "syft-preview" },
    h("pre", { class: "syft-values" }, p.text ?? (p.values || []).map(fmtNumber).join(", ")),
    h("div", { class: "syft-stats" }, `${p.numel} value${p.numel === 1 ? "" : "s"}`, stats ? ` · ${stats}` : ""));
}

// --- the op log of a LoggingTensor ------------------------------------------------------------
// Records are {op, inputs, backward?, cell?} (or an op name, from log_tail): `backward` says the
// op ran inside autograd's backward pass, `cell` the notebook cell (execution count) that ran
// it, where the kernel recorded them.

/** The phase of a record: "backward", "forward", or null when it was not recorded. */
export function phaseOf(r) {
  if (typeof r !== "object" || r === null || r.backward === undefined) return null;
  return r.backward ? "backward" : "forward";
}

/** The phase of each record: as recorded, except the gradient seed. `backward()` issues its
 * `ones_like` before autograd's engine starts, so it is recorded outside backward; it is the
 * start of the backward pass that follows it (issue 26.3). */
export function phasesOf(records) {
  const phases = records.map(phaseOf);
  records.forEach((r, i) => {
    if (phases[i] === "forward" && phases[i + 1] === "backward" && /^aten\.ones_like\b/.test(r.op || "")) phases[i] = "backward";
  });
  return phases;
}

/** Records with their 1-based index, kept by a text filter (on the op and its inputs) and a phase. */
export function filterLog(records, { text = "", phase = "all", start = 0 } = {}) {
  const needle = text.trim().toLowerCase();
  const out = [];
  const phases = phasesOf(records);
  records.forEach((r, i) => {
    if (phase !== "all" && phases[i] !== phase) return;
    if (needle && !opLine(r).toLowerCase().includes(needle)) return;
    out.push({ record: r, index: start + i + 1, phase: phases[i] });
  });
  return out;
}

function opText(r) {
  const ins = (r.inputs || []).map((i) => `${i.dtype}[${(i.shape || []).join(", ")}]`).join(", ");
  return `${r.op}(${ins})`;
}

function opLine(r) {
  return typeof r === "string" ? r : opText(r);
}

/** Scroll the notebook cell with execution count `n` (the one holding `from`) into view. */
export function showCell(from, n) {
  const nb = from.closest?.(".jp-Notebook") || globalThis.document?.querySelector(".jp-Notebook");
  if (!nb) return false;
  for (const prompt of nb.querySelectorAll(".jp-InputArea-prompt")) {
    if (prompt.textContent.trim() === `[${n}]:`) {
      const cell = prompt.closest(".jp-Cell");
      cell.scrollIntoView({ block: "center" });
      cell.classList.add("syft-cell-flash");
      setTimeout(() => cell.classList.remove("syft-cell-flash"), 1200);
      return true;
    }
  }
  return false;
}

function logItem({ record, index, phase }) {
  const cell = typeof record === "object" && record !== null && Number.isInteger(record.cell) ? record.cell : null;
  const link = cell === null ? null : h("button", {
    class: "syft-btn syft-log-cell", type: "button", title: `ran in cell [${cell}]: show it`, "data-cell": cell,
    onclick: (ev) => { ev.stopPropagation(); showCell(ev.currentTarget, cell); },
  }, `cell [${cell}]`);
  return h("li", { value: index, class: phase ? `syft-phase-${phase}` : null, "data-phase": phase }, opLine(record), link);
}

function logBlock(node, ctx) {
  const n = node.log_length ?? 0;
  const state = { records: node.log_tail || [], total: n, text: "", phase: "all" };
  const list = h("ol", { class: "syft-log", hidden: true });
  const count = h("span", { class: "syft-log-count syft-muted" });
  const filter = h("input", { class: "syft-log-filter", type: "search", placeholder: "filter ops, e.g. mm",
    "aria-label": "filter the op log" });
  const phaseBtns = ["all", "forward", "backward"].map((p) => h("button", {
    class: "syft-btn syft-log-phase", type: "button", "data-phase": p, "aria-pressed": String(p === "all"),
    onclick: () => { state.phase = p; draw(); },
  }, p));
  const phases = h("span", { class: "syft-log-phases", role: "group", "aria-label": "forward or backward ops" }, phaseBtns);
  const tools = h("div", { class: "syft-log-tools", hidden: true }, filter, phases, count);
  filter.addEventListener("input", () => { state.text = filter.value; draw(); });

  function draw() {
    const { records, total } = state;
    const start = total - records.length;
    const known = records.some((r) => phaseOf(r) !== null);
    phases.hidden = !known;
    for (const b of phaseBtns) b.setAttribute("aria-pressed", String(b.dataset.phase === state.phase));
    const shown = filterLog(records, { text: state.text, phase: known ? state.phase : "all", start });
    const items = [];
    if (start > 0) items.push(h("li", { class: "syft-more", value: 0 }, `… ${start} earlier`));
    let last = null;
    for (const it of shown) {
      const phase = it.phase;
      if (known && phase !== last) {
        items.push(h("li", { class: `syft-log-section syft-phase-${phase}`, "data-section": phase, "aria-hidden": "true" },
          phase === "backward" ? "backward (autograd)" : "forward"));
        last = phase;
      }
      items.push(logItem(it));
    }
    if (!records.length) items.push(h("li", { class: "syft-empty" }, "no ops yet"));
    else if (!shown.length) items.push(h("li", { class: "syft-empty" }, "no op matches"));
    list.replaceChildren(...items);
    count.textContent = shown.length === records.length ? `${records.length} op${records.length === 1 ? "" : "s"}`
      : `${shown.length} of ${records.length} shown`;
    ctx?.layoutChanged?.();
  }

  const btn = h("button", {
    class: "syft-btn syft-log-toggle", type: "button", "aria-expanded": "false",
    "aria-label": `op log of LoggingTensor ${shortId(node.id)}`,
  }, `log: ${n} op${n === 1 ? "" : "s"}`);
  btn.addEventListener("click", async () => {
    const open = list.hidden;
    list.hidden = tools.hidden = !open;
    btn.setAttribute("aria-expanded", String(open));
    if (!open) { ctx?.layoutChanged?.(); return; }
    draw();
    if (ctx && ctx.request && n > state.records.length && (!node.actions || node.actions.includes("oplog"))) {
      const reply = await ctx.request("oplog", { worker: node.owner ?? LOCAL, id: node.id });
      if (reply.ok) Object.assign(state, { records: reply.log, total: reply.total });
      draw();
    }
  });
  return h("div", { class: "syft-logbox" }, btn, tools, list);
}

function displayLines(node) {
  const lines = node.display?.lines || [];
  return lines.length ? h("div", { class: "syft-display" }, lines.map((l) => h("div", { class: "syft-display-line" }, l))) : null;
}

function annotationsLine(node) {
  const notes = (node.annotations || []).map((a) => h("span", { class: "syft-annotation", "data-label": a.label },
    h("span", { class: "syft-muted" }, `${a.label}: `), String(a.value)));
  return notes.length ? h("div", { class: "syft-annotations" }, notes) : null;
}

/** One box of the chain view. `actions` (element or null) goes in its header. */
export function nodeBox(node, ctx, actions = null) {
  const kind = node.kind ?? "layer";
  const badge = node.display?.badge;
  const head = h("div", { class: "syft-box-head" },
    kindBadge(kind), h("span", { class: "syft-type" }, node.display?.label ?? node.type ?? kind),
    node.id !== undefined ? idChip(node.id) : null,
    badge ? h("span", { class: "syft-badge" }, badge) : null, actions);
  const body = [metaLine(node)];
  if (isEdge(node)) {
    body.push(h("div", { class: `syft-where ${hueClass(node.location)}` },
      "→ ", h("span", { class: "syft-worker-chip" }, node.location),
      h("span", { class: "syft-id", title: `id ${node.id_at_location} on ${node.location}` }, `:${shortId(node.id_at_location)}`),
      node.state && node.state !== "ok" ? h("span", { class: "syft-state-bad" }, node.state) : null,
      node.owning === false ? h("span", { class: "syft-muted" }, " (not owning)") : null));
  } else if (node.log_length !== undefined) { // an op log
    body.push(logBlock(node, ctx));
  } else if (kind === "tensor") {
    body.push(previewBlock(node));
  } else if (kind === "plan") {
    body.push(h("div", { class: "syft-meta" }, `plan ${node.name ?? ""}: ${node.n_nodes ?? 0} op(s)`,
      node.sent_to?.length ? ` · sent to ${node.sent_to.join(", ")}` : ""));
  } else if (kind === "unreachable") {
    body.push(h("div", { class: "syft-error-text" }, node.error ?? "unreachable"));
  } else {
    body.push(displayLines(node)); // any other layer: what it displays
  }
  body.push(annotationsLine(node));
  body.push(tagsLine(node));
  return h("div", {
    class: `syft-box syft-box-${kind} ${hueClass(node.owner ?? LOCAL)}`, "data-kind": kind,
    "data-id": String(node.id ?? ""), "data-owner": node.owner ?? LOCAL,
    "data-group": node.group !== undefined ? String(node.group) : null,
  }, head, body);
}

const BRANCHES_PER_ROW = 4; // more shares than this take several rows of equal length

const hasButtons = (node) => (node.actions || []).some((a) => a !== "oplog");

/**
 * The pieces of a subtree, to append in order: boxes of the current owner, then a
 * `.syft-remote` block per run of nodes on another worker, then (at a node with several
 * children) a `.syft-branches` row with one `.syft-branch` per child.
 */
function subtree(node, ctx, opts, home) {
  const pieces = [];
  let owner = home;
  let run = null; // the remote block nodes of another owner go into
  let first = true;
  for (let n = node; n;) {
    const nOwner = n.owner ?? LOCAL;
    const link = first ? null : h("div", { class: "syft-link", "aria-hidden": "true" }, "↓");
    if (nOwner !== owner) {
      owner = nOwner;
      run = owner === home ? null : h("div", { class: `syft-remote ${hueClass(owner)}`, "data-worker": owner },
        h("div", { class: "syft-remote-label" }, `on ${owner}`));
      if (run) pieces.push(run);
    }
    const buttons = opts.buttons && hasButtons(n) ? actionBar(nOwner, n, ctx, opts.label(n)) : null;
    const parts = [link, nodeBox(n, ctx, buttons)].filter(Boolean);
    if (run) run.append(...parts);
    else pieces.push(...parts);
    const kids = n.children || [];
    first = false;
    if (kids.length > 1) {
      const parties = n.distributed || [];
      const note = parties.length ? h("div", { class: "syft-reconstruct-note" },
        `reconstructing needs every share: ${parties.join(" + ")} (alone, each reveals nothing)`) : null;
      // the branches side by side, evenly: rows of equal width, never one share alone on a row
      const rows = Math.ceil(kids.length / BRANCHES_PER_ROW);
      const cols = Math.ceil(kids.length / rows);
      const row = h("div", { class: "syft-branches", role: "group", "aria-label": `${kids.length} branches`,
        style: { display: "grid", gap: "8px", "grid-template-columns": `repeat(${cols}, minmax(0, 1fr))`, "align-items": "start" } },
      kids.map((k, i) => {
        const where = k.location ?? k.owner ?? LOCAL;
        return h("div", { class: `syft-branch ${hueClass(where)}`, "data-branch": i, "data-worker": where,
          "data-group": k.group !== undefined ? String(k.group) : null, style: { "min-width": "0" } },
        h("div", { class: "syft-link", "aria-hidden": "true" }, "↓"),
        subtree(k, ctx, { ...opts, buttons: false }, owner));
      }));
      (run || { append: (...x) => pieces.push(...x) }).append(...[note, row].filter(Boolean));
      break;
    }
    n = kids[0];
  }
  return pieces;
}

/** One chain: title (names or the code that made it), then the tree of boxes. */
export function chainBlock(chain, ctx, { buttons = true } = {}) {
  const root = rootOf(chain);
  const names = chain.names || [];
  const title = chain.code
    ? h("code", { class: "syft-code" }, chain.code)
    : names.length ? h("span", { class: "syft-names" }, names.join(" = ")) : null;
  const block = h("div", { class: "syft-chain-block", "data-names": names.join(",") });
  if (title) block.append(h("div", { class: "syft-chain-title" }, title));
  if (!root) return block;
  const label = (n) => (n === root && names[0]) || `${n.type ?? n.kind} ${shortId(n.id)}`;
  block.append(...subtree(root, ctx, { buttons, label }, root.owner ?? LOCAL));
  return block;
}

/** The whole chain view for a list of chains (the object first, then action results). */
export function renderChains(chains, ctx) {
  return h("div", { class: "syft-chains" }, (chains || []).map((c) => chainBlock(c, ctx)));
}
