"""What one object's change costs the kernel when worker events drive the views (issue 13 item 4).

A world of 10,000 objects on 10 in-process workers is shown by a world widget (its comm replaced
by a counter of the bytes it would send). Measured, in turns, CPU time of the kernel's thread:

- *event path*: one stored object changes (its worker emits ``changed``), then the refresh the
  event loop runs: the tracker reads that one entry again, the views' patch and step are made,
  the patch is serialised (syft_lab/widget/tracker.py, live.py);
- the same with a new object a worker stores (``worker.load``: a ``stored`` event, and the weak
  pointer it returns in "me", whose lane is then read again);
- the peer, a *full recompute* as every refresh did before: the world of 1,000 objects (on 10
  other workers) computed whole, diffed against the last one and described (world_dict's
  lanes, diff.diff, diff.describe).

    python benchmarks/bench_events.py [--quick]
"""
from __future__ import annotations

import json
import sys

import torch

import syft_lab as sy
from syft_lab import events
from syft_lab.inspection.model import Names, lane_of
from syft_lab.widget import WorldWidget, diff, live
from common import cpu_clock, figure, interleaved

torch.set_num_threads(1)

WORKERS = 10
GOAL_MS = 2.0


def _fill(workers, per_worker: int) -> None:
    for w in workers:
        for i in range(per_worker):
            t = torch.ones(4)
            t.tags = {f"#n{i % 7}"}
            w.load(t)  # held by the worker; the weak pointer it returns is dropped at once


def run(quick: bool = False) -> list[dict]:
    sy.hook()
    per_worker = 300 if quick else 1000
    big = [sy.VirtualWorker(f"bench_ev_{i}") for i in range(WORKERS)]
    peer_workers = [sy.VirtualWorker(f"bench_ev_peer_{i}") for i in range(WORKERS)]
    view = None
    try:
        _fill(big, per_worker)
        _fill(peer_workers, 100)
        ns: dict = {}
        view = WorldWidget(namespace=ns)
        view._views.add("bench")  # shown: refreshed by the events
        sent = {"bytes": 0, "n": 0}

        def send(msg, *_a, **_k):
            sent["bytes"] += len(json.dumps(msg, separators=(",", ":")))
            sent["n"] += 1

        view.send = send
        live.watch_events()
        live.refresh_all()
        target = big[WORKERS // 2]
        obj_id = next(iter(target.core.objects))
        obj = target.core.objects[obj_id]
        turn = [0]

        def event_path():
            turn[0] += 1
            obj.tags = {f"#turn{turn[0]}"}  # what the worker changed
            events.emit("changed", target.id, obj_id)
            live.refresh_all(world_only=True)  # what the event loop runs next

        stored = []

        def stored_path():
            stored.append(target.load(torch.zeros(2)))  # stored on the worker, a weak pointer here
            live.refresh_all(world_only=True)

        names = Names(ns)
        last = {"world": {"workers": [lane_of(w, names) for w in peer_workers]}}

        def full_recompute():
            new = {"workers": [lane_of(w, Names(ns)) for w in peer_workers]}
            diff.diff(last["world"], new)
            diff.describe(last["world"], new, [], "")
            last["world"] = new

        number, repeat = (5, 20) if quick else (10, 60)
        calls = {"n": 0}

        def counted(fn):
            def call():
                calls["n"] += 1
                fn()
            return call

        before = sent["n"]
        t = interleaved({"event": counted(event_path), "stored": counted(stored_path), "full": full_recompute},
                        number=number, repeat=repeat, clock=cpu_clock)
        patches = sent["n"] - before
        sent["bytes"] = 0
        event_path()
        one_patch = sent["bytes"]
        n_objects = sum(len(w.core.objects) for w in big)
        assert patches >= calls["n"], "every change sent a patch"
    finally:
        if view is not None:
            view.close()
        for w in big + peer_workers:
            w.close()
    ms = {k: v * 1e3 for k, v in t.items()}
    return [
        figure(f"one object's change, event-driven ({n_objects:,} objects on {WORKERS} workers)", ms["event"], "ms",
               GOAL_MS, peer="full recompute of 1,000 objects (ms)", ratio=None,
               note=f"peer {ms['full']:.2f} ms: {ms['event'] / ms['full']:.2f}x; its patch {one_patch} bytes"),
        figure(f"a stored object and its weak pointer, event-driven ({n_objects:,} objects)", ms["stored"], "ms",
               GOAL_MS, note=f"{ms['stored'] / ms['full']:.2f}x the full recompute of 1,000 objects"),
        figure("full recompute of a 1,000-object world (world_dict lanes + diff + describe)", ms["full"], "ms", None,
               note="every refresh before events drove the views"),
    ]


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(f"{r['name']}: {r['value']:.3f} {r['unit']}  {r['note']}")
