"""The layer hook for what a layer tells its children and the world (#25 item 1).

``SplitTensor`` is a toy layer with several children, defined only here: a tensor cut into
parts along its first dimension, each part a child (a local tensor or a pointer to a worker). It
annotates its children through ``child_fields(i)`` and says what its own world entry carries
through ``world_fields()``; nothing in syft_lab names it, and it draws as a tree with those
marks in the chain model (text and SVG views too) and in the world.
"""
from __future__ import annotations

import json

import pytest
import torch

import syft_lab as sy
from syft_lab.inspection.text import render_tree
from syft_lab.tensors.base import ChainLayer, make_layer
from syft_lab.widget import svg


class SplitTensor(ChainLayer):
    kind = "toy_split"
    node_actions = ("get",)
    child_fields_below = ("split",)  # the stored part a part pointer points to knows its split

    @staticmethod
    def __new__(cls, parts, split: int):
        rows = sum(p.shape[0] for p in parts)
        r = make_layer(cls, (rows, *parts[0].shape[1:]), parts[0].dtype, torch.device("cpu"))
        r.parts, r.split = list(parts), split
        return r

    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        raise NotImplementedError("a toy: only inspected")

    def layer_children(self):
        return list(self.parts)

    def node_fields(self):
        return {"split": self.split, "annotations": [{"label": "cut", "value": "dim 0"}]}

    def child_fields(self, i):
        rows = self.parts[i].shape[0]
        return {"split": self.split, "part": {"index": i, "of": len(self.parts)},
                "annotations": [{"label": "part", "value": f"{i + 1} of {len(self.parts)} ({rows} rows)"}]}

    def world_fields(self):
        return {"split": self.split, "n_parts": len(self.parts)}

    def display(self):
        return {"label": "SplitTensor", "lines": [f"{len(self.parts)} parts"], "badge": "split"}


@pytest.fixture
def split(workers):
    bob, alice = workers
    parts = [torch.ones(2, 3).send(bob), torch.zeros(1, 3).send(alice), torch.full((1, 3), 2.0)]
    return SplitTensor(parts, split=4242)


def test_a_layer_annotates_each_child_through_the_hook_and_draws_as_a_tree(split):
    root = sy.chain(split).root
    assert root["kind"] == "toy_split" and root["split"] == 4242
    assert root["annotations"] == [{"label": "cut", "value": "dim 0"}]
    kids = root["children"]
    assert [c["kind"] for c in kids] == ["pointer", "pointer", "tensor"]
    assert [c["part"] for c in kids] == [{"index": i, "of": 3} for i in range(3)]
    assert [c["annotations"] for c in kids] == [[{"label": "part", "value": v}] for v in
                                                ("1 of 3 (2 rows)", "2 of 3 (1 rows)", "3 of 3 (1 rows)")]
    # what the layer passes below: the stored part on its worker knows its split, not its index
    (stored,) = kids[0]["children"]
    assert stored["owner"] == "bob" and stored["split"] == 4242 and "part" not in stored
    assert stored["annotations"] == []
    assert kids[2]["preview"]["values"][:3] == [2.0, 2.0, 2.0]  # a local part shows its values
    # the views draw it from that model: the text tree and the SVG carry the children's marks
    text = render_tree(root)
    assert "SplitTensor" in text and "part: 1 of 3 (2 rows)" in text and "part: 3 of 3 (1 rows)" in text
    drawn = svg.chain_svg(root)
    assert "SplitTensor" in drawn and "2 of 3 (1 rows)" in drawn
    del root, kids, stored


@pytest.mark.parametrize("where", ["name", "container"])
def test_the_world_carries_what_the_layer_tells_its_children_and_what_it_says_of_itself(split, where):
    ns, holder = ({"sp": split}, "sp") if where == "name" else ({"box": {"k": [split]}}, "box['k'][0]")
    w = sy.world(ns)
    lanes = {lane["id"]: lane for lane in w["workers"]}
    me = lanes["me"]["objects"]
    if where == "name":  # a named local layer: its row says what world_fields says
        (row,) = [o for o in me if o["names"] == ["sp"]]
        assert row["kind"] == "toy_split" and row["split"] == 4242 and row["n_parts"] == 2 + 1
        assert row["actions"] == ["get"]
    pointers = sorted((o for o in me if o["kind"] == "pointer" and o.get("split") == 4242),
                      key=lambda o: o["part"]["index"])
    assert [(o["location"], o["part"]["index"], o["secret"]) for o in pointers] == [("bob", 0, holder),
                                                                                     ("alice", 1, holder)]
    stored = [o for lid in ("bob", "alice") for o in lanes[lid]["objects"]]
    assert [(o["part"], o["split"], o["secret"]) for o in stored] == [({"index": 0, "of": 3}, 4242, holder),
                                                                      ({"index": 1, "of": 3}, 4242, holder)]
    # a part moves with its layer only; the chain's annotations stay in the chain model
    assert all(o["actions"] == [] for o in pointers + stored)
    assert "annotations" not in json.dumps(pointers + stored)
    del w, lanes, me, pointers, stored


def test_without_the_layer_in_the_namespace_its_parts_are_plain_rows(split):
    w = sy.world({})
    (row,) = [o for lane in w["workers"] if lane["id"] == "bob" for o in lane["objects"]]
    assert "part" not in row and "split" not in row and row["actions"] == ["get", "move"]
    del w, row
