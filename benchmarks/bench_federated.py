"""Federated learning (issue 14): one FedAvg round over 3 websocket worker processes, local
training op by op through pointers vs one plan message per batch, side by side."""
from __future__ import annotations

import sys
import threading

import torch
import torch.nn as nn

from common import figure, interleaved

torch.set_num_threads(1)


def _count_requests(worker, counter):
    """Count the worker's request/reply exchanges (one message each way): the ones a caller
    waits on (``_request``) and the ones sent ahead (``_submit``: a plan round's calls)."""
    for door in ("_request", "_submit"):
        send = getattr(worker, door)

        def counted(*args, _send=send, **kwargs):
            counter[0] += 1
            return _send(*args, **kwargs)

        setattr(worker, door, counted)


def _in_parallel(fn, items):
    """Worker processes start (import torch) and stop in parallel: most of the quick mode's time."""
    threads = [threading.Thread(target=fn, args=(i,)) for i in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _start(sy, ids):
    workers = {}

    def start(i):
        workers[i] = sy.start_worker(i)

    _in_parallel(start, ids)
    missing = [i for i in ids if i not in workers]
    if missing:
        raise RuntimeError(f"workers did not start: {missing}")
    return [workers[i] for i in ids]


def run(quick: bool = False) -> list[dict]:
    import syft_lab as sy

    sy.hook()
    n, batch = (144, 16) if quick else (1347, 16)  # the digits notebook's training set: 1347 x 64
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g)
    workers = _start(sy, ["bench_fed_bob", "bench_fed_alice", "bench_fed_carol"])
    try:
        fds = sy.BaseDataset(x, y, name="bench").federate(workers)

        def trainer(plans):
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
            fl = sy.federated.FedAvg(model, fds, lr=0.1, batch_size=batch, plans=plans)
            fl.round(progress=False)  # the first round also sends the clients' models (and traces plans)
            return fl

        op, plan = trainer(False), trainer(True)
        counter = [0]
        for w in workers:
            _count_requests(w, counter)
        messages = {}
        for name, fl in (("op", op), ("plan", plan)):
            counter[0] = 0
            fl.round(progress=False)
            messages[name] = counter[0]
        t = interleaved({"op": lambda: op.round(progress=False), "plan": lambda: plan.round(progress=False)},
                        number=1, repeat=2 if quick else 5)
        del op, plan
        fds.unload()
    finally:
        _in_parallel(lambda w: w.close(), workers)
    batches = -(-n // 3 // batch) * 3
    return [
        figure(f"one FedAvg round, 3 websocket workers ({n} samples, {batches} batches): op by op vs plans",
               t["op"] / t["plan"], "x faster", None, higher_is_better=True, ratio=t["op"] / t["plan"],
               peer=f"op by op {t['op'] * 1e3:.0f} ms, plans {t['plan'] * 1e3:.0f} ms per round"),
        figure("messages per FedAvg round (3 websocket workers): op by op vs plans", messages["op"], "messages", None,
               ratio=messages["op"] / messages["plan"],
               peer=f"op by op {messages['op']}, plans {messages['plan']} "
                    f"({messages['op'] / batches:.1f} vs {messages['plan'] / batches:.1f} per batch)"),
    ]


if __name__ == "__main__":
    from run import print_table

    print_table(run("--quick" in sys.argv))
