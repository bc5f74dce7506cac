"""Named actions from the views: send, get, move, oplog; and every bad request refused."""
import copy
import json

import pytest
import torch

import syft_lab as sy
from syft_lab.tensors.nodes import flatten
from syft_lab import actions
from syft_lab.inspection.model import world_dict
from syft_lab.widget import ChainWidget, WorldWidget


def act(widget, action, lane_id, obj_id, **extra):
    msg = {"type": "action", "req": 1, "action": action, "target": {"worker": lane_id, "id": obj_id}}
    msg.update(extra)
    return widget.handle_message(msg)


def lane(world, worker_id):
    return next(lane for lane in world["workers"] if lane["id"] == worker_id)


def entry_named(world, name):
    for ln in world["workers"]:
        for o in ln["objects"]:
            if name in o.get("names", []):
                return ln["id"], o
    raise KeyError(name)


@pytest.fixture
def setup(bob, alice):
    x = torch.tensor([1., 2., 3.])
    ns = {"x": x, "bob": bob, "alice": alice, "torch": torch}
    w = WorldWidget(namespace=ns)
    return ns, w


def test_send_binds_x_ptr_and_the_world_shows_it(setup, bob, capture):
    ns, w = setup
    sent = capture(w)
    _, x_entry = entry_named(w.world, "x")
    reply = act(w, "send", "me", x_entry["id"], worker="bob")
    assert reply["ok"] and reply["type"] == "reply" and reply["req"] == 1
    assert reply["name"] == "x_ptr" and reply["code"] == "x_ptr = x.send(bob)"
    p = ns["x_ptr"]
    assert isinstance(p, sy.PointerTensor) and p.location is bob
    assert torch.equal(bob.objects[p.id_at_location], ns["x"])
    # the view changed at once: a patch reached the browser before the reply
    assert sent.of("world_patch") and sent.index(sent.of("world_patch")[0]) < sent.index(reply)
    assert entry_named(w.world, "x_ptr")[1]["location"] == "bob"
    assert any(o["id"] == p.id_at_location for o in lane(w.world, "bob")["objects"])
    assert reply["result"] == {"worker": "me", "id": p._ref.pointer_id, "kind": "pointer", "location": "bob",
                               "id_at_location": p.id_at_location}


def test_send_with_a_name_and_default_names_never_replace_other_bindings(setup):
    ns, w = setup
    _, x_entry = entry_named(w.world, "x")
    assert act(w, "send", "me", x_entry["id"], worker="alice", name="on_alice")["name"] == "on_alice"
    ns["x_ptr"] = "a string the user keeps"
    reply = act(w, "send", "me", x_entry["id"], worker="bob")
    assert reply["ok"] and reply["name"] == "x_ptr_2" and ns["x_ptr"] == "a string the user keeps"
    assert reply["code"] == "x_ptr_2 = x.send(bob)  # x_ptr is taken by another str"
    assert reply["note"] == "x_ptr is taken by another str"
    assert ns["x_ptr_2"].location.id == "bob"


def test_sending_twice_binds_x_ptr_then_x_ptr_2_and_keeps_the_first_pointer(setup, bob):
    ns, w = setup
    _, x_entry = entry_named(w.world, "x")
    first = act(w, "send", "me", x_entry["id"], worker="bob")
    assert first["name"] == "x_ptr" and first["code"] == "x_ptr = x.send(bob)" and "note" not in first
    p1 = ns["x_ptr"]
    second = act(w, "send", "me", x_entry["id"], worker="bob")
    assert second["name"] == "x_ptr_2" and second["code"] == "x_ptr_2 = x.send(bob)  # x_ptr is taken by " \
                                                              "another PointerTensor"
    assert ns["x_ptr"] is p1 and not p1._ref.released  # the first pointer is still there and live
    assert p1.id_at_location in bob.objects and ns["x_ptr_2"].id_at_location in bob.objects
    assert p1.id_at_location != ns["x_ptr_2"].id_at_location
    third = act(w, "send", "me", x_entry["id"], worker="bob")
    assert third["name"] == "x_ptr_3"


