"""The plan view in a real JupyterLab (headless Chromium): labels inside their boxes, edge
labels beside their edges, scalar constants shown, "sent to" only while a worker holds the
plan; a 300-node training step that opens fitted and readable, zooms, pans, has a minimap,
regions, in-place marks and node details; the op log's filter. Screenshots go to
test-artifacts/; docs/images/plan-view.png is rewritten only with SYFT_LAB_UPDATE_SCREENSHOTS=1
(or when missing)."""
import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

README_SHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "plan-view.png"

SETUP = """\
import torch
import torch.nn as nn
import syft_lab as sy
sy.hook()
bob = sy.VirtualWorker("bob")"""

LONG_NAMES = """\
class Net(sy.Plan):
    def __init__(self):
        super().__init__()
        self.encoder_first_projection = nn.Linear(3, 16)
        self.decoder_final_projection = nn.Linear(16, 2)

    def forward(self, observations_of_the_environment):
        hidden = self.encoder_first_projection(observations_of_the_environment).relu()
        return self.decoder_final_projection(hidden).log_softmax(dim=1)

net = Net()
net.build(torch.ones(4, 3))
net"""

DOUBLE = """\
@sy.plan
def double(x):
    return 2 * x

double.build(torch.ones(3))
double"""


def run_code(nb, code: str) -> str:
    """Run ``code`` as a cell of the notebook's kernel (the views refresh after it, as after
    any cell); returns the reply's status."""
    return nb.page.evaluate("""async (code) => {
        const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
        const reply = await k.requestExecute({code, silent: false, store_history: true}).done;
        return reply.content.status;
    }""", code)


def _text_outside_boxes(out):
    """Labels of plan nodes that reach outside their box (their rendered text extents)."""
    return out.evaluate("""el => {
        const bad = [];
        for (const g of el.querySelectorAll('.syft-plan-node')) {
            const r = g.querySelector('rect').getBBox();
            for (const t of g.querySelectorAll('text')) {
                const b = t.getBBox();
                if (b.width && (b.x < r.x - 0.5 || b.x + b.width > r.x + r.width + 0.5))
                    bad.push(t.textContent + ' in ' + g.dataset.id);
            }
        }
        return bad;
    }""")


def _labels_on_edges(out):
    """Edge labels that an edge line runs through (sampled along every edge path)."""
    return out.evaluate("""el => {
        const paths = [...el.querySelectorAll('.syft-plan-edge')];
        const samples = paths.map(p => {
            const n = p.getTotalLength(), pts = [];
            for (let d = 0; d <= n; d += 2) pts.push(p.getPointAtLength(d));
            return pts;
        });
        const bad = [];
        for (const t of el.querySelectorAll('.syft-plan-edge-label')) {
            const b = t.getBBox();
            const inside = samples.some(pts => pts.some(q =>
                q.x > b.x + 1 && q.x < b.x + b.width - 1 && q.y > b.y + 1 && q.y < b.y + b.height - 1));
            const by = samples.map((pts, k) => pts.some(q =>
                q.x > b.x + 1 && q.x < b.x + b.width - 1 && q.y > b.y + 1 && q.y < b.y + b.height - 1)
                ? paths[k].dataset.from + '->' + paths[k].dataset.to : null).filter(Boolean);
            if (inside) bad.push(t.textContent + ' ' + t.dataset.from + '->' + t.dataset.to + ' crossed by ' + by.join(','));
        }
        return [bad, el.querySelectorAll('.syft-plan-edge-label').length];
    }""")


def test_labels_stay_in_their_boxes_and_beside_their_edges(open_notebook, artifacts):
    nb = open_notebook("plan_labels.ipynb", [SETUP, LONG_NAMES])
    out = nb.output(1)
    out.locator(".syft-plan-viewer[data-fitted=true]").wait_for()
    assert out.locator(".syft-plan-label", has_text="encoder_first_proj").count() >= 1
    out.screenshot(path=str(artifacts / "plan-view-labels.png"))
    assert _text_outside_boxes(out) == []
    bad, n_labels = _labels_on_edges(out)
    assert n_labels >= 5 and bad == []
    out.screenshot(path=str(artifacts / "plan-view-labels.png"))


