"""The Syft sidebar (js/lab/) in a real JupyterLab, in headless Chromium: it opens from the
command palette, follows the active notebook, shows the workers, updates after a cell runs
`%syft send x bob`, its Get button acts on the kernel, it reconnects after a kernel restart,
and it says what is wrong when there is no notebook, a kernel that is not Python, or a kernel
where syft_lab cannot be imported. Screenshots go to test-artifacts/; the sidebar's is also
the README's docs/images/sidebar.png (rewritten with SYFT_LAB_UPDATE_SCREENSHOTS=1)."""
from __future__ import annotations

import json
import re
import sys
import time

import nbformat
import pytest
from playwright.sync_api import expect
from lab_steps import run_cell, widen_sidebar, update_readme_image


pytestmark = [pytest.mark.browser, pytest.mark.slow]

PANEL = "#syft-lab-sidebar"

# A kernel that speaks the Jupyter protocol but is not Python (its kernel_info says "text").
ECHO_KERNEL = '''
from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel


class EchoKernel(Kernel):
    implementation = "echo"
    implementation_version = "1.0"
    language = "text"
    language_version = "1.0"
    language_info = {"name": "text", "mimetype": "text/plain", "file_extension": ".txt"}
    banner = "echo"

    async def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False,
                         **kwargs):
        if not silent:
            self.send_response(self.iopub_socket, "stream", {"name": "stdout", "text": code})
        return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}


if __name__ == "__main__":
    IPKernelApp.launch_instance(kernel_class=EchoKernel)
'''

# A Python kernel in which `import syft_lab` fails as it does where it is not installed.
NO_SYFT_LAUNCHER = """\
import sys


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "syft_lab":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, NotInstalled())
from ipykernel import kernelapp
kernelapp.launch_new_instance()
"""


@pytest.fixture(scope="module")
def kernels(lab):
    """Two extra kernelspecs in the test server's data dir: echo (not Python), nosyft."""
    kdir = lab.root.parent / "data" / "kernels"
    (kdir / "echo").mkdir(parents=True, exist_ok=True)
    script = kdir / "echo" / "echo_kernel.py"
    script.write_text(ECHO_KERNEL)
    (kdir / "echo" / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(script), "-f", "{connection_file}"],
        "display_name": "Echo", "language": "text"}))
    (kdir / "nosyft").mkdir(parents=True, exist_ok=True)
    (kdir / "nosyft" / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-c", NO_SYFT_LAUNCHER, "-f", "{connection_file}"],
        "display_name": "Python (no syft_lab)", "language": "python"}))
    return ("echo", "nosyft")


def write(lab, name: str, cells: list[str], kernel: str = "python3", language: str = "python") -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": language}
    nbformat.write(nb, str(lab.root / name))


def show_panel_from_palette(page):
    page.keyboard.press("Control+Shift+C")
    box = page.locator(".lm-CommandPalette-input")
    box.wait_for()
    box.fill("Syft: Show panel")
    item = page.locator(".lm-CommandPalette-item", has_text="Syft: Show panel").first
    item.wait_for()
    page.keyboard.press("Enter")
    panel = page.locator(PANEL)
    expect(panel).to_be_visible()
    return panel


def state(panel, kind: str, timeout=60_000):
    expect(panel).to_have_attribute("data-state", kind, timeout=timeout)


class Notebook:
    """The current notebook of a page (the conftest's NotebookPage opens a page per notebook)."""

    def __init__(self, page):
        self.page = page

    def wait_kernel(self):
        self.page.wait_for_function("() => { const w = window.jupyterapp.shell.currentWidget;"
                                    " return w && w.sessionContext && w.sessionContext.session"
                                    " && w.sessionContext.session.kernel; }", timeout=60_000)
        self.wait_idle()
        return self

    def wait_idle(self, timeout=60_000):
        self.page.wait_for_function(
            "() => { const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;"
            " return k && k.status === 'idle'; }", timeout=timeout)

    def kernel_eval(self, expr: str) -> str:
        """The repr of a Python expression in the notebook's kernel."""
        return self.page.evaluate(
            """async (expr) => {
                const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
                const reply = await k.requestExecute({code: "", silent: true, store_history: false,
                                                      user_expressions: {v: expr}}).done;
                const r = reply.content.user_expressions.v;
                return r.status === 'ok' ? r.data['text/plain'] : 'ERROR: ' + r.ename + ': ' + r.evalue;
            }""", expr)


