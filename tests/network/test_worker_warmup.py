"""A worker process warms up as it starts (server.warm_up on its command thread): torch's
Python meta kernels, which a worker runs to size every op before running it, no longer import
torch._dynamo on their first call (2-4 s and ~70 MiB of a fresh worker's first op or plan
call), and give the same shapes as before."""
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

import syft_lab as sy

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import json, sys, torch
from syft_lab.workers.server import _no_dynamo_disable
changed = _no_dynamo_disable()
a, b = torch.randn(4, 3), torch.randn(3, 5)
ops = [(torch.ops.aten.add.Tensor, (a, a)), (torch.ops.aten.mul.Tensor, (a, 2.0)),
       (torch.ops.aten.mm.default, (a, b)), (torch.ops.aten.mse_loss.default, (a, a)),
       (torch.ops.aten.addmm.default, (torch.zeros(5), a, b)), (torch.ops.aten.mean.default, (a,)),
       (torch.ops.aten.pow.Tensor_Scalar, (a, 2)), (torch.ops.aten.div.Tensor, (a, torch.ones(3, dtype=torch.float64))),
       (torch.ops.aten.where.self, (a > 0, a, torch.zeros(1, dtype=torch.int64)))]
meta = lambda x: x.to("meta") if isinstance(x, torch.Tensor) else x
same = all(list(op(*map(meta, args)).shape) == list(op(*args).shape)
           and op(*map(meta, args)).dtype == op(*args).dtype for op, args in ops)
print(json.dumps({"changed": changed, "same": same, "dynamo": "torch._dynamo" in sys.modules}))
"""


def _run(code):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_meta_kernels_run_without_importing_dynamo_and_give_the_same_shapes():
    r = _run(CHECK)
    assert r["changed"] > 0
    assert r["same"]
    assert r["dynamo"] is False


def test_without_the_warm_up_the_same_meta_runs_import_dynamo():
    # the other side of the test above: what the warm-up saves is real
    r = _run(CHECK.replace("changed = _no_dynamo_disable()", "changed = 1"))
    assert r["same"] and r["dynamo"] is True


def test_a_fresh_worker_answers_its_first_op_and_plan_call(spawn, token):
    from syft_lab.workers.websocket import WebSocketWorker

    w = spawn("warm1")
    bob = WebSocketWorker(w.url, id="warm1", token=token, progress=False)
    try:
        x = torch.tensor([1.0, -2.0, 3.0])
        p = x.send(bob)
        assert torch.equal((p * 2 + p).get(), x * 3)

        @sy.plan
        def f(t):
            return (t.abs() + 1).mean()

        f.build(torch.zeros(3))
        pp = f.send(bob)
        assert torch.allclose(pp(x.send(bob)).get(), (x.abs() + 1).mean())
    finally:
        bob.close()
