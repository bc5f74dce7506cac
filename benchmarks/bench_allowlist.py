"""What the allow-list's checks cost an in-process pointer op (issue 12): a tiny add through a
VirtualWorker pointer with WorkerCore.run's checks on and off, in turns, in one process.

    python benchmarks/bench_allowlist.py
"""
from __future__ import annotations

import torch

import syft_lab as sy
from syft_lab.workers import core
from common import cpu_clock, interleaved

torch.set_num_threads(1)


def main() -> dict:
    sy.hook()
    bob = sy.VirtualWorker("bench_allowlist")
    a, b = torch.ones(1).send(bob), torch.ones(1).send(bob)
    checks = core.check_call, core.check_result

    def with_checks():
        core.check_call, core.check_result = checks
        a + b

    def without_checks():
        core.check_call = core.check_result = _nothing
        a + b

    try:
        t = interleaved({"on": with_checks, "off": without_checks}, number=400, repeat=150, clock=cpu_clock)
    finally:
        core.check_call, core.check_result = checks
    return {"tiny add, checks off (us)": t["off"] * 1e6, "tiny add, checks on (us)": t["on"] * 1e6,
            "checks per op (us)": (t["on"] - t["off"]) * 1e6}


def _nothing(*args):
    return None


if __name__ == "__main__":
    for name, value in main().items():
        print(f"{name}: {value:.2f}")