def open_doc(page, path: str) -> Notebook:
    page.evaluate("(p) => window.jupyterapp.commands.execute('docmanager:open', {path: p})", path)
    page.wait_for_function("(p) => { const w = window.jupyterapp.shell.currentWidget;"
                           " return w && w.context && w.context.path === p; }", arg=path, timeout=60_000)
    return Notebook(page)


def lane(panel, worker):
    return panel.locator(f".syft-lane[data-worker='{worker}']")


def test_panel_follows_a_notebook_send_get_and_restart(lab, browser, artifacts):
    page = browser.new_page()
    try:
        # --- no notebook open ---------------------------------------------------------------------
        page.goto(f"{lab.url}/lab?reset&token={lab.token}")
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined")
        page.locator(".jp-Launcher, .jp-LauncherBody").first.wait_for(timeout=60_000)
        panel = show_panel_from_palette(page)
        state(panel, "no-notebook")
        expect(panel.locator(".syft-lab-message")).to_contain_text("No notebook is open")
        panel.screenshot(path=str(artifacts / "sidebar-no-notebook.png"))

        # --- a notebook: no workers yet -------------------------------------------------------------
        write(lab, "sidebar.ipynb", [
            "import torch\n%load_ext syft_lab\nx = torch.tensor([1., 2., 3.])",
            "%syft worker bob\n%syft worker alice",
            "%syft send x bob",
            "w = torch.ones(2, 2).send(alice)",
            "%load_ext syft_lab\nimport torch\n%syft worker carol\nz = torch.zeros(4).send(carol)",
        ])
        nb = open_doc(page, "sidebar.ipynb").wait_kernel()
        state(panel, "connected")
        expect(panel.locator(".syft-lab-where")).to_contain_text("sidebar.ipynb")
        run_cell(nb, 0)
        expect(panel.locator(".syft-lab-hint")).to_be_visible()
        expect(panel.locator(".syft-lab-hint")).to_contain_text("No workers yet")
        expect(lane(panel, "me").locator(".syft-obj[data-names='x']")).to_have_count(1)
        panel.screenshot(path=str(artifacts / "sidebar-no-workers.png"))

        # --- the workers, then a cell runs `%syft send x bob` ---------------------------------------
        run_cell(nb, 1)
        expect(lane(panel, "bob")).to_be_visible()
        expect(lane(panel, "alice")).to_be_visible()
        expect(panel.locator(".syft-lab-hint")).to_be_hidden()
        expect(lane(panel, "bob").locator(".syft-obj")).to_have_count(0)
        run_cell(nb, 2)
        ptr = lane(panel, "me").locator(".syft-obj[data-names='x_ptr']")
        expect(ptr).to_have_count(1)
        expect(ptr).to_contain_text("→ bob")
        expect(lane(panel, "bob").locator(".syft-obj")).to_have_count(1)
        run_cell(nb, 3)
        expect(lane(panel, "alice").locator(".syft-obj")).to_have_count(1)
        # a narrow sidebar stacks the lanes; the pointer rows say where they point
        expect(panel).to_have_class(re.compile(r"syft-lab-stacked"))
        expect(lane(panel, "me").locator(".syft-obj[data-names='w']")).to_contain_text("→ alice")
        panel.screenshot(path=str(artifacts / "sidebar-narrow.png"))
        # widened (the user drags the sidebar's edge), the lanes go side by side, with arrows
        page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
        widen_sidebar(page, 840)
        expect(panel).not_to_have_class(re.compile(r"syft-lab-stacked"))
        page.wait_for_function("() => document.querySelectorAll('#syft-lab-sidebar .syft-arrow').length === 2")
        page.screenshot(path=str(artifacts / "sidebar.png"))
        update_readme_image(artifacts / "sidebar.png", "sidebar.png")

        # --- its Get button acts on the kernel -------------------------------------------------------
        ptr.locator("button[data-action='get']").click()
        expect(panel.locator(".syft-status")).to_have_text("x = x_ptr.get()")
        expect(lane(panel, "bob").locator(".syft-obj")).to_have_count(0)
        gone = lane(panel, "me").locator(".syft-obj[data-names='x_ptr']")  # still bound: a gone row
        expect(gone).to_have_class(re.compile(r"syft-obj-gone"))
        expect(gone.locator("button[data-action]")).to_have_count(0)
        assert nb.kernel_eval("(x.tolist(), len(bob.objects))") == "([1.0, 2.0, 3.0], 0)"

        # --- a failed action says why, and changes nothing ------------------------------------------
        w_row = lane(panel, "me").locator(".syft-obj[data-names='w']")
        nb.kernel_eval("alice.objects.clear()")  # the object behind w goes away behind the view's back
        w_row.locator("button[data-action='get']").click()
        expect(panel.locator(".syft-status")).to_contain_text("Error:")
        assert nb.kernel_eval("type(w).__name__") == "'PointerTensor'"

        # --- a kernel restart: the panel reconnects, and follows the new kernel ------------------------
        rev_before = panel.get_attribute("data-rev")
        started = time.monotonic()
        page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
        state(panel, "connected")
        # how long a class waits (a kernel restart, then import syft_lab): recorded, not asserted
        (artifacts / "sidebar-reconnect-seconds.txt").write_text(f"{time.monotonic() - started:.2f}\n")
        expect(lane(panel, "bob")).to_have_count(0)  # a fresh kernel: no workers
        expect(panel.locator(".syft-lab-hint")).to_be_visible()
        assert panel.get_attribute("data-rev") != rev_before
        run_cell(nb, 4)
        expect(lane(panel, "carol").locator(".syft-obj")).to_have_count(1)
        expect(lane(panel, "me").locator(".syft-obj[data-names='z']")).to_contain_text("→ carol")
        panel.screenshot(path=str(artifacts / "sidebar-after-restart.png"))
    finally:
        page.close()


