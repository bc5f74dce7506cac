"""Authentication, hostile input, failures and concurrency, against real worker processes."""
import gc
import pickle
import shutil
import struct
import subprocess
import sys
import threading
import time

import msgpack
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import syft_lab as sy
from syft_lab.errors import ObjectNotFoundError, RemoteError, SyftError, WorkerUnavailableError
from syft_lab.wire.format import WireError
from syft_lab.wire.format import CHUNK_SIZE, EXT_TENSOR, WIRE_VERSION, encode, encode_bytes
from syft_lab.commands import Ref
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.service import Session, WorkerService, scrub
from syft_lab.workers.websocket import AuthenticationError, WebSocketWorker

from .conftest import ROOT, WorkerProcess

pytestmark = pytest.mark.network

PREFIX = struct.Struct(">2sBBII")


def raw(url, token=None, max_queue=16):
    """A bare websocket connection that can send anything."""
    from websockets.sync.client import connect

    headers = {"Authorization": f"Bearer {token}"} if token else None
    return connect(url, additional_headers=headers, compression=None, max_size=None, legacy=True,
                   open_timeout=10, max_queue=max_queue)


def frame(header_bytes: bytes, buffers=(), version=WIRE_VERSION, flags=0):
    prefix = PREFIX.pack(b"SY", version, flags, len(header_bytes), len(buffers))
    prefix += b"".join(struct.pack(">Q", len(b)) for b in buffers)
    return prefix + header_bytes + b"".join(buffers)


def reply_of(ws, timeout=10):
    from syft_lab.wire.format import decode

    return decode(ws.recv(timeout=timeout))


def closed(ws, timeout=10) -> bool:
    from websockets.exceptions import ConnectionClosed

    try:
        while True:
            ws.recv(timeout=timeout)
    except ConnectionClosed:
        return True
    except TimeoutError:
        return False


# --- authentication ------------------------------------------------------------------------

def test_no_token_or_wrong_token_is_refused_at_the_handshake(worker_procs, token):
    from websockets.exceptions import InvalidStatus

    url = worker_procs["bob"].url
    for bad in [None, "wrong", token + "x", token[:-1], ""]:
        with pytest.raises(AuthenticationError, match="token"):
            WebSocketWorker(url, id="bob", token=bad or None, progress=False)
        with pytest.raises(InvalidStatus) as info:  # refused before the websocket opens at all
            raw(url, bad)
        assert info.value.response.status_code == 401
    good = WebSocketWorker(url, id="bob", token=token)
    assert good.ping()
    good.close()


def test_non_loopback_host_without_token_is_refused(tmp_path):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "syft_lab.worker", "--id", "x", "--host", "0.0.0.0", "--port", "0"],
                       capture_output=True, text=True, env=env, timeout=60, cwd=str(ROOT))
    assert r.returncode == 2 and "without a token" in r.stderr


def test_a_layers_module_that_cannot_be_imported_stops_the_worker_clearly():
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "syft_lab.worker", "--id", "x", "--port", "0", "--layers",
                        "no_such_layer_module"], capture_output=True, text=True, env=env, timeout=60, cwd=str(ROOT))
    assert r.returncode == 2
    assert "--layers no_such_layer_module: cannot import it (No module named 'no_such_layer_module')" in r.stderr


