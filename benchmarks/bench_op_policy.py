"""What the op policy's checks cost per op, side by side (issue 22: no regression of the
VirtualWorker pointer op, <= 10x a plain tiny add).

    python benchmarks/bench_op_policy.py [--out benchmarks/op_policy_cost.md]

A tiny add through a VirtualWorker pointer with WorkerCore.run's checks on and off, in turns,
in one process (CPU time, medians), next to a plain tiny add; then ``check_call`` alone for ops
of each kind of check (a memo hit after the first call, as in a training loop).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cpu_clock, interleaved  # noqa: E402

import syft_lab as sy  # noqa: E402
from syft_lab.wire import allowlist  # noqa: E402
from syft_lab.workers import core  # noqa: E402

torch.set_num_threads(1)
aten = torch.ops.aten


def _nothing(*args):
    return None


def pointer_add() -> dict:
    sy.hook()
    bob = sy.VirtualWorker("bench_op_policy")
    a, b = torch.ones(1).send(bob), torch.ones(1).send(bob)
    x, y = torch.ones(1), torch.ones(1)
    checks = core.check_call, core.check_result

    def with_checks():
        core.check_call, core.check_result = checks
        a + b

    def without_checks():
        core.check_call = core.check_result = _nothing
        a + b

    def plain():
        x + y

    try:
        t = interleaved({"on": with_checks, "off": without_checks, "plain": plain}, number=300, repeat=100,
                        clock=cpu_clock)
    finally:
        core.check_call, core.check_result = checks
    return t


def check_costs() -> dict:
    x4 = torch.randn(2, 3, 8, 8)
    w = torch.randn(4, 3, 3, 3)
    m = torch.randn(16, 16)
    z = torch.zeros(4, 4)
    calls = {
        "add.Tensor (pointwise fast path)": (aten.add.Tensor, [m, m], None),
        "mm (meta memo + contraction bound)": (aten.mm.default, [m, m], None),
        "convolution (meta memo + convolution bound)": (aten.convolution.default,
                                                         [x4, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1],
                                                         None),
        "avg_pool2d (meta memo + window bound)": (aten.avg_pool2d.default, [x4, [2, 2]], None),
        "index_put_ (meta memo + indexed-write bound)": (aten.index_put_.default, [z, [torch.tensor([0])],
                                                                                 torch.tensor(1.)], None),
        "as_strided (view check)": (aten.as_strided.default, [m, [4, 4], [16, 1]], None),
        "native_batch_norm (family check + meta memo)": (aten.native_batch_norm.default,
                                                          [x4, None, None, torch.zeros(3), torch.ones(3), False,
                                                           0.1, 1e-5], None),
    }
    fns = {}
    for what, (op, args, kwargs) in calls.items():
        allowlist.check_call(op, args, kwargs)  # the first call runs on meta; then the memo answers
        fns[what] = (lambda op=op, args=args, kwargs=kwargs: allowlist.check_call(op, args, kwargs))
    return interleaved(fns, number=300, repeat=40, clock=cpu_clock)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "op_policy_cost.md"))
    options = parser.parse_args(argv)
    t = pointer_add()
    costs = check_costs()
    lines = ["# What the op policy's checks cost", "",
             "Written by `python benchmarks/bench_op_policy.py` (one process, CPU time, medians of interleaved "
             f"rounds; torch {torch.__version__}, 1 thread).", "",
             "| a tiny 1-element add | µs | × plain |", "|---|---|---|",
             f"| plain tensors | {t['plain'] * 1e6:.2f} | 1 |",
             f"| VirtualWorker pointer, checks off | {t['off'] * 1e6:.2f} | {t['off'] / t['plain']:.1f} |",
             f"| VirtualWorker pointer, checks on | {t['on'] * 1e6:.2f} | {t['on'] / t['plain']:.1f} |",
             f"| the checks per op | {(t['on'] - t['off']) * 1e6:.2f} | |", "",
             "| `check_call` alone (a repeated signature) | µs |", "|---|---|"]
    lines += [f"| {what} | {v * 1e6:.2f} |" for what, v in costs.items()]
    text = "\n".join(lines) + "\n"
    Path(options.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
