"""The handout's picture in JupyterLab (issue 39.2): each view's static picture is an output of
its own, for pages where no widget runs; where the widget drew, the picture beside it is hidden
(one view on screen, not a view and its picture), and it is still in the notebook."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser]

CELLS = [
    "import torch, syft_lab as sy\nsy.hook()\nbob = sy.VirtualWorker('bob')\np = torch.tensor([1., 2.]).send(bob)",
    "p",
    "sy.world()",
    "bob.close()",
]

# [handout pictures in the output area, of them visible, live views visible]
SEEN = """(area) => {
  const visible = (e) => { const b = e.getBoundingClientRect(); return b.width > 0 && b.height > 0; };
  const pics = [...area.querySelectorAll('.syft-lab-handout')];
  return [pics.length, pics.filter(visible).length, [...area.querySelectorAll('.syft-root')].filter(visible).length];
}"""


def test_a_live_view_hides_its_handout_picture(open_notebook):
    nb = open_notebook("handout_in_lab.ipynb", CELLS)
    for index, view in ((1, ".syft-chain-block"), (2, ".syft-lane[data-worker=bob]")):
        out = nb.output(index)
        out.locator(view).first.wait_for()
        nb.page.wait_for_function(f"(a) => ({SEEN})(a)[1] === 0", arg=out.element_handle())
        assert out.evaluate(SEEN) == [1, 0, 1], index
