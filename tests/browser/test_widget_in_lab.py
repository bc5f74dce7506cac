"""The widget in a real JupyterLab, in headless Chromium: chain views, the world view with
Send and Get, and the plan view. Screenshots of each view go to test-artifacts/."""
import ast
import re
import time

import pytest
from playwright.sync_api import expect
from lab_steps import update_readme_image

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SETUP = """\
import torch
import syft_lab as sy
sy.hook()
bob = sy.VirtualWorker("bob")
alice = sy.VirtualWorker("alice")
x = torch.tensor([1., 2., 3.])
lx = (sy.LoggingTensor(torch.tensor([1., -2., 3.])) * 2).relu() + 1"""

CELLS = [SETUP, "lx", "p = sy.LoggingTensor(torch.ones(2, 3)).send(bob)\np", "sy.inspect()"]


@pytest.fixture
def notebook(open_notebook):
    return open_notebook("views.ipynb", CELLS)


def kinds(output):
    return [b.get_attribute("data-kind") for b in output.locator(".syft-box").all()]


def test_chain_views_world_view_send_and_get(notebook, artifacts):
    page = notebook.page
    # --- the chain of a LoggingTensor: its box (with the op log), then the data -------------
    lx_out = notebook.output(1)
    lx_out.locator(".syft-chain-block").wait_for()
    assert kinds(lx_out) == ["logging", "tensor"]
    log_box = lx_out.locator(".syft-box-logging")
    assert "log: 3 ops" in log_box.inner_text()
    log_box.locator(".syft-log-toggle").click()
    ops = log_box.locator(".syft-log li")
    ops.first.wait_for()
    assert [o.inner_text() for o in ops.all()][0].startswith("aten.mul.Tensor")
    assert "tensor([3., 1., 7.])" in lx_out.locator(".syft-values").inner_text()
    lx_out.screenshot(path=str(artifacts / "chain-logging-tensor.png"))

    # --- the chain of a pointer: the remote part inside bob's colour, no values ---------------
    p_out = notebook.output(2)
    p_out.locator(".syft-chain-block").wait_for()
    assert kinds(p_out) == ["pointer", "logging", "tensor"]
    remote = p_out.locator(".syft-remote")
    assert remote.get_attribute("data-worker") == "bob"
    assert remote.locator(".syft-box").count() == 2
    assert "values stay on bob" in remote.inner_text()
    assert re.search(r"→ bob:[0-9a-f]{1,6}", p_out.locator(".syft-box-pointer").inner_text())
    p_out.screenshot(path=str(artifacts / "chain-pointer.png"))
    update_readme_image(artifacts / "chain-pointer.png", "chain-view.png")

    # --- the world view: lanes, the pointer's arrow ----------------------------------------------
    world = notebook.output(3)
    world.locator(".syft-lane[data-worker=bob]").wait_for()
    lanes = [lane.get_attribute("data-worker") for lane in world.locator(".syft-lane").all()]
    assert lanes[:3] == ["me", "bob", "alice"]
    bob_lane = world.locator(".syft-lane[data-worker=bob]")
    me_lane = world.locator(".syft-lane[data-worker=me]")
    assert bob_lane.locator(".syft-obj").count() == 1
    assert world.locator(".syft-arrow").count() == 1
    world.screenshot(path=str(artifacts / "world-before-send.png"))

    # --- Send x to bob with the keyboard-reachable buttons --------------------------------------
    x_row = me_lane.locator(".syft-obj[data-names='x']")
    x_row.locator("[data-action=send]").click()
    x_row.locator(".syft-menu-item[data-worker=bob]").click()
    page.wait_for_function("() => document.querySelectorAll("
                           "'.syft-lane[data-worker=bob] .syft-obj').length === 2")
    ptr_row = me_lane.locator(".syft-obj[data-names='x_ptr']")
    ptr_row.wait_for()
    assert "→ bob" in ptr_row.inner_text()
    expect(world.locator(".syft-status")).to_have_text("x_ptr = x.send(bob)")
    assert notebook.kernel_eval("(type(x_ptr).__name__, x_ptr.location.id)") == "('PointerTensor', 'bob')"
    page.wait_for_function("() => document.querySelectorAll('.syft-arrow').length === 2")
    world.screenshot(path=str(artifacts / "world-after-send.png"))

    # --- Get it back: it leaves bob's lane and x is a tensor again; x_ptr, still bound, stays as a
    # gone row saying what happened, with no buttons ------------------------------------------------
    ptr_row.locator("[data-action=get]").click()
    page.wait_for_function("() => document.querySelectorAll("
                           "'.syft-lane[data-worker=bob] .syft-obj').length === 1")
    gone_row = me_lane.locator(".syft-obj[data-names='x_ptr']")
    expect(gone_row).to_have_class(re.compile(r"syft-obj-gone"))
    expect(gone_row.locator(".syft-badge-gone")).to_contain_text("fetched")
    expect(gone_row.locator("[data-action]")).to_have_count(0)
    expect(world.locator(".syft-status")).to_have_text("x = x_ptr.get()")
    assert notebook.kernel_eval("(type(x).__name__, x.tolist(), x_ptr._ref.released)") == \
        "('Tensor', [1.0, 2.0, 3.0], True)"
    world.screenshot(path=str(artifacts / "world-after-get.png"))

    # --- the keyboard alone: Tab to a button, Enter opens the menu, arrows pick, Enter sends -----
    lx_row = me_lane.locator(".syft-obj[data-names='lx']")
    lx_row.locator("[data-action=send]").focus()
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.dataset.worker") == "bob"
    page.keyboard.press("ArrowDown")
    assert page.evaluate("() => document.activeElement.dataset.worker") == "alice"
    page.keyboard.press("Enter")
    me_lane.locator(".syft-obj[data-names='lx_ptr']").wait_for()
    expect(world.locator(".syft-status")).to_have_text("lx_ptr = lx.send(alice)")
    assert notebook.kernel_eval("lx_ptr.location.id, type(lx_ptr.location.objects[lx_ptr.id_at_location]).__name__") \
        == "('alice', 'LoggingTensor')"
    lx_row.locator("[data-action=send]").focus()
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")  # closes the menu, focus back on its button
    expect(lx_row.locator(".syft-menu")).to_have_count(0)
    assert page.evaluate("() => document.activeElement.dataset.action") == "send"

    # --- a failed action shows its error and changes nothing -------------------------------------
    # p's object disappears from bob behind the view's back: Get fails with the worker's error
    assert notebook.kernel_eval("bob.core.objects.pop(p.id_at_location) is not None") == "True"
    p_row = me_lane.locator(".syft-obj[data-names='p']")
    p_row.locator("[data-action=get]").click()
    status = world.locator(".syft-status.syft-error")
    status.wait_for()
    assert "holds no object" in status.inner_text()
    assert notebook.kernel_eval("type(p).__name__, p.location.id") == "('PointerTensor', 'bob')"
    # a closed worker stays as a greyed lane while a pointer (lx_ptr) still points there
    notebook.kernel_eval("alice.close()")
    page.wait_for_selector(".syft-lane[data-worker=alice].syft-lane-down")
    world.screenshot(path=str(artifacts / "world-after-error.png"))



