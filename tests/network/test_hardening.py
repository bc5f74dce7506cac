"""The websocket worker under attack and load: streamed replies, handshake floods, browser
origins, long ops, sessions that end, worker-held data and large stores.

Every worker here is a real process on 127.0.0.1 under resource limits set by the test
(RLIMIT_AS, RLIMIT_NOFILE), so a failure cannot take the machine down. Every flood is bounded
in count and time.
"""
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from syft_lab.errors import ObjectNotFoundError, RemoteError, SyftError
from syft_lab.wire.format import Decoder, decode, encode_bytes
from syft_lab.commands import Ref
from syft_lab.workers.websocket import WebSocketWorker

from .conftest import ROOT

pytestmark = pytest.mark.network

GiB, MiB = 2**30, 2**20
WORKER_AS = 3 * GiB  # address space of a test worker: torch maps ~0.7 GiB at start


def limited(address_space=WORKER_AS, files=None):
    """preexec_fn for a worker process: its own memory (and file descriptor) limits."""
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        if files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    return apply


def status(pid, field) -> int:
    """A /proc/<pid>/status memory field (VmRSS, VmHWM, ...) in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def cpu_seconds(pid) -> float:
    """CPU time of a process and its children, the live ones too: an expensive op runs in a
    forked child (syft_lab/workers/forked.py), whose time the parent only gets once it ends."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:  # a child that ended meanwhile: its time is in the parent's now
        return 0.0
    total = sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            total += sum(cpu_seconds(int(c)) for c in task.read_text().split())
        except FileNotFoundError:
            pass
    return total


def raw(url, token=None, max_queue=16, origin=None):
    from websockets.sync.client import connect

    headers = {"Authorization": f"Bearer {token}"} if token else None
    return connect(url, additional_headers=headers, compression=None, max_size=None, legacy=True,
                   open_timeout=10, max_queue=max_queue, origin=origin)


def request(ws, header, timeout=60):
    ws.send(encode_bytes(header))
    return decode(ws.recv(timeout=timeout))


def client(url, token, **kw):
    return WebSocketWorker(url, token=token, progress=False, **kw)