def test_loopback_without_token_works_and_warns(spawn):
    w = spawn("dave", use_token=False)
    deadline = time.monotonic() + 5
    while "no token set" not in "".join(w.stderr_lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "no token set" in "".join(w.stderr_lines)
    d = WebSocketWorker(w.url, id="dave")
    assert torch.equal(torch.ones(2).send(d).get(), torch.ones(2))
    d.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed: cannot make a test cert")
def test_tls(tmp_path, token_file, token):
    import ssl

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    w = WorkerProcess("tlsbob", token_file, ["--certfile", str(cert), "--keyfile", str(key)]).start()
    try:
        assert w.url.startswith("wss://")
        ctx = ssl.create_default_context(cafile=str(cert))
        b = WebSocketWorker(w.url, id="tlsbob", token=token, ssl=ctx)
        assert torch.equal(torch.arange(3.0).send(b).get(), torch.arange(3.0))
        b.close()
        with pytest.raises(WorkerUnavailableError):  # a client that does not trust the cert
            WebSocketWorker(w.url, id="tlsbob", token=token)
    finally:
        w.kill()


# --- hostile input -------------------------------------------------------------------------

class Bomb:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickle_bomb_in_every_client_field_never_runs(worker_procs, token, tmp_path):
    target = tmp_path / "pwned"
    bomb = pickle.dumps(Bomb(str(target)))
    text = bomb.decode("latin-1")
    ext_bomb = msgpack.ExtType(EXT_TENSOR, bomb)
    fields = [bomb, text, ext_bomb, [bomb], {"x": bomb}]
    url = worker_procs["bob"].url
    messages = [bomb, text]
    for value in fields:
        for header in [
            {"c": value, "r": 1},
            {"c": "run", "r": 1, "op": value, "a": [], "k": None},
            {"c": "run", "r": 1, "op": "aten.add.Tensor", "a": [value, value], "k": {"alpha": value}},
            {"c": "store", "r": 1, "o": value},
            {"c": "fetch", "r": 1, "id": value, "keep": value},
            {"c": "search", "r": 1, "q": [value] if not isinstance(value, list) else value},
            {"c": "describe", "r": value, "id": value},
            {"c": "release", "r": 1, "ids": value, "rel": value},
            {"c": "incref", "r": 1, "id": value, value if isinstance(value, str) else "extra": value},
        ]:
            try:
                messages.append(frame(msgpack.packb(header, use_bin_type=True)))
            except TypeError:
                pass
    # tags, description and raw tensor bytes
    messages.append(frame(msgpack.packb({"c": "store", "r": 1, "o": msgpack.ExtType(
        EXT_TENSOR, msgpack.packb([0, "uint8", [len(bomb)], False, [text], text]))}), [bomb]))
    for m in messages:
        ws = raw(url, token)
        try:
            ws.send(m)
            try:
                ws.recv(timeout=10)  # every message gets a reply (or a close)
            except Exception:
                pass
        finally:
            ws.close()
    # the bomb as the token, in the path and in a header
    from websockets.sync.client import connect

    for kwargs in [{"additional_headers": {"Authorization": "Bearer " + text.encode("latin-1").hex()}},
                   {"additional_headers": {"X-Bomb": bomb.hex()}}]:
        try:
            connect(url + "/" + bomb.hex(), legacy=True, **kwargs).close()
        except Exception:
            pass
    time.sleep(0.5)
    assert not target.exists()
    b = WebSocketWorker(url, id="bob", token=token)
    assert b.ping()  # still serving
    for p in b.search("#" + text[:5]) + b.search(text):
        p.location._discard(p.id_at_location)  # the stored bomb bytes were only ever tensor data
    b.close()


BAD_FRAMES = {
    "text": "hello",
    "empty": b"",
    "garbage": b"\x00\x01\x02 not a message",
    "truncated": encode_bytes({"c": "ping", "r": 1})[:-3],
    "wrong version": b"SY" + bytes([WIRE_VERSION + 7]) + encode_bytes({"c": "ping", "r": 1})[3:],
    "oversized header": PREFIX.pack(b"SY", WIRE_VERSION, 0, 2**31, 0),
    "oversized buffers": PREFIX.pack(b"SY", WIRE_VERSION, 1, 1, 1) + struct.pack(">Q", 2**50) + b"\xc0",
    "not a map": frame(msgpack.packb([1, 2, 3])),
    "bad tensor": frame(msgpack.packb({"c": "store", "o": msgpack.ExtType(EXT_TENSOR, msgpack.packb(
        [0, "float32", [100], False, None, None]))}), [b"\x00" * 8]),
}


@pytest.mark.parametrize("name", list(BAD_FRAMES))
def test_malformed_frames_close_only_that_connection(worker_procs, token, name):
    url = worker_procs["bob"].url
    other = WebSocketWorker(url, id="bob", token=token)
    mine = torch.tensor([7.0, 8.0]).send(other)
    ws = raw(url, token)
    ws.send(BAD_FRAMES[name])
    r = reply_of(ws)
    assert r["r"] == 0 and r["err"]["t"] == "WireError"
    assert closed(ws)
    assert torch.equal((mine + 1).get(), torch.tensor([8.0, 9.0]))  # everyone else unaffected
    assert torch.equal(mine.get(), torch.tensor([7.0, 8.0]))
    other.close()


def test_unknown_commands_and_bad_arguments_get_an_error_reply(remote, worker_procs, token):
    bob, _ = remote
    ws = raw(worker_procs["bob"].url, token)
    for i, header in enumerate([{"c": "format_disk"}, {"c": 42}, {}, {"c": "fetch", "id": "x"},
                                {"c": "run", "op": "aten.add.Tensor", "a": "x"},
                                {"c": "run", "op": "os.system", "a": ["touch /tmp/x"], "k": None},
                                {"c": "fetch", "id": 12345}], start=1):
        header["r"] = i
        ws.send(encode_bytes(header))
        r = reply_of(ws)
        assert r["r"] == i and "err" in r and r["err"]["t"]
    ws.send(encode_bytes({"c": "ping", "r": 99}))
    assert reply_of(ws) == {"r": 99, "ok": "pong"}  # the connection lives on
    ws.close()


@pytest.mark.parametrize("op", ["aten.from_file.default", "builtins.eval", "os.system", "torch.load",
                                "aten.__class__.__init__", "aten.save.default"])
def test_ops_off_the_allow_list_are_refused(remote, op, tmp_path):
    bob, _ = remote
    target = tmp_path / "f"
    with pytest.raises(RemoteError) as info:
        bob._request({"c": "run", "op": op, "a": [str(target)], "k": None})
    assert info.value.remote_type == "OpNotAllowedError"
    assert not target.exists()


def test_oversized_message_on_a_small_worker(spawn, token):
    w = spawn("small", extra=["--max-message-size", "1MiB"])
    s = WebSocketWorker(w.url, id="small", token=token)
    assert s.max_message_size == 2**20
    with pytest.raises(SyftError, match="maximum message size"):
        torch.zeros(2**20).send(s)  # refused before sending
    ws = raw(w.url, token)
    ws.send(encode({"c": "store", "r": 1, "o": torch.zeros(2**19)}).frames[0])  # 2 MiB, bypassing the client
    assert reply_of(ws)["err"]["t"] == "WireError" and closed(ws)
    assert s.ping() and len(s.objects) == 0
    s.close()


def test_disconnect_mid_transfer_leaves_no_partial_object(remote, worker_procs, token):
    bob, _ = remote
    gc.collect()
    bob.flush()
    before = set(bob.objects)
    enc = encode({"c": "store", "r": 1, "o": torch.randn(16 * 2**20 // 4)})
    ws = raw(worker_procs["bob"].url, token)
    ws.send(enc.frames[0])
    ws.send(enc.frames[1])  # 1 of 4 chunks, then gone
    ws.close()
    time.sleep(0.3)
    assert set(bob.objects) == before
    # and a client that drops a get midway leaves the object in place
    p = torch.randn(40 * 2**20 // 4).send(bob)
    ws = raw(worker_procs["bob"].url, token, max_queue=1)  # reads no further ahead than one chunk
    ws.send(encode_bytes({"c": "fetch", "r": 1, "id": p.id_at_location, "keep": False}))
    ws.recv(timeout=10)
    ws.close()
    time.sleep(0.5)
    assert p.id_at_location in bob.objects
    assert p.get().shape == (10 * 2**20,)


def test_killed_worker_gives_clear_error_and_client_reconnects(spawn, token):
    w = spawn("carol")
    carol = WebSocketWorker(w.url, id="carol", token=token, timeout=10)
    p = torch.ones(3).send(carol)
    w.kill()
    with pytest.raises(WorkerUnavailableError, match="carol"):
        p + 1
    assert carol.state == "disconnected"
    with pytest.raises(WorkerUnavailableError, match="carol"):
        carol.ping()  # still down: a reconnect attempt fails clearly
    lanes = {lane["id"]: lane for lane in sy.world()["workers"]}
    assert lanes["carol"]["state"] == "unreachable"
    w.restart()  # same port
    assert carol.ping() and carol.state == "connected"
    w.restart()  # restarted while the client is idle: the next call reconnects by itself
    deadline = time.monotonic() + 5
    while carol.state == "connected" and time.monotonic() < deadline:
        time.sleep(0.05)  # the client notices the closed connection in the background
    assert carol.state == "disconnected"
    assert torch.equal(torch.ones(1).send(carol).get(), torch.ones(1))
    with pytest.raises(ObjectNotFoundError) as info:
        p.get()  # its object died with the old process
    assert "restarted" in " ".join(getattr(info.value, "__notes__", []))
    assert torch.equal(torch.arange(3.0).send(carol).get(), torch.arange(3.0))
    carol.close()


def test_remote_errors_carry_type_and_message_without_paths(remote):
    bob, _ = remote
    p = torch.ones(3).send(bob)
    with pytest.raises(RemoteError) as info:
        p.view(7)
    e = info.value
    assert e.remote_type == "RuntimeError" and "is invalid for input of size 3" in e.remote_message
    assert "Traceback" not in str(e) and "File \"" not in str(e)
    assert scrub("failed in /usr/lib/python3.11/site-packages/torch/x.py line 3") == "failed in <path> line 3"
    assert "/home/me/secret" not in scrub("No such file: '/home/me/secret/data.bin'")


def test_eight_concurrent_clients_times_1000_ops(worker_procs, token):
    url = worker_procs["bob"].url
    n_clients, n_ops = 8, 1000
    errors, done = [], []

    def client(k):
        try:
            w = WebSocketWorker(url, id="bob", token=token, progress=False)
            base = torch.full((4,), float(k))
            p = base.send(w)
            acc = p
            for i in range(n_ops):
                acc = acc + 1 if i % 2 == 0 else acc - p * 0 + 1
                if i % 250 == 249:  # check along the way: never another client's value
                    got = (acc * 1).get()
                    assert torch.equal(got, base + (i + 1)), (k, i, got)
            assert torch.equal(acc.get(), base + n_ops)
            assert torch.equal(p.get(), base)
            w.close()
            done.append(k)
        except BaseException as e:  # reported below
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(n_clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert sorted(done) == list(range(n_clients))
    print(f"{n_clients} clients x {n_ops} ops in {time.perf_counter() - t0:.1f} s")


# --- a fuzz of the server's command handling (sans-I/O) --------------------------------------

_values = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats() | st.text(max_size=12)
                       | st.builds(Ref, st.integers(0, 2**53)) | st.builds(lambda n: torch.ones(n), st.integers(0, 3)),
                       lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                       max_leaves=8)
_commands = st.sampled_from(["hello", "ping", "store", "load", "run", "fetch", "delete", "incref", "release", "search",
                             "describe", "summary", "store_plan", "run_plan", "run_graph", "nope", ""])
_ops = st.sampled_from(["aten.add.Tensor", "aten.mul.Tensor", "aten.view.default", "aten.cat.default",
                        "aten.from_file.default", "aten.zeros.default", "x"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.fixed_dictionaries({"c": _commands, "r": st.integers(0, 10)},
                                      optional={"op": _ops, "g": st.sampled_from(["{}", "[]", "x", '{"format": 1}']),
                                                "i": _values, "s": _values, "a": _values, "k": _values, "o": _values, "id": _values,
                                                "ids": _values, "q": _values, "keep": _values, "rel": _values}),
                min_size=1, max_size=6))
def test_fuzz_server_command_handling(messages):
    service = WorkerService("fuzz")
    door = ServiceConnection(service, Session())
    keep = service.core.store(torch.arange(3.0))
    for m in messages:
        if m.get("id") == "keep":
            m["id"] = keep
        reply, then = door.answer(m)
        assert set(reply) in ({"r", "ok"}, {"r", "err"})
        encode(reply)  # every reply can travel
        door.sent(then)
    core = service.core
    for obj_id, obj in core.objects.items():  # no partial or foreign object was stored
        assert isinstance(obj, torch.Tensor) and (obj_id in core.refcounts or obj_id in core.held)


# --- content a frame carries that cannot be accepted: an error reply, the connection goes on ----

def _bad_tensor_frame(rid, shape, nbytes, streamed=False):
    header = msgpack.packb({"c": "store", "r": rid, "o": msgpack.ExtType(EXT_TENSOR, msgpack.packb(
        [0, "float32", shape, False, None, None]))})
    if not streamed:
        return frame(header, [b"\x00" * nbytes])
    prefix = PREFIX.pack(b"SY", WIRE_VERSION, 1, len(header), 1) + struct.pack(">Q", nbytes)
    return prefix + header


SIXTY_FIVE = "a shape is a list of at most 64 sizes"


@pytest.mark.parametrize("shape,nbytes,why", [
    ([1] * 65, 4, SIXTY_FIVE), ([2**41, 0], 0, "a dimension size must be an integer in [0, 1099511627776]"),
    ([1] * 64 + [2**20 + 1], 4 * (2**20 + 1), SIXTY_FIVE)])  # streamed: 4 MiB + 4 bytes
def test_a_bad_shape_in_a_well_formed_frame_is_answered_on_the_same_connection(worker_procs, token, shape, nbytes,
                                                                               why):
    ws = raw(worker_procs["bob"].url, token)
    ws.send(encode_bytes({"c": "store", "r": 1, "o": torch.tensor([5.0])}))
    kept = reply_of(ws)["ok"]
    streamed = nbytes > CHUNK_SIZE
    ws.send(_bad_tensor_frame(2, shape, nbytes, streamed))
    if streamed:  # the rest of the message arrives and is read past
        ws.send(b"\x00" * CHUNK_SIZE)
        ws.send(b"\x00" * (nbytes - CHUNK_SIZE))
    r = reply_of(ws)
    assert r["r"] == 2 and r["err"]["t"] == "WireError" and why in r["err"]["m"]
    ws.send(encode_bytes({"c": "fetch", "r": 3, "id": kept}))
    assert torch.equal(reply_of(ws)["ok"], torch.tensor([5.0]))  # same connection, same session
    ws.close()


def test_a_result_the_wire_cannot_carry_is_refused_before_it_runs(remote):
    bob, _ = remote
    x = torch.tensor([1.0, 2.0]).send(bob)
    connection = bob.transport.ws
    for make in (lambda: x.new_ones([1] * 65), lambda: x.new_zeros([1] * 65), lambda: x[:1].repeat([1] * 65),
                 lambda: bob._request({"c": "run", "op": "aten.ones.default", "a": [[1] * 65], "k": None})):
        with pytest.raises(RemoteError, match=r"would return a tensor of 65 dimensions \(the wire carries at most "
                                              r"64\): nothing ran") as info:
            make()
        assert isinstance(info.value, WireError)
    with pytest.raises(WireError, match=SIXTY_FIVE):  # sent: refused by the worker's decoder, answered
        torch.ones([1] * 65).send(bob)
    assert bob.transport.ws is connection  # never dropped
    assert torch.equal(x.get(), torch.tensor([1.0, 2.0]))


def _two_outputs_graph():
    from syft_lab.plans.graph import Node, PlanGraph, Value

    aten = torch.ops.aten
    nodes = [Node(aten.mul.Tensor, [Value("input", 0), 2.0], {}, [((2,), "float32")]),
             Node(aten.neg.default, [Value("input", 0)], {}, [((2,), "float32")])]
    return PlanGraph("two", [{"name": "x", "role": "input", "shape": [2], "dtype": "float32"}], [], nodes,
                     [Value("node", 0), Value("node", 1)], False).to_json()


def test_run_graph_with_repeated_or_out_of_range_output_ids_stores_nothing(remote):
    bob, _ = remote
    x = torch.tensor([1.0, 2.0]).send(bob)
    connection, before = bob.transport.ws, set(bob.objects)
    for outputs in ([7, 7], [-5, 2**64 - 1], [0, 8]):
        with pytest.raises(RemoteError, match="one new, distinct object id per output .*nothing ran"):
            bob._request({"c": "run_graph", "g": _two_outputs_graph(), "i": [x.id_at_location], "o": outputs})
        assert set(bob.objects) == before
    assert bob.transport.ws is connection
    kept = bob._request({"c": "run_graph", "g": _two_outputs_graph(), "i": [x.id_at_location], "o": [7, 8]})
    assert [k.id for k in kept] == [7, 8]
    bob._request({"c": "release", "ids": [7, 8]})
    assert set(bob.objects) == before
