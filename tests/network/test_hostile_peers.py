"""Hostile peers on 127.0.0.1 (issue 37, item 4): a client whose one message would hold the
worker's event loop, a worker that keeps the notebook waiting or sends a reply too costly to
read, and the worker's owner reading every session's ledger.

The hostile client is a raw websocket peer written here; the hostile worker is a small
websockets server written here, driving a real ``WebSocketWorker``. Every wait has a deadline:
a test never sleeps and hopes."""
from __future__ import annotations

import asyncio
import struct
import threading
import time

import pytest
import torch

import syft_lab as sy
from syft_lab.errors import RemoteError, WorkerUnavailableError
from syft_lab.wire.format import (_PREFIX, MAGIC, MAX_HEADER_ELEMENTS, MAX_HEADER_SIZE, WIRE_VERSION, decode, encode,
                                  encode_bytes)
from syft_lab.workers.websocket import WebSocketWorker

from .test_hardening import raw, request, status

pytestmark = pytest.mark.network

MiB = 2**20
BUDGET_MESSAGE = f"at most {MAX_HEADER_ELEMENTS} values"
PING_DEADLINE = 3.0  # seconds another client's ping may take while a hostile header decodes (it took 9.8-15 s)
REPLY_DEADLINE = 60.0  # seconds the hostile client's refusal may take on a loaded machine (it took 22-110 s)


def header_of_empty_lists(rid: int, size: int = MAX_HEADER_SIZE) -> bytes:
    """One frame whose header, ``{"r": rid, "x": [[[], [], ...], ...]}``, is ``size`` bytes of
    empty lists (1 byte each on the wire, a 56-byte list each in Python), in lists of 65,000:
    well-formed msgpack, no list longer than the decoder accepts on its own."""
    pre = b"\x82\xa1r" + struct.pack(">BQ", 0xCF, rid) + b"\xa1x"
    inner = b"\xdc" + struct.pack(">H", 65000) + b"\x90" * 65000
    n = (size - len(pre) - 3) // len(inner)
    head = pre + b"\xdc" + struct.pack(">H", n) + inner * n
    assert len(head) <= MAX_HEADER_SIZE
    return _PREFIX.pack(MAGIC, WIRE_VERSION, 0, len(head), 0) + head


# --- a hostile client ------------------------------------------------------------------------

def test_a_header_of_millions_of_empty_lists_is_refused_while_other_clients_are_answered(spawn, token):
    """Two raw peers each send a 16 MiB header of empty lists. Before: other clients' pings
    waited 9.8-15 s, the hostile requests took 22-110 s and the worker peaked 1.4-4.9 GB above
    its start. Now each is refused by request id for its values (the header budget) and its
    connection goes on; meanwhile pings and new handshakes are answered, and memory stays low."""
    w = spawn("hostile-target", extra=["--max-memory", "1G"])
    pinger = raw(w.url, token)
    assert request(pinger, {"c": "ping", "r": 1}) == {"r": 1, "ok": "pong"}
    before = status(w.proc.pid, "VmHWM")
    frame = header_of_empty_lists(7)
    replies: dict = {}

    def attack(name):
        ws = raw(w.url, token)
        ws.send(frame)
        replies[name] = decode(ws.recv(timeout=REPLY_DEADLINE))
        replies[name + " then"] = request(ws, {"c": "ping", "r": 8}, timeout=REPLY_DEADLINE)
        ws.close()

    attackers = [threading.Thread(target=attack, args=(f"hostile {i}",), daemon=True) for i in range(2)]
    for t in attackers:
        t.start()
    pings = 0
    deadline = time.monotonic() + REPLY_DEADLINE
    while any(t.is_alive() for t in attackers) and time.monotonic() < deadline:
        t0 = time.monotonic()
        pinger.send(encode_bytes({"c": "ping", "r": 2}))
        assert decode(pinger.recv(timeout=PING_DEADLINE)) == {"r": 2, "ok": "pong"}
        with raw(w.url, token):  # a new client's opening handshake (open_timeout bounds it)
            pass
        assert time.monotonic() - t0 < 2 * PING_DEADLINE
        pings += 1
    for t in attackers:
        t.join(timeout=max(deadline - time.monotonic(), 0.1))
    assert not any(t.is_alive() for t in attackers), "a hostile request was not answered in time"
    assert pings >= 1
    for i in range(2):
        reply = replies[f"hostile {i}"]
        assert reply["r"] == 7 and reply["err"]["t"] == "WireError", reply
        assert BUDGET_MESSAGE in reply["err"]["m"]
        assert replies[f"hostile {i} then"] == {"r": 8, "ok": "pong"}  # the same connection goes on
    assert status(w.proc.pid, "VmHWM") - before < 400 * MiB
    assert request(pinger, {"c": "ping", "r": 3}) == {"r": 3, "ok": "pong"}
    pinger.close()


