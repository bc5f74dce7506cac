"""A real JupyterLab for the browser tests, driven by Playwright with the system Chromium.

The server runs on a free 127.0.0.1 port with its own config, runtime, settings and
workspace directories and a random token; the browser is /usr/bin/chromium (never
`playwright install`). Screenshots go to test-artifacts/ (git-ignored).
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import sync_playwright

from venv_kernel import install_kernelspec

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    def __init__(self, url: str, token: str, root: Path, proc):
        self.url, self.token, self.root, self.proc = url, token, root, proc

    def api(self, path: str, method: str = "GET", timeout: float = 5):
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
            return json.loads(body) if body else None

    def kernel_ids(self) -> set[str]:
        return {k["id"] for k in self.api("/api/kernels")}

    def shut_down_kernels(self, keep: set[str] = frozenset()) -> None:
        """End every notebook session and kernel but ``keep``'s, through the server's REST API
        (the server waits for each kernel to exit), as closing a notebook and its kernel does."""
        for s in self.api("/api/sessions"):
            if s.get("kernel", {}).get("id") not in keep:
                self.api(f"/api/sessions/{s['id']}", method="DELETE", timeout=60)
        for kid in self.kernel_ids() - set(keep):  # a kernel without a session (a restart's leftover)
            self.api(f"/api/kernels/{kid}", method="DELETE", timeout=60)

    def open_url(self, path: str) -> str:
        return f"{self.url}/lab/tree/{path}?reset&token={self.token}"


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup installs the Debian chromium package")
    base = tmp_path_factory.mktemp("lab")
    dirs = {k: base / k for k in ("config", "runtime", "settings", "workspaces", "root", "data")}
    for d in dirs.values():
        d.mkdir()
    (dirs["config"] / "labconfig").mkdir()
    (dirs["config"] / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
               JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]), JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
               JUPYTER_DATA_DIR=str(dirs["data"]), PYTHONPATH=str(ROOT), JUPYTER_PLATFORM_DIRS="1")
    env.pop("JUPYTER_PATH", None)
    install_kernelspec(dirs["data"])  # notebooks' "python3" is this venv's, not the user's
    cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={dirs['root']}",
           "--LabApp.expose_app_in_browser=True", "--ServerApp.port_retries=0",
           "--LabServerApp.workspaces_dir=" + str(dirs["workspaces"]), "--allow-root"]
    log = open(base / "lab.log", "w")
    proc = subprocess.Popen(cmd, cwd=dirs["root"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    lab = Lab(url, token, dirs["root"], proc)
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            pytest.fail("jupyter lab exited:\n" + (base / "lab.log").read_text()[-3000:])
        try:
            lab.api("/api/status")
            break
        except Exception:
            if time.monotonic() > deadline:
                proc.terminate()
                pytest.fail("jupyter lab did not start in 60 s:\n" + (base / "lab.log").read_text()[-3000:])
            time.sleep(0.3)
    yield lab
    try:
        lab.shut_down_kernels()
    except Exception:  # the server is stopped next anyway
        pass
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture(autouse=True)
def shut_down_the_tests_kernels(request):
    """The kernels a test's notebooks started are shut down when it ends (its pages are closed
    first: fixtures end in reverse order), so no more than one test's kernels are alive at once
    (tests/kernel_census.py counts them)."""
    if "lab" not in request.fixturenames:
        yield
        return
    lab = request.getfixturevalue("lab")
    before = lab.kernel_ids()
    yield
    lab.shut_down_kernels(keep=before)
    left = lab.kernel_ids() - before
    assert not left, f"kernels still running after the test's notebooks were shut down: {left}"


# (the session's headless Chromium, ``browser``, is tests/conftest.py's: one Playwright per process)


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def write_notebook(path: Path, cells: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


class NotebookPage:
    """A notebook open in JupyterLab, with helpers to run cells and ask the kernel."""

    def __init__(self, page, lab: Lab, name: str):
        self.page, self.lab, self.name = page, lab, name

    def open(self):
        self.page.goto(self.lab.open_url(self.name))
        self.page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                                    "&& window.jupyterapp.shell.currentWidget.sessionContext "
                                    "&& window.jupyterapp.shell.currentWidget.sessionContext.session "
                                    "&& window.jupyterapp.shell.currentWidget.sessionContext.session.kernel",
                                    timeout=60_000)
        self.wait_idle()
        return self

    def wait_idle(self, timeout=60_000):
        self.page.wait_for_function(
            "() => { const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;"
            " return k && k.status === 'idle'; }", timeout=timeout)

    def run_all(self):
        self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        self.page.wait_for_function(
            "() => { const nb = window.jupyterapp.shell.currentWidget.content;"
            " return nb.widgets.every(c => c.model.type !== 'code' || (c.model.executionCount !== null"
            " && !c.node.querySelector('.jp-InputArea-prompt').textContent.includes('*'))); }",
            timeout=120_000)
        self.wait_idle()

    def kernel_eval(self, expr: str) -> str:
        """The repr of a Python expression in the notebook's kernel (a silent execute)."""
        return self.page.evaluate(
            """async (expr) => {
                const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
                const fut = k.requestExecute({code: "", silent: false, store_history: false,
                                               user_expressions: {v: expr}});
                const reply = await fut.done;
                const r = reply.content.user_expressions.v;
                if (r.status !== 'ok') return 'ERROR: ' + r.ename + ': ' + r.evalue;
                return r.data['text/plain'];
            }""", expr)

    def output(self, index: int):
        """The output area of code cell ``index``."""
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea")


@pytest.fixture
def open_notebook(lab, browser):
    """open_notebook(name, cells, run=True) -> a NotebookPage with its cells run."""
    pages = []

    def open_(name: str, cells: list[str], run: bool = True) -> NotebookPage:
        write_notebook(lab.root / name, cells)
        page = browser.new_page()
        pages.append(page)
        nb = NotebookPage(page, lab, name).open()
        if run:
            nb.run_all()
        return nb

    yield open_
    for page in pages:
        page.close()
