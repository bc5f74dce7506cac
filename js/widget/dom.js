// Shared rendering helpers: tiny DOM builders and the formatting of model fields.
// No anywidget here: the JupyterLab sidebar reuses these with its own data source.

const SVG_NS = "http://www.w3.org/2000/svg";

/** Create an element: h("div", {class: "x", title: "y", onclick: fn}, child, "text", [more]). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** Create an SVG element. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "style" && typeof v === "object") {
      for (const [p, val] of Object.entries(v)) el.style.setProperty(p, String(val));
    } else if (k === "dataset") {
      for (const [p, val] of Object.entries(v)) el.dataset[p] = String(val);
    } else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(typeof c === "object" ? c : String(c));
  }
}

/** The short form of an id the views print (last 6 hex digits, as syft_lab.ids.short). */
export function shortId(id) {
  if (typeof id !== "number" || !Number.isFinite(id)) return String(id ?? "");
  return id.toString(16).slice(-6);
}

/** "float32[2, 3]" from a node or object entry. */
export function shapeText(o) {
  if (!o || (o.shape === undefined && o.dtype === undefined)) return "";
  if (o.shape === null || o.shape === undefined) return o.dtype ?? "";
  return `${o.dtype ?? "?"}[${o.shape.join(", ")}]`;
}

/** The notebook's own worker: its lane's id, the owner of what the notebook holds (the kernel's
 * commands.LOCAL_OWNER). The one place the front end writes it. */
export const LOCAL = "me";

/** Whether a world row or chain node refers to an object elsewhere (a pointer, a plan pointer,
 * a pointer a worker holds): the world's edges are the entries with a `location` (the kernel's
 * tensors/nodes.py is_edge), read by that field, not by a layer's kind. */
export function isEdge(o) {
  return typeof o?.location === "string";
}

// Hues for worker colours; syft_lab/widget/svg.py has the same list and hash.
export const PALETTE = [330, 95, 30, 280, 205, 180, 0, 150];

/** The hue of a worker's colour, or null for LOCAL (neutral). FNV-1a over the id. */
export function workerHue(id) {
  if (id === LOCAL) return null;
  let hash = 2166136261;
  for (const ch of String(id)) {
    hash ^= ch.codePointAt(0);
    hash = Math.imul(hash, 16777619) >>> 0;
  }
  return PALETTE[hash % PALETTE.length];
}

/** The class that colours an element as a worker's (style.css defines one per hue). */
export function hueClass(id) {
  const hue = workerHue(id);
  return hue === null ? "syft-hue-none" : `syft-hue-${hue}`;
}

// Colours for many workers: the hash hue when it is free (as in svg.py's static pictures),
// else the next free one of 24 hues x 3 lightnesses (72 distinct colours before any repeats).
const RING = Array.from({ length: 24 }, (_, i) => (i * 15 + 5) % 360);
const LIGHTS = [50, 36, 64];

/** id -> {hue, light} for the workers of one view, in their order; LOCAL gets none. */
export function laneColours(ids) {
  const out = new Map();
  const used = new Set();
  for (const id of ids) {
    const hue = workerHue(id);
    if (hue === null) continue;
    let pick = used.has(`${hue}/50`) ? null : { hue, light: 50 };
    if (!pick) {
      const start = RING.findIndex((r) => r >= hue);
      for (let k = 0; k < RING.length * LIGHTS.length && !pick; k++) {
        const c = { hue: RING[(start + k) % RING.length], light: LIGHTS[Math.floor(k / RING.length) % LIGHTS.length] };
        if (!used.has(`${c.hue}/${c.light}`)) pick = c;
      }
    }
    pick ||= { hue, light: 50 };
    used.add(`${pick.hue}/${pick.light}`);
    out.set(id, pick);
  }
  return out;
}

/** The inline style that gives an element a colour of laneColours ("" for none: neutral). */
export function colourStyle(c) {
  return c ? `--syft-hue:${c.hue};--syft-sat:65%;--syft-l:${c.light}%` : "--syft-hue:0;--syft-sat:0%;--syft-l:50%";
}

