// The round chart of syft_lab.federated.RoundChart: loss and accuracy per round, one line per
// client (its local training) and a thick one for the global model (its evaluation). It redraws
// whenever the kernel changes the synced `rounds` list, which it does after every round, and
// `running` (the clients of the round in progress, one change per finished client), while the
// training cell still runs (no polling).
const W = 300, H = 170, PAD = { l: 38, r: 8, t: 18, b: 22 };
const COLOURS = ["#1976d2", "#e65100", "#2e7d32", "#6a1b9a", "#00838f", "#ad1457", "#5d4037", "#9e9d24"];

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

/** {name: [[round, value], ...]} for one metric ("loss" or "accuracy"). */
export function seriesOf(rounds, metric) {
  const out = {};
  for (const r of rounds) {
    for (const [client, m] of Object.entries(r.clients || {})) {
      if (typeof m[metric] === "number") (out[client] ??= []).push([r.round, m[metric]]);
    }
    if (typeof r.global?.[metric] === "number") (out["global"] ??= []).push([r.round, r.global[metric]]);
  }
  return out;
}

export function panelSVG(title, series, names) {
  const pts = Object.values(series).flat();
  const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
  const x0 = Math.min(...xs, 1), x1 = Math.max(...xs, x0 + 1);
  let y0 = Math.min(...ys, 0), y1 = Math.max(...ys, 1e-9);
  if (title === "accuracy") { y0 = Math.min(y0, 0); y1 = Math.max(y1, 1); }
  const X = (x) => PAD.l + ((x - x0) / (x1 - x0)) * (W - PAD.l - PAD.r);
  const Y = (y) => H - PAD.b - ((y - y0) / (y1 - y0 || 1)) * (H - PAD.t - PAD.b);
  let body = `<text x="${PAD.l}" y="12" class="syft-chart-title">${esc(title)}</text>`
    + `<line x1="${PAD.l}" y1="${H - PAD.b}" x2="${W - PAD.r}" y2="${H - PAD.b}" class="syft-chart-axis"/>`
    + `<line x1="${PAD.l}" y1="${PAD.t}" x2="${PAD.l}" y2="${H - PAD.b}" class="syft-chart-axis"/>`
    + `<text x="${PAD.l - 4}" y="${PAD.t + 4}" text-anchor="end">${y1.toPrecision(2)}</text>`
    + `<text x="${PAD.l - 4}" y="${H - PAD.b}" text-anchor="end">${y0.toPrecision(2)}</text>`
    + `<text x="${W - PAD.r}" y="${H - 6}" text-anchor="end">round ${x1}</text>`;
  for (const [name, p] of Object.entries(series)) {
    const colour = name === "global" ? "currentColor" : COLOURS[names.indexOf(name) % COLOURS.length];
    const d = p.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(" ");
    body += `<polyline data-series="${esc(name)}" points="${d}" fill="none" stroke="${colour}"`
      + ` stroke-width="${name === "global" ? 2.5 : 1.5}"/>`;
  }
  return `<svg class="syft-chart-panel" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}">${body}</svg>`;
}

/** The round running now (`running` trait): the clients that finished it so far. */
export function runningHTML(running) {
  const done = Object.entries(running?.clients || {});
  if (!running?.round) return "";
  const parts = done.map(([n, m]) => `${n} ${typeof m.loss === "number" ? m.loss.toFixed(4) : "-"}`).join(", ");
  return `<div class="syft-chart-running">${esc(`round ${running.round} running · done: ${parts}`)}</div>`;
}

export function chartHTML(rounds, running = {}) {
  if (!rounds.length) return runningHTML(running) || '<div class="syft-chart-empty">no rounds yet</div>';
  const names = [...new Set(rounds.flatMap((r) => Object.keys(r.clients || {})))];
  const legend = names.map((n, i) => `<span style="color:${COLOURS[i % COLOURS.length]}">━ ${esc(n)}</span>`).join(" ")
    + ' <span><b>━ global</b></span>';
  const last = rounds[rounds.length - 1];
  const g = last.global || {};
  const summary = `round ${last.round}` + (typeof g.loss === "number" ? ` · global loss ${g.loss.toFixed(4)}` : "")
    + (typeof g.accuracy === "number" ? ` · accuracy ${(100 * g.accuracy).toFixed(1)}%` : "");
  return `<div class="syft-chart-summary">${esc(summary)}</div>` + runningHTML(running)
    + panelSVG("loss", seriesOf(rounds, "loss"), names) + panelSVG("accuracy", seriesOf(rounds, "accuracy"), names)
    + `<div class="syft-chart-legend">${legend}</div>`;
}

const CSS = `.syft-chart{font:12px var(--jp-ui-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,#222)}
.syft-chart svg{margin-right:8px;overflow:visible}.syft-chart text{font-size:10px;fill:var(--jp-ui-font-color2,#666)}
.syft-chart .syft-chart-title{font-size:11px;font-weight:600;fill:var(--jp-ui-font-color1,#222)}
.syft-chart-axis{stroke:var(--jp-border-color1,#bbb)}.syft-chart-legend span{margin-right:10px}`;

export default {
  render({ model, el }) {
    const style = document.createElement("style");
    style.textContent = CSS;
    const box = document.createElement("div");
    box.className = "syft-chart";
    el.append(style, box);
    const draw = () => { box.innerHTML = chartHTML(model.get("rounds") || [], model.get("running") || {}); };
    model.on("change:rounds", draw);
    model.on("change:running", draw);  // each client as it finishes, while the round runs
    draw();
    return () => { model.off("change:rounds", draw); model.off("change:running", draw); };
  },
};
