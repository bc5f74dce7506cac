// A worker's ledger in its lane (#26.8) and the reconstruction lesson of a shared value (#26.9).
//
// The lane header's `ledger` entry (docs/inspection-model.md) lists the newest records the
// worker keeps: kind, direction, peer, bytes, cell (never a value: the model has none). A lane
// header button opens it as a list inside the lane; a crypto provider's lane also says what
// material it made, by item. A shared value's row carries `explain` (lines, parties): the
// world view shows it in a panel and lights the shares it names.

import { LOCAL, esc, h } from "./dom.js";

/** "384 B", "2.2 KB" */
export function sizeText(n) {
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KB`;
  return `${n ?? 0} B`;
}

/** Messages in and out, for the header button: "↓12 ↑3". */
export function ledgerCounts(ledger) {
  let inn = 0, out = 0;
  for (const [key, [count]] of Object.entries(ledger?.totals || {})) {
    if (key.endsWith(" in")) inn += count; else out += count;
  }
  return { inn, out };
}

/** The lane header's button that opens (or closes) the lane's record. */
export function ledgerButton(lane, open) {
  if (!lane.ledger || (lane.id === LOCAL && !lane.ledger.seq)) return null; // the notebook's own worker, unused
  const { inn, out } = ledgerCounts(lane.ledger);
  return h("button", {
    class: `syft-btn syft-ledger-toggle${open ? " syft-on" : ""}`, type: "button", "aria-expanded": String(open),
    "aria-label": `what ${lane.id} saw and what left it`,
    title: `what ${lane.id} saw and what left it: ${inn} message${inn === 1 ? "" : "s"} in, ${out} out (sizes and cells, never a value)`,
  }, `record ↓${inn} ↑${out}`);
}

const PEER_TITLE = { client: "a client session (me: this notebook)", worker: "another worker (a move)",
  "crypto provider": "the crypto provider's material, through the notebook that runs the protocol" };

/** One record as a list item (newest first in the panel); `lane`: whose record it is. */
export function ledgerRowHTML(r, lane) {
  const dir = r.direction === "in" ? "in" : "out";
  const arrow = dir === "in" ? "↓ from" : "↑ to";
  const what = r.op ? `<span class="syft-ledger-op">${esc(r.op)}</span>` : "";
  const items = r.items ? `<span class="syft-ledger-items">${esc(Object.entries(r.items).map(([k, n]) => `${n} ${k}`).join(", "))}</span>` : "";
  const cell = r.cell !== undefined && r.cell !== null ? `<span class="syft-ledger-cell" title="the notebook cell that sent it">[${esc(r.cell)}]</span>` : "";
  // who sent it to whom ("hospital_a → aggregator"), on hover
  const [from, to] = dir === "in" ? [r.peer, lane] : [lane, r.peer];
  const flowAttrs = lane ? ` title="${esc(`${from} → ${to}: ${r.kind}`)}" data-to="${esc(to)}"` : "";
  return `<li class="syft-ledger-rec syft-ledger-${dir}" data-kind="${esc(r.kind)}" data-seq="${esc(r.seq)}"${flowAttrs}>`
    + `<span class="syft-ledger-kind">${esc(r.kind)}</span>`
    + `<span class="syft-ledger-dir" title="${dir === "in" ? "received" : "sent"}">${arrow}</span>`
    + `<span class="syft-ledger-peer" title="${esc(PEER_TITLE[r.peer_kind] || "")}">${esc(r.peer)}</span>`
    + `<span class="syft-ledger-bytes">${esc(sizeText(r.bytes))}</span>${cell}${what}${items}</li>`;
}

/** The panel of a lane's record: totals, a provider's material, then the newest records. */
export function ledgerPanel(lane) {
  const L = lane.ledger;
  const panel = h("div", { class: "syft-ledger", role: "region", "aria-label": `${lane.id}'s record` });
  const totals = Object.entries(L.totals || {}).sort(([a], [b]) => a.localeCompare(b))
    .map(([key, [count, bytes]]) => `${count} ${key} (${sizeText(bytes)})`);
  panel.append(h("div", { class: "syft-ledger-sum" }, totals.length ? totals.join(" · ") : "nothing yet"));
  const material = Object.entries(L.material || {});
  if (material.length) {
    panel.append(h("div", { class: "syft-ledger-material", title: "correlated randomness this worker made, by item (counts, never values)" },
      `material made: ${material.map(([k, n]) => `${n} ${k}`).join(", ")}`));
  }
  const list = h("ol", { class: "syft-ledger-list" });
  list.innerHTML = [...(L.records || [])].reverse().map((r) => ledgerRowHTML(r, lane.id)).join("");
  panel.append(list);
  const kept = (L.records || []).length;
  const older = L.seq - kept;
  if (older > 0) {
    panel.append(h("div", { class: "syft-muted syft-ledger-more" },
      `the newest ${kept} of ${L.seq}; ${lane.id}.ledger() gives the last ${Math.min(L.cap, L.seq)} it keeps`
      + (L.dropped ? ` (${L.dropped} older dropped off)` : "")));
  }
  if (L.scope === "session") panel.append(h("div", { class: "syft-muted" }, "this notebook's session only (the worker's token reads every session's)"));
  return panel;
}

/** The reconstruction lesson of a shared value (its entry's `explain`), with a close button. */
export function explainPanel(ex, onClose) {
  const parties = h("div", { class: "syft-explain-parties" },
    ...(ex.parties || []).map((p) => h("span", { class: `syft-explain-party${p.sent ? " syft-sent" : ""}`, "data-worker": p.worker },
      `${p.worker}: share ${p.share}/${p.of}${p.sent ? " (sent)" : ""}`)),
    ex.crypto_provider ? h("span", { class: "syft-explain-party syft-explain-provider" }, `${ex.crypto_provider}: no share`) : null);
  return h("div", { class: "syft-explain", role: "region", "aria-label": `reconstructing ${ex.secret}` },
    h("div", { class: "syft-explain-title" }, h("b", {}, `Reconstructing ${ex.secret}`),
      h("button", { class: "syft-btn syft-explain-close", type: "button", "aria-label": "close the explanation", onclick: onClose }, "×")),
    parties,
    h("ol", { class: "syft-explain-lines" }, ...(ex.lines || []).map((line) => h("li", {}, line))));
}
