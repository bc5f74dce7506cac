"""Steps the browser tests take in a real JupyterLab page: run one cell, drag the sidebar wider,
keep a README image.

A plain module (not the conftest): test modules import these functions by name."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

README_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def update_readme_image(shot: Path, name: str) -> None:
    """docs/images/<name> is the README's, a tracked file: written from a test's screenshot when
    missing, or rewritten when asked to with SYFT_LAB_UPDATE_SCREENSHOTS=1."""
    docs = README_IMAGES / name
    if not docs.exists() or os.environ.get("SYFT_LAB_UPDATE_SCREENSHOTS") == "1":
        docs.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, docs)


def run_cell(nb, index: int, timeout: int = 120_000):
    """Run code cell ``index`` of the open notebook (as Shift+Enter would) and wait for it and the
    kernel. ``nb`` has the ``page`` it lives in and ``wait_idle(timeout)``."""
    nb.page.evaluate("""async (i) => {
        const panel = window.jupyterapp.shell.currentWidget;
        panel.content.activeCellIndex = i;
        await window.jupyterapp.commands.execute('notebook:run-cell');
    }""", index)
    nb.page.wait_for_function(
        """(i) => { const c = window.jupyterapp.shell.currentWidget.content.widgets[i];
                   return c.model.executionCount !== null
                     && !c.node.querySelector('.jp-InputArea-prompt').textContent.includes('*'); }""",
        arg=index, timeout=timeout)
    nb.wait_idle(timeout=timeout)


def widen_sidebar(page, width: int):
    """Drag the right sidebar's edge (the last split handle of the main area) to ``width`` px."""
    box = page.evaluate("""() => {
        const hs = Array.from(document.querySelectorAll('#jp-main-split-panel > .lm-SplitPanel-handle'))
            .filter(h => !h.classList.contains('lm-mod-hidden') && h.offsetWidth > 0);
        const r = hs[hs.length - 1].getBoundingClientRect();
        return {x: r.x + r.width / 2, y: r.y + r.height / 2};
    }""")
    right = page.evaluate("() => document.getElementById('jp-right-stack').getBoundingClientRect().right")
    page.mouse.move(box["x"], box["y"])
    page.mouse.down()
    page.mouse.move(right - width, box["y"], steps=8)
    page.mouse.up()