def test_a_builtin_name_is_refused_and_the_builtin_still_works(setup, bob):
    ns, w = setup
    ns["__builtins__"] = __builtins__
    _, x_entry = entry_named(w.world, "x")
    for name in ("print", "len", "list"):
        reply = act(w, "send", "me", x_entry["id"], worker="bob", name=name)
        assert reply["ok"] is False and f"'{name}' is a Python builtin" in reply["error"]
        assert name not in ns
    assert not bob.objects
    exec("out = len([1, 2]); print('still works')", ns)
    assert ns["out"] == 2


def test_a_name_the_request_gives_rebinds_like_an_assignment(setup, bob):
    ns, w = setup
    ns["result"] = "an old value"
    _, x_entry = entry_named(w.world, "x")
    reply = act(w, "send", "me", x_entry["id"], worker="bob", name="result")
    assert reply["ok"] and reply["code"] == "result = x.send(bob)" and "note" not in reply
    assert ns["result"].location is bob


def test_a_default_name_that_is_a_builtin_gets_a_suffix(setup, bob):
    ns, w = setup
    ns["max_ptr"] = torch.ones(2).send(bob)
    w.refresh()
    reply = act(w, "get", "me", entry_named(w.world, "max_ptr")[1]["id"])
    assert reply["ok"] and reply["name"] == "max_2" and reply["code"] == "max_2 = max_ptr.get()  # max is a Python builtin"
    assert "max" not in ns and torch.equal(ns["max_2"], torch.ones(2))


def test_get_brings_it_back_and_it_leaves_bob(setup, bob):
    ns, w = setup
    act(w, "send", "me", entry_named(w.world, "x")[1]["id"], worker="bob")  # x_ptr = x.send(bob)
    obj_id = ns["x_ptr"].id_at_location
    _, p_entry = entry_named(w.world, "x_ptr")
    reply = act(w, "get", "me", p_entry["id"])
    # the round trip x -> x_ptr -> x rebinds x: it is the tensor x_ptr was sent from
    assert reply["ok"] and reply["name"] == "x" and reply["code"] == "x = x_ptr.get()"
    assert torch.equal(ns["x"], torch.tensor([1., 2., 3.])) and not isinstance(ns["x"], sy.PointerTensor)
    assert obj_id not in bob.objects
    assert all(o["id"] != obj_id for o in lane(w.world, "bob")["objects"])
    # x_ptr is still bound: its row stays, gone, with nothing to offer
    (gone,) = [o for o in lane(w.world, "me")["objects"] if o.get("names") == ["x_ptr"]]
    assert gone["state"] == "gone" and gone["actions"] == [] and gone["location"] == "bob"


def test_get_when_a_different_x_exists_binds_x_2_and_says_so(setup, bob):
    ns, w = setup
    ns["x_ptr"] = torch.tensor([5., 6.]).send(bob)  # not sent from x
    w.refresh()
    x_before = ns["x"]
    reply = act(w, "get", "me", entry_named(w.world, "x_ptr")[1]["id"])
    assert reply["ok"] and reply["name"] == "x_2"
    assert reply["code"] == "x_2 = x_ptr.get()  # x is taken by another Tensor"
    assert ns["x"] is x_before and torch.equal(ns["x_2"], torch.tensor([5., 6.]))
    ns["y_ptr"] = torch.ones(1).send(bob)
    ns["y"] = ns["y_ptr"].send(bob)  # a live pointer is "something else" too
    w.refresh()
    reply = act(w, "get", "me", entry_named(w.world, "y_ptr")[1]["id"])
    assert reply["name"] == "y_2" and reply["note"] == "y is taken by another PointerTensor"


def test_a_stale_pointer_gives_its_name_back(setup, bob):
    ns, w = setup
    x_id = entry_named(w.world, "x")[1]["id"]
    act(w, "send", "me", x_id, worker="bob")
    stale = ns["x_ptr"]
    stale.get()  # its object left bob: the pointer points to nothing any more
    reply = act(w, "send", "me", x_id, worker="bob")
    assert reply["name"] == "x_ptr" and "note" not in reply and ns["x_ptr"] is not stale


