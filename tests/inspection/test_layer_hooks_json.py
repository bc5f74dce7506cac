"""The JSON the views get for shared values and federated datasets, pinned (#25 item 1).

The share and dataset marks of the world and chain models moved from tensors/nodes.py and
inspection/model.py into the layers' own files (``ChainLayer.child_fields``/``world_fields``);
this test was written on the code before that move and pins what ``sy.world(ns)`` and
``sy.chain(x).root`` gave then: a shared tensor, a shared module's parameters, a shared value in
a dict and a list, a federated dataset. Ids are replaced by their order of first appearance and
ledgers (byte counts) are left out, so the golden file does not depend on test order.

Regenerate (only when the spec, docs/inspection-model.md, changes):
    SYFT_LAB_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/inspection/test_layer_hooks_json.py
"""
from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import re

import pytest
import torch
from torch import nn

import syft_lab as sy

GOLDEN = Path(__file__).with_name("layer_hooks_golden.json")
ID_KEYS = {"id", "id_at_location", "pointer_id", "group", "state_of_id"}
ID_LIST_KEYS = {"state_ids"}
SHORT_ID = re.compile(r"(?<=:)[0-9a-f]{6}\b")  # an id as the display lines write it (ids.short)
WORKERS = ("hb_bob", "hb_alice", "hb_carol")


def _normalise(value, ids: dict | None):
    """``value`` with ids as labels in order of first appearance (``ids`` None: all "#")."""
    def label(i):
        return "#" if ids is None else f"#{ids.setdefault(i, len(ids))}"

    def walk(v, key=None):
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items() if k != "ledger"}
        if isinstance(v, list):
            if key in ID_LIST_KEYS:
                return [label(i) for i in v]
            return [walk(x) for x in v]
        if key in ID_KEYS and isinstance(v, int) and not isinstance(v, bool):
            return label(v)
        if isinstance(v, str):
            return SHORT_ID.sub("<id>", v)
        return v
    return walk(value)


def _world(ns) -> dict:
    w = sy.world(ns).to_dict()
    lanes = []
    for lane in w["workers"]:
        if lane["id"] == "me":
            # what the namespace names or holds (the other scenarios' pointers are left out)
            lane = dict(lane, objects=[o for o in lane["objects"]
                                       if o.get("names") or o.get("held_in") or o.get("secret")])
        elif lane["id"] not in WORKERS:
            continue
        lanes.append(lane)
    lanes.sort(key=lambda lane: lane["id"])
    for lane in lanes:  # rows in an order ids (random) do not decide
        lane["objects"] = sorted(lane["objects"], key=lambda o: json.dumps(_normalise(o, None), sort_keys=True))
    return {"schema": w["schema"], "version": w["version"], "workers": lanes}


def _scenarios(bob, alice, carol):
    """name -> (namespace, the object whose chain is pinned)."""
    torch.manual_seed(0)
    sx = torch.tensor([1.5, -2.0]).fix_precision().share(bob, alice, crypto_provider=carol)
    model = nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.5, -1.0]]))
        model.bias.copy_(torch.tensor([0.25]))
    model.fix_precision().share(bob, alice, crypto_provider=carol)
    held = torch.tensor([3.0, 4.0]).fix_precision().share(bob, alice, crypto_provider=carol)
    d = {"data": [held]}
    data, targets = torch.arange(6.).reshape(3, 2), torch.tensor([0, 1, 0])
    fds = sy.BaseDataset(data, targets).federate([bob, alice], name="digits")  # tagged: dataset rows
    return {
        "shared_tensor": ({"sx": sx}, sx),
        "shared_module": ({"model": model}, model.weight),
        "shared_in_container": ({"d": d}, d["data"][0]),
        "federated_dataset": ({"fds": fds}, fds.datasets["hb_bob"].data),
    }


@pytest.fixture
def trio():
    ws = [sy.VirtualWorker(name) for name in WORKERS]
    yield ws
    for w in ws:
        w.close()


def test_world_and_chain_json_of_shares_and_datasets_is_unchanged(trio):
    got = {}
    scenarios = _scenarios(*trio)
    gc.collect()  # temporaries of the set-up are released: the stores hold what the scenarios hold
    for name, (ns, obj) in scenarios.items():
        ids: dict = {}
        got[name] = {"chain": _normalise(sy.chain(obj).root, ids), "world": _normalise(_world(ns), ids)}
    got = json.loads(json.dumps(got))
    if os.environ.get("SYFT_LAB_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    if os.environ.get("SYFT_LAB_DUMP_GOLDEN"):
        Path(os.environ["SYFT_LAB_DUMP_GOLDEN"]).write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    for name in want:
        assert got[name]["chain"] == want[name]["chain"], name
        assert got[name]["world"] == want[name]["world"], name
    assert set(got) == set(want)


def test_a_shared_tensor_in_a_container_keeps_its_share_marks_in_the_world(trio):
    """The bug of #25 (Finding 1): the marks came from a pointer slot nothing wrote; they come
    from the shared layer's child_fields now, wherever the notebook holds it."""
    bob, alice, carol = trio
    d = {"data": [torch.tensor([1.0, 2.0]).fix_precision().share(bob, alice, crypto_provider=carol)]}
    group = d["data"][0].child.group
    lanes = {lane["id"]: lane for lane in sy.world({"d": d})["workers"]}
    pointers = [o for o in lanes["me"]["objects"] if o.get("group") == group]
    stored = lanes["hb_bob"]["objects"] + lanes["hb_alice"]["objects"]
    for rows in (pointers, stored):
        assert sorted((o["share"]["index"], o["share"]["of"], o["secret"]) for o in rows) == [
            (0, 2, "d['data'][0]"), (1, 2, "d['data'][0]")]
        assert all(o["group"] == group and o["actions"] == [] for o in rows)
    del d, lanes, pointers, stored
