"""What an earlier test in the same process leaves behind never reaches a later test's view.

The "me" lane lists every live pointer of the process. A test whose pointers end up in a
reference cycle leaves them alive until the cyclic GC runs, at a moment nobody chooses: if it
runs during a later test's action, that test's patch also carries their rows' removal (the
fresh-clone run that counted 10 patch ops where 2 were meant). tests/widget/conftest.py
collects them before each test (forget_earlier_tests)."""
import gc

import torch

import syft_lab as sy
from syft_lab import actions
from syft_lab.widget import WorldWidget
from widget_isolation import forget_earlier_tests


def _earlier_test_leaves_pointers_in_a_cycle(n: int) -> None:
    dave = sy.VirtualWorker("dave_of_an_earlier_test")
    cycle = {"pointers": [torch.ones(1).send(dave) for _ in range(n)]}
    cycle["itself"] = cycle
    dave.close()


def test_pointers_an_earlier_test_left_in_a_cycle_stay_out_of_a_later_views_patch(bob, capture, monkeypatch):
    gc.disable()  # the earlier test's cycle waits for the GC, as it may in a run
    try:
        _earlier_test_leaves_pointers_in_a_cycle(4)
        forget_earlier_tests()  # what every widget test starts with
    finally:
        gc.enable()
    perform = actions.perform

    def perform_while_the_gc_runs(*args, **kwargs):
        gc.collect()  # the cyclic GC happens to run during the action
        return perform(*args, **kwargs)

    monkeypatch.setattr(actions, "perform", perform_while_the_gc_runs)
    x = torch.tensor([1., 2.])
    ns = {"x": x, "bob": bob}
    w = WorldWidget(namespace=ns)
    sent = capture(w)
    x_entry = next(o for o in w.world["workers"][0]["objects"] if o["names"] == ["x"])
    reply = w.handle_message({"type": "action", "action": "send", "target": {"worker": "me", "id": x_entry["id"]},
                              "worker": "bob"})
    assert reply["ok"] and reply["code"] == "x_ptr = x.send(bob)"
    (patch,) = sent.of("world_patch")
    assert sorted((op[0], op[1]) for op in patch["ops"]) == [("put", "bob"), ("put", "me")], patch["ops"]
