"""The world view and the actions with a real remote worker (a websocket worker process)."""
import pytest
import torch

import syft_lab as sy
from syft_lab.widget import WorldWidget

pytestmark = [pytest.mark.network, pytest.mark.slow]


@pytest.fixture
def carol():
    w = sy.start_worker("carol_view")
    yield w
    w.close()


def test_remote_lane_send_get_and_a_stopped_worker(carol, capture):
    x = torch.tensor([1., 2.])
    ns = {"x": x, "carol": carol}
    w = WorldWidget(namespace=ns)
    sent = capture(w)
    lane = {ln["id"]: ln for ln in w.world["workers"]}["carol_view"]
    assert lane["kind"] == "websocket" and lane["state"] == "connected" and lane["objects"] == []
    x_entry = next(o for o in w.world["workers"][0]["objects"] if o["names"] == ["x"])
    reply = w.handle_message({"type": "action", "action": "send", "target": {"worker": "me", "id": x_entry["id"]},
                              "worker": "carol_view"})
    assert reply["ok"] and reply["code"] == "x_ptr = x.send(carol)"
    patch = sent.of("world_patch")[-1]
    assert {op[1] for op in patch["ops"]} == {"me", "carol_view"} and len(patch["ops"]) == 2
    p_entry = next(o for o in w.world["workers"][0]["objects"] if o["names"] == ["x_ptr"])
    # the worker process stops: the view still has the pointer; the kernel's current model knows
    # its worker is down, so Get is refused before anything is tried
    from syft_lab.workers.local_process import stop_process

    stop_process(carol.process)
    before = dict(ns)
    reply = w.handle_message({"type": "action", "action": "get", "target": {"worker": "me", "id": p_entry["id"]}})
    assert not reply["ok"] and "points to 'carol_view', which is closed or down" in reply["error"], reply
    assert ns == before and not ns["x_ptr"]._ref.released
    w.refresh()
    lane = {ln["id"]: ln for ln in w.world["workers"]}["carol_view"]
    assert lane["state"] in ("disconnected", "unreachable")
