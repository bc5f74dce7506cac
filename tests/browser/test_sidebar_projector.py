"""The Syft sidebar on a projector (issue 39.3): at 1280x720 it opens wide enough to read names
(it was 200 px, and every name was cut), and in the large-font mode its rows keep what tells
them apart: two hospitals' pointers differ on screen, each with its index."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from test_sidebar_in_lab import show_panel_from_palette

pytestmark = [pytest.mark.browser]

CELLS = [
    "import torch, syft_lab as sy\nsy.hook()\n"
    "mary, martin = sy.VirtualWorker('st_mary_hospital'), sy.VirtualWorker('st_martin_hospital')\n"
    "data = {w.id: [torch.ones(2).send(w), torch.ones(3).send(w)] for w in (mary, martin)}",
]

# the name labels of the me lane's rows: what shows, whether all of it shows, the whole name
NAMES = """(lane) => [...lane.querySelectorAll('.syft-obj .syft-names')].map((l) => {
  const c = l.querySelector('.syft-cut'); const main = l.closest('.syft-obj-main').getBoundingClientRect();
  const b = l.getBoundingClientRect();
  return {shown: c.textContent, full: c.dataset.full,
          whole: b.width > 0 && b.right <= main.right + 1 && l.scrollWidth <= l.clientWidth + 1};
})"""


def test_the_sidebar_opens_readable_at_1280x720(open_notebook):
    nb = open_notebook("sidebar_projector.ipynb", CELLS, run=False)
    page = nb.page
    page.set_viewport_size({"width": 1280, "height": 720})
    nb.run_all()
    panel = show_panel_from_palette(page)
    expect(panel).to_have_attribute("data-state", "connected", timeout=60_000)
    me = panel.locator(".syft-lane[data-worker='me']")
    expect(me.locator(".syft-obj .syft-names")).to_have_count(4, timeout=60_000)
    assert panel.evaluate("(p) => p.getBoundingClientRect().width") >= 300  # not 200 px
    panel.locator(".syft-big-toggle").click()
    page.wait_for_function("() => document.querySelector('#syft-lab-sidebar .syft-classroom .syft-obj .syft-cut') !== null")
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    names = me.evaluate(NAMES)
    assert len(names) == 4 and all(n["whole"] for n in names), names
    for n in names:
        assert n["shown"].endswith(n["full"][n["full"].rindex("["):]), n  # its index shows
    assert len({n["shown"] for n in names}) == 4, names  # no two rows read alike
