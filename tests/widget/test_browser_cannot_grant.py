"""A browser cannot grant itself actions (#29 item 2), in a real kernel driven over the widget's
comm as a browser would: a forged state update is dropped, an action is decided from the
kernel's own current model, and the legitimate action on the same view still works.

The kernel is shared by the module (a start costs seconds) and reset at the start of each test."""
import copy

import pytest

from widget_kernel import WidgetComm, world_widget_comm

SHARED = """\
import torch
import syft_lab as sy
%load_ext syft_lab
bob, alice, carol = sy.VirtualWorker("bob"), sy.VirtualWorker("alice"), sy.VirtualWorker("carol")
sx = torch.tensor([1.5, -2.0]).fix_precision().share(bob, alice, crypto_provider=carol)
x_ptr = torch.tensor([1., 2.]).send(bob)
w = sy.inspect()
w
"""


def run(kernel, code):
    r = kernel.run(code)
    assert r["error"] is None, r
    return r


def entry_of(world, lane_id, pred):
    lane = next(l for l in world["workers"] if l["id"] == lane_id)
    return next(o for o in lane["objects"] if pred(o))


@pytest.fixture
def shown(kernel):
    """A kernel holding a secret shared between bob and alice and a pointer to bob, shown in a
    world view; returns (kernel, the view's comm, the world the view was sent)."""
    kernel.reset()
    start = len(kernel.comm_msgs)
    run(kernel, SHARED)
    comm_id, world = world_widget_comm(kernel, start)
    return kernel, WidgetComm(kernel, comm_id), world


def test_a_forged_world_grants_no_action_on_a_share(shown):
    kernel, comm, world = shown
    share = entry_of(world, "alice", lambda o: True)
    assert share["actions"] == []  # a share offers nothing alone
    fake = copy.deepcopy(world)
    entry_of(fake, "alice", lambda o: o["id"] == share["id"])["actions"] = ["get", "move"]
    comm.update({"world": fake})
    reply, before = comm.request({"type": "action", "req": "attack", "action": "move",
                                  "target": {"worker": "alice", "id": share["id"]}, "worker": "bob"})
    assert reply["ok"] is False and "not offered" in reply["error"], reply
    assert not any(d.get("method") == "echo_update" for d in before)  # not passed on to other views
    # nothing moved: each party still holds one share, and the secret comes back whole
    assert kernel.eval("(len(bob.objects) - 1, len(alice.objects))") == (1, 1)  # bob: a share and x_ptr's
    # the kernel's own copy of the view's world was not rewritten
    assert kernel.eval("[o['actions'] for l in w.world['workers'] if l['id'] == 'alice' for o in l['objects']]") == [[]]
    assert kernel.eval("sx.get().float_precision().tolist()") == [1.5, -2.0]


def test_a_forged_world_cannot_name_an_object_the_view_was_not_shown(shown):
    kernel, comm, world = shown
    bob_ids = kernel.eval("sorted(bob.objects)")
    fake = copy.deepcopy(world)
    lane = next(l for l in fake["workers"] if l["id"] == "bob")
    lane["objects"].append({"id": 4242, "kind": "tensor", "shape": [2], "dtype": "float32",
                            "actions": ["get", "move"]})
    comm.update({"world": fake})
    reply, _ = comm.request({"type": "action", "req": "ghost", "action": "get",
                             "target": {"worker": "bob", "id": 4242}})
    assert reply["ok"] is False and "unknown object" in reply["error"], reply
    assert kernel.eval("sorted(bob.objects)") == bob_ids


def test_the_legitimate_action_still_works_after_a_forged_update(shown):
    kernel, comm, world = shown
    ptr = entry_of(world, "me", lambda o: "x_ptr" in o.get("names", []))
    assert "move" in ptr["actions"]
    fake = copy.deepcopy(world)
    for lane in fake["workers"]:
        lane["objects"] = []  # a browser that hides everything changes nothing either
    comm.update({"world": fake})
    reply, _ = comm.request({"type": "action", "req": "legit", "action": "move",
                             "target": {"worker": "me", "id": ptr["id"]}, "worker": "alice"})
    assert reply["ok"] is True and reply["code"] == "x_ptr = x_ptr.move(alice)", reply
    assert kernel.eval("(x_ptr.location.id, x_ptr.get().tolist())") == ("alice", [1.0, 2.0])

