"""Narrow lanes keep their buttons whole and clickable (issue 18): the Syft sidebar lays its
lanes side by side at 240 px (docs/images/sidebar.png cut the Move… button of a pointer row);
the notebook's world view in a narrow window does the same. What gives way is the text of a
row (its tooltip keeps all of it), never a button. Screenshots go to test-artifacts/."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect
from lab_steps import widen_sidebar

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = ["""\
import torch
import syft_lab as sy
sy.hook()
bob = sy.VirtualWorker("bob")
alice = sy.VirtualWorker("alice")
a_rather_long_pointer_name = torch.ones(2, 3).tag("#data", "#train").send(bob)
w = torch.ones(2, 2).send(alice)
x = torch.tensor([1., 2., 3.])""", "sy.inspect()"]

# Every button of every row: whole inside its row and its lane, and the topmost element at its
# centre (nothing covers it, nothing clips it).
CUT_BUTTONS = """(root) => {
  const bad = [];
  let n = 0;
  for (const b of root.querySelectorAll('.syft-lane .syft-obj button[data-action]')) {
    n++;
    const r = b.getBoundingClientRect();
    const lane = b.closest('.syft-lane-body').getBoundingClientRect();
    const row = b.closest('.syft-obj').getBoundingClientRect();
    const inside = r.left >= row.left - 0.5 && r.right <= row.right + 0.5 && r.left >= lane.left - 0.5
      && r.right <= lane.right + 0.5 && r.width > 0;
    const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (!inside || !(top === b || b.contains(top)))
      bad.push(b.getAttribute('aria-label') + ' ' + JSON.stringify([r.left, r.right, lane.right]));
  }
  return {buttons: n, bad};
}"""


def _lane_widths(root_handle, page):
    return page.evaluate("(r) => [...r.querySelectorAll('.syft-lane')].map((l) => l.getBoundingClientRect().width)",
                         root_handle)


def show_panel(page):
    page.keyboard.press("Control+Shift+C")
    box = page.locator(".lm-CommandPalette-input")
    box.wait_for()
    box.fill("Syft: Show panel")
    page.locator(".lm-CommandPalette-item", has_text="Syft: Show panel").first.wait_for()
    page.keyboard.press("Enter")
    panel = page.locator("#syft-lab-sidebar")
    expect(panel).to_be_visible()
    return panel


def test_the_sidebars_narrow_lanes_keep_their_buttons_whole(open_notebook, artifacts):
    nb = open_notebook("narrow_sidebar.ipynb", CELLS[:1])
    page = nb.page
    panel = show_panel(page)
    expect(panel).to_have_attribute("data-state", "connected", timeout=60_000)
    page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
    widen_sidebar(page, 840)  # three lanes side by side, as in docs/images/sidebar.png
    page.wait_for_function("() => document.querySelectorAll('#syft-lab-sidebar .syft-arrow').length === 2")
    widths = _lane_widths(panel.element_handle(), page)
    assert len(widths) == 3 and max(widths) < 300, widths  # narrow lanes
    result = page.evaluate(CUT_BUTTONS, panel.element_handle())
    assert result["buttons"] >= 6 and result["bad"] == [], result
    # a row's target chip stays whole too; what gives way is the text, kept in the tooltip
    row = panel.locator(".syft-lane[data-worker='me'] .syft-obj[data-names='a_rather_long_pointer_name']")
    assert page.evaluate("(w) => w.scrollWidth <= w.clientWidth + 1", row.locator(".syft-where").element_handle())
    assert "a_rather_long_pointer_name" in row.locator(".syft-obj-main").get_attribute("title")
    # and the buttons work: Move… opens its menu of workers, inside the view
    row.locator("[data-action=move]").click()
    item = row.locator(".syft-menu-item[data-worker='alice']")
    expect(item).to_be_visible()
    panel.screenshot(path=str(artifacts / "sidebar-narrow-lanes.png"))
    item.click()
    expect(panel.locator(".syft-status")).to_contain_text("a_rather_long_pointer_name.move(alice)")
    assert nb.kernel_eval("a_rather_long_pointer_name.location.id") == "'alice'"


def test_a_narrow_window_keeps_the_world_views_buttons_whole(open_notebook, artifacts):
    nb = open_notebook("narrow_window.ipynb", CELLS)
    page = nb.page
    page.set_viewport_size({"width": 640, "height": 900})
    try:
        out = nb.output(1)
        out.locator(".syft-lane").first.wait_for()
        root = out.locator(".syft-world").element_handle()
        page.wait_for_function("(r) => r.querySelectorAll('.syft-arrow').length === 2", arg=root)
        widths = _lane_widths(root, page)
        assert max(widths) < 260, widths  # a narrow lane
        out.screenshot(path=str(artifacts / "world-narrow-window.png"))
        result = page.evaluate(CUT_BUTTONS, root)
        assert result["buttons"] >= 6 and result["bad"] == [], (result, widths)
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})
