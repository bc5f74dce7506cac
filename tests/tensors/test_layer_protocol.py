"""The proof of the layer protocol (#13, "Done when"): a third layer type defined in one
test-side file (note_layer.py, registered with ``register_layer``, nothing else changed)
travels the wire, is stored and computed on by a real websocket worker process, comes back,
and renders in the text and static SVG views and in the JSON the JS views draw.
"""
from __future__ import annotations

import json
import os
import secrets
import struct
import subprocess
import sys
import threading
from pathlib import Path

import msgpack
import pytest
import torch

import syft_lab as sy
from syft_lab.inspection.model import chain
from syft_lab.tensors import registry
from syft_lab.tensors.registry import LayerSpec
from syft_lab.widget import svg
from syft_lab.wire.format import EXT_TENSOR, WIRE_VERSION, PointerSpec, WireError, decode, encode_bytes
from syft_lab.workers.websocket import WebSocketWorker

from note_layer import NoteTensor

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURE = ROOT / "tests" / "js" / "fixtures" / "note_chain.json"
READY_TIMEOUT = 180  # a worker process imports torch: ~2 s idle, 30 s and more on a loaded 2-core machine


def test_the_note_layer_is_registered_by_its_own_file():
    assert registry.layer_for_kind("note") is NoteTensor and registry.layer_for_code(40) is NoteTensor
    n = (NoteTensor(torch.tensor([1.0, -2.0]), "scaled") * 2).abs()
    assert n.notes == ["mul: scaled", "abs: scaled"] and torch.equal(n.child, torch.tensor([2.0, 4.0]))


def test_a_note_chain_round_trips_the_wire_under_a_logging_tensor():
    lx = sy.LoggingTensor(NoteTensor(torch.tensor([1.0, 2.0]), "inner")) + 1
    out = decode(encode_bytes({"o": lx.tag("#n").describe("noted")}))["o"]
    assert isinstance(out, sy.LoggingTensor) and isinstance(out.child, NoteTensor)
    assert out.log.ops() == ["aten.add.Tensor"] and out.child.notes == ["add: inner"]
    assert out.tags == {"#n"} and out.description == "noted"
    assert torch.equal(out.child.child, torch.tensor([2.0, 3.0]))


def _note_ext(fields, children=None):
    children = [msgpack.ExtType(EXT_TENSOR, msgpack.packb([0, "float32", [1], False, None, None]))] \
        if children is None else children
    return msgpack.ExtType(40, msgpack.packb([fields, children, None, None]))


def _frame(header: dict, buffers=(b"\x00" * 4,)) -> bytes:
    head = msgpack.packb(header)
    prefix = struct.pack(">2sBBII", b"SY", WIRE_VERSION, 0, len(head), len(buffers))
    return prefix + b"".join(struct.pack(">Q", len(b)) for b in buffers) + head + b"".join(buffers)


@pytest.mark.parametrize("fields, match", [
    ({"note": "a"}, "fields are"),                                     # a field missing
    ({"note": "a", "notes": [], "x": 1}, "fields are"),                # a field too many
    ({"note": 3, "notes": []}, "'note' of a note layer has the wrong type"),
    ({"note": "a", "notes": [1]}, "a note must be a string"),          # from_wire's own check
    ({"note": "a" * 5000, "notes": []}, "a note must be a string"),
])
def test_the_decoder_checks_a_layers_fields_against_its_schema(fields, match):
    with pytest.raises(WireError, match=match):
        decode(_frame({"o": _note_ext(fields)}))