def test_panel_states_for_other_kernels_and_switching_notebooks(lab, browser, kernels, artifacts):
    write(lab, "with_syft.ipynb", ["%load_ext syft_lab\n%syft worker dave"])
    write(lab, "echo.ipynb", ["hello"], kernel="echo", language="text")
    write(lab, "nosyft.ipynb", ["1 + 1"], kernel="nosyft")
    page = browser.new_page()
    try:
        page.goto(lab.open_url("with_syft.ipynb"))
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget")
        nb = Notebook(page).wait_kernel()
        panel = show_panel_from_palette(page)
        state(panel, "connected")
        run_cell(nb, 0)
        expect(lane(panel, "dave")).to_be_visible()

        # --- a kernel that is not Python ---------------------------------------------------------------
        open_doc(page, "echo.ipynb")
        state(panel, "not-python")
        expect(panel.locator(".syft-lab-message")).to_contain_text("is a text kernel")
        expect(panel.locator(".syft-lab-world")).to_be_hidden()
        panel.screenshot(path=str(artifacts / "sidebar-not-python.png"))

        # --- a Python kernel without syft_lab -------------------------------------------------------
        open_doc(page, "nosyft.ipynb")
        state(panel, "not-importable")
        expect(panel.locator(".syft-lab-message")).to_contain_text(
            "syft_lab is not importable in this kernel (Python (no syft_lab)): "
            "ModuleNotFoundError: No module named 'syft_lab'")
        panel.screenshot(path=str(artifacts / "sidebar-not-importable.png"))

        # --- back to the first notebook: its world again ----------------------------------------------
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="with_syft.ipynb").click()
        state(panel, "connected")
        expect(lane(panel, "dave")).to_be_visible()
        expect(panel.locator(".syft-lab-where")).to_contain_text("with_syft.ipynb")

        # --- the notebook's kernel changed: the panel follows to the new kernel ------------------------
        change = "(k) => window.jupyterapp.shell.currentWidget.sessionContext.changeKernel({name: k})"
        page.evaluate(change, "nosyft")
        state(panel, "not-importable")
        page.evaluate(change, "python3")
        state(panel, "connected")
        expect(panel.locator(".syft-lab-hint")).to_be_visible()  # a new kernel: no workers yet
        expect(lane(panel, "dave")).to_have_count(0)

        # --- every notebook closed ------------------------------------------------------------------
        page.evaluate("async () => { await window.jupyterapp.commands.execute('docmanager:save-all');"
                      " await window.jupyterapp.commands.execute('application:close-all'); }")
        state(panel, "no-notebook")
    finally:
        page.close()
