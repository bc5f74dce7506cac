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

Side by side, the same with 10 *websocket* worker processes holding 10,000 objects: one remote
object changes (an in-place op, whose "changed" event the worker pushes before its reply:
workers/feed.py) and the view refreshes; the kernel's cost of that change is the op with the
refresh minus the op alone (both timed, in turns). Its peer is what a refresh did before
remote workers pushed their events: read every remote lane again (10 summaries of 1,000).

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
from syft_lab.workers.local_process import start_worker
import common
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
    """In-process workers, then websocket worker processes, side by side."""
    return run_in_process(quick) + run_websocket(quick)


def run_in_process(quick: bool = False) -> list[dict]:
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


def run_websocket(quick: bool = False) -> list[dict]:
    """One remote object's change on 10 websocket workers (10,000 objects), event-driven."""
    sy.hook()
    per_worker = 300 if quick else 1000
    n_workers = WORKERS
    if common.SMOKE:  # the suite's smoke run: it only shows the figure is computed
        n_workers, per_worker = 2, 50
    remote = []
    view = None
    try:
        for i in range(n_workers):
            remote.append(start_worker(f"bench_ws_{i}"))
        _fill(remote, per_worker)
        ns: dict = {}
        view = WorldWidget(namespace=ns)
        view._views.add("bench")
        sent = {"n": 0}
        view.send = lambda msg, *_a, **_k: sent.__setitem__("n", sent["n"] + 1)
        live.watch_events()
        live.refresh_all()
        assert all(w.follows_events for w in remote), "the view follows every remote worker"
        target = remote[n_workers // 2]
        ptr = torch.ones(4).send(target)
        ns["ptr"] = ptr

        def change_and_refresh():
            ptr.add_(1)  # the worker pushes "changed" with the new entry before its reply
            live.refresh_all(world_only=True)

        def change_only():
            ptr.add_(1)

        names = Names(ns)

        def reread_lanes():  # what each refresh did before: every remote lane read again
            for w in remote:
                lane_of(w, names)

        number, repeat = (3, 10) if quick else (5, 30)
        before = sent["n"]
        t = interleaved({"change+refresh": change_and_refresh, "change": change_only},
                        number=number, repeat=repeat, clock=cpu_clock)
        t_old = interleaved({"reread": reread_lanes}, number=1, repeat=3 if quick else 7, clock=cpu_clock)
        assert sent["n"] > before, "the changes reached the view"
        n_objects = sum(len(lane["objects"]) for lane in view.world["workers"] if lane["id"].startswith("bench_ws_"))
    finally:
        if view is not None:
            view.close()
        for w in remote:
            w.close()
    ms = {k: v * 1e3 for k, v in {**t, **t_old}.items()}
    cost = max(ms["change+refresh"] - ms["change"], 0.0)
    return [
        figure(f"one remote object's change, event-driven ({n_objects:,} objects on {n_workers} websocket workers)",
               cost, "ms", GOAL_MS, peer="re-read of every remote lane (ms)", ratio=None,
               note=f"op + refresh {ms['change+refresh']:.2f} ms, op alone {ms['change']:.2f} ms; "
                    f"peer {ms['reread']:.1f} ms: {cost / ms['reread']:.3f}x"),
    ]


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(f"{r['name']}: {r['value']:.3f} {r['unit']}  {r['note']}")