def test_a_layer_over_a_pointer_decodes_to_data_never_to_a_live_layer():
    pointer_ext = msgpack.ExtType(11, msgpack.packb(
        [{"worker": "bob", "address": None, "id": 5, "shape": [1], "dtype": msgpack.ExtType(4, b"float32")},
         [], None, None]))
    assert isinstance(decode(_frame({"o": pointer_ext}, buffers=()))["o"], PointerSpec)  # alone: a spec
    note = _note_ext({"note": "a", "notes": []}, [pointer_ext])
    out = decode(_frame({"o": msgpack.ExtType(10, msgpack.packb([{"records": []}, [note], ["#t"], None]))},
                        buffers=()))["o"]
    assert isinstance(out, LayerSpec) and out.kind == "logging" and out.tags == {"#t"}
    assert isinstance(out.children[0], LayerSpec) and out.children[0].kind == "note"
    assert [(s.worker_id, s.id_at_location) for s in out.pointer_specs()] == [("bob", 5)]
    with pytest.raises(WireError, match="children are tensors, layers or pointers, got a int"):
        decode(_frame({"o": _note_ext({"note": "a", "notes": []}, [3])}, buffers=()))


# --- a real websocket worker process that imports the note layer ------------------------------

@pytest.fixture(scope="module")
def note_worker(tmp_path_factory):
    """A worker process that imports the note module (``--layers``: it registers NoteTensor)."""
    token = secrets.token_urlsafe(24)
    token_file = tmp_path_factory.mktemp("note_token") / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    cmd = [sys.executable, "-m", "syft_lab.worker", "--id", "noter", "--port", "0", "--threads", "1",
           "--layers", "note_layer", "--token-file", str(token_file)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("SYFT_LAB_TOKEN", None)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()
    line = [None]
    reader = threading.Thread(target=lambda: line.__setitem__(0, proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(READY_TIMEOUT)
    try:
        if not line[0] or "listening on" not in line[0]:
            pytest.fail(f"the note worker did not start: {line[0]!r} {''.join(err)}")
        yield line[0].split("listening on", 1)[1].strip(), token
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def noter(note_worker):
    url, token = note_worker
    w = WebSocketWorker(url, id="noter", token=token, progress=False)
    yield w
    w.close()


@pytest.mark.network
def test_a_note_tensor_round_trips_through_a_websocket_worker_and_renders(noter):
    x = NoteTensor(torch.tensor([1.0, -2.0, 3.0]), "seen by noter")
    p = x.send(noter)
    assert isinstance(p, sy.PointerTensor) and p.location is noter
    entry = noter.objects[p.id_at_location]
    assert entry["kind"] == "note" and entry["type"] == "NoteTensor"  # stored as a NoteTensor there
    q = (p * 2).abs()  # runs on the worker, through the NoteTensor's own dispatch there
    out = q.get()
    assert type(out) is NoteTensor and out.note == "seen by noter"
    assert out.notes == ["mul: seen by noter", "abs: seen by noter"]
    assert torch.equal(out.child, torch.tensor([2.0, 4.0, 6.0]))
    assert x.notes == []  # the sent original is untouched

    text = repr(out)
    assert text.startswith("NoteTensor [note: seen by noter]>tensor([2., 4., 6.])")
    picture = svg.chain_svg(chain(out).root)
    assert "NoteTensor" in picture and "note: seen by noter" in picture
    assert "abs: seen by noter" in picture  # the display's lines: the last notes


def note_chain_fixture() -> dict:
    """The chain of a NoteTensor over a tensor, with fixed ids: what tests/js renders."""
    x = NoteTensor(torch.tensor([1.0, 2.0]), "from python")
    y = x * 3
    y.__dict__["_syft_id"] = 1001
    y.child.__dict__["_syft_id"] = 1002
    return chain(y).to_dict()


def test_the_js_fixture_of_a_note_chain_is_current():
    """tests/js/fixtures/note_chain.json is this test's output (regenerate it with
    SYFT_LAB_UPDATE_FIXTURES=1); the JS tests render it with the generic node drawing."""
    d = note_chain_fixture()
    root = d["root"]
    assert root["kind"] == "note" and root["display"]["badge"] == "note: from python"
    assert root["children"][0]["kind"] == "tensor"
    text = json.dumps(d, indent=1, sort_keys=True) + "\n"
    if os.environ.get("SYFT_LAB_UPDATE_FIXTURES") == "1":
        FIXTURE.write_text(text)
    assert FIXTURE.read_text() == text, "run with SYFT_LAB_UPDATE_FIXTURES=1 to refresh the fixture"