def connect_within(url, token, seconds):
    """A real client connects and pings, retrying until ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            w = client(url, token, timeout=10)
            assert w.ping()
            return w
        except SyftError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def wait_until(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds} s: {what}")
        time.sleep(0.1)


def stored_ids(url, token):
    with client(url, token) as w:
        return set(w.objects)


# --- item 2: a streamed reply never reads memory another command can change or free ---------

N = 16 * MiB  # float32 elements: a 64 MiB tensor streams in 16 chunks, more than the socket buffers hold


def start_slow_fetch(url, token, obj_id, keep):
    """Client A asks for an object and reads only the first websocket message of the reply."""
    ws = raw(url, token, max_queue=1)  # reads no further ahead than one message
    ws.send(encode_bytes({"c": "fetch", "r": 1, "id": obj_id, "keep": keep}))
    decoder = Decoder(2**31)
    assert decoder.feed(ws.recv(timeout=60)) is None  # the header: the reply is streaming now
    return ws, decoder


def finish_fetch(ws, decoder):
    while True:
        msg = decoder.feed(ws.recv(timeout=60))
        if msg is not None:
            ws.close()
            return msg


def refused(fn):
    """The command failed cleanly: an error reply naming the object or the refused op."""
    with pytest.raises((ObjectNotFoundError, RemoteError)) as info:
        fn()
    e = info.value
    assert isinstance(e, ObjectNotFoundError) or e.remote_type == "OpNotAllowedError", e


def test_a_copying_fetch_streams_the_bytes_of_the_moment_it_was_asked(spawn, token):
    w = spawn("uaf1", preexec_fn=limited())
    b = client(w.url, token)
    x = torch.arange(N, dtype=torch.float32)
    px = x.send(b)
    ws, decoder = start_slow_fetch(w.url, token, px.id_at_location, keep=True)
    px.add_(1)  # client B writes into it while A's reply streams
    b._request({"c": "run", "op": "aten.mul_.Tensor", "a": [Ref(px.id_at_location), 0.0], "k": None})
    reply = finish_fetch(ws, decoder)
    assert torch.equal(reply["ok"], x)  # exactly what it was when A asked
    assert torch.equal(px.get(), (x + 1) * 0)  # and B's writes happened
    assert b.ping()
    b.close()


def test_a_get_takes_the_object_out_before_streaming(spawn, token):
    w = spawn("uaf2", preexec_fn=limited())
    b = client(w.url, token)
    x = torch.arange(N, dtype=torch.float32)
    px = x.send(b)
    alias = px.view(-1)  # another stored object over the same memory
    obj_id = px.id_at_location
    ws, decoder = start_slow_fetch(w.url, token, obj_id, keep=False)
    run = b._request
    refused(lambda: run({"c": "run", "op": "aten.resize_.default", "a": [Ref(obj_id), [4 * N]], "k": None}))
    refused(lambda: run({"c": "run", "op": "aten.add.out", "a": [Ref(obj_id), 1.0],
                         "k": {"out": Ref(obj_id)}}))
    refused(lambda: run({"c": "run", "op": "aten.add_.Tensor", "a": [Ref(obj_id), 1.0], "k": None}))
    # through the alias: growing its storage would free the memory A's reply reads
    refused(lambda: run({"c": "run", "op": "aten.resize_.default", "a": [Ref(alias.id_at_location), [4 * N]],
                         "k": None}))
    alias.mul_(0)  # an in-place write through the alias does run, after the reply's bytes were taken
    reply = finish_fetch(ws, decoder)
    assert torch.equal(reply["ok"], x)
    assert obj_id not in b.objects  # A got it
    assert torch.equal(alias.get(), torch.zeros(N))
    assert b.ping()
    b.close()


def test_a_get_that_cannot_be_delivered_puts_the_object_back_for_its_owner(spawn, token):
    w = spawn("uaf3", preexec_fn=limited())
    b = client(w.url, token)
    x = torch.arange(N, dtype=torch.float32)
    px = x.send(b)
    ws, _ = start_slow_fetch(w.url, token, px.id_at_location, keep=False)
    ws.socket.shutdown(socket.SHUT_RDWR)  # A is gone mid-reply
    ws.close()
    wait_until(lambda: px.id_at_location in b.objects, 30, "the object is back in the store")
    b.close()  # B's session still owns it: closing releases it
    assert stored_ids(w.url, token) == set()


# --- item 3: the opening handshake cannot exhaust memory, file descriptors or the log --------

def handshake_flood(port, n, header_bytes, seconds):
    """Open ``n`` connections that each send a request line and up to ``header_bytes`` of 8 KB
    headers and never finish. Returns the sockets (still open). Bounded by ``seconds``."""
    deadline = time.monotonic() + seconds
    start = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    line = b"X-Pad: " + b"a" * 8000 + b"\r\n"
    todo, socks = {}, []
    for _ in range(n):
        if time.monotonic() > deadline:
            break
        s = socket.socket()
        s.settimeout(1)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        socks.append(s)
        todo[s] = start + line * (header_bytes // len(line))
        for s in list(todo):  # push what the sockets take now, round-robin
            try:
                sent = s.send(todo[s][:65536])
                todo[s] = todo[s][sent:]
            except BlockingIOError:
                continue
            except OSError:
                sent = 0
                todo[s] = b""
            if not todo[s]:
                del todo[s]
    while todo and time.monotonic() < deadline:
        for s in list(todo):
            try:
                sent = s.send(todo[s][:65536])
                todo[s] = todo[s][sent:]
            except BlockingIOError:
                continue
            except OSError:
                todo[s] = b""
            if not todo[s]:
                del todo[s]
        time.sleep(0.01)
    return socks


def test_handshake_flood_with_big_headers_keeps_memory_bounded(spawn, token):
    w = spawn("flood", preexec_fn=limited())
    b = client(w.url, token)
    assert torch.equal(torch.ones(3).send(b).get(), torch.ones(3))  # warm: the command thread has run
    pid = w.proc.pid
    before = status(pid, "VmRSS")
    socks = handshake_flood(w.port, n=1000, header_bytes=900_000, seconds=60)
    try:
        assert w.proc.poll() is None, "".join(w.stderr_lines)
        grown = status(pid, "VmHWM") - before
        assert grown < 64 * MiB, f"the worker grew by {grown / MiB:.0f} MiB under the flood"
        c = connect_within(w.url, token, 10)  # a real client, while the flood's sockets are open
        assert torch.equal((torch.arange(3.0).send(c) * 2).get(), torch.tensor([0.0, 2.0, 4.0]))
        c.close()
    finally:
        for s in socks:
            s.close()
    assert b.ping()  # the connection from before the flood still works
    b.close()
    log = "".join(w.stderr_lines)
    assert "Traceback" not in log and len(w.stderr_lines) < 40, log[-3000:]


def test_half_open_sockets_do_not_starve_clients_at_a_low_fd_limit(spawn, token):
    w = spawn("fds", preexec_fn=limited(files=64))
    socks = []
    try:
        for _ in range(300):  # connections that start a handshake and never finish it
            s = socket.socket()
            s.settimeout(1)
            try:
                s.connect(("127.0.0.1", w.port))
                s.send(b"GET / HTTP/1.1\r\n")
            except OSError:
                s.close()
                continue
            socks.append(s)
        assert len(socks) > 64  # more than the worker has file descriptors
        # the default handshake timeout is 10 s: a real client gets in well within it
        c = connect_within(w.url, token, 10)
        assert torch.equal(torch.ones(2).send(c).get(), torch.ones(2))
        c.close()
    finally:
        for s in socks:
            s.close()
    assert w.proc.poll() is None
    log = "".join(w.stderr_lines)
    assert "Traceback" not in log and len(w.stderr_lines) < 40, log[-3000:]


def http_status(port, request: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        head = s.recv(4096)
    return int(head.split(b" ", 2)[1])


def test_duplicated_authorization_header_is_a_400_not_a_traceback(worker_procs, token):
    w = worker_procs["bob"]
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    req = (f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
           f"Authorization: Bearer {token}\r\nAuthorization: Bearer {token}\r\n\r\n").encode()
    lines_before = len(w.stderr_lines)
    assert http_status(w.port, req) == 400
    assert http_status(w.port, req.replace(f"Authorization: Bearer {token}\r\n".encode(), b"", 1)) == 101
    b = client(w.url, token)
    assert b.ping()
    b.close()
    assert "Traceback" not in "".join(w.stderr_lines[lines_before:])


def test_repeated_log_lines_are_rate_limited_with_a_count():
    from syft_lab.workers.server import RateLimitedLog

    lines, now = [], [0.0]
    log = RateLimitedLog(lines.append, interval=10, clock=lambda: now[0])
    for i in range(1000):
        log("emfile", "accept failed: EMFILE")
        now[0] += 0.01  # 1000 events in 10 s
    log("other", "a different kind")
    now[0] = 10.5
    log("emfile", "accept failed: EMFILE")
    assert lines == ["accept failed: EMFILE", "a different kind",
                     "accept failed: EMFILE (999 more like this in the last 10 s)"]
    log("emfile", "accept failed: EMFILE")  # a flood that then stops
    log.flush()
    assert len(lines) == 3  # not yet: its interval runs
    now[0] = 21
    log.flush()
    assert lines[3:] == ["accept failed: EMFILE (1 more like this in the last 10 s)"]
    log.flush()
    assert len(lines) == 4


# --- item 4: browsers -----------------------------------------------------------------------

def test_web_pages_are_refused_unless_their_origin_is_allowed(spawn, token):
    from websockets.exceptions import InvalidStatus

    w = spawn("origins", extra=["--allow-origin", "https://lab.example.org"])
    with pytest.raises(InvalidStatus) as info:
        raw(w.url, token, origin="https://evil.example")
    assert info.value.response.status_code == 403
    ws = raw(w.url, token, origin="https://lab.example.org")
    assert request(ws, {"c": "ping", "r": 1}) == {"r": 1, "ok": "pong"}
    ws.close()
    b = client(w.url, token)  # no Origin header: not a browser
    assert b.ping()
    b.close()


def test_a_worker_without_token_refuses_every_browser_origin(spawn):
    from websockets.exceptions import InvalidStatus

    w = spawn("noorigin", use_token=False)
    for origin in ["https://evil.example", "http://localhost:8888", "null"]:
        with pytest.raises(InvalidStatus) as info:
            raw(w.url, origin=origin)
        assert info.value.response.status_code == 403


# --- item 6: a long op does not stall the event loop ----------------------------------------

def test_pings_and_new_connections_are_answered_while_an_op_runs(spawn, token):
    w = spawn("busy", preexec_fn=limited())
    with client(w.url, token) as b:  # closed (unregistered) however the test ends
        _pings_are_answered_while_ops_run(w, b, token)


def _pings_are_answered_while_ops_run(w, b, token):
    m = torch.randn(2000, 2000).send(b)  # mm of these: 16 GFLOP (under the per-op cost bound), seconds on one thread
    a = raw(w.url, token)
    used = cpu_seconds(w.proc.pid)
    ops = 12  # each mm is at the per-op cost bound: A queues several, so C comes while they run
    for r in range(1, ops + 1):
        a.send(encode_bytes({"c": "run", "r": r, "op": "aten.mm.default",
                             "a": [Ref(m.id_at_location), Ref(m.id_at_location)], "k": None}))
    wait_until(lambda: cpu_seconds(w.proc.pid) > used + 0.3, 30, "the worker is computing A's op")
    c = client(w.url, token, timeout=30)  # a new handshake and a hello
    assert c.ping()
    answered = []
    while True:  # A's replies that were ready when C had its answer
        try:
            answered.append(decode(a.recv(timeout=0)))
        except TimeoutError:
            break
    assert len(answered) < ops  # C was answered while A's ops still ran
    while len(answered) < ops:
        answered.append(decode(a.recv(timeout=300)))
    assert [r["r"] for r in answered] == list(range(1, ops + 1))
    assert all(list(r["ok"].shape) == [2000, 2000] for r in answered)
    a.close()
    c.close()


# --- item 7: sessions own their objects -----------------------------------------------------

CLIENT = """
import sys, torch
import syft_lab; syft_lab.hook()
from syft_lab.workers.websocket import WebSocketWorker
w = WebSocketWorker(sys.argv[1], token=sys.argv[2], progress=False)
ptrs = [torch.full((MiB,), float(i)).send(w) for i in range(50)]
print(len(w.objects), flush=True)
""".replace("MiB", str(MiB))


def run_client(script, url, token):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", script, url, token], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))


def test_a_killed_client_leaves_nothing_after_the_grace_period(spawn, token):
    w = spawn("sess1", extra=["--session-grace", "1"], preexec_fn=limited())
    proc = run_client(CLIENT + "import time; time.sleep(600)\n", w.url, token)
    try:
        assert proc.stdout.readline().strip() == "50", proc.stderr.read() if proc.poll() is not None else ""
        assert len(stored_ids(w.url, token)) == 50
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        proc.kill()
    wait_until(lambda: not stored_ids(w.url, token), 30, "the killed client's 50 objects are released")


def test_an_interpreter_that_exits_without_close_leaves_nothing(spawn, token):
    w = spawn("sess2", extra=["--session-grace", "600"], preexec_fn=limited())  # only a close ends it soon
    proc = run_client(CLIENT, w.url, token)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out.strip() == "50", err
    wait_until(lambda: not stored_ids(w.url, token), 30, "the exited client's 50 objects are released")


def test_close_with_pointers_alive_leaves_nothing(spawn, token):
    w = spawn("sess3", extra=["--session-grace", "600"], preexec_fn=limited())
    b = client(w.url, token)
    ptrs = [torch.full((MiB,), float(i)).send(b) for i in range(50)]
    assert len(b.objects) == 50
    b.close()
    wait_until(lambda: not stored_ids(w.url, token), 30, "the closed client's 50 objects are released")
    assert len(ptrs) == 50  # the pointers were alive all along


def test_a_client_that_reconnects_within_the_grace_period_keeps_its_objects(spawn, token):
    w = spawn("sess4", extra=["--session-grace", "600"], preexec_fn=limited())
    b = client(w.url, token)
    p = torch.arange(4.0).send(b)
    b.transport.ws.socket.shutdown(socket.SHUT_RDWR)  # the link drops without a close
    wait_until(lambda: b.state == "disconnected", 30, "the client notices the drop")
    assert torch.equal((p + 1).get(), torch.arange(4.0) + 1)  # reconnected into its session
    assert torch.equal(p.get(), torch.arange(4.0))
    b.close()


def test_a_client_whose_request_timed_out_keeps_its_objects(spawn, token):
    w = spawn("sess6", extra=["--session-grace", "600"], preexec_fn=limited())
    b = client(w.url, token)
    x = torch.randn(2000, 2000)  # under the per-op cost bound, still seconds on one thread
    p = x.send(b)
    b.timeout = 0.05  # shorter than the mm below: the client drops the connection to start afresh
    with pytest.raises(SyftError, match="no reply within"):
        p @ p
    # once the product is stored, the worker has seen the old connection go (its reply failed)
    wait_until(lambda: len(stored_ids(w.url, token)) == 2, 60, "the product is stored")
    b.timeout = 60
    assert torch.equal(p.get(), x)  # its session lived on through the reconnect
    b.close()


def test_a_dying_session_drops_only_its_own_references(spawn, token):
    w = spawn("sess5", extra=["--session-grace", "600"], preexec_fn=limited())
    a, b = client(w.url, token), client(w.url, token)
    mine = torch.arange(3.0).tag("#shared").send(a)
    found = b.search("#shared")
    assert [f.id_at_location for f in found] == [mine.id_at_location]
    theirs = torch.ones(2).send(b)
    # b's release of an id it does not hold (a's object) is ignored
    b._request({"c": "release", "ids": [mine.id_at_location]})
    b.close()
    assert torch.equal(mine.get(), torch.arange(3.0))  # b's session ended; a's object lived on
    assert theirs.id_at_location not in stored_ids(w.url, token)
    a.close()


# --- issue 11: data the worker holds itself --------------------------------------------------

def test_loaded_data_outlives_every_session_until_deleted(spawn, token):
    w = spawn("held", extra=["--session-grace", "600"], preexec_fn=limited())
    a = client(w.url, token)
    obj_id = a._load(torch.arange(5.0), ["#boston", "#housing"], "Boston housing, 5 rows")
    a.close()  # the loading client leaves: the data stays
    b = client(w.url, token)
    entry = b.objects[obj_id]
    assert entry["held"] is True
    (found,) = b.search("#boston")
    assert found.id_at_location == obj_id
    assert torch.equal((found * 2).get(), torch.arange(5.0) * 2)
    del found
    b.flush()
    b.close()
    c = client(w.url, token)
    assert set(c.objects) == {obj_id}
    c._discard(obj_id)  # an explicit delete removes it
    assert c.objects == {}
    c.close()


# --- item 5: the summary is paged -----------------------------------------------------------

def test_a_worker_with_120000_objects_still_answers_every_client(spawn, token):
    w = spawn("many", extra=["--max-objects", "300000"], preexec_fn=limited())
    ws = raw(w.url, token)
    big = request(ws, {"c": "store", "r": 1, "o": torch.arange(120_000.0)})["ok"]
    reply = request(ws, {"c": "run", "r": 2, "op": "aten.unbind.int", "a": [Ref(big), 0], "k": None})
    assert len(reply["ok"]) == 120_000
    page = request(ws, {"c": "summary", "r": 3, "offset": 119_990, "limit": 100})["ok"]
    assert page["total"] == 120_001 and len(page["objects"]) == 11
    bad = request(ws, {"c": "summary", "r": 4, "limit": 10**6})
    assert bad["err"]["t"] == "SyftError" and "limit" in bad["err"]["m"]
    for _ in range(2):  # every client, one after the other
        c = client(w.url, token)
        objects = c.objects
        assert len(objects) == 100_000  # the client's cap (websocket.SUMMARY_CAP)
        assert all(e["shape"] == [] for i, e in objects.items() if i != big)
        everything = c.summary(limit=300_000)
        assert len({e["id"] for e in everything}) == 120_001
        c.close()
    ws.close()  # the raw session ends: its 120,001 objects go
    assert stored_ids(w.url, token) == set()


def test_a_slow_decode_does_not_hold_up_other_clients_pings_or_handshakes(spawn, token, tmp_path, monkeypatch):
    import msgpack
    import select

    from .gate_layer import GATE_DIR

    started, go = tmp_path / "started", tmp_path / "go"
    os.mkfifo(started)
    os.mkfifo(go)
    monkeypatch.setenv(GATE_DIR, str(tmp_path))
    w = spawn("gated", extra=["--layers", "tests.network.gate_layer"], preexec_fn=limited())
    a = raw(w.url, token)
    header = {"c": "store", "r": 1, "pad": "x" * 2**20,  # a 1 MiB frame whose decode waits at the gate
              "o": msgpack.ExtType(77, msgpack.packb([{"gate": "g"}, [], None, None]))}
    watch = os.open(started, os.O_RDONLY | os.O_NONBLOCK)
    a.send(encode_bytes(header))
    ready, _, _ = select.select([watch], [], [], 60)
    assert ready and os.read(watch, 1) == b"1", "the worker is decoding A's frame"
    c = client(w.url, token, timeout=30)  # a new handshake, a hello and a ping while A's decode waits
    assert c.ping()
    with pytest.raises(TimeoutError):
        a.recv(timeout=0)  # A's decode is still at the gate
    with open(go, "wb") as f:
        f.write(b"1")
    os.close(watch)
    r = decode(a.recv(timeout=30))
    assert r["r"] == 1 and r["err"]["t"] == "WireError" and "the gate opened" in r["err"]["m"]
    a.send(encode_bytes({"c": "ping", "r": 2}))
    assert decode(a.recv(timeout=30)) == {"r": 2, "ok": "pong"}  # A's connection lives on
    a.close()
    c.close()