def test_move_rebinds_the_pointer_to_the_new_worker(setup, bob, alice):
    ns, w = setup
    ns["x_ptr"] = ns["x"].send(bob)
    w.refresh()
    old = ns["x_ptr"]
    reply = act(w, "move", "me", entry_named(w.world, "x_ptr")[1]["id"], worker="alice")
    assert reply["ok"] and reply["name"] == "x_ptr" and reply["code"] == "x_ptr = x_ptr.move(alice)"
    assert ns["x_ptr"].location is alice and old._ref.released
    assert not bob.objects and len(alice.objects) == 1


def test_get_and_move_from_a_worker_lane_act_through_the_pointer(setup, bob, alice):
    ns, w = setup
    act(w, "send", "me", entry_named(w.world, "x")[1]["id"], worker="bob")
    obj_id = ns["x_ptr"].id_at_location
    reply = act(w, "move", "bob", obj_id, worker="alice")
    assert reply["ok"] and reply["name"] == "x_ptr" and ns["x_ptr"].location is alice
    obj_id = ns["x_ptr"].id_at_location
    reply = act(w, "get", "alice", obj_id)
    assert reply["ok"] and reply["name"] == "x" and not alice.objects


def test_get_of_an_object_no_local_pointer_names(setup, bob, alice):
    ns, w = setup
    ns["pp"] = torch.ones(2).send(bob).send(alice)  # bob's tensor is pointed to from alice only
    w.refresh()
    bob_obj = lane(w.world, "bob")["objects"][0]
    reply = act(w, "get", "bob", bob_obj["id"])
    short = f"{bob_obj['id']:x}"[-6:]
    assert reply["ok"] and reply["name"] == f"obj_{short}"
    assert reply["code"] == f"obj_{short} = <object {short} on bob>.get()"
    assert torch.equal(ns[reply["name"]], torch.ones(2)) and not bob.objects


def test_oplog_reads_the_whole_log_of_a_local_logging_tensor(bob):
    lx = sy.LoggingTensor(torch.ones(3))
    y = lx
    for _ in range(8):
        y = y * 2
    ns = {"y": y}
    c = ChainWidget(y, namespace=ns)
    head = flatten(c.chains[0]["root"])[0]
    assert head["log_length"] == 8 and len(head["log_tail"]) == 5
    reply = act(c, "oplog", "me", head["id"])
    assert reply["ok"] and reply["total"] == 8 and len(reply["log"]) == 8
    assert reply["log"][0]["op"] == "aten.mul.Tensor" and reply["log"][0]["inputs"][0]["shape"] == [3]
    p = y.send(bob)
    ns["p"] = p
    c2 = ChainWidget(p, namespace=ns)
    remote = flatten(c2.chains[0]["root"])[1]
    reply = act(c2, "oplog", "bob", remote["id"])
    assert reply["ok"] and reply["total"] == 8  # an in-process worker's log can be read


def test_chain_widget_buttons_append_the_result(bob):
    x = torch.tensor([1., 2.])
    ns = {"x": x, "bob": bob}
    c = ChainWidget(x, namespace=ns)
    assert c.chains[0]["names"] == ["x"]
    reply = act(c, "send", "me", flatten(c.chains[0]["root"])[0]["id"], worker="bob")
    assert reply["ok"] and len(c.chains) == 2
    assert c.chains[1]["names"] == ["x_ptr"] and c.chains[1]["code"] == "x_ptr = x.send(bob)"
    assert [n["kind"] for n in flatten(c.chains[1]["root"])] == ["pointer", "tensor"]
    reply = act(c, "get", "me", flatten(c.chains[1]["root"])[0]["id"])
    assert reply["ok"] and flatten(c.chains[1]["root"])[0]["state"] == "gone" and len(c.chains) == 3
    assert flatten(c.chains[2]["root"])[0]["preview"]["values"] == [1.0, 2.0]


# --- every bad action: an error reply, and nothing changes -----------------------------------

def _state(ns, bob, alice):
    return ({k: id(v) for k, v in ns.items()}, sorted(bob.objects), sorted(alice.objects),
            copy.deepcopy(world_dict(ns)))


