"""The JS chain view draws a layer it does not know, with several children, from the model
alone (#25 item 1: "draws as a tree with its annotations in every view"): the chain of
tests/tensors/test_layer_hooks.py's SplitTensor, as the kernel builds it, is the fixture that
tests/js/chain_tree.test.js renders (text and SVG are checked in that test module).

Regenerate the fixture with SYFT_LAB_UPDATE_FIXTURES=1."""
import importlib.util
import json
import os
from pathlib import Path

import torch

import syft_lab as sy
from syft_lab.ids import short
from syft_lab.tensors.nodes import walk

TESTS = Path(__file__).resolve().parents[1]
FIXTURE = TESTS / "js" / "fixtures" / "split_chain.json"
ID_KEYS = ("id", "id_at_location", "pointer_id")


def _split_layer():
    spec = importlib.util.spec_from_file_location("layer_hooks_toy", TESTS / "tensors" / "test_layer_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SplitTensor


def _stable_ids(root):
    """Every id as its order of first appearance, in the fields and in the short ids the display
    lines show (ids differ from run to run, the tree does not)."""
    seen: dict = {}
    nodes = list(walk(root))
    for node in nodes:
        for k in ID_KEYS:
            if isinstance(node.get(k), int):
                node[k] = seen.setdefault(node[k], 101 + len(seen))
    for node in nodes:
        lines = node["display"]["lines"]
        for old, new in seen.items():
            lines = [line.replace(short(old), short(new)) for line in lines]
        node["display"]["lines"] = lines
    return root


def test_the_js_fixture_of_a_split_chain_is_the_kernels_model(workers):
    bob, alice = workers
    split_tensor = _split_layer()
    parts = [torch.ones(2, 3).send(bob), torch.zeros(1, 3).send(alice), torch.full((1, 3), 2.0)]
    d = sy.chain(split_tensor(parts, split=4242)).to_dict()
    root = _stable_ids(d["root"])
    assert [c["annotations"][-1]["value"] for c in root["children"]] == ["1 of 3 (2 rows)", "2 of 3 (1 rows)", "3 of 3 (1 rows)"]
    text = json.dumps(d, indent=1, sort_keys=True) + "\n"
    if os.environ.get("SYFT_LAB_UPDATE_FIXTURES") == "1":
        FIXTURE.write_text(text)
    assert FIXTURE.read_text() == text, "run with SYFT_LAB_UPDATE_FIXTURES=1 to refresh the fixture"
    del parts, d
