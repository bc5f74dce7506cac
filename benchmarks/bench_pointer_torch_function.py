"""What PointerTensor.__torch_function__ costs a pointer op (issue 22 item 4), side by side.

    python benchmarks/bench_pointer_torch_function.py

A pointer honours ``__torch_function__`` so that torch's Python-level composites that make
helper tensors (``fractional_max_pool2d``, ``svd_lowrank``, ``multi_head_attention_forward``)
run with their helpers on the worker (tensors/composite.py); every other call through it is a
dict miss and torch's disabled implementation. This measures a 1-element add and relu on a
VirtualWorker pointer, and the same ops on a pointer subclass with ``__torch_function__``
disabled (what a pointer was before), in turns in one process (CPU time), beside a plain add.
A plain tensor never reaches this code.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import cpu_clock, interleaved  # noqa: E402

import syft_lab as sy  # noqa: E402
from syft_lab.tensors.pointer import PointerTensor  # noqa: E402


class _WithoutTorchFunction(PointerTensor):
    __torch_function__ = torch._C._disabled_torch_function_impl


def run(number=200, repeat=61) -> dict:
    bob = sy.VirtualWorker("bench_tf_bob")
    a = torch.ones(1)
    p = bob.send(torch.ones(1))
    q = _WithoutTorchFunction(bob, p.id_at_location, p.shape, p.dtype, owning=False)
    t = interleaved({"plain add": lambda: a + a, "pointer add": lambda: p + p, "pointer add, no tf": lambda: q + q,
                     "pointer relu": lambda: torch.relu(p), "pointer relu, no tf": lambda: torch.relu(q)},
                    number=number, repeat=repeat, clock=cpu_clock)
    return {k: v * 1e6 for k, v in t.items()}


def main() -> int:
    t = run()
    for k, v in t.items():
        print(f"{k:22} {v:7.2f} us  ({v / t['plain add']:.2f}x plain add)")
    print(f"__torch_function__ adds {t['pointer add'] - t['pointer add, no tf']:.2f} us to an add, "
          f"{t['pointer relu'] - t['pointer relu, no tf']:.2f} us to a relu")
    return 0


if __name__ == "__main__":
    sys.exit(main())
