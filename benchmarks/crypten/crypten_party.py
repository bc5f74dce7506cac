"""One CrypTen party (or its third-party dealer) for benchmarks/bench_smpc.py, run by it in
.venv-crypten (benchmarks/setup_crypten) as a process of its own: every party is started with
WORLD_SIZE, RANK and RENDEZVOUS (a file) in its environment, as crypten.mpc.run_multiprocess does,
on loopback (gloo), and CRYPTEN_PROVIDER (TFP: CrypTen's default trusted first party, or TTP: a
third-party dealer process, the rank after the parties).

The parties read one command a line on stdin, the same for every party, and answer one JSON line
on stdout (rank 0's answers are read; the others' too, to keep the pipes in step):
    ready?                      -> {"ready": true, "ops": [...]}
    time NAME                   -> {"t": seconds}  (a barrier, then the op once, wall time)
    rounds NAME                 -> {"rounds": r, "bytes": b}  (CrypTen's communication stats)
    quit
The dealer (TTP) process runs crypten's TTPServer until the parties end.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

torch.set_num_threads(1)  # as the syft_lab workers (start_worker's default)

import crypten  # noqa: E402
import crypten.communicator as comm  # noqa: E402

PROVIDER = os.environ.get("CRYPTEN_PROVIDER", "TFP")
crypten.cfg.mpc.provider = PROVIDER


def inputs():
    """The benchmark's inputs (the same shapes and ranges as the syft_lab side)."""
    g = torch.Generator().manual_seed(0)

    def enc(*shape, low=-2.0, high=2.0):
        return crypten.cryptensor(torch.rand(*shape, generator=g) * (high - low) + low, src=0)

    a1, b1 = enc(1), enc(1)
    a, b = enc(100, 100), enc(100, 100)
    pos = enc(100, 100, low=0.5, high=4.0)
    a10 = enc(100, 10)
    img = enc(1, 8, 8, 8)
    logits = crypten.cryptensor(torch.rand(32, 10, generator=g) * 4 - 2, src=0, requires_grad=True)
    target = torch.nn.functional.one_hot(torch.randint(0, 10, (32,), generator=g), 10).float()  # public, as ours

    def cross_entropy():
        logits.grad = None
        logits.cross_entropy(target).backward()
        return logits.grad

    return {
        "add": lambda: a + b,
        "mul1": lambda: a1 * b1,
        "mul": lambda: a * b,
        "matmul": lambda: a.matmul(b),
        "relu": lambda: a.relu(),
        "gt": lambda: a > b,
        "exp": lambda: a.exp(),
        "reciprocal": lambda: pos.reciprocal(),
        "sigmoid": lambda: a.sigmoid(),
        "softmax": lambda: a10.softmax(1),
        "max_pool2d": lambda: img.max_pool2d(2),
        "cross_entropy": cross_entropy,
    }


def say(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def party() -> None:
    crypten.init()
    ops = inputs()
    c = comm.get()
    for line in sys.stdin:
        cmd, _, name = line.strip().partition(" ")
        if cmd == "quit":
            break
        if cmd == "ready?":
            c.barrier()
            say({"ready": True, "ops": sorted(ops)})
        elif cmd == "time":
            c.barrier()
            t0 = time.perf_counter()
            ops[name]()
            say({"t": time.perf_counter() - t0})
        elif cmd == "rounds":
            crypten.cfg.communicator.verbose = True
            c.barrier()
            c.reset_communication_stats()
            ops[name]()
            stats = c.get_communication_stats()
            crypten.cfg.communicator.verbose = False
            say({"rounds": stats["rounds"], "bytes": stats["bytes"]})
        else:
            say({"error": f"unknown command {line.strip()!r}"})
    crypten.uninit()


def dealer() -> None:
    crypten.init()
    crypten.mpc.provider.TTPServer()  # serves the parties' requests until rank 0 says terminate
    crypten.uninit()


if __name__ == "__main__":
    if int(os.environ["RANK"]) >= int(os.environ["WORLD_SIZE"]):
        dealer()
    else:
        party()