BAD = [
    ("not an object", "just a string", "JSON object"),
    ("a list", [1, 2], "JSON object"),
    ("no type", {"req": 3}, "malformed"),
    ("unknown type", {"type": "eval", "code": "import os"}, "malformed"),
    ("unknown field", {"type": "action", "action": "send", "target": {"worker": "me", "id": 1}, "worker": "bob",
                       "code": "x"}, "unknown field"),
    ("unknown action", {"type": "action", "action": "Delete all", "target": {"worker": "me", "id": 1}},
     "unknown action"),
    # a name like a layer's action is looked up in the model: what the object does not offer is refused
    ("action no layer offers", {"type": "action", "action": "delete", "target": {"worker": "me", "id": 1}},
     "unknown object"),
    ("action is code", {"type": "action", "action": "__import__('os')", "target": {"worker": "me", "id": 1}},
     "unknown action"),
    ("no target", {"type": "action", "action": "get"}, "target must be"),
    ("target extra key", {"type": "action", "action": "get", "target": {"worker": "me", "id": 1, "x": 1}},
     "target must be"),
    ("id a string", {"type": "action", "action": "get", "target": {"worker": "me", "id": "1"}}, "integer id"),
    ("id a float", {"type": "action", "action": "get", "target": {"worker": "me", "id": 1.0}}, "integer id"),
    ("id a bool", {"type": "action", "action": "get", "target": {"worker": "me", "id": True}}, "integer id"),
    ("id negative", {"type": "action", "action": "get", "target": {"worker": "me", "id": -5}}, "integer id"),
    ("id too big", {"type": "action", "action": "get", "target": {"worker": "me", "id": 2 ** 60}}, "integer id"),
    ("worker not a name", {"type": "action", "action": "get", "target": {"worker": "bob; rm -rf", "id": 1}},
     "worker id"),
    ("bad req", {"type": "action", "req": {"a": 1}, "action": "get", "target": {"worker": "me", "id": 1}}, "req"),
]


