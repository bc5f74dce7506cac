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


def _shape(text):
    return tuple(int(v) for v in text.split("x"))


class Ops(dict):
    """The benchmark's ops by name, made on first use: "NAME" (issue 30's fixed shapes) or
    "NAME@SHAPE" (bench_smpc's sweep: e.g. "mul@100000", "softmax@10x1000"), the same inputs
    (shapes and ranges) as the syft_lab side."""

    def __missing__(self, name):
        self[name] = op = make_op(name)
        return op


def make_op(name):
    g = torch.Generator().manual_seed(0)

    def enc(*shape, low=-2.0, high=2.0, grad=False):
        return crypten.cryptensor(torch.rand(*shape, generator=g) * (high - low) + low, src=0, requires_grad=grad)

    key, _, shape = name.partition("@")
    if not shape:
        key, shape = {"mul1": ("mul", "1"), "softmax": ("softmax", "100x10"), "max_pool2d": ("max_pool2d", "1x8x8x8"),
                      "cross_entropy": ("cross_entropy", "32x10")}.get(key, (key, "100x100"))
    dims = _shape(shape)
    if key == "reciprocal":
        x = enc(*dims, low=0.5, high=4.0)
        return lambda: x.reciprocal()
    if key == "cross_entropy":
        logits = crypten.cryptensor(torch.rand(*dims, generator=g) * 4 - 2, src=0, requires_grad=True)
        target = torch.nn.functional.one_hot(torch.randint(0, dims[1], (dims[0],), generator=g), dims[1]).float()

        def cross_entropy():  # public targets, as ours
            logits.grad = None
            logits.cross_entropy(target).backward()
            return logits.grad

        return cross_entropy
    a = enc(*dims)
    b = enc(*dims) if key in ("add", "mul", "matmul", "gt") else None
    return {"add": lambda: a + b, "mul": lambda: a * b, "matmul": lambda: a.matmul(b), "relu": lambda: a.relu(),
            "gt": lambda: a > b, "exp": lambda: a.exp(), "sigmoid": lambda: a.sigmoid(),
            "softmax": lambda: a.softmax(1), "log_softmax": lambda: a.log_softmax(1),
            "max": lambda: a.max(1, one_hot=False), "argmax": lambda: a.argmax(1, one_hot=False),
            "max_pool2d": lambda: a.max_pool2d(2)}[key]


def inputs():
    return Ops()


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
            say({"ready": True})
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