def test_a_header_nested_past_the_depth_budget_is_refused_by_request_id(worker_procs, token):
    ws = raw(worker_procs["bob"].url, token)
    deep = []
    for _ in range(200):
        deep = [deep]
    reply = request(ws, {"c": "ping", "r": 5, "x": deep})
    assert reply["r"] == 5 and reply["err"]["t"] == "WireError" and "128 deep" in reply["err"]["m"], reply
    assert request(ws, {"c": "ping", "r": 6}) == {"r": 6, "ok": "pong"}
    ws.close()


# --- a hostile worker ------------------------------------------------------------------------

HELLO = {"worker": "mallory", "v": WIRE_VERSION, "instance": "mallory-1", "max_message_size": 2**31}


class HostileWorker:
    """A websockets server in a thread that answers ``hello`` as a worker would, request number
    ``hostile_at`` (after the hello) with ``behaviour(ws, rid, stopped)``, a coroutine that runs
    until ``stopped`` is set, and every other request with "pong"."""

    def __init__(self, behaviour, hostile_at: int = 1):
        self.behaviour, self.hostile_at = behaviour, hostile_at
        self.url = None
        self._ready = threading.Event()
        self._loop = None
        self._stopped = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def __enter__(self):
        self._thread.start()
        assert self._ready.wait(30), "the hostile worker did not start"
        return self

    def __exit__(self, *exc):
        self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(30)

    async def _main(self):
        from websockets.asyncio.server import serve

        self._loop, self._stopped = asyncio.get_running_loop(), asyncio.Event()
        async with serve(self._handler, "127.0.0.1", 0, compression=None, max_size=None, ping_interval=None) as server:
            self.url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            self._ready.set()
            await self._stopped.wait()

    async def _handler(self, ws):
        n = 0
        async for data in ws:
            msg = decode(data)
            if msg["c"] == "hello":
                await ws.send(encode_bytes({"r": msg["r"], "ok": {**HELLO, "session": msg.get("session")}}))
                continue
            n += 1
            if n == self.hostile_at:
                await self.behaviour(ws, msg["r"], self._stopped)
            else:
                await ws.send(encode_bytes({"r": msg["r"], "ok": "pong"}))


async def keep_pinging(ws, rid, stopped):
    while not stopped.is_set():
        await ws.ping()
        await asyncio.sleep(0.2)


async def keep_pushing(ws, rid, stopped):
    seq = 0
    while not stopped.is_set():
        seq += 1
        await ws.send(encode_bytes({"push": "events", "seq": seq, "events": []}))
        await asyncio.sleep(0.2)


async def trickle_chunks(ws, rid, stopped):
    """A streamed reply, one 1-byte chunk (one websocket message) every 0.2 s."""
    frames = encode({"r": rid, "ok": torch.zeros(64, dtype=torch.uint8)}, chunk_size=1).frames
    for frame in frames:
        if stopped.is_set():
            return
        await ws.send(bytes(frame))
        await asyncio.sleep(0.2)


async def trickle_bytes(ws, rid, stopped):
    """One reply frame written to the socket a byte at a time, one byte every 0.2 s."""
    payload = encode_bytes({"r": rid, "ok": "pong"})
    frame = bytes((0x82, len(payload))) + payload
    for i in range(len(frame)):
        if stopped.is_set():
            return
        ws.transport.write(frame[i:i + 1])
        await asyncio.sleep(0.2)


def call_with_deadline(fn, deadline: float):
    """``fn()`` in a thread: (its result or exception, seconds it took), failing the test if it
    has not returned within ``deadline`` seconds."""
    out = {}

    def run():
        t0 = time.monotonic()
        try:
            out["value"] = fn()
        except BaseException as e:
            out["value"] = e
        out["took"] = time.monotonic() - t0

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(deadline)
    assert not t.is_alive(), f"still waiting after {deadline} s"
    return out["value"], out["took"]


@pytest.mark.parametrize("behaviour", [keep_pinging, keep_pushing, trickle_chunks, trickle_bytes],
                         ids=lambda b: b.__name__)