@pytest.mark.parametrize("msg,fragment", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_malformed_messages_get_an_error_reply_and_change_nothing(setup, bob, alice, msg, fragment, capture):
    ns, w = setup
    ns["x_ptr"] = ns["x"].send(bob)
    w.refresh()
    before = _state(ns, bob, alice)
    sent = capture(w)
    w._on_front_msg(w, msg, [])
    replies = sent.of("reply")
    assert len(replies) == 1 and replies[0]["ok"] is False
    assert fragment.lower() in replies[0]["error"].lower()
    assert not sent.of("world_patch")
    assert _state(ns, bob, alice) == before


def _bad_requests(ns, w, bob, alice):
    """Well-formed requests that the kernel must refuse, given the setup's world."""
    _, x = entry_named(w.world, "x")
    _, p = entry_named(w.world, "x_ptr")
    bob_id = ns["x_ptr"].id_at_location
    return [
        ("unknown id", dict(action="get", target={"worker": "me", "id": 12345}), "unknown object"),
        ("id on the wrong lane", dict(action="get", target={"worker": "alice", "id": bob_id}), "unknown object"),
        ("unknown worker", dict(action="send", target={"worker": "me", "id": x["id"]}, worker="carol"),
         "no worker named 'carol'"),
        ("send to me", dict(action="send", target={"worker": "me", "id": x["id"]}, worker="me"), "another worker"),
        ("move to me", dict(action="move", target={"worker": "me", "id": p["id"]}, worker="me"), "use 'get'"),
        ("move where it is", dict(action="move", target={"worker": "me", "id": p["id"]}, worker="bob"),
         "already"),
        # actions the model does not offer on the entry are refused first (nodes.entry_actions)
        ("send a pointer where it points", dict(action="send", target={"worker": "me", "id": p["id"]}, worker="bob"),
         "send is not offered on PointerTensor"),
        ("send needs a worker", dict(action="send", target={"worker": "me", "id": x["id"]}), "destination"),
        ("get takes no worker", dict(action="get", target={"worker": "me", "id": p["id"]}, worker="bob"),
         "no destination"),
        ("get a local tensor", dict(action="get", target={"worker": "me", "id": x["id"]}), "offers: send"),
        ("send a stored object", dict(action="send", target={"worker": "bob", "id": bob_id}, worker="alice"),
         "offers: get, move"),
        ("oplog of a plain tensor", dict(action="oplog", target={"worker": "me", "id": x["id"]}), "not offered"),
        ("name not an identifier", dict(action="send", target={"worker": "me", "id": x["id"]}, worker="bob",
                                        name="os.system('x')"), "not a name"),
        ("name a keyword", dict(action="send", target={"worker": "me", "id": x["id"]}, worker="bob", name="import"),
         "not a name"),
        ("name private", dict(action="send", target={"worker": "me", "id": x["id"]}, worker="bob", name="__builtins__"),
         "not a name"),
        ("name not a string", dict(action="send", target={"worker": "me", "id": x["id"]}, worker="bob", name=3),
         "not a name"),
        ("name a builtin", dict(action="send", target={"worker": "me", "id": x["id"]}, worker="bob", name="print"),
         "'print' is a Python builtin"),
        ("name a dunder", dict(action="get", target={"worker": "me", "id": p["id"]}, name="__class__"),
         "not a name"),
        ("name a builtin on get", dict(action="get", target={"worker": "me", "id": p["id"]}, name="id"),
         "'id' is a Python builtin"),
    ]


def test_every_refused_action_changes_nothing(setup, bob, alice, capture):
    ns, w = setup
    ns["x_ptr"] = ns["x"].send(bob)
    w.refresh()
    for label, req, fragment in _bad_requests(ns, w, bob, alice):
        before = _state(ns, bob, alice)
        sent = capture(w)
        reply = w.handle_message({"type": "action", "req": label.replace(" ", "-"), **req})
        assert reply["ok"] is False, label
        assert reply["req"] == label.replace(" ", "-")
        assert fragment.lower() in reply["error"].lower(), (label, reply["error"])
        assert not sent.of("world_patch"), label
        assert _state(ns, bob, alice) == before, label


def test_the_world_changed_meanwhile(setup, bob, alice):
    """The view is out of date: the object was fetched, the pointer rebound, the worker closed."""
    ns, w = setup
    ns["x_ptr"] = ns["x"].send(bob)
    ns["y_ptr"] = torch.zeros(1).send(alice)
    w.refresh()
    _, p = entry_named(w.world, "x_ptr")
    _, x = entry_named(w.world, "x")
    _, y = entry_named(w.world, "y_ptr")
    bob_id = ns["x_ptr"].id_at_location
    ns["x_ptr"].get()  # fetched in a cell; the view has not refreshed yet
    before = _state(ns, bob, alice)
    for target in ({"worker": "me", "id": p["id"]}, {"worker": "bob", "id": bob_id}):
        reply = w.handle_message({"type": "action", "action": "get", "target": target})
        assert not reply["ok"] and ("stale" in reply["error"] or "no longer holds" in reply["error"])
    del ns["x"]  # the variable is gone
    before = _state(ns, bob, alice)
    reply = w.handle_message({"type": "action", "action": "send", "target": {"worker": "me", "id": x["id"]},
                              "worker": "bob"})
    assert not reply["ok"] and "no longer bound" in reply["error"]
    assert _state(ns, bob, alice) == before
    alice.close()  # the worker went away
    reply = w.handle_message({"type": "action", "action": "get", "target": {"worker": "alice", "id":
                                                                           ns["y_ptr"].id_at_location}})
    assert not reply["ok"] and "no worker named 'alice'" in reply["error"]
    reply = w.handle_message({"type": "action", "action": "move", "target": {"worker": "me", "id": y["id"]},
                              "worker": "alice"})
    assert not reply["ok"] and "points to 'alice', which is closed or down" in reply["error"]


def test_chain_widget_only_accepts_ids_it_shows(bob):
    x = torch.ones(2)
    other = torch.zeros(2)
    ns = {"x": x, "other": other}
    c = ChainWidget(x, namespace=ns)
    from syft_lab.ids import tensor_id

    reply = act(c, "send", "me", tensor_id(other), worker="bob")
    assert not reply["ok"] and "unknown object" in reply["error"]
    assert not bob.objects and set(ns) == {"x", "other"}


def test_parse_is_strict_and_names_are_checked():
    with pytest.raises(actions.ActionError):
        actions.check_name("x-y")
    with pytest.raises(actions.ActionError):
        actions.check_name("ünïcode")
    assert actions.check_name("x_ptr2") == "x_ptr2"
    with pytest.raises(actions.ActionError, match="'print' is a Python builtin"):
        actions.check_name("print")
    with pytest.raises(actions.ActionError, match="'shown' is a Python builtin"):
        actions.check_name("shown", {"__builtins__": {"shown": print}})  # a namespace's own builtins
    for name in ("get_ipython", "display", "In", "Out", "exit", "quit"):  # IPython's, even between cells
        with pytest.raises(actions.ActionError, match=f"'{name}' is a name IPython keeps"):
            actions.check_name(name)
    assert actions.check_name("match") == "match"  # a soft keyword is a valid name
    p = actions.parse({"type": "action", "req": "v1-2", "action": "move", "target": {"worker": "me", "id": 5},
                       "worker": "alice", "name": "z"})
    assert p == {"action": "move", "req": "v1-2", "worker": "me", "id": 5, "dest": "alice", "name": "z"}


def test_a_weak_proxy_in_underscore_never_stands_for_the_object(bob):
    """After a cell ends with ``lx``, IPython's ``_`` holds a weak proxy of it (views hold
    what they show weakly): an action on lx names lx, not the proxy."""
    import weakref

    lx = sy.LoggingTensor(torch.tensor([1., 2.]))
    ns = {"_": weakref.proxy(lx), "_2": weakref.proxy(lx), "lx": lx, "bob": bob}
    w = WorldWidget(namespace=ns)
    reply = act(w, "send", "me", entry_named(w.world, "lx")[1]["id"], worker="bob")
    assert reply["ok"] and reply["code"] == "lx_ptr = lx.send(bob)"
    assert ns["lx_ptr"].location is bob


def test_a_layer_s_own_actions_run_from_its_view_and_a_shared_tensor_is_a_tree(workers):
    """A secret-shared fixed precision tensor: one branch per share, each on its worker, the crypto
    provider named, no value anywhere; the buttons are the layer's node_actions (get, then
    float_precision), run through actions.perform like send/get/move."""
    bob, alice = workers
    carol = sy.VirtualWorker("carol")
    try:
        ns = {"sx": torch.tensor([1.5, -2.0]).fix_precision().share(bob, alice, crypto_provider=carol)}
        c = ChainWidget(ns["sx"], namespace=ns)
        root = c.chains[0]["root"]
        (shared,) = root["children"]
        assert [b["location"] for b in shared["children"]] == ["bob", "alice"]
        assert shared["annotations"] == [{"label": "crypto provider", "value": "carol"}]
        assert {b["group"] for b in shared["children"]} == {shared["group"]}
        assert '"values"' not in json.dumps(root)
        assert root["actions"] == ["get", "float_precision"]
        refused = act(c, "float_precision", "me", root["id"])
        assert not refused["ok"] and "get() first" in refused["error"]  # the layer's own check
        reply = act(c, "get", "me", root["id"])
        assert reply["ok"] and reply["code"] == "sx = sx.get()", reply
        fx = ns["sx"]
        assert [n["kind"] for n in flatten(sy.chain(fx).root)] == ["fixed_precision", "tensor"]  # here now
        c2 = ChainWidget(fx, namespace=ns)
        reply = act(c2, "float_precision", "me", c2.chains[0]["root"]["id"])
        assert reply["ok"] and reply["code"] == "sx_float_precision = sx.float_precision()", reply
        assert torch.allclose(ns["sx_float_precision"], torch.tensor([1.5, -2.0]))
        # a name that is no action of the layer is refused before anything runs
        bad = act(c2, "share", "me", c2.chains[0]["root"]["id"])
        assert not bad["ok"] and "not offered" in bad["error"]
        c.close()
        c2.close()
        ns.clear()
    finally:
        carol.close()
