"""The notebook widget (issue 6): render time in Chromium, live-update messages, bundle size.

    .venv/bin/python benchmarks/bench_widget.py [--quick]

- The world view of 1,000 objects on 4 workers (plus 250 local pointers, so 250 arrows),
  rendered by the real bundle (syft_lab/widget/static/widget.js) in headless Chromium
  (/usr/bin/chromium, through Playwright), from render() to the second animation frame after
  it (rows laid out, arrows drawn, painted). Target <= 300 ms.
- One object's change after the first render: the whole comm message the kernel sends (every
  frame of the signed Jupyter message, target <= 2 KB) and the time the page takes to show it,
  next to a full re-render; a patch the page could not apply (it asked for a resync) is not
  timed as an update.
- The kernel side of that change: recompute the world and diff it (1,000 objects).
- The bundle's size, minified (target <= 150 KB).
- A world of 100 Ray workers on 8 nodes x 10,000 objects (+2,000 pointers): rendered folded
  into the overview of workers (target <= 300 ms), and each interaction (scroll, search, open
  and close a lane, group by node; with every lane shown: scroll, collapse, expand) <= 100 ms.
- A 300-node plan (a real training step: forward, backward, SGD updates) opened in the plan
  view: from render() until it is fitted on screen (laid out by dagre, drawn, the view fitted
  at a readable scale) and painted. Target <= 500 ms.
"""
from __future__ import annotations

import gzip
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from jupyter_client.session import Session  # noqa: E402

import common  # noqa: E402  (its SMOKE switch: run.py --smoke)
from common import figure  # noqa: E402

BUNDLE = ROOT / "syft_lab" / "widget" / "static" / "widget.js"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WORKERS = ("bob", "alice", "carol", "dave")
N_OBJECTS, N_POINTERS = 1000, 250


def _compact(msg) -> int:
    return len(json.dumps(msg, separators=(",", ":")).encode())


# A signed session as a kernel's: what a comm message costs on the wire is its every frame
# (signature, header, parent header, metadata, content), not only the patch inside it.
_SESSION = Session(key=b"0" * 64, username="bench")
_PARENT = _SESSION.msg("execute_request", content={"code": "x = torch.ones(4, 8).send(bob)"})


def _comm_bytes(msg, buffers=None) -> int:
    """Bytes of the whole Jupyter comm message a widget's ``send(msg)`` becomes."""
    comm_msg = _SESSION.msg("comm_msg", parent=_PARENT,
                            content={"comm_id": "0" * 32, "data": {"method": "custom", "content": msg}})
    return sum(len(f) for f in _SESSION.serialize(comm_msg)) + sum(len(memoryview(b).cast("B")) for b in buffers or ())


def build_world():
    """A real runtime state: 1,000 objects on 4 virtual workers, 250 of them named pointers."""
    import torch

    import syft_lab as sy
    from syft_lab.widget import WorldWidget

    sy.hook()
    workers = [sy.VirtualWorker(f"bench_{w}") for w in WORKERS]
    ns: dict = {}
    keep = []
    for i in range(N_OBJECTS):
        w = workers[i % len(workers)]
        t = torch.randn(4, 8).tag(f"#batch{i % 7}")
        if i < N_POINTERS:
            ns[f"t{i}"] = t.send(w)
        else:
            keep.append(w.core.store(t))  # stored results nobody points to (as after search)
    widget = WorldWidget(namespace=ns)
    return sy, torch, workers, ns, widget