PLAN_CELLS = [SETUP, """\
@sy.plan
def layer(x, w):
    return ((x * 2) @ w).relu() + 1

layer(torch.ones(2, 3), torch.ones(3, 4))
layer""", "sy.inspect()"]


def test_plan_view_send_it_and_dark_theme(open_notebook, artifacts):
    nb = open_notebook("plan.ipynb", PLAN_CELLS)
    page = nb.page
    out = nb.output(1)
    out.locator(".syft-plan-graph").wait_for()
    n_nodes = int(nb.kernel_eval("len(sy.chain(layer).nodes[0]['graph']['nodes'])"))
    nodes = out.locator(".syft-plan-node")
    assert nodes.count() == n_nodes
    roles = [g.get_attribute("data-role") for g in nodes.all()]
    assert roles.count("input") == 2 and roles.count("output") == 1 and roles.count("op") == 4
    labels = {t.text_content() for t in out.locator(".syft-plan-label").all()}
    assert {"x", "w", "mm", "relu"} <= labels
    assert "[2, 4]" in {t.text_content() for t in out.locator(".syft-plan-edge-label").all()}
    assert out.locator(".syft-plan-edge").count() == int(nb.kernel_eval("len(sy.chain(layer).nodes[0]['graph']['edges'])"))
    # the layout puts every edge downwards (dagre, top to bottom)
    boxes = {g.get_attribute("data-id"): g.bounding_box() for g in nodes.all()}
    edges = ast.literal_eval(nb.kernel_eval("[(e['from'], e['to']) for e in sy.chain(layer).nodes[0]['graph']['edges']]"))
    for a, b in edges:
        assert boxes[a]["y"] < boxes[b]["y"], (a, b)
    assert "not sent to any worker" in out.locator(".syft-plan-sent").inner_text()
    out.screenshot(path=str(artifacts / "plan-view.png"))

    # Send the plan to bob from its view: it is marked as sent, and bob's lane holds it
    out.locator(".syft-plan-head [data-action=send]").click()
    out.locator(".syft-menu-item[data-worker=bob]").click()
    out.locator(".syft-plan-sent [data-worker=bob]").wait_for()
    # the plan's "sent" list and the action's reply are two messages: the status follows its reply
    expect(out.locator(".syft-status")).to_have_text("layer_ptr = layer.send(bob)")
    assert nb.kernel_eval("type(layer_ptr).__name__, layer_ptr.location.id") == "('PlanPointer', 'bob')"
    world = nb.output(2)
    world.locator(".syft-lane[data-worker=bob] .syft-obj[data-kind=plan]").wait_for()
    world.scroll_into_view_if_needed()
    expect(world.locator(".syft-arrow")).to_have_count(1)  # layer_ptr -> the plan on bob
    out.screenshot(path=str(artifacts / "plan-view-sent.png"))

    # dark theme: the same views in JupyterLab Dark's colours
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    bg = _wait_for_dark(page, ".syft-lane-head")  # from the theme's variables, once its CSS is in
    assert sum(_rgb(bg)) < 3 * 110, bg
    out.screenshot(path=str(artifacts / "plan-view-dark.png"))
    world.screenshot(path=str(artifacts / "world-dark.png"))
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")


def _wait_for_dark(page, selector: str, timeout: float = 30) -> str:
    """The computed background of ``selector`` once it is dark (or the last one seen)."""
    deadline = time.monotonic() + timeout
    while True:
        bg = page.evaluate("(s) => getComputedStyle(document.querySelector(s)).backgroundColor", selector)
        if sum(_rgb(bg)) < 3 * 110 or time.monotonic() > deadline:
            return bg
        page.wait_for_timeout(100)


def _rgb(css: str) -> tuple:
    """0-255 channels of a computed colour: rgb(r, g, b) or color(srgb r g b) (from color-mix)."""
    inner = css[css.index("(") + 1:css.index(")")]
    if inner.startswith("srgb"):
        return tuple(round(float(v) * 255) for v in inner.split()[1:4])
    return tuple(int(float(v)) for v in inner.replace("/", ",").split(",")[:3])
