"""Every ```python block of the README runs twice in a row in one kernel ("Run All" twice), in
the README's order, with no error: a reader pastes them into a notebook and re-runs it.

Several blocks are fragments of a larger program (split learning names its segments, federated
learning its model and test set): the names their section's text says they assume are defined
by a short cell run before the block each time (``ASSUMED``, keyed by a call the block makes), as
the reader's own notebook would define them. The websocket block connects to a worker on 127.0.0.1:8777, which
the test starts (a real ``syft-lab worker`` process) with the token the block names.

The Ray section's block runs twice in tests/ray/test_readme_ray_block.py instead, on the Ray
tier's session Ray (a second local Ray in this kernel would double the suite's Ray start-ups);
``RAY_BLOCK`` names it so that the test fails if another block starts Ray unnoticed.
"""
from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BLOCK_RE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

# a call a fragment makes -> the names it uses without defining them (its section's text says what)
ASSUMED = {
    "segment_1(images.send(alice))": """
import torch, torch.nn as nn
images, labels = torch.randn(8, 6), torch.randint(0, 3, (8,))
segment_1 = nn.Sequential(nn.Linear(6, 5), nn.ReLU()).send(alice)   # segment 1 lives on alice
segment_2 = nn.Linear(5, 3).send(bob)
""",
    "sy.BaseDataset(images, labels": """
import torch, torch.nn as nn
carol = sy.VirtualWorker("carol")
images, labels = torch.randn(60, 64), torch.randint(0, 10, (60,))
x_test, y_test = torch.randn(20, 64), torch.randint(0, 10, (20,))
model, m1, m2 = nn.Linear(64, 10), nn.Linear(64, 10), nn.Linear(64, 10)
""",
    "fix_precision().share(": """
import torch, torch.nn as nn
w = torch.tensor([0.5, 1.0, -1.0])
model = nn.Linear(3, 2)
""",
    "sy.WebSocketWorker(": "token = {token!r}",
}


RAY_BLOCK = "clients = sy.ray.workers(16"


def readme_blocks() -> list[tuple[str, str]]:
    """(the names it assumes, code) for every ```python block, in order."""
    blocks = []
    for m in BLOCK_RE.finditer(README.read_text()):
        code = m.group(1)
        blocks.append((next((ASSUMED[k] for k in ASSUMED if k in code), ""), code))
    return blocks


@pytest.fixture(scope="module")
def worker_on_8777(tmp_path_factory):
    """The worker the README's websocket block connects to, as its bash block starts it."""
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 8777)) == 0:
            pytest.fail("port 8777 (the README's worker) is taken on this machine")
    token = secrets.token_urlsafe(24)
    env = dict(os.environ, SYFT_LAB_TOKEN=token, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "syft_lab.worker", "--id", "bob", "--host", "127.0.0.1",
                             "--port", "8777", "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env, cwd=str(tmp_path_factory.mktemp("worker")))
    ready = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(60)
    try:
        assert ready and "listening on" in ready[0], f"the README's worker did not start: {ready}"
        yield token
    finally:
        proc.kill()
        proc.wait(10)


def test_the_readme_has_the_blocks_this_test_knows():
    codes = [code for _, code in readme_blocks()]
    assert len(codes) >= 5
    assert [c for c in codes if "sy.ray." in c or "RayWorker" in c] == [c for c in codes if RAY_BLOCK in c]
    assert all(any(k in code for code in codes) for k in ASSUMED)  # no context for a block that is gone


def test_every_readme_python_block_runs_twice_in_one_kernel(kernel, worker_on_8777):
    kernel.reset()
    r = kernel.run("import syft_lab as sy")
    assert r["error"] is None, r["error"]
    for run in (1, 2):
        for i, (assumed, code) in enumerate(readme_blocks()):
            if RAY_BLOCK in code:
                continue
            if assumed:
                r = kernel.run(assumed.format(token=worker_on_8777), timeout=300)
                assert r["error"] is None, f"run {run}, the names README block {i} assumes: {r['error']}"
            r = kernel.run(code, timeout=300)
            assert r["error"] is None, f"run {run}, README block {i}: {r['error']}\n{code}"
            assert "Traceback" not in r["stderr"] + r["stdout"], f"run {run}, README block {i}: {r['stderr']}"
    kernel.reset()
