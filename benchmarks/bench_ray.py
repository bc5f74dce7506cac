"""Ray workers (issue 15), each figure beside a bare Ray actor doing the same, in one run on one
local Ray (actors with 0.05 CPU and one torch thread: 2 shared cores).

- a RayWorker pointer op (1-element add, result stored, the previous one released) vs a bare
  actor call doing the same op on a dict of tensors (the median of the ratios of rounds taken in
  turns: the machine's load swings between rounds);
- a move of 64 MiB between two RayWorkers (actor to actor through the object store) vs Ray's
  own actor-to-actor transfer (a method returning a NumPy array, passed by reference to another
  actor that keeps a torch copy of it);
- start-up of 32 workers (one actor each, and 8 to an actor) and the memory each takes;
- one FedAvg round at 4, 16 and 32 Ray workers (the same data per client), beside the same round
  on as many VirtualWorkers.
"""
from __future__ import annotations

import statistics
import sys

import torch
import torch.nn as nn

import common
from common import figure, interleaved, interleaved_samples, paired_ratio, stop_ray_workers, wall_clock

torch.set_num_threads(1)
CPU = 0.05  # each actor's share of a core


class BareActor:
    """What Ray alone does for the same work: a dict of tensors, one method per command."""

    def __init__(self):
        torch.set_num_threads(1)
        self.store = {1: torch.ones(1)}
        self.next = 2

    def add(self, obj_id, drop):
        self.store.pop(drop, None)  # the previous result, released as a pointer's release would
        self.store[self.next] = self.store[obj_id] + 1
        self.next += 1
        return self.next - 1

    def ping(self):
        return 0

    def hold(self, nbytes):
        self.store[0] = torch.zeros(nbytes // 4)

    def give(self):
        return self.store[0].numpy()  # zero-copy into Ray's serializer (one copy into the object store)

    def take(self, array):
        self.store[0] = torch.tensor(array)  # a tensor of its own (the shared buffer is read-only)
        return 0


def _uss(pid) -> int:
    import psutil

    return psutil.Process(pid).memory_full_info().uss


def _op(sy, ray, bare_cls, quick):
    bob = sy.RayWorker("bench_ray_bob", num_cpus=CPU)
    bare = bare_cls.options(num_cpus=CPU).remote()
    try:
        p = torch.ones(1).send(bob)
        last = [None]

        def syft_op():
            last[0] = p + 1  # the previous result's release travels with this request

        state = {"id": None}

        def bare_op():
            state["id"] = ray.get(bare.add.remote(1, state["id"]))

        def bare_ping():
            ray.get(bare.ping.remote())

        for _ in range(20):
            syft_op(), bare_op()
        samples = interleaved_samples({"syft": syft_op, "bare": bare_op, "ping": bare_ping},
                                      number=20, repeat=10 if quick else 40)
        t = {k: statistics.median(v) for k, v in samples.items()}
        ratio = paired_ratio(samples, "syft", "bare")  # round by round: the load swings between rounds
        del last[0], p
    finally:
        stop_ray_workers([bob])
        ray.kill(bare)
    return [figure("RayWorker pointer op (1-element add) vs a bare actor call doing the same op", t["syft"] * 1e6,
                   "us", 1.2, ratio=ratio,
                   peer=f"bare actor {t['bare'] * 1e6:.0f} us (a bare actor call with no work "
                        f"{t['ping'] * 1e6:.0f} us)")]


def _move(sy, ray, bare_cls, quick):
    nbytes = (1 if common.SMOKE else 16 if quick else 64) * 2**20  # smoke: shows the path runs
    a, b = sy.ray.workers(2, prefix="bench_ray_move", num_cpus=CPU)
    src, dst = (bare_cls.options(num_cpus=CPU).remote() for _ in range(2))
    try:
        ray.get([src.hold.remote(nbytes), dst.hold.remote(nbytes)])
        ptr = [torch.zeros(nbytes // 4).send(a)]

        def syft_move():  # there and back: one move each way per call, as the bare pair below
            ptr[0] = ptr[0].move(b).move(a)

        def bare_move():
            ray.get(src.take.remote(dst.give.remote()))  # dst's array, by reference, into src
            ray.get(dst.take.remote(src.give.remote()))

        syft_move(), bare_move()
        samples = interleaved_samples({"syft": syft_move, "bare": bare_move}, number=1, repeat=4 if quick else 10)
        t = {k: statistics.median(v) for k, v in samples.items()}
        ratio = paired_ratio(samples, "bare", "syft")  # throughput: Ray's time over ours
        del ptr[0]
    finally:
        stop_ray_workers([a, b])
        ray.kill(src), ray.kill(dst)
    mib = nbytes / 2**20
    syft_rate, bare_rate = 2 * mib / t["syft"], 2 * mib / t["bare"]
    return [figure(f"move of {mib:.0f} MiB between two RayWorkers vs Ray's own actor-to-actor transfer",
                   syft_rate, "MiB/s", 0.8, ratio=ratio, higher_is_better=True,
                   peer=f"Ray actor to actor {bare_rate:.0f} MiB/s (move {t['syft'] / 2 * 1e3:.0f} ms, "
                        f"Ray {t['bare'] / 2 * 1e3:.0f} ms)")]


def _startup(sy, quick):
    n = 2 if common.SMOKE else 4 if quick else 32  # quick: each actor process costs ~2 s of CPU to start
    out, kept = [], None
    for per_actor in (1, 2 if common.SMOKE else 4 if quick else 8):
        t0 = wall_clock()
        workers = sy.ray.workers(n, prefix=f"bench_ray_s{per_actor}_", num_cpus=CPU, per_actor=per_actor)
        seconds = wall_clock() - t0
        pids = {w.pid for w in workers}
        uss = sum(_uss(pid) for pid in pids) / n
        out.append(figure(f"start-up of {n} Ray workers, {per_actor} to an actor process", seconds, "s", None,
                          peer=f"{len(pids)} process(es); memory {uss / 2**20:.0f} MiB per worker (USS: what "
                               f"stopping it frees)"))
        if per_actor == 1:
            kept = workers
        else:
            stop_ray_workers(workers)
    return out, kept


def _fedavg_round(sy, workers, per_client=32):
    n = per_client * len(workers)
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g)
    fds = sy.BaseDataset(x, y, name="bench_ray").federate(workers)
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        fl = sy.federated.FedAvg(model, fds, lr=0.1, batch_size=16)
        fl.round(progress=False)  # the first round also sends the clients' models
        return lambda: fl.round(progress=False), fds
    except BaseException:
        fds.unload()
        raise


def _scaling(sy, ray_workers, quick):
    sizes = (2,) if common.SMOKE else (2, 4) if quick else (4, 16, 32)
    rows = []
    for k in sizes:
        virtual = [sy.VirtualWorker(f"bench_ray_v{i}") for i in range(k)]
        ray_round, ray_fds = _fedavg_round(sy, ray_workers[:k])
        virtual_round, virtual_fds = _fedavg_round(sy, virtual)
        try:
            t = interleaved({"ray": ray_round, "virtual": virtual_round}, number=1, repeat=2 if quick else 3)
        finally:
            ray_fds.unload(), virtual_fds.unload()
            for w in virtual:
                w.close()
        rows.append(figure(f"one FedAvg round on {k} Ray workers (32 samples, 2 batches each) vs {k} VirtualWorkers",
                           t["ray"] * 1e3, "ms", None, ratio=t["ray"] / t["virtual"],
                           peer=f"VirtualWorkers {t['virtual'] * 1e3:.0f} ms; {t['ray'] / k * 1e3:.0f} ms per Ray "
                                f"client"))
    return rows


def run(quick: bool = False) -> list[dict]:
    import ray
    import ray.cloudpickle

    import syft_lab as sy

    sy.hook()
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # BareActor: benchmarks/ is not on the actors' path
    started = not ray.is_initialized()
    sy.ray.init(num_cpus=2)
    bare_cls = ray.remote(BareActor)
    ray_workers = []
    try:
        results = _op(sy, ray, bare_cls, quick)
        results += _move(sy, ray, bare_cls, quick)
        startup, ray_workers = _startup(sy, quick)
        results += startup
        results += _scaling(sy, ray_workers, quick)
    finally:
        stop_ray_workers(ray_workers)
        if started:
            sy.ray.shutdown()
    return results


if __name__ == "__main__":
    from run import print_table

    print_table(run("--quick" in sys.argv))
