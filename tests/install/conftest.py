"""A user's install: the wheel built from this checkout, pip-installed into a fresh venv that
already holds another supported torch (2.14.1, scripts/venv-with-torch), with no node or npm on
the PATH; a Jupyter server from that venv serves JupyterLab and Notebook 7 to headless Chromium.
Built once per test session (the venv is about a minute once torch's template exists)."""
from __future__ import annotations

import importlib.util
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

import pytest

ROOT = Path(__file__).resolve().parents[2]
OTHER_TORCH = os.environ.get("SYFT_LAB_OTHER_TORCH", "2.14.1")


def _browser_helpers():
    """tests/browser/conftest.py as a module (its name would clash with tests/conftest.py)."""
    sys.path.insert(0, str(ROOT / "tests" / "browser"))  # its own imports (venv_kernel is in tests/)
    spec = importlib.util.spec_from_file_location("browser_conftest", ROOT / "tests" / "browser" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


browser_conftest = _browser_helpers()
artifacts = browser_conftest.artifacts


@pytest.fixture(scope="session")
def other_torch() -> str:
    """The torch release the user's venv holds: another supported one than the pinned 2.13.0."""
    return OTHER_TORCH


def _run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> Path:
    """`python -m build` of this checkout: an sdist, and the wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], timeout=600)
    return out


class UserVenv:
    """A venv as a user has it: ``bin``, ``python``, ``env`` (PATH without node or npm)."""

    def __init__(self, path: Path, nodeless_bin: Path):
        self.path, self.bin, self.python = path, path / "bin", path / "bin" / "python"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NODE_PATH") and not k.startswith("JUPYTER")}
        self.env["PATH"] = f"{self.bin}{os.pathsep}{nodeless_bin}"

    def run(self, *args, **kw):
        return _run([str(a) for a in args], env=self.env, cwd=kw.pop("cwd", self.path), timeout=kw.pop("timeout", 1200), **kw)


def _nodeless_bin(base: Path) -> Path:
    """A directory of the few system tools a Jupyter server and pip may call, without node and npm."""
    d = base / "nodeless-bin"
    d.mkdir()
    for tool in ("sh", "bash", "env", "uname", "git"):
        found = shutil.which(tool)
        if found:
            (d / tool).symlink_to(found)
    return d


@pytest.fixture(scope="session")
def user_venv(tmp_path_factory, dist) -> UserVenv:
    base = tmp_path_factory.mktemp("user")
    path = base / "venv"
    _run([str(ROOT / "scripts" / "venv-with-torch"), OTHER_TORCH, str(path)], timeout=900)
    venv = UserVenv(path, _nodeless_bin(base))
    assert shutil.which("node", path=venv.env["PATH"]) is None and shutil.which("npm", path=venv.env["PATH"]) is None
    # the versions the suite ran with, torch's left out: the user's own stays
    constraints = base / "constraints.txt"
    constraints.write_text("".join(line for line in (ROOT / "constraints.txt").read_text().splitlines(True)
                                   if not line.lower().startswith("torch==")))
    wheel = next(dist.glob("syft_lab-*.whl"))
    venv.install_output = venv.run(venv.python, "-m", "pip", "install", "--no-compile", "--disable-pip-version-check",
                                   "-c", constraints, f"{wheel}[notebook]").stdout
    return venv


class Server:
    def __init__(self, url, token, root, proc, log):
        self.url, self.token, self.root, self.proc, self.log = url, token, root, proc, log

    def api(self, path: str):
        req = urllib.request.Request(f"{self.url}{path}", headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())


class FrontEnd:
    """What NotebookPage (tests/browser/conftest.py) needs of a server: the URL of a notebook, in
    JupyterLab (/lab/tree/...) or Notebook 7 (/notebooks/...)."""

    def __init__(self, server: Server, kind: str):
        self.server, self.kind, self.root = server, kind, server.root

    def open_url(self, path: str) -> str:
        where = "lab/tree" if self.kind == "lab" else "notebooks"
        return f"{self.server.url}/{where}/{path}?reset&token={self.server.token}"


@pytest.fixture(scope="session")
def user_server(tmp_path_factory, user_venv):
    """`jupyter lab` from the user's venv (Notebook 7's pages are served by the same server), with
    its own config, data and runtime directories; kernels are the venv's Python."""
    base = tmp_path_factory.mktemp("user-server")
    dirs = {k: base / k for k in ("config", "runtime", "settings", "workspaces", "root", "data")}
    for d in dirs.values():
        d.mkdir()
    (dirs["config"] / "labconfig").mkdir()
    (dirs["config"] / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = dict(user_venv.env, JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
               JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]), JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
               JUPYTER_DATA_DIR=str(dirs["data"]), JUPYTER_PLATFORM_DIRS="1")
    cmd = [str(user_venv.bin / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={dirs['root']}",
           "--LabApp.expose_app_in_browser=True", "--JupyterNotebookApp.expose_app_in_browser=True",
           "--ServerApp.port_retries=0", "--LabServerApp.workspaces_dir=" + str(dirs["workspaces"]), "--allow-root"]
    log_path = base / "server.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, cwd=dirs["root"], env=env, stdout=log, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", token, dirs["root"], proc, log_path)
    deadline = time.monotonic() + 90
    while True:
        if proc.poll() is not None:
            pytest.fail("jupyter lab (the user's venv) exited:\n" + log_path.read_text()[-3000:])
        try:
            server.api("/api/status")
            break
        except Exception:
            if time.monotonic() > deadline:
                proc.terminate()
                pytest.fail("jupyter lab (the user's venv) did not start in 90 s:\n" + log_path.read_text()[-3000:])
            time.sleep(0.3)
    yield server
    for s in server.api("/api/sessions"):  # each test's kernels end with the server at the latest
        try:
            req = urllib.request.Request(f"{server.url}/api/sessions/{s['id']}", method="DELETE",
                                         headers={"Authorization": f"token {token}"})
            urllib.request.urlopen(req, timeout=5)
        except Exception:
            pass
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture
def open_in(user_server, browser):
    """open_in(kind, name, cells) -> a NotebookPage of the notebook in JupyterLab ("lab") or
    Notebook 7 ("notebook"), its cells run; its page closes and its kernel shuts down at the end."""
    pages = []

    def open_(kind: str, name: str, cells: list[str]):
        browser_conftest.write_notebook(user_server.root / name, cells)
        page = browser.new_page()
        pages.append(page)
        nb = browser_conftest.NotebookPage(page, FrontEnd(user_server, kind), name).open()
        nb.run_all()
        return nb

    yield open_
    for page in pages:
        page.close()
    for s in user_server.api("/api/sessions"):  # no kernel outlives its test
        req = urllib.request.Request(f"{user_server.url}/api/sessions/{s['id']}", method="DELETE",
                                     headers={"Authorization": f"token {user_server.token}"})
        urllib.request.urlopen(req, timeout=10)
