"""Where widgets cannot run: a notebook executed without widget state and exported to HTML
with nbconvert shows the static SVG of each syft output (text/html); plain tensors keep
torch's text."""
import nbclient
import nbformat
import pytest
from nbconvert import HTMLExporter

pytestmark = pytest.mark.slow


def test_nbconvert_html_shows_the_static_svgs(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in [
        "import torch, syft_lab as sy\nsy.hook()\nbob = sy.VirtualWorker('bob')\nx = torch.ones(3)\n"
        "p = sy.LoggingTensor(x).send(bob)",
        "p", "sy.world()", "x"]]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=False,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    # a syft view is two outputs: its picture, then the widget (display.py); a tensor one
    (p_pic, p_out), (world_pic, world_out), (x_out,) = ([o["data"] for o in c.outputs] for c in nb.cells[1:])
    assert set(p_pic) == set(world_pic) == {"text/html"} and 'class="syft-lab-handout"' in p_pic["text/html"]
    assert {"application/vnd.jupyter.widget-view+json", "text/plain"} <= set(p_out) and "text/html" not in p_out
    assert p_out["text/plain"].startswith("[PointerTensor | me:")
    assert "bob (virtual" in world_out["text/plain"]
    assert set(x_out) == {"text/plain"} and x_out["text/plain"] == "tensor([1., 1., 1.])"
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert html.count('class="syft-lab-static"') == 2
    assert "on bob" in html and "LoggingTensor" in html
