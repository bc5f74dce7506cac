"""Secure computation benchmark: ops on additively shared fixed precision tensors.

    .venv/bin/python benchmarks/bench_smpc.py [--quick] [--approximations]

Figures:
- with 2 websocket worker processes as parties and a third as crypto provider (loopback):
  1-element mul, 100x100 matmul, 100x100 relu, 100x100 add, each against CrypTen 0.4.1's figure
  on this machine class with 2 parties as processes (2.7 ms, 5.3 ms, 47 ms, 0.45 ms: the issue's
  numbers; CrypTen itself no longer imports with this torch), with the rounds and messages each
  op takes and a ping round trip to the same worker measured in turns beside it (the floor of
  one round);
- in process (VirtualWorkers): a shared 100x100 matmul against a plain float32 100x100 matmul,
  in turns (CPU time of this thread: everything runs here);
- randomness: 4*10^5 int64 words (a 100x100 relu's dealer material) from the generator the dealer
  uses (AES-256-CTR, syft_lab.workers.randomness, drawn on the provider's worker by its `deal`
  command), from os.urandom and from torch's randint (the Mersenne Twister the dealer used
  before, which a party could predict), side by side.
"""
from __future__ import annotations

import statistics
import sys
import threading
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import cpu_clock, figure, interleaved, interleaved_samples  # noqa: E402

CRYPTEN_MS = {"mul1": 2.7, "matmul100": 5.3, "relu100": 47.0, "add100": 0.45,
              # issue 30: CrypTen 2-party figures on 100x100 (its default provider), for --approximations
              "exp100": 25.0, "sigmoid100": 110.0, "softmax100": 460.0, "div100": 171.0, "maxpool100": 228.0}


def _start(sy, ids):
    workers, threads = {}, []

    def start(i):
        workers[i] = sy.start_worker(i)

    for i in ids:
        threads.append(threading.Thread(target=start, args=(i,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    missing = [i for i in ids if i not in workers]
    if missing:
        raise RuntimeError(f"workers did not start: {missing}")
    return [workers[i] for i in ids]


def _remote(sy, runtime, quick):
    alice, bob, carol = _start(sy, ["bench_smpc_alice", "bench_smpc_bob", "bench_smpc_carol"])
    rows = []
    try:
        def shared(*shape):
            return torch.randn(*shape).fix_precision().share(alice, bob, crypto_provider=carol)

        a1, b1 = shared(1), shared(1)
        a, b = shared(100, 100), shared(100, 100)
        ops = {"mul1": lambda: a1 * b1, "matmul100": lambda: a @ b, "relu100": lambda: a.relu(),
               "add100": lambda: a + b}
        labels = {"mul1": "1-element mul", "matmul100": "100x100 matmul", "relu100": "100x100 relu",
                  "add100": "100x100 add"}
        if "--approximations" in sys.argv:  # issue 30's ops (minutes on a loaded 2-core machine)
            # softmax of 100x100 along dim 1 is a max over 100 elements per row; every pair compared
            # at once is 10^6 words a message (a WireError): the rows of 10 the issue names instead
            a10 = shared(100, 10)
            ops.update({"exp100": lambda: a.exp(), "sigmoid100": lambda: a.sigmoid(),
                        "softmax100": lambda: F.softmax(a10, 1), "div100": lambda: a / b,
                        "maxpool100": lambda: F.max_pool2d(a.view(1, 1, 100, 100), 2)})
            labels.update({"exp100": "100x100 exp", "sigmoid100": "100x100 sigmoid",
                           "softmax100": "100x10 softmax (CrypTen's figure: 100x100)", "div100": "100x100 division by a shared value", "maxpool100": "100x100 max_pool2d 2x2"})
        counts = {}
        for name, op in ops.items():
            op()  # warm: meta shapes memoised, connections open
            runtime.reset_stats()
            op()
            counts[name] = dict(runtime.stats)
        fns = dict(ops, ping=alice.ping)
        repeat = 5 if quick else 15
        samples = interleaved_samples(fns, number=1, repeat=repeat)
        ping = statistics.median(samples["ping"])
        for name in ops:
            t = statistics.median(samples[name])
            c = counts[name]
            rows.append(figure(
                f"{labels[name]}, 2 websocket parties + crypto provider (ratio: to CrypTen)", t * 1e3, "ms", 1.0,
                ratio=t * 1e3 / CRYPTEN_MS[name],
                peer=f"CrypTen {CRYPTEN_MS[name]} ms; {c['rounds']} rounds, {c['messages']} messages, "
                     f"{t / max(c['rounds'], 1) * 1e3:.2f} ms a round; a ping {ping * 1e3:.2f} ms"))
        rows.append(figure("a ping round trip to a party (the floor of one round), in turns with the ops",
                           ping * 1e3, "ms", None))
    finally:
        for w in (alice, bob, carol):
            w.close()
    return rows


def _in_process(sy, quick):
    alice, bob, carol = (sy.VirtualWorker(f"bench_smpc_v{i}") for i in range(3))
    try:
        x, w = torch.randn(100, 100), torch.randn(100, 100)
        sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
        sw = w.fix_precision().share(alice, bob, crypto_provider=carol)
        t = interleaved({"shared": lambda: sx @ sw, "plain": lambda: x @ w},
                        number=2 if quick else 5, repeat=5 if quick else 15, clock=cpu_clock)
        del sx, sw
    finally:
        for v in (alice, bob, carol):
            v.close()
    return [figure("shared 100x100 matmul in process (VirtualWorkers) vs a plain float32 matmul", t["shared"] * 1e3,
                   "ms", 20.0, ratio=t["shared"] / t["plain"], peer=f"plain {t['plain'] * 1e6:.0f} us")]


def _randomness(sy, quick):
    import os

    from syft_lab.workers import randomness as csprng

    words = 4 * 10**5
    fns = {"csprng": lambda: csprng.random_words([words]),
           "urandom": lambda: torch.frombuffer(bytearray(os.urandom(8 * words)), dtype=torch.int64),
           "randint": lambda: torch.randint(-2**63, 2**63 - 1, (words,), dtype=torch.int64)}
    t = interleaved(fns, number=1 if quick else 3, repeat=5 if quick else 15, clock=cpu_clock)
    mb = 8 * words / 1e6
    rows = [figure(f"4e5 random int64 words from the dealer's generator ({csprng.BACKEND}) (ratio: to torch randint)",
                   t["csprng"] * 1e3, "ms", None, ratio=t["csprng"] / t["randint"],
                   peer=f"{mb / t['csprng']:.0f} MB/s; os.urandom {t['urandom'] * 1e3:.2f} ms ({mb / t['urandom']:.0f} MB/s); "
                        f"torch randint (Mersenne Twister) {t['randint'] * 1e3:.2f} ms ({mb / t['randint']:.0f} MB/s)")]

    return rows


def run(quick: bool = False) -> list[dict]:
    torch.set_num_threads(1)  # as the workers (start_worker's default): comparable and not oversubscribed
    import syft_lab as sy
    from syft_lab.smpc import runtime

    sy.hook()
    return _randomness(sy, quick) + _in_process(sy, quick) + _remote(sy, runtime, quick)


if __name__ == "__main__":
    from run import print_table

    print_table(run("--quick" in sys.argv))
