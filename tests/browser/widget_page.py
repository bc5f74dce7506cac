"""The widget bundle alone in a Chromium page (no JupyterLab): a fake anywidget model feeds it
worlds and patches as the kernel would. For tests of how the world view draws and redraws,
which need a real layout engine but no kernel. The page and the bundle are served through
Playwright's routing (no server, no file:// module restrictions)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "syft_lab" / "widget" / "static" / "widget.js"
ORIGIN = "http://syft-widget.test"

# A fake anywidget model (get/set/on/off/send), and mount(id, world, opts) -> the view's root.
PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body { margin: 0; font-family: sans-serif; } .spacer { height: var(--h, 1600px); }
</style></head><body><div class="spacer" id="above"></div><div id="views"></div>
<div class="spacer"></div><script type="module">
import widget from "/widget.js";
function fakeModel(state) {
  const handlers = new Map();
  const fire = (e, arg) => { for (const f of handlers.get(e) || []) f(arg); };
  return {
    get: (k) => state[k], set: (k, v) => { state[k] = v; fire("change:" + k); },
    on: (e, f) => { if (!handlers.has(e)) handlers.set(e, []); handlers.get(e).push(f); },
    off: (e, f) => handlers.set(e, (handlers.get(e) || []).filter((g) => g !== f)),
    send: () => {}, emit: fire, save_changes: () => {},
  };
}
window.syftViews = {};
window.mount = (id, world, style = "") => {
  const el = document.createElement("div");
  el.id = id;
  el.setAttribute("style", style);
  document.getElementById("views").append(el);
  const model = fakeModel({ view: "world", world, focus: [], workers: [] });
  widget.initialize({ model });
  widget.render({ model, el });
  window.syftViews[id] = { model, el };
  return el;
};
window.patch = (id, msg) => window.syftViews[id].model.emit("msg:custom", msg);
window.frames = (n = 2) => new Promise((res) => {
  const step = (k) => (k ? requestAnimationFrame(() => step(k - 1)) : res());
  step(n);
});
window.ready = true;
</script></body></html>"""


def open_widget_page(browser, viewport=(1400, 900)):
    """A new page with the bundle loaded: ``mount``, ``patch`` and ``frames`` are globals."""
    page = browser.new_page()
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    page.route(f"{ORIGIN}/", lambda route: route.fulfill(status=200, content_type="text/html", body=PAGE))
    page.route(f"{ORIGIN}/widget.js", lambda route: route.fulfill(
        status=200, content_type="text/javascript", body=BUNDLE.read_text()))
    page.goto(f"{ORIGIN}/")
    page.wait_for_function("() => window.ready === true")
    return page


# What a person sees of a world view, in comparable form: each lane's header text, the rows it
# shows (key, text, top within the lane), its height, and the arrows (from, to, where each
# starts and ends; side by side in a gutter, their offsets follow the order rows were made).
SNAPSHOT = """(root) => {
  const lanes = [...root.querySelectorAll('.syft-lane')].map((l) => {
    const box = l.getBoundingClientRect();
    const head = l.querySelector('.syft-lane-head');
    return {
      worker: l.dataset.worker,
      head: head ? head.textContent : null,
      headVisible: !!head && head.getBoundingClientRect().height > 0,
      height: Math.round(box.height),
      rows: [...l.querySelectorAll('.syft-obj, .syft-group')]
        .map((r) => [r.dataset.key || r.textContent, r.textContent, Math.round(r.getBoundingClientRect().top - box.top)])
        .sort((a, b) => a[2] - b[2] || String(a[0]).localeCompare(String(b[0]))),
    };
  });
  const ends = (d) => {
    const n = d.match(/-?[\d.]+/g).map(Number);
    return [n[0], n[1], n[n.length - 1], n[n.length - 2]];  // M x1 y1 ... V y2 H x2
  };
  const arrows = [...root.querySelectorAll('path.syft-arrow')]
    .map((p) => [p.dataset.from, p.dataset.to, ends(p.getAttribute('d'))]).sort();
  return {lanes, arrows};
}"""