def test_scalar_constants_are_nodes_of_the_graph(open_notebook, artifacts):
    nb = open_notebook("plan_scalar.ipynb", [SETUP, DOUBLE])
    out = nb.output(1)
    out.locator(".syft-plan-viewer[data-fitted=true]").wait_for()
    scalar = out.locator(".syft-plan-node.syft-plan-scalar")
    assert scalar.count() == 1 and scalar.locator(".syft-plan-label").text_content() == "2"
    sid = scalar.get_attribute("data-id")
    mul = out.locator(".syft-plan-node[data-role=op]")
    assert mul.count() == 1 and "mul" in mul.text_content()
    assert out.locator(f".syft-plan-edge[data-from='{sid}'][data-to='{mul.get_attribute('data-id')}']").count() == 1
    # its details say where the number goes
    scalar.click()
    detail = out.locator(".syft-plan-detail")
    detail.wait_for()
    assert "argument other" in detail.inner_text() and "constant" in detail.inner_text()
    out.screenshot(path=str(artifacts / "plan-view-scalar.png"))
    # an op's details show the source line it came from (a cell of this notebook)
    mul.click()
    expect(detail.locator(".syft-plan-source")).to_have_text("a notebook cell, line 3: return 2 * x")
    out.screenshot(path=str(artifacts / "plan-view-source-line.png"))


def test_sent_to_forgets_a_worker_once_the_plan_came_back(open_notebook, artifacts):
    nb = open_notebook("plan_back.ipynb", [SETUP, DOUBLE, "double_ptr = double.send(bob)"])
    sent = nb.output(1).locator(".syft-plan-sent")
    sent.locator("[data-worker=bob]").wait_for()
    assert [c.inner_text() for c in sent.locator("[data-worker]").all()] == ["bob"]
    # the plan comes back: bob no longer holds it, and the (live) view says so
    assert run_code(nb, "back = double_ptr.get()") == "ok"
    assert nb.kernel_eval("type(back).__name__, bob.objects == {}") == "('Plan', True)"
    nb.page.wait_for_function("() => document.querySelector('.syft-plan-sent').textContent.includes('no longer on bob')")
    assert sent.locator("[data-worker]").count() == 0
    assert "not sent to any worker" in sent.inner_text()
    assert nb.kernel_eval("double.held_by(), double.sent_to") == "([], ['bob'])"
    nb.output(1).screenshot(path=str(artifacts / "plan-view-came-back.png"))


def _training_step_cells(layers: int) -> list:
    return [SETUP, f"""\
model = nn.Sequential(*[m for _ in range({layers}) for m in (nn.Linear(8, 8), nn.Tanh())], nn.Linear(8, 1))

def train_step(X, Y):
    loss = ((model(X) - Y) ** 2).mean()
    grads = torch.autograd.grad(loss, list(model.parameters()))
    with torch.no_grad():
        for p, g in zip(model.parameters(), grads):
            p.sub_(0.1 * g)
    return loss

step = sy.plan(train_step, state=model).build(torch.ones(4, 8), torch.ones(4, 1))
step"""]


