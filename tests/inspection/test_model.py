"""The inspection model: the JSON every view renders."""
import json

import pytest
import torch

import syft_lab as sy
from syft_lab import events
from syft_lab.tensors import nodes
from syft_lab.tensors.base import ChainLayer, make_layer


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
    assert d["schema"] == "syft_lab.chain" and d["version"] == 2
    assert json.loads(json.dumps(d)) == d
    # version 2: a tree; a plain chain is the one-child case
    root = d["root"]
    assert root["id"] == head["id"] and [c["kind"] for c in root["children"]] == ["tensor"]
    assert root["children"][0]["children"] == []
    assert root["actions"] == ["send", "oplog"] and root["children"][0]["actions"] == []
    assert root["display"]["label"] == "LoggingTensor" and root["annotations"] == []


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
    assert ptr["actions"] == ["get", "move"] and remote_leaf["actions"] == []
    assert sy.chain(p).root["children"][0]["id"] == remote_log["id"]
    assert repr(p).startswith("[PointerTensor | me:") and "-> bob:" in repr(p)


def test_stale_pointer_shows_its_state(bob):
    p = torch.ones(1).send(bob)
    p.get()
    nodes = sy.chain(p).nodes
    assert nodes[0]["state"] == "gone" and len(nodes) == 1
    assert nodes[0]["actions"] == []  # nothing to get or move any more
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


class ThreeShares(ChainLayer):
    """A toy layer with one child per share (as a shared tensor has): the tree's case."""

    kind = "toy_shared"

    @staticmethod
    def __new__(cls, shares, group):
        r = make_layer(cls, shares[0].shape, shares[0].dtype, torch.device("cpu"))
        r.shares, r.group_id = list(shares), group
        return r

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        raise NotImplementedError("a toy: only inspected")

    def layer_children(self):
        return list(self.shares)

    def node_fields(self):
        return {"group": self.group_id, "annotations": [{"label": "crypto provider", "value": "carol"}]}

    def child_fields(self, i):  # what every share node carries: its secret's group (the layer hook)
        return {"group": self.group_id}

    def display(self):
        return {"label": "ThreeShares", "lines": [f"{len(self.shares)} shares"], "badge": "secret"}


def test_a_layer_with_several_children_is_a_tree_with_one_branch_per_share(workers):
    bob, alice = workers
    carol = sy.VirtualWorker("carol")
    try:
        secret = ThreeShares([torch.tensor([1., 2.]).send(w) for w in (bob, alice, carol)], group=77)
        root = sy.chain(secret).root
        assert root["kind"] == "toy_shared" and root["display"] == {"label": "ThreeShares", "lines": ["3 shares"],
                                                                  "badge": "secret"}
        assert root["annotations"] == [{"label": "crypto provider", "value": "carol"}]
        assert [c["location"] for c in root["children"]] == ["bob", "alice", "carol"]
        assert {c["group"] for c in root["children"]} == {77}  # every share names its secret
        assert all(c["actions"] == [] for c in root["children"])  # a share alone is not fetched
        text = json.dumps(root)
        assert '"values"' not in text  # share values are in no node
        assert repr(secret).startswith("ThreeShares [secret](crypto provider: carol)>([PointerTensor | me:")
        assert repr(secret).count("[PointerTensor") == 3
        del secret, root
    finally:
        carol.close()


def test_a_version_1_list_becomes_a_one_child_tree():
    v1 = [{"kind": "logging", "type": "LoggingTensor", "id": 1, "owner": "bob", "log_length": 2, "log_tail": ["a"]},
          {"kind": "tensor", "type": "Tensor", "id": 2, "owner": "bob", "shape": [2], "dtype": "float32",
           "preview": None}]
    root = nodes.tree_from_list(v1)
    assert root["children"][0]["id"] == 2 and root["children"][0]["children"] == []
    assert root["display"]["lines"] == ["log: 2 ops, last a"]
    assert [n["id"] for n in nodes.flatten(root)] == [1, 2]