class Page:
    """A blank Chromium page with the bundle imported and a stand-in anywidget model."""

    HARNESS = """
    async ([code]) => {
      const url = URL.createObjectURL(new Blob([code], {type: 'text/javascript'}));
      window.__syft = (await import(url)).default;
      window.makeModel = (state) => {
        const handlers = {};
        return {
          get: (k) => state[k],
          set: (k, v) => { state[k] = v; for (const f of handlers['change:' + k] || []) f(); },
          on: (e, f) => { (handlers[e] ||= []).push(f); },
          off: (e, f) => { handlers[e] = (handlers[e] || []).filter((g) => g !== f); },
          send: (m) => { (window.__sent ||= []).push(m); },
          emit: (e, m) => { for (const f of handlers[e] || []) f(m); },
        };
      };
      window.frames2 = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    }"""

    def __init__(self):
        from playwright.sync_api import sync_playwright

        import tempfile

        if not Path(CHROMIUM).exists():
            raise RuntimeError(f"{CHROMIUM} is missing (scripts/setup installs Debian's chromium)")
        self._pw = sync_playwright().start()
        self._dir = tempfile.TemporaryDirectory()
        self.ctx = self._pw.chromium.launch_persistent_context(
            self._dir.name, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000})
        self.page = self.ctx.new_page()
        self.page.set_content("<!doctype html><html><head></head><body><div id=host></div></body></html>")
        self.page.evaluate(self.HARNESS, [BUNDLE.read_text()])

    def render_world(self, world: dict) -> float:
        """ms from render() to the second frame after it, for a fresh view of ``world``."""
        return self.page.evaluate("""
        async ([world]) => {
          const host = document.getElementById('host');
          host.replaceChildren();
          const el = document.createElement('div');
          host.append(el);
          const model = makeModel({view: 'world', world, focus: [], workers: []});
          await frames2();
          const t0 = performance.now();
          window.__cleanup = __syft.render({model, el});
          el.getBoundingClientRect();
          await frames2();
          const t = performance.now() - t0;
          const ok = el.querySelectorAll('.syft-obj').length;
          const arrows = el.querySelectorAll('.syft-arrow').length;
          window.__model = model;
          return [t, ok, arrows];
        }""", [world])

    def patch_update(self, patch: dict) -> list:
        """ms for the live view to show one patch (applied by initialize(), as in the lab)."""
        return self.page.evaluate("""
        async ([patch]) => {
          const model = window.__model;
          if (!model.__init) { __syft.initialize({model}); model.__init = true; }
          await frames2();
          window.__sent = [];
          const t0 = performance.now();
          model.emit('msg:custom', patch);
          const js = performance.now() - t0;
          document.getElementById('host').getBoundingClientRect();
          await frames2();
          const resync = window.__sent.some((m) => m && m.type === 'resync');
          return [performance.now() - t0, js, model.get('world').rev, resync];
        }""", [patch])

    def scroll(self, fraction: float) -> list:
        """ms for the world view to show another part of its lanes (scrolled to ``fraction``)."""
        return self.page.evaluate("""
        async ([fraction]) => {
          const sc = document.querySelector('#host .syft-world-scroll');
          await frames2();
          const t0 = performance.now();
          sc.scrollTop = fraction * (sc.scrollHeight - sc.clientHeight);
          await frames2();
          const keys = [...document.querySelectorAll('#host .syft-obj')].map((r) => r.dataset.key);
          return [performance.now() - t0, keys.length];
        }""", [fraction])

    def floor(self) -> float:
        """ms for a trivial DOM change (one status line's text) to reach the 2nd frame: the
        page's own cost of showing any change, whatever the widget does."""
        return self.page.evaluate("""
        async () => {
          const st = document.querySelector('#host .syft-status');
          await frames2();
          const t0 = performance.now();
          st.textContent = 'x' + Math.random();
          document.getElementById('host').getBoundingClientRect();
          await frames2();
          return performance.now() - t0;
        }""")

    def plan(self, node: dict) -> float:
        return self.page.evaluate("""
        async ([node]) => {
          const host = document.getElementById('host');
          host.replaceChildren();
          const el = document.createElement('div');
          host.append(el);
          const model = makeModel({view: 'plan', chains: [{names: ['p'], nodes: [node]}], workers: []});
          await frames2();
          const t0 = performance.now();
          __syft.render({model, el});
          el.getBoundingClientRect();
          await frames2();
          return [performance.now() - t0, el.querySelectorAll('.syft-plan-node').length];
        }""", [node])

    def plan_fitted(self, node: dict) -> list:
        """ms from render() of the plan view to its graph fitted and painted; and the scale."""
        return self.page.evaluate("""
        async ([node]) => {
          const host = document.getElementById('host');
          host.replaceChildren();
          const el = document.createElement('div');
          host.append(el);
          const model = makeModel({view: 'plan', chains: [{names: ['step'], nodes: [node]}], workers: []});
          await frames2();
          const t0 = performance.now();
          __syft.render({model, el});
          while (!el.querySelector('.syft-plan-viewer[data-fitted=true]')) {
            await new Promise((r) => requestAnimationFrame(r));
            if (performance.now() - t0 > 10000) throw new Error('the plan view was not fitted in 10 s');
          }
          await frames2();
          const v = el.querySelector('.syft-plan-viewer');
          return [performance.now() - t0, Number(v.dataset.nodes), Number(v.dataset.scale)];
        }""", [node])

    def big_world(self, world: dict) -> dict:
        """A world of many workers: ms to render it (folded into the overview), to scroll the
        notebook's lane, to search (one keystroke's filter, the overview included), to open a
        worker's lane from the overview and close it, to group the overview by node; then with
        every lane shown (the "all lanes" button): that render, scrolling the whole view, and
        collapsing and expanding a lane; each until the 2nd animation frame after it."""
        return self.page.evaluate("""
        async ([world]) => {
          const host = document.getElementById('host');
          host.replaceChildren();
          const el = document.createElement('div');
          host.append(el);
          const model = makeModel({view: 'world', world, focus: [], workers: []});
          await frames2();
          const t = {};
          const time = async (name, f) => { const t0 = performance.now(); f(); await frames2(); t[name] = performance.now() - t0; };
          await time('render', () => { window.__cleanup = __syft.render({model, el}); el.getBoundingClientRect(); });
          const body = el.querySelector('.syft-lane[data-worker=me] .syft-lane-body');
          await time('scroll_lane', () => { body.scrollTop = body.scrollHeight / 2; });
          const input = el.querySelector('.syft-search');
          await time('search', () => { input.value = 't1234'; input.dispatchEvent(new Event('input')); });
          t.found = el.querySelectorAll('.syft-obj').length;
          t.filter_script = el.querySelector('.syft-root').__syftWorld.timings.filter;
          await time('search_cleared', () => { input.value = ''; input.dispatchEvent(new Event('input')); });
          t.chips = el.querySelectorAll('.syft-ov-worker').length;
          t.overview_lanes = el.querySelectorAll('.syft-lane').length;
          await time('open_lane', () => el.querySelector('.syft-ov-worker[data-worker=w050]').click());
          t.opened_rows = el.querySelectorAll('.syft-lane[data-worker=w050] .syft-obj').length;
          await time('close_lane', () => el.querySelector('.syft-lane[data-worker=w050] .syft-lane-close').click());
          const by = el.querySelector('.syft-ov-group-by');
          await time('group_by_node', () => { by.value = 'node'; by.dispatchEvent(new Event('change')); });
          t.groups = el.querySelectorAll('.syft-ov-group').length;
          await time('all_lanes', () => el.querySelector('.syft-ov-all').click());
          const sc = el.querySelector('.syft-world-scroll');
          await time('scroll_view', () => { sc.scrollTop = sc.scrollHeight / 2; });
          const toggle = () => el.querySelector('.syft-lane[data-worker=w050] .syft-lane-toggle');
          await time('collapse', () => toggle().click());
          await time('expand', () => toggle().click());
          t.rows = el.querySelectorAll('.syft-obj').length;
          t.lanes = el.querySelectorAll('.syft-lane').length;
          return t;
        }""", [world])

    def close(self):
        self.ctx.close()
        self._pw.stop()
        self._dir.cleanup()