/** Text made safe for HTML (views build rows of the world view as HTML text: faster). */
export function esc(x) {
  return String(x ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** CSS custom properties that colour an element as a worker's (inline; hueClass is cheaper). */
export function workerStyle(id) {
  const hue = workerHue(id);
  return hue === null ? { "--syft-hue": "0", "--syft-sat": "0%" } : { "--syft-hue": String(hue), "--syft-sat": "65%" };
}

/** A key for an object in the world: "bob:123". */
export const objKey = (worker, id) => `${worker}:${id}`;

/** Whether a world entry is an object stored in a worker's store (vs a local tensor/pointer). */
export function isStored(worker, entry) {
  return worker !== LOCAL || (entry && entry.refcount !== undefined);
}

/** A compact number for previews (4 significant digits). */
export function fmtNumber(x) {
  if (typeof x !== "number") return String(x);
  if (Number.isInteger(x)) return String(x);
  const a = Math.abs(x);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? x.toExponential(3) : String(Number(x.toPrecision(4)));
}

/** Remove all children. */
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** What a row keeps of a name it must cut (issue 39.3): the characters where it starts to differ
 * from the other names of its lane (`distinctAt`: their longest common prefix, world/lanes.js),
 * a few after them, and its last part (the index `[0]`, `.weight`): `data['st_mar…tin…[0]` and
 * `data['st_mar…y_h…[2]` read apart where `data['st_ma…` did not. Parts:
 * [head (may be cut), key (kept), middle (cut first), tail (kept)]. */
export const KEY_CHARS = 4;

/** A name's last part, kept whole when a row cuts the name: its last index or attribute. */
export function nameTail(t) {
  if (t.length <= 8) return "";
  const last = /(\[[^\[\]]*\]|\.[^.[\]]{1,12}|_[^_.[\]]{1,8})$/.exec(t);
  return last && last[0].length < t.length ? last[0] : t.slice(-3);
}

export function nameParts(text, distinctAt = 0) {
  const t = String(text ?? "");
  if (t.length <= 8) return [t, "", "", ""];
  const tail = nameTail(t);
  const end = t.length - tail.length;
  const at = Math.max(0, Math.min(distinctAt, end));
  const keyEnd = Math.min(end, at + (at ? KEY_CHARS : 2 * KEY_CHARS)); // a name like no other keeps its start
  return [t.slice(0, at), t.slice(at, keyEnd), t.slice(keyEnd, end), tail];
}

/** A name cut to about `n` characters (issue 39.3): its head and middle give way to "…", never
 * where it starts to differ from the other names (`distinctAt`) nor its tail:
 * cutName("data['st_mary_hospital'][0]", 14, 12) === "data[…y_ho…[0]". */
export function cutName(text, n, distinctAt = 0) {
  const t = String(text ?? "");
  if (t.length <= n) return t;
  let [head, key, mid, tail] = nameParts(t, distinctAt);
  // with too little room the head goes to "…", then the kept part shortens to its first
  // character (the one that differs from the other names: distinctAt is where they part)
  while (key.length > 1 && (head ? 1 : 0) + key.length + (mid ? 1 : 0) + tail.length > n) {
    mid = key.slice(-1) + mid;
    key = key.slice(0, -1);
  }
  // still too long: the head's "…" goes too (the middle's "…" says the name is cut)
  if (head && mid && key.length + 1 + tail.length + 1 > n) return key + "…" + tail;
  let room = n - key.length - tail.length;
  let midCut = "";
  if (mid) {
    room -= 1; // its ellipsis at least
    midCut = "…";
  }
  let headCut = head;
  if (head.length > Math.max(room, 0)) headCut = room > 1 ? head.slice(0, room - 1) + "…" : head ? "…" : "";
  else if (mid) {
    const spare = room - head.length; // what the head left: the start of the middle
    if (spare > 0) midCut = mid.slice(0, spare) + "…";
  }
  return headCut + key + midCut + tail;
}

/** The HTML of a name a row may cut to fit (world/lanes.js fitNames): the whole name is in
 * `data-full`, and in the title of the label that holds it. */
export function nameHTML(text, distinctAt = 0) {
  return `<span class="syft-cut" data-full="${esc(text)}" data-at="${Number(distinctAt) || 0}">${esc(text)}</span>`;
}

/** For each text, where it starts to differ from the others before its tail (the longest prefix
 * its body shares with another's; names that differ in their tail only, `x[0]` and `x[1]`, or a
 * text alone: 0): what a cut name must keep besides its tail. */
export function distinctFrom(texts) {
  const body = (t) => t.slice(0, t.length - nameTail(t).length);
  const bodies = [...new Set(texts.filter(Boolean).map((t) => body(String(t))))].sort();
  const common = (a, b) => { let i = 0; while (i < a.length && i < b.length && a[i] === b[i]) i++; return i; };
  const at = new Map();
  bodies.forEach((b, i) => {
    at.set(b, Math.max(i > 0 ? common(b, bodies[i - 1]) : 0, i + 1 < bodies.length ? common(b, bodies[i + 1]) : 0));
  });
  const out = new Map();
  for (const t of texts) if (t) out.set(t, at.get(body(String(t))) ?? 0);
  return out;
}
