"""`pip install syft-lab` as a user does it: the wheel (with the prebuilt JupyterLab extension and
widget bundle inside) installs into a venv that already holds another supported torch, without
node or npm, keeps that torch, and works in JupyterLab and Notebook 7: a chain view renders and
its Get button acts on the kernel; in Notebook 7 the world view and the Syft sidebar too.
Screenshots go to test-artifacts/."""
from __future__ import annotations

import re
import tarfile
import zipfile

import pytest
from playwright.sync_api import expect

# the first test to ask for the user's venv waits for it: the build (~20 s on a quiet machine) and
# pip's install of the wheel and its dependencies (~1 min quiet; over 5 min seen on a machine
# shared by several suites), and once per machine torch's template (~2 min)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

CELLS = [
    "import torch\nimport syft_lab as sy\nsy.hook()\nbob = sy.VirtualWorker('bob')\n"
    "x = torch.tensor([1., 2., 3.])\np = x.send(bob)",
    "sy.show(p)",
    "sy.inspect()",
]


def test_the_wheel_and_sdist_carry_the_prebuilt_front_end(dist):
    wheel = zipfile.ZipFile(next(dist.glob("syft_lab-*.whl")))
    names = wheel.namelist()
    assert "syft_lab/widget/static/widget.js" in names
    share = [n for n in names if "/data/share/jupyter/labextensions/syft-lab/" in n]
    assert any(n.endswith("/package.json") for n in share) and any(n.endswith("/install.json") for n in share)
    assert any(re.search(r"/static/remoteEntry\.[0-9a-f]+\.js$", n) for n in share)
    sdist = tarfile.open(next(dist.glob("syft_lab-*.tar.gz"))).getnames()
    assert any(n.endswith("syft_lab/labextension/package.json") for n in sdist)
    assert any(n.endswith("syft_lab/widget/static/widget.js") for n in sdist)


def test_installing_keeps_the_users_torch_and_enables_the_extension(user_venv, other_torch):
    version = user_venv.run(user_venv.python, "-c",
                            "import importlib.metadata as m; print(m.version('torch'))").stdout.strip()
    assert version.split("+")[0] == other_torch
    # torch's files are still the ones the venv was made with (hard links to its template):
    # pip neither reinstalled nor replaced it
    installed = " ".join(re.findall(r"Successfully installed (.*)", user_venv.install_output)).split()
    assert "syft-lab-0.1.0" in installed and not [p for p in installed if p.startswith("torch-")], installed
    init = next(user_venv.path.glob("lib/python3*/site-packages/torch/__init__.py"))
    assert init.stat().st_nlink >= 2
    listed = user_venv.run(user_venv.bin / "jupyter", "labextension", "list")
    out = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)  # its colours
    assert re.search(r"syft-lab v\S+ enabled\s+\S*OK", out), out
    where = user_venv.run(user_venv.python, "-c", "import syft_lab; print(syft_lab.__file__)").stdout
    assert where.startswith(str(user_venv.path)), where


def _chain_view_and_get(nb, artifacts, name, other_torch):
    """Cell 1's chain view of p (a pointer on bob); its Get button brings the value back."""
    out = nb.output(1)
    out.locator(".syft-chain-block").wait_for()
    assert [b.get_attribute("data-kind") for b in out.locator(".syft-box").all()] == ["pointer", "tensor"]
    expect(out.locator(".syft-remote")).to_have_attribute("data-worker", "bob")
    out.screenshot(path=str(artifacts / f"{name}-chain-view.png"))
    out.locator(".syft-box-pointer [data-action=get]").first.click()
    expect(out.locator(".syft-status.syft-ok")).to_contain_text(".get()")
    assert nb.kernel_eval("(type(x).__name__, len(bob.objects))") == "('Tensor', 0)"
    # the kernel runs the wheel's syft_lab on the user's torch
    assert nb.kernel_eval("torch.__version__.split('+')[0]") == repr(other_torch)
    assert "/site-packages/syft_lab/" in nb.kernel_eval("sy.__file__")


@pytest.mark.browser
def test_jupyterlab_from_the_wheel_renders_a_chain_view_and_runs_a_button(open_in, artifacts, other_torch):
    nb = open_in("lab", "in_lab.ipynb", CELLS)
    assert nb.page.evaluate("() => window.jupyterapp.name") == "JupyterLab"
    _chain_view_and_get(nb, artifacts, "wheel-lab", other_torch)


@pytest.mark.browser
def test_notebook_7_renders_the_widget_runs_its_buttons_and_shows_the_sidebar(open_in, artifacts, other_torch):
    nb = open_in("notebook", "in_notebook7.ipynb", CELLS)
    page = nb.page
    assert page.url.split("?")[0].endswith("/notebooks/in_notebook7.ipynb")
    assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"  # Notebook 7's app, not Lab's
    # the world view: me and bob, the pointer's arrow
    world = nb.output(2)
    world.locator(".syft-lane[data-worker=bob]").wait_for()
    assert [lane.get_attribute("data-worker") for lane in world.locator(".syft-lane").all()][:2] == ["me", "bob"]
    expect(world.locator(".syft-lane[data-worker=bob] .syft-obj")).to_have_count(1)
    # the Syft sidebar, in Notebook 7's right area (the same extension, from the wheel)
    page.evaluate("() => window.jupyterapp.commands.execute('syft-lab:show-panel')")
    panel = page.locator("#syft-lab-sidebar")
    expect(panel).to_be_visible()
    expect(panel).to_have_attribute("data-state", "connected", timeout=60_000)
    expect(panel.locator(".syft-lane[data-worker='bob'] .syft-obj")).to_have_count(1)
    page.screenshot(path=str(artifacts / "notebook7.png"))
    # a button in the chain view acts on the kernel; the sidebar follows
    _chain_view_and_get(nb, artifacts, "notebook7", other_torch)
    expect(panel.locator(".syft-lane[data-worker='bob'] .syft-obj")).to_have_count(0)
    expect(world.locator(".syft-lane[data-worker=bob] .syft-obj")).to_have_count(0)
