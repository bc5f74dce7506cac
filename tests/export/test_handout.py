"""A handout (issue 39.2): a notebook with every kind of view, executed and exported with the
plain `jupyter nbconvert --to html --execute` (which saves the widget state, so nbconvert
prefers the widget, whose renderer loads from a CDN), opened offline (file://, every network
request refused) in headless Chromium: each view is a visible picture with its names and values.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"  # git-ignored

CELLS = [
    # 0: the workers (a hospital name long enough to be cut in a lane)
    "import torch, syft_lab as sy\nsy.hook()\n"
    "bob, alice, carol = sy.VirtualWorker('bob'), sy.VirtualWorker('alice'), sy.VirtualWorker('carol')\n"
    "data = {'st_mary_hospital': [torch.tensor([1., 2.]).send(bob), torch.tensor([3., 4.]).send(bob)]}",
    # 1: a chain view (a local LoggingTensor: its values are shown)
    "lx = sy.LoggingTensor(torch.tensor([1.5, 2.25]))\nlx",
    # 2: a chain view of a pointer
    "p = torch.tensor([7., 8.]).send(alice)\np",
    # 3: the world view, names and container paths
    "sy.world()",
    # 4: a plan's graph
    "@sy.plan\ndef double_abs(x):\n    return 2 * x.abs()\n"
    "double_abs.build(torch.tensor([1., -2.]))\ndouble_abs",
    # 5: a worker's lane with its record (the ledger view)
    "bob",
    # 6: the reconstruction lesson of a shared value
    "sx = torch.tensor([3., 5.]).fix_precision().share(alice, bob, crypto_provider=carol)\nsy.explain(sx)",
    # 7: the workers are closed at the end (nothing left running)
    "for w in (bob, alice, carol):\n    w.close()",
]


def _export(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "handout.ipynb"
    nbformat.write(nb, str(path))
    jupyter = Path(sys.executable).parent / "jupyter"
    # this checkout's syft_lab, whichever one the venv installed
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    run = subprocess.run([str(jupyter), "nbconvert", "--to", "html", "--execute", str(path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return tmp_path / "handout.html"


def _offline_page(browser, html: Path):
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 720})
    refused = []

    def refuse(route):
        refused.append(route.request.url)
        route.abort()

    page.route("http://**/*", refuse)
    page.route("https://**/*", refuse)
    page.goto(html.as_uri(), wait_until="load")
    return page, refused


# The picture of a cell's output: [visible pictures (width, height)], the pictures' text
PICTURES = """(cell) => {
  const pics = [...cell.querySelectorAll('.jp-OutputArea-output svg.syft-lab-static, .jp-OutputArea-output .syft-explain')];
  const seen = pics.filter((p) => { const b = p.getBoundingClientRect();
    return b.width > 40 && b.height > 20 && getComputedStyle(p).visibility !== 'hidden'; });
  return {boxes: seen.map((p) => [Math.round(p.getBoundingClientRect().width), Math.round(p.getBoundingClientRect().height)]),
          text: seen.map((p) => p.textContent).join(' | ')};
}"""

EXPECTED = {  # cell -> what its picture must say
    1: ["LoggingTensor", "1.5", "2.25"],
    2: ["p", "on alice", "float32[2]"],
    3: ["bob (virtual", "alice (virtual", "data['st_mary_hospital'][0]", "data['st_mary_hospital'][1]", "p = "],
    4: ["double_abs", "abs"],
    5: ["bob (virtual", "record", "data['st_mary_hospital'][1]"],
    6: ["Reconstructing sx", "alice: share", "bob: share", "carol none"],
}


def test_an_exported_notebook_shows_every_view_offline(tmp_path, browser):
    html = _export(tmp_path)
    page, refused = _offline_page(browser, html)
    try:
        cells = page.locator(".jp-CodeCell")
        assert cells.count() == len(CELLS)
        for index, words in EXPECTED.items():
            cell = cells.nth(index)
            cell.scroll_into_view_if_needed()
            got = cell.evaluate(PICTURES)
            assert len(got["boxes"]) == 1, f"cell {index}: {got}"  # one picture, not two
            for word in words:
                assert word in got["text"], f"cell {index} does not show {word!r}: {got['text'][:600]}"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "handout-offline.png"), full_page=True)
        assert refused, "the page asked for nothing online: the test would not see a CDN renderer fail"
    finally:
        page.close()