def test_a_300_node_training_step_opens_fitted_and_navigates(open_notebook, artifacts):
    nb = open_notebook("plan_big.ipynb", _training_step_cells(13))
    page = nb.page
    out = nb.output(1)
    viewer = out.locator(".syft-plan-viewer[data-fitted=true]")
    viewer.wait_for()
    n_nodes = int(viewer.get_attribute("data-nodes"))
    assert n_nodes >= 300, n_nodes
    # fitted: as wide as the output allows, and readable (not scaled below 60 %)
    scale = float(viewer.get_attribute("data-scale"))
    assert scale >= 0.6
    canvas = out.locator(".syft-plan-canvas")
    box = canvas.bounding_box()
    graph = out.locator(".syft-plan-graph").bounding_box()
    assert abs(graph["width"] - box["width"]) < 2
    label_px = page.evaluate("() => document.querySelector('.syft-plan-label').getBoundingClientRect().height")
    assert label_px >= 7, label_px
    # the graph is taller than the view: the minimap shows where the view is, beside the graph
    # (never over it)
    minimap = out.locator(".syft-plan-minimap")
    assert minimap.is_visible()
    mb = minimap.bounding_box()
    assert mb["x"] >= box["x"] + box["width"] - 0.5 or mb["y"] >= box["y"] + box["height"] - 0.5, (mb, box)
    # it does not drift wide: the graph is about as wide as its widest rank (the nodes at one
    # height side by side), not a staircase many times wider (a dagre layout of the whole step
    # came out 11,000 px wide for ranks of at most ~1,100 px)
    spread = out.evaluate("""el => {
        const ranks = new Map();
        let x0 = Infinity, x1 = -Infinity;
        for (const g of el.querySelectorAll('.syft-plan-graph .syft-plan-node')) {
            const b = g.querySelector('rect').getBBox();
            const y = Math.round(b.y + b.height / 2);
            ranks.set(y, (ranks.get(y) || 0) + b.width + 24);
            x0 = Math.min(x0, b.x); x1 = Math.max(x1, b.x + b.width);
        }
        return [x1 - x0, Math.max(...ranks.values())];
    }""")
    assert spread[0] <= 1.6 * spread[1], spread
    # regions of a training step, each a group; the updates are in-place writes of the state
    regions = {g.get_attribute("data-region") for g in out.locator(".syft-plan-region").all()}
    assert regions == {"forward", "backward", "update"}
    n_params = int(nb.kernel_eval("len(list(model.parameters()))"))
    inplace = out.locator(".syft-plan-node.syft-plan-inplace")
    assert inplace.count() == n_params
    assert {g.get_attribute("data-region") for g in inplace.all()} == {"update"}
    out.screenshot(path=str(artifacts / "plan-view-300-opened.png"))

    def view_box():
        return [float(v) for v in out.locator(".syft-plan-graph").get_attribute("viewBox").split()]

    # zoom in and out with the buttons, around the centre
    before = view_box()
    out.locator("[data-tool='+']").click()
    assert float(viewer.get_attribute("data-scale")) == pytest.approx(scale * 1.25, rel=1e-3)
    assert view_box()[2] == pytest.approx(before[2] / 1.25, rel=1e-3)
    out.locator("[data-tool='−']").click()
    assert float(viewer.get_attribute("data-scale")) == pytest.approx(scale, rel=1e-3)
    # Ctrl+wheel zooms too (a plain wheel scrolls the notebook)
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 100)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    page.wait_for_function("s => Number(document.querySelector('.syft-plan-viewer').dataset.scale) > s", arg=scale)
    # drag pans: the view moves down the graph by the dragged distance
    y0 = view_box()[1]
    k = float(viewer.get_attribute("data-scale"))
    page.mouse.move(box["x"] + 200, box["y"] + 300)
    page.mouse.down()
    page.mouse.move(box["x"] + 200, box["y"] + 150, steps=5)
    page.mouse.up()
    assert view_box()[1] == pytest.approx(y0 + 150 / k, abs=2)
    # a click on the minimap's bottom brings the end of the graph (the updates) into view
    mb = minimap.bounding_box()
    page.mouse.click(mb["x"] + mb["width"] / 2, mb["y"] + mb["height"] - 3)
    vb = view_box()
    last = out.locator(".syft-plan-node[data-role=output]").first
    assert vb[1] + vb[3] >= float(page.evaluate("el => el.querySelector('rect').getBBox().y", last.element_handle()))
    # fit shows the whole graph; the minimap is then not needed
    out.locator("[data-tool=fit]").click()
    vb = view_box()
    size = page.evaluate("() => { const b = document.querySelector('.syft-plan-graph').getBBox(); return [b.width, b.height]; }")
    assert vb[2] >= size[0] - 30 and vb[3] >= size[1] - 30
    assert not minimap.is_visible()
    out.screenshot(path=str(artifacts / "plan-view-300-fit.png"))

    # node details: op, shapes, what it reads and feeds, the region; in-place writes name their input
    out.locator("[data-tool='1:1']").click()
    target = inplace.first
    target_id = target.get_attribute("data-id")
    page.evaluate("id => document.querySelector('.syft-plan-viewer').closest('.syft-plan').__syftPlan.select(id)", target_id)
    detail = out.locator(".syft-plan-detail")
    detail.wait_for()
    text = detail.inner_text()
    assert "aten.sub_.Tensor" in text and "optimizer update" in text and "overwrites" in text
    assert "float32[" in text
    assert out.locator(f".syft-plan-node.syft-plan-on[data-id='{target_id}']").count() == 1
    # following a link in the details selects that node
    detail.locator(".syft-plan-ref").first.click()
    assert out.locator(".syft-plan-viewer").get_attribute("data-selected") != target_id
    page.keyboard.press("Escape")
    out.screenshot(path=str(artifacts / "plan-view-300-details.png"))
    canvas.focus()
    page.keyboard.press("Escape")
    assert detail.is_hidden()