def _plan_node(n_ops: int) -> dict:
    """A chain-shaped plan graph of n_ops ops with a side input every 4 ops (like an MLP)."""
    nodes = [{"id": "in0", "role": "input", "label": "x", "op": None, "shape": [64, 32], "dtype": "float32"}]
    edges = []
    prev = "in0"
    for i in range(n_ops):
        vid = f"v{i}"
        nodes.append({"id": vid, "role": "op", "label": ["mm", "add.Tensor", "relu", "mul.Tensor"][i % 4],
                      "op": "aten.mm.default", "shape": [64, 32], "dtype": "float32", "inputs": [prev]})
        edges.append({"from": prev, "to": vid, "shape": [64, 32], "dtype": "float32"})
        if i % 4 == 0:
            sid = f"s{i}"
            nodes.append({"id": sid, "role": "state", "label": f"w{i}", "op": None, "shape": [32, 32],
                          "dtype": "float32"})
            edges.append({"from": sid, "to": vid, "shape": [32, 32], "dtype": "float32"})
        prev = vid
    nodes.append({"id": "out0", "role": "output", "label": "output 0", "op": None, "shape": [64, 32],
                  "dtype": "float32"})
    edges.append({"from": prev, "to": "out0", "shape": [64, 32], "dtype": "float32"})
    return {"kind": "plan", "type": "Plan", "id": 1, "owner": "me", "name": "deep", "built": True,
            "sent_to": ["bob"], "graph": {"nodes": nodes, "edges": edges}}


def training_step_node(layers: int = 13) -> dict:
    """The plan-view node of a real training step of an MLP (about 300 nodes at 13 layers)."""
    import torch
    import torch.nn as nn

    import syft_lab as sy

    model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(8, 8), nn.Tanh())], nn.Linear(8, 1))

    def train_step(X, Y):
        loss = ((model(X) - Y) ** 2).mean()
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(0.1 * g)
        return loss

    step = sy.plan(train_step, state=model).build(torch.ones(4, 8), torch.ones(4, 1))
    return json.loads(json.dumps(sy.chain(step).nodes[0]))