def test_a_fetched_pointer_still_bound_stays_as_a_gone_row(bob, alice):
    x_ptr = torch.ones(2).send(bob)
    moved = x_ptr.move(alice)
    w = sy.world({"x_ptr": x_ptr, "moved": moved})
    me = next(lane for lane in w["workers"] if lane["id"] == "me")
    gone = next(o for o in me["objects"] if o["names"] == ["x_ptr"])
    assert gone["state"] == "gone" and gone["actions"] == []
    assert (gone["gone_how"], gone["gone_to"]) == ("moved", "alice")  # where it went
    assert "(moved to alice)" in repr(w)
    live = next(o for o in me["objects"] if o["names"] == ["moved"])
    assert live["state"] == "ok" and live["actions"] == ["get", "move"]
    # once nothing names it, the row goes
    w = sy.world({"moved": moved})
    me = next(lane for lane in w["workers"] if lane["id"] == "me")
    assert [o["names"] for o in me["objects"] if o["kind"] == "pointer"] == [["moved"]]


def test_the_world_marks_every_share_of_a_secret_and_offers_nothing_on_one(workers):
    bob, alice = workers
    carol = sy.VirtualWorker("carol")
    try:
        sx = torch.tensor([1.5, -2.0]).fix_precision().share(bob, alice, crypto_provider=carol)
        w = sy.world({"sx": sx})
        lanes = {lane["id"]: lane for lane in w["workers"]}
        (local,) = [o for o in lanes["me"]["objects"] if o["names"] == ["sx"]]
        group = local["group"]
        assert local["kind"] == "fixed_precision" and local["crypto_provider"] == "carol"
        assert local["actions"] == ["get", "float_precision"]
        ptrs = [o for o in lanes["me"]["objects"] if o["kind"] == "pointer"]
        stored = lanes["bob"]["objects"] + lanes["alice"]["objects"]
        for rows in (ptrs, stored):
            assert sorted((o["group"], o["share"]["index"], o["share"]["of"]) for o in rows) == [(group, 0, 2),
                                                                                                 (group, 1, 2)]
            assert all(o["actions"] == [] for o in rows)  # a share moves with its secret only
        assert '"values"' not in json.dumps(w) and "preview" not in json.dumps(w)
        del sx, w, local, ptrs, stored, lanes
    finally:
        carol.close()


def test_a_closed_worker_keeps_a_gone_lane_while_a_pointer_points_to_it_in_every_view():
    """sy.world() (the text and the dict) and a world view apply one rule to a closed worker."""
    carl = sy.VirtualWorker("carl_closing")
    x = torch.ones(2).send(carl)
    carl.close()
    ns = {"x": x}
    w = sy.world(ns)
    lanes = {lane["id"]: lane for lane in w["workers"]}
    gone = lanes["carl_closing"]  # #39.1: it still holds x's object (its pointer owns it): the lane says so
    assert {k: v for k, v in gone.items() if k != "objects"} == {"id": "carl_closing", "kind": "virtual",
                                                                   "state": "closed", "gone": True}
    assert [(o["id"], o["actions"]) for o in gone["objects"]] == [(x.id_at_location, [])]
    (ptr,) = [o for o in lanes["me"]["objects"] if o.get("names") == ["x"]]
    assert ptr["dangling"] and ptr["actions"] == []
    assert "-> carl_closing:" in repr(w) and "(dangling: carl_closing is down)" in repr(w)
    assert "carl_closing (virtual) [closed]: 1 object(s)" in repr(w)
    from syft_lab.widget.widgets import WorldWidget
    view = WorldWidget(namespace=ns)
    try:
        assert [lane for lane in view.world["workers"] if lane["id"] == "carl_closing"] == [lanes["carl_closing"]]
    finally:
        view.close()
    del ns["x"], x
    import gc
    gc.collect()
    assert "carl_closing" not in {lane["id"] for lane in sy.world({})["workers"]}