def test_a_request_timeout_is_a_deadline_for_its_reply_whatever_arrives(behaviour):
    """A worker that sends pings, pushes, or its reply a chunk or a byte at a time used to keep
    a ``timeout=2`` request waiting for ever (each arrival restarted the wait). Now the request
    fails at its deadline, naming it."""
    with HostileWorker(behaviour) as evil:
        client = WebSocketWorker(evil.url, id="mallory", timeout=2, progress=False)
        try:
            error, took = call_with_deadline(client.ping, 30)
            assert isinstance(error, WorkerUnavailableError), error
            assert "no reply within 2 s" in str(error)
            assert took < 8, took  # 2 s, plus one wait for a frame at most on a loaded machine
        finally:
            client.close()


def test_a_reply_header_past_the_budget_is_refused_at_little_cost_and_the_connection_goes_on():
    """A worker answering with a 16 MiB header of empty lists cost the notebook's kernel
    +1.19 GB and 25 s. The client checks the same header budget as a worker: the request raises
    a RemoteWireError naming it, memory stays low, and the next request works."""
    rid_seen = []

    async def huge_reply(ws, rid, stopped):
        rid_seen.append(rid)
        await ws.send(header_of_empty_lists(rid))

    with HostileWorker(huge_reply, hostile_at=2) as evil:
        client = WebSocketWorker(evil.url, id="mallory", timeout=60, progress=False)
        try:
            assert client.ping()  # hello and a first request of the budget's reader: the connection works
            with open("/proc/self/clear_refs", "w") as f:  # this process's peak RSS starts again from now
                f.write("5")
            before = status("self", "VmHWM")
            error, took = call_with_deadline(client.ping, 60)
            assert isinstance(error, RemoteError) and error.remote_type == "WireError", error
            assert BUDGET_MESSAGE in str(error)
            assert status("self", "VmHWM") - before < 300 * MiB
            assert client.ping() is True  # in step: the connection goes on
            assert len(rid_seen) == 1
        finally:
            client.close()


# --- the owner's token reads the whole ledger -----------------------------------------------

def test_the_worker_owner_reads_every_session_s_ledger_with_its_token():
    """``ledger(everything=True)`` with the worker's own token was always refused (the server
    never gave the service its token). The process that started the worker holds the token
    (sy.start_worker) and reads every session's part; another session reads only its own, and a
    wrong token is refused."""
    owner = sy.start_worker("ledger-owner")
    other = WebSocketWorker(owner.url, id="ledger-owner", token=owner.transport.token, progress=False)
    try:
        mine = torch.ones(3).send(owner)  # 12 bytes, the owner's session
        theirs = torch.ones(5).send(other)  # 20 bytes, another session
        every = owner.ledger(everything=True)
        stored = sorted((r["bytes"], r["session"]) for r in every if r["kind"] == "stored")
        assert stored == [(12, "me"), (20, "client 2")], stored
        assert [r["bytes"] for r in other.ledger() if r["kind"] == "stored"] == [20]
        with pytest.raises(RemoteError, match="token"):
            other.ledger(everything=True, token="not-the-token")
        assert mine.get().tolist() == [1.0] * 3 and theirs.get().tolist() == [1.0] * 5
    finally:
        other.close()
        owner.close()


def test_a_worker_flooding_pushes_never_holds_up_the_notebook_between_requests():
    """A worker the notebook follows that sends pushes without pause: reading them between
    cells (``poll_events``, after each cell and every keepalive tick) returns, one poll reading
    at most POLL_FRAMES of them, and the notebook keeps at most HELD_PUSHES."""
    from syft_lab.workers.protocol import HELD_PUSHES

    async def answer_then_flood(ws, rid, stopped):
        await ws.send(encode_bytes({"r": rid, "ok": "pong"}))
        seq = 0
        while not stopped.is_set():
            seq += 1
            await ws.send(encode_bytes({"push": "events", "seq": seq, "events": []}))

    with HostileWorker(answer_then_flood, hostile_at=2) as evil:
        client = WebSocketWorker(evil.url, id="mallory", timeout=10, progress=False)
        try:
            assert client.follow_events()  # request 1 (answered), then request 2 starts the flood
            assert client.ping()
            deadline = time.monotonic() + 60
            while client.transport._push_seq < 4 * HELD_PUSHES:  # reads of the pushes, not yet emitted
                assert time.monotonic() < deadline, "the pushes stopped coming"
                call_with_deadline(client.transport.poll, 30)  # at most POLL_FRAMES frames a read
                assert len(client._pushes) <= HELD_PUSHES  # what waits to be emitted is bounded
            for _ in range(3):  # what the views do after each cell: it returns, the flood going on
                call_with_deadline(client.poll_events, 30)
        finally:
            client.close()