BIG_WORKERS, BIG_OBJECTS, BIG_POINTERS = 100, 10_000, 2_000
BIG_STEPS = ("scroll_lane", "search", "search_cleared", "open_lane", "close_lane", "group_by_node", "scroll_view",
             "collapse", "expand")


BIG_NODES = 8  # the hosts of a Ray cluster the big world's workers are spread over


def big_world() -> dict:
    """The model of a large world (issues 15 and 18): 100 Ray workers on 8 nodes holding 10,000
    objects in all, and 2,000 named pointers to them in "me"."""
    lanes = [{"id": "me", "kind": "local", "state": "in-process", "objects": []}]
    for w in range(BIG_WORKERS):
        lanes.append({"id": f"w{w:03d}", "kind": "ray", "node": f"10.0.0.{w % BIG_NODES + 1}",
                      "state": "restarting" if w % 37 == 5 else "connected", "objects": [
            {"id": w * 1000 + i + 1, "kind": "tensor", "type": "Tensor", "shape": [4, 8], "dtype": "float32",
             "requires_grad": False, "tags": [f"#batch{i % 7}"], "description": None, "refcount": 1, "names": [],
             "actions": ["get", "move"]}
            for i in range(BIG_OBJECTS // BIG_WORKERS)]})
    for p in range(BIG_POINTERS):
        w = p % BIG_WORKERS
        lanes[0]["objects"].append({"id": 10_000_000 + p, "kind": "pointer", "type": "PointerTensor",
                                    "location": f"w{w:03d}", "id_at_location": w * 1000 + p // BIG_WORKERS + 1,
                                    "owning": True, "state": "ok", "names": [f"t{p}"], "shape": [4, 8], "dtype": "float32",
                                    "actions": ["get", "move"]})
    return {"schema": "syft_lab.world", "version": 1, "rev": 0, "workers": lanes}


def run(quick: bool = False) -> list[dict]:
    if not BUNDLE.is_file():
        raise RuntimeError("the widget bundle is not built: run npm run build (scripts/setup does)")
    smoke = common.SMOKE  # the suite's smoke run: every figure once, no warm-ups (not measurements)
    reps = 1 if smoke else 3 if quick else 9
    sy, torch, workers, ns, widget = build_world()
    sent: list = []
    buffers_of: dict = {}
    widget.send = lambda msg, buffers=None: (sent.append(msg), buffers_of.__setitem__(id(msg), buffers))
    try:
        world = widget.world
        n_rows = sum(len(lane["objects"]) for lane in world["workers"])
        full_bytes = _compact(world)

        # the kernel side of one change: a tensor sent to bob (its pointer and its object)
        kernel_ms, patches = [], []
        for i in range(reps):
            ns[f"new{i}"] = torch.ones(4, 8).send(workers[0])
            t0 = time.perf_counter()
            widget.refresh()
            kernel_ms.append((time.perf_counter() - t0) * 1e3)
            patches.append(sent[-1])
        one_bytes = max(_comm_bytes(p, buffers_of.get(id(p))) for p in patches)
        one_patch_bytes = max(_compact(p) for p in patches)
        # and a change to a single object (a tag added on bob)
        obj = next(iter(workers[1].objects.values()))
        obj.tag("#seen")
        widget.refresh()
        single_bytes = _comm_bytes(sent[-1], buffers_of.get(id(sent[-1])))

        page = Page()
        try:
            if not smoke:
                page.render_world(world)  # warm-up (JIT, style injection)
            renders, rows, arrows = [], 0, 0
            for _ in range(reps):
                t, rows, arrows = page.render_world(world)
                renders.append(t)
            ups, ups_js, floors, failed = [], [], [], 0
            page.render_world(world)
            for p in patches:
                t, js, rev, resync = page.patch_update(p)
                if resync or rev != p.get("rev"):  # the view lost track: a resync is no update
                    failed += 1
                    continue
                ups.append(t)
                ups_js.append(js)
                floors.append(page.floor())
            if not ups:
                raise RuntimeError(f"every one of {len(patches)} world patches failed in the page (resync)")
            scrolls = [page.scroll(f)[0] for f in (1.0, 0.5, 0.0, 0.75, 0.25)[:reps if quick else 5]]
            deep = _plan_node(60 if quick else 120)
            plan_t = []
            for _ in range(reps):
                t, n = page.plan(deep)
                plan_t.append(t)
            big = big_world()
            if not smoke:
                page.big_world(big)  # warm-up
            bigs = [page.big_world(big) for _ in range(reps)]
            step_node = training_step_node()
            if not smoke:
                page.plan_fitted(step_node)  # warm-up
            fitted = [page.plan_fitted(step_node) for _ in range(reps)]
        finally:
            page.close()
    finally:
        for w in workers:
            w.close()
        widget.close()

    render_ms = statistics.median(renders)
    update_ms = statistics.median(ups)
    floor_ms = statistics.median(floors)
    size = BUNDLE.stat().st_size
    gz = len(gzip.compress(BUNDLE.read_bytes(), 9))
    return [
        figure(f"world view render, {N_OBJECTS:,} objects on 4 workers + {N_POINTERS} pointers (Chromium)",
               render_ms, "ms", 300.0,
               peer=f"{n_rows:,} rows ({rows} in the DOM: lanes are virtual lists), {arrows} arrows in view; "
                    f"the world as JSON is {full_bytes / 1024:.0f} KB",
               note="render() to the 2nd animation frame, median"),
        figure("one object's change (a tensor sent: its pointer and its object), message", one_bytes, "bytes",
               2048, peer=f"the whole Jupyter comm message (signed frames, headers, content); the patch JSON in it "
                          f"{one_patch_bytes} bytes; whole world {full_bytes:,} bytes; a tag added to one object: "
                          f"{single_bytes} bytes"),
        figure("that change shown in the page (patch applied, rows and arrows redrawn)", update_ms, "ms", None,
               peer=f"a trivial DOM change on the same page: {floor_ms:.0f} ms (frame floor); "
                    f"script time {statistics.median(ups_js):.1f} ms; full render {render_ms:.0f} ms; "
                    f"{len(ups)} of {len(patches)} patches applied"
                    + (f", {failed} failed and caused a resync (not timed)" if failed else ""),
               ratio=update_ms / floor_ms, note="until the 2nd animation frame; patches that failed are not timed"),
        figure("world view scrolled to another part of its lanes (rows made, arrows redrawn)",
               statistics.median(scrolls), "ms", None, peer=f"a trivial DOM change: {floor_ms:.0f} ms",
               ratio=statistics.median(scrolls) / floor_ms),
        figure(f"kernel: world recomputed and diffed after one change ({N_OBJECTS:,} objects)",
               statistics.median(kernel_ms), "ms", None),
        figure(f"plan view, {deep['graph']['nodes'].__len__()}-node graph laid out (dagre) and drawn", statistics.median(plan_t),
               "ms", None),
        figure(f"plan view, a {fitted[0][1]}-node training step opened until fitted and painted (Chromium)",
               statistics.median(f[0] for f in fitted), "ms", 500.0,
               peer=f"opened at {fitted[0][2]:.0%} (never below 75 %: 12 px labels stay >= 9 px), minimap for the rest",
               note="render() to fitted, then the 2nd animation frame, median"),
        figure(f"world of {BIG_WORKERS} Ray workers on {BIG_NODES} nodes x {BIG_OBJECTS:,} objects "
               f"(+{BIG_POINTERS:,} pointers): rendered, folded into the overview (Chromium)",
               statistics.median(b["render"] for b in bigs), "ms", 300.0,
               peer=f"{bigs[0]['chips']} worker chips, {bigs[0]['overview_lanes']} lane open (the notebook's); every lane "
                    f"shown on request: {statistics.median(b['all_lanes'] for b in bigs):.0f} ms",
               note="render() to the 2nd animation frame, median"),
        figure(f"world of {BIG_WORKERS} workers x {BIG_OBJECTS:,} objects: the slowest of scroll, search, "
               "open/close a lane, group by node, collapse/expand (Chromium)",
               statistics.median(max(b[k] for k in BIG_STEPS) for b in bigs), "ms", 100.0,
               peer="median ms: " + ", ".join(f"{k.replace('_', ' ')} {statistics.median(b[k] for b in bigs):.0f}"
                                              for k in BIG_STEPS)
                    + f"; a search's own script {statistics.median(b['filter_script'] for b in bigs):.0f} ms (the rest is "
                      f"the browser's layout and paint); an opened lane made {bigs[0]['opened_rows']} rows; the overview by "
                      f"node has {bigs[0]['groups']} groups; with all {bigs[0]['lanes']} lanes, {bigs[0]['rows']} rows in the "
                      f"DOM (virtual lists); a search found {bigs[0]['found']}",
               note="each until the 2nd animation frame after it; scroll view, collapse and expand with every lane shown"),
        figure("widget bundle (static/widget.js), minified", size / 1024, "KB", 150.0,
               peer=f"gzip {gz / 1024:.1f} KB"),
    ]


if __name__ == "__main__":
    from run import print_table

    print_table(run("--quick" in sys.argv))
