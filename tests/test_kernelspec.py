"""The kernels the tests start are this venv's interpreter, whatever "python3" means elsewhere."""
import json
import sys

from jupyter_client.kernelspec import KernelSpecManager


def test_python3_resolves_to_this_interpreter():
    assert KernelSpecManager().get_kernel_spec("python3").argv[0] == sys.executable


def test_the_shared_kernel_runs_this_interpreter(kernel):
    r = kernel.run("import sys, json, syft_lab\nprint(json.dumps([sys.executable, syft_lab.__file__]))")
    assert r["error"] is None, r
    executable, syft_file = json.loads(r["stdout"])
    assert executable == sys.executable
    assert syft_file == sys.modules["syft_lab"].__file__  # the same checkout, not another install
