"""Walking the notebook's namespace (issue 24.2): the world is read whatever lives there, and
IPython's cache never names anything (issue 26.4)."""
import gc
import weakref

import torch
from torch import nn

import syft_lab as sy
from syft_lab.inspection import model


class Boom(Exception):
    pass


class Hostile:
    """Raises from every hook a walker might call."""

    def __getattr__(self, name):
        raise Boom(f"getattr {name}")

    def __eq__(self, other):
        raise Boom("eq")

    def __hash__(self):
        raise Boom("hash")

    def __len__(self):
        raise Boom("len")

    def __bool__(self):
        raise Boom("bool")

    def __repr__(self):
        raise Boom("repr")

    @property
    def __class__(self):
        raise Boom("class")


class HostileList(list):
    def __iter__(self):
        raise Boom("iter")

    def __len__(self):
        raise Boom("len")


class HostileDict(dict):
    def items(self):
        raise Boom("items")

    def __getitem__(self, key):
        raise Boom("getitem")


class Target:
    pass


def dead_proxy():
    t = Target()
    proxy = weakref.proxy(t)
    del t
    gc.collect()
    return proxy


def hostile_namespace(p, q):
    cycle = []
    cycle.append(cycle)
    cycle.append({"again": cycle, "q": q})
    tensor_proxy_target = torch.ones(1)
    tensor_proxy = weakref.proxy(Target())  # dead at once
    return {
        "dead": dead_proxy(),
        "dead_ref": weakref.ref(Target()),
        "dead_in_list": [dead_proxy(), dead_proxy()],
        "dead_in_dict": {"a": dead_proxy()},
        "hostile": Hostile(),
        "hostile_in_list": [Hostile(), {"h": Hostile()}],
        "hostile_list": HostileList([p]),
        "hostile_dict": HostileDict(k=p),
        "huge": list(range(2_000_000)),
        "huge_dict": {i: i for i in range(200_000)},
        "cycle": cycle,
        "tensor_proxy": tensor_proxy,
        "kept": tensor_proxy_target,
        "p": p,
        "Out": {10: [q]},  # IPython's output cache
        "_": q, "_5": q, "__": q, "_i3": "q = ...",
    }


def test_world_of_a_hostile_namespace_renders_and_names_what_a_person_named(bob):
    p = torch.tensor([1., 2.]).send(bob)
    q = torch.tensor([3.]).send(bob)
    ns = hostile_namespace(p, q)
    w = sy.world(ns)
    me = next(lane for lane in w["workers"] if lane["id"] == "me")
    rows = {o["id"]: o for o in me["objects"] if o["kind"] == "pointer"}
    assert rows[p._ref.pointer_id]["names"] == ["p"]
    # q is named only by the cycle, read after the huge containers (each is looked at up to
    # CONTAINER_ITEMS): never by Out[10][0], _, _5 or __
    q_row = rows[q._ref.pointer_id]
    assert q_row["names"] == []
    assert q_row["held_in"] == ["cycle[1]['q']"]
    assert not any(path.startswith(("Out", "_")) for o in me["objects"] for path in o.get("held_in", []))
    # the hostile list and dict were read without their overridden methods
    assert "hostile_list[0]" in rows[p._ref.pointer_id]["held_in"]
    assert "hostile_dict['k']" in rows[p._ref.pointer_id]["held_in"]
    assert "kept" in {n for o in me["objects"] for n in o["names"]}
    assert "p" in repr(w)  # the text view renders it too


def test_container_items_never_raises_and_ends_on_cycles(bob):
    p = torch.ones(1).send(bob)
    ns = hostile_namespace(p, p)
    paths = [path for path, _v in model.container_items(ns)]
    assert "cycle[1]['q']" in paths and len(paths) == len(set(paths))


def test_a_dict_changing_size_while_walked_is_not_an_error(bob):
    p = torch.ones(1).send(bob)

    class Growing(dict):
        pass

    d = Growing(a=p)
    ns = {"d": d}
    it = model.container_items(ns)
    assert next(it) == ("d['a']", p)
    d["b"] = 1  # the walk's dict iterator is now invalid
    assert list(it) == []


def test_module_parameters_are_named_by_their_qualified_names(bob):
    segment_1 = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    segment_1.send(bob)
    w = sy.world({"segment_1": segment_1})
    me = next(lane for lane in w["workers"] if lane["id"] == "me")
    held = sorted(path for o in me["objects"] for path in o.get("held_in", []))
    assert held == ["segment_1.0.bias", "segment_1.0.weight"]
    segment_1.get()
