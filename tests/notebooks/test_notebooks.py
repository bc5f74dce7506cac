"""Every teaching notebook runs top to bottom in a real kernel (nbclient), as a learner would,
and then again in the same kernel ("Run All" twice, as after editing a cell), with no error."""
import copy
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks_and_outputs_are_stripped():
    assert {p.name for p in NOTEBOOKS} >= {"01_tensor_chains.ipynb", "02_pointers_and_workers.ipynb",
                                          "03_plans.ipynb"}
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs in git"


def _errors(cells) -> list:
    found = [f"cell {i}: {o['ename']}: {o['evalue']}" for i, c in enumerate(cells) for o in c.outputs
             if o.output_type == "error"]
    found += [f"cell {i}: a traceback in its output" for i, c in enumerate(cells) for o in c.outputs
              if "Traceback" in o.get("text", "")]
    return found


def _shape(cells) -> list:
    """What each cell showed: its output kinds and mime types (values, ids and timings aside;
    a stream counts once however many chunks its text came in)."""
    shapes = []
    for c in cells:
        kinds = [(o.output_type, o.get("name"), tuple(sorted(o.get("data", {})))) for o in c.outputs]
        shapes.append([k for i, k in enumerate(kinds) if k[0] != "stream" or i == 0 or kinds[i - 1] != k])
    return shapes


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom_twice_in_one_kernel(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    runs = []
    with client.setup_kernel():
        for _ in range(2):  # Run All, then Run All again in the same kernel
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
            runs.append(copy.deepcopy([c for c in nb.cells if c.cell_type == "code"]))
    first, second = runs
    assert _errors(first) == []
    assert _errors(second) == []
    assert _shape(second) == _shape(first)  # the same things shown, cell by cell


def test_notebooks_run_in_this_venv(tmp_path):
    """The "python3" kernel of the tests is this interpreter, not one from the user's Jupyter paths."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import sys, syft_lab\nprint(sys.executable)")]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[0].outputs[0]["text"].strip() == sys.executable
