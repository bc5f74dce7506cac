"""Tensor layers and in-process workers: what a chain costs over plain torch (issues 2 and 3).

Each figure is a ratio of two timings taken side by side, in turns, in one process.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import torch

from common import figure, interleaved

torch.set_num_threads(1)


def hook_cost(quick: bool) -> list[dict]:
    """Plain ops before and after `import syft_lab; sy.hook()`: measured in a fresh process,
    since an import cannot be undone. Alternating hook/unhook rounds after the import check
    that the hook itself adds nothing."""
    reps = 5 if quick else 25
    code = textwrap.dedent(f"""
        import json, statistics, time, torch, torch.nn as nn, torch.nn.functional as F
        torch.set_num_threads(1)
        a = torch.ones(1); b = torch.ones(1)
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        X, T = torch.randn(16, 32), torch.randint(0, 10, (16,))
        def add():
            for _ in range(2000): a + b
        def step():
            for _ in range(50):
                opt.zero_grad(); F.cross_entropy(model(X), T).backward(); opt.step()
        def sample(fn):
            t = time.perf_counter(); fn(); return time.perf_counter() - t
        before = {{"add": [], "step": []}}
        for _ in range({reps}):
            before["add"].append(sample(add)); before["step"].append(sample(step))
        import syft_lab as sy
        after = {{"add": [], "step": []}}
        for i in range({reps}):
            sy.hook() if i % 2 == 0 else sy.unhook()
            sy.hook()
            after["add"].append(sample(add)); after["step"].append(sample(step))
        print(json.dumps({{k: statistics.median(after[k]) / statistics.median(before[k]) for k in before}}))
    """)
    import json

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    ratios = json.loads(out.stdout.strip().splitlines()[-1])
    return [
        figure("plain 1-element add after import + sy.hook()", ratios["add"], "x before", 1.02,
               peer="the same add before import", ratio=ratios["add"]),
        figure("plain small MLP train step after import + sy.hook()", ratios["step"], "x before", 1.02,
               peer="the same step before import", ratio=ratios["step"]),
    ]


def logging_cost(quick: bool) -> list[dict]:
    import syft_lab as sy

    number, repeat = (500, 5) if quick else (5000, 15)
    a = torch.ones(1)
    la = sy.LoggingTensor(torch.ones(1))
    big = torch.ones(1000, 1000)
    lbig = sy.LoggingTensor(torch.ones(1000, 1000))

    def add_logged():
        la + la
        if len(la.log) > 10000:
            del la.log[:]

    t = interleaved({"plain": lambda: a + a, "logging": add_logged}, number=number, repeat=repeat)
    tb = interleaved({"plain": lambda: big + big, "logging": lambda: lbig + lbig},
                     number=5 if quick else 20, repeat=repeat)
    r, rb = t["logging"] / t["plain"], tb["logging"] / tb["plain"]
    return [
        figure("LoggingTensor 1-element add", t["logging"] * 1e6, "us", 6.0,
               peer=f"plain add {t['plain'] * 1e6:.2f} us", ratio=r),
        figure("LoggingTensor 1000x1000 add", tb["logging"] * 1e6, "us", 1.08,
               peer=f"plain add {tb['plain'] * 1e6:.0f} us", ratio=rb),
    ]


def pointer_cost(quick: bool) -> list[dict]:
    import syft_lab as sy

    bob = sy.VirtualWorker("bench_bob")
    number, repeat = (300, 5) if quick else (3000, 15)
    a = torch.ones(1)
    p = bob.send(torch.ones(1))
    t = interleaved({"plain": lambda: a + a, "pointer": lambda: p + p}, number=number, repeat=repeat)
    big = torch.ones(1000, 1000)

    def clone_twice():
        big.clone()
        big.clone()

    def send_get():
        bob.send(big).get()

    tb = interleaved({"clone2": clone_twice, "send_get": send_get}, number=3 if quick else 10, repeat=repeat)
    bob.close()
    return [
        figure("pointer op round trip (1 element, VirtualWorker)", t["pointer"] * 1e6, "us", 20.0,
               peer=f"plain add {t['plain'] * 1e6:.2f} us", ratio=t["pointer"] / t["plain"]),
        figure("send + get of 1000x1000 (VirtualWorker)", tb["send_get"] * 1e3, "ms", 3.0,
               peer=f"t.clone() twice {tb['clone2'] * 1e3:.2f} ms", ratio=tb["send_get"] / tb["clone2"]),
    ]


def run(quick: bool = False) -> list[dict]:
    return hook_cost(quick) + logging_cost(quick) + pointer_cost(quick)


if __name__ == "__main__":
    from run import print_table

    print_table(run("--quick" in sys.argv))
