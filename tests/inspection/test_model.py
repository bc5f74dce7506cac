"""The inspection model: the JSON every view renders."""
import json

import pytest
import torch

import syft_lab as sy
from syft_lab import events


def test_chain_of_a_logging_tensor_head_first_data_last():
    x = torch.tensor([[1., -2., 3.]])
    y = (sy.LoggingTensor(x) * 2).sum()
    c = sy.chain(y)
    kinds = [n["kind"] for n in c.nodes]
    assert kinds == ["logging", "tensor"]
    head, leaf = c.nodes
    assert head["type"] == "LoggingTensor" and head["owner"] == "me"
    assert head["shape"] == [] and head["dtype"] == "float32" and head["requires_grad"] is False
    assert head["log_length"] == 2 and head["log_tail"] == ["aten.mul.Tensor", "aten.sum.default"]
    assert leaf["preview"]["values"] == [4.0] and leaf["preview"]["mean"] == 4.0
    assert isinstance(head["id"], int) and head["id"] < 2 ** 53
    assert sy.chain(y).nodes[0]["id"] == head["id"]  # stable
    d = c.to_dict()
    assert d["schema"] == "syft_lab.chain" and d["version"] == 1
    assert json.loads(json.dumps(d)) == d


def test_nested_layers_give_one_node_each():
    c = sy.chain(sy.LoggingTensor(sy.LoggingTensor(torch.ones(2))))
    assert [n["kind"] for n in c.nodes] == ["logging", "logging", "tensor"]
    assert len({n["id"] for n in c.nodes}) == 3


def test_leaf_preview_is_bounded_for_large_tensors():
    big = torch.arange(1_000_000, dtype=torch.float32)
    leaf = sy.chain(big).nodes[0]
    p = leaf["preview"]
    assert p["numel"] == 1_000_000 and p["truncated"] is True
    assert p["values"] == [0., 1., 2., 3., 4., 5.]
    assert p["min"] == 0 and p["max"] == 999_999 and p["mean"] == pytest.approx(499_999.5)
    assert len(json.dumps(sy.chain(big).to_dict())) < 2000
    ints = sy.chain(torch.tensor([1, 2])).nodes[0]["preview"]
    assert "mean" not in ints and ints["values"] == [1, 2]


def test_pointer_chain_continues_on_the_worker_without_values(bob):
    p = sy.LoggingTensor(torch.tensor([1., 2.])).send(bob)
    nodes = sy.chain(p).nodes
    assert [n["kind"] for n in nodes] == ["pointer", "logging", "tensor"]
    ptr, remote_log, remote_leaf = nodes
    assert ptr["owner"] == "me" and ptr["location"] == "bob"
    assert ptr["id_at_location"] == p.id_at_location == remote_log["id"]
    assert remote_log["owner"] == "bob" and remote_leaf["owner"] == "bob"
    assert remote_leaf["preview"] is None  # values stay on bob
    assert repr(p).startswith("[PointerTensor | me:") and "-> bob:" in repr(p)


def test_stale_pointer_shows_its_state(bob):
    p = torch.ones(1).send(bob)
    p.get()
    nodes = sy.chain(p).nodes
    assert nodes[0]["state"] == "gone" and len(nodes) == 1
    assert "(gone)" in repr(p)


def test_chain_of_a_non_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="sy.chain expects a tensor"):
        sy.chain(42)
    with pytest.raises(TypeError):
        sy.chain("abc")


def test_world_lists_workers_objects_pointers_and_names(bob, alice):
    x = torch.tensor([1., 2.]).tag("#x").describe("an x")
    x_ptr = x.send(bob)
    pp = torch.ones(1).send(bob).send(alice)
    w = sy.world({"x": x, "x_ptr": x_ptr, "pp": pp, "_hidden": x, "n": 3})
    assert json.loads(json.dumps(w)) == dict(w)
    lanes = {lane["id"]: lane for lane in w["workers"]}
    assert {"me", "bob", "alice"} <= set(lanes)
    me_objs = lanes["me"]["objects"]
    ptr_entry = next(o for o in me_objs if o.get("names") == ["x_ptr"])
    assert ptr_entry["kind"] == "pointer" and ptr_entry["location"] == "bob"
    assert ptr_entry["id_at_location"] == x_ptr.id_at_location
    assert any(o.get("names") == ["x"] and o["kind"] == "tensor" for o in me_objs)
    bob_obj = next(o for o in lanes["bob"]["objects"] if o["id"] == x_ptr.id_at_location)
    assert bob_obj["tags"] == ["#x"] and bob_obj["description"] == "an x" and bob_obj["shape"] == [2]
    alice_ptr = lanes["alice"]["objects"][0]
    assert alice_ptr["kind"] == "pointer" and alice_ptr["location"] == "bob"
    assert "bob (virtual): 2 object(s)" in repr(w)


def test_workers_publish_events(bob):
    seen = []
    unsubscribe = events.subscribe(seen.append)
    try:
        p = torch.ones(1).send(bob)
        q = p + 1
        del q
        p.get()
    finally:
        unsubscribe()
    types = [(e["type"], e["worker"]) for e in seen]
    assert ("stored", "bob") in types and ("pointer_created", "me") in types
    assert ("pointer_dropped", "me") in types
    assert types.count(("deleted", "bob")) == 2
    reasons = sorted(e.get("reason") for e in seen if e["type"] == "deleted")
    assert reasons == ["fetched", "released"]