def test_readme_plan_view_screenshot(open_notebook, artifacts):
    """The README's picture of a plan: a small training step, its regions, a node's details."""
    nb = open_notebook("plan_readme.ipynb", _training_step_cells(1))
    page = nb.page
    page.set_viewport_size({"width": 1200, "height": 1000})
    out = nb.output(1)
    out.locator(".syft-plan-viewer[data-fitted=true]").wait_for()
    out.locator(".syft-plan-node.syft-plan-inplace").first.focus()
    page.keyboard.press("Enter")
    out.locator(".syft-plan-detail").wait_for()
    out.screenshot(path=str(artifacts / "plan-view-readme.png"))
    if os.environ.get("SYFT_LAB_UPDATE_SCREENSHOTS") == "1" or not README_SHOT.exists():
        out.screenshot(path=str(README_SHOT))
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_op_log_filters_its_ops(open_notebook, artifacts):
    nb = open_notebook("oplog.ipynb", [SETUP, """\
w = sy.LoggingTensor(torch.ones(3, 3, requires_grad=True))
loss = ((w @ w).relu() * 2).sum()
loss.backward()
w"""])
    out = nb.output(1)
    box = out.locator(".syft-box-logging")
    box.locator(".syft-log-toggle").click()
    items = box.locator(".syft-log li:not(.syft-log-section):not(.syft-more):not(.syft-empty)")
    total = int(nb.kernel_eval("len(w.log)"))
    assert total > 5  # more than the tail the view carries: the whole log is asked for
    nb.page.wait_for_function(
        "n => document.querySelectorAll('.syft-log li:not(.syft-more):not(.syft-log-section)').length === n", arg=total)
    # the records say which ops backward ran: the log shows forward and backward apart
    sections = [t.strip().lower() for t in box.locator(".syft-log li.syft-log-section").all_inner_texts()]
    assert any("forward" in t for t in sections) and any("backward" in t for t in sections), sections
    box.locator(".syft-log-filter").fill("mm")
    ops = [li.inner_text() for li in items.all()]
    assert ops and all("mm" in o for o in ops) and len(ops) < total
    assert f"{len(ops)} of {total} shown" in box.locator(".syft-log-count").inner_text()
    box.locator(".syft-log-filter").fill("no such op")
    assert items.count() == 0 and "no op matches" in box.inner_text()
    box.locator(".syft-log-filter").fill("")
    assert items.count() == total
    out.screenshot(path=str(artifacts / "oplog-filter.png"))


def test_a_plan_of_two_signatures_shows_the_graph_picked(open_notebook, artifacts):
    nb = open_notebook("plan_sigs.ipynb", [SETUP, """\
@sy.plan
def f(x):
    return (x * 2).sum(dim=0) if x.dim() == 2 else x.abs()

f.build(torch.ones(2, 3))
f.build(torch.ones(3))
f"""])
    out = nb.output(1)
    out.locator(".syft-plan-viewer[data-fitted=true]").wait_for()
    pick = out.locator(".syft-plan-sig-pick")
    assert [o.inner_text() for o in pick.locator("option").all()] == \
        ["(x: float32[2, 3]) · 2 ops", "(x: float32[3]) · 1 op"]
    ops = lambda: sorted(g.locator(".syft-plan-label").text_content() for g in out.locator(".syft-plan-node[data-role=op]").all())
    assert ops() == ["abs"]  # the last build is shown first
    pick.select_option("0")
    out.locator(".syft-plan-viewer[data-fitted=true]").wait_for()
    assert ops() == ["mul.Tensor", "sum.dim_IntList"]
    assert "2 ops" in out.locator(".syft-plan-head").inner_text()
    assert out.locator(".syft-plan-node.syft-plan-scalar").count() == 1
    out.screenshot(path=str(artifacts / "plan-view-signatures.png"))
