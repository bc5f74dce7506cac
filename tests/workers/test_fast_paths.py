"""The websocket fast paths the benchmarks rely on stay taken. Both sides read a little of
websockets beyond its documented API: the client's frames (workers/framing.py) read its
protocol's ``current_size``, ``extensions`` and size limits; the worker's server runs a small
message at once when its handler waits on an empty queue (``recv_messages.frames.get_waiter``)
and writes a one-frame reply itself (``send_in_progress``, ``send_data``). pyproject.toml pins
websockets below its next major release; a release that renames any of these turns a fast path
off silently (a getattr default) or loudly. These tests fail in both cases: the names must be
there in the installed websockets, and pointer ops through a real worker must take both
short ways, counted where websockets would have done the work instead."""
import asyncio
import threading

import pytest
import torch
from websockets.asyncio import connection as ws_connection
from websockets.asyncio import messages as ws_messages
from websockets.asyncio.server import serve
from websockets.protocol import Protocol, Side, State

import syft_lab as sy
from syft_lab.workers.websocket import WebSocketWorker

OPS = 40


def _in_thread(main):
    """Run ``main(stop_event)`` (a coroutine function) on an event loop in a thread; the
    returned ``stop()`` ends it and waits for the thread."""
    loop = asyncio.new_event_loop()
    ready, box = threading.Event(), {}

    async def runner():
        box["stop"] = asyncio.Event()
        await main(box["stop"], ready)

    t = threading.Thread(target=lambda: loop.run_until_complete(runner()), daemon=True)
    t.start()
    assert ready.wait(60), "the server did not start"

    def stop():
        loop.call_soon_threadsafe(box["stop"].set)
        t.join(30)
        loop.close()

    return stop


def test_websockets_has_what_the_fast_paths_read():
    p = Protocol(Side.CLIENT, max_size=123)
    assert (p.current_size, p.extensions, p.max_message_size, p.max_fragment_size) == (None, [], 123, None)
    seen, port = {}, {}

    async def handler(ws):
        waiting = asyncio.ensure_future(ws.recv())
        for _ in range(100):  # until the read waits on the empty queue
            await asyncio.sleep(0)
            if ws.recv_messages.frames.get_waiter is not None:
                break
        seen["waiter while reading"] = ws.recv_messages.frames.get_waiter is not None
        seen["send_in_progress"] = ws.send_in_progress
        seen["send_data"] = callable(ws.send_data)
        seen["open"] = ws.protocol.state is State.OPEN
        await ws.send(await waiting)

    async def main(stop, ready):
        async with serve(handler, "127.0.0.1", 0, compression=None) as s:
            port["n"] = s.sockets[0].getsockname()[1]
            ready.set()
            await stop.wait()

    stop = _in_thread(main)
    try:
        from syft_lab.workers.websocket import _LeanConnection

        c = _LeanConnection(f"ws://127.0.0.1:{port['n']}", None, 2**20, 10.0)
        try:
            c.send(b"ping me")
            assert c.recv(timeout=30) == b"ping me"
        finally:
            c.close()
    finally:
        stop()
    assert seen == {"waiter while reading": True, "send_in_progress": None, "send_data": True, "open": True}


@pytest.fixture
def counted(monkeypatch):
    """How many frames reached websockets' message queue on the server (the inline path keeps
    a small message from it) and how many messages went out through its ``send`` (the one-frame
    reply path writes without it)."""
    counts = {"queued": 0, "sent": 0}
    put, send = ws_messages.Assembler.put, ws_connection.Connection.send

    def counting_put(self, frame):
        counts["queued"] += 1
        return put(self, frame)

    async def counting_send(self, *args, **kwargs):
        counts["sent"] += 1
        return await send(self, *args, **kwargs)

    monkeypatch.setattr(ws_messages.Assembler, "put", counting_put)
    monkeypatch.setattr(ws_connection.Connection, "send", counting_send)
    return counts


def test_pointer_ops_through_a_real_worker_take_both_short_ways(counted):
    from syft_lab.workers.server import WorkerServer

    sy.hook()
    server = WorkerServer("fastpaths", port=0)
    server.warm = False  # (a warm-up on the command thread would send ops there meanwhile)

    async def main(stop, ready):
        serving = asyncio.ensure_future(server.serve(ready=lambda s: ready.set()))
        await stop.wait()
        server.stop()
        await serving

    stop = _in_thread(main)
    bob = None
    try:
        bob = WebSocketWorker(f"ws://127.0.0.1:{server.port}", id="fastpaths", progress=False)
        p = torch.arange(4.0).send(bob)
        frames = bob.transport.ws.frames
        short, queued, sent = frames.short, counted["queued"], counted["sent"]
        acc = p
        for _ in range(OPS):
            acc = acc + p
        assert torch.equal(acc.get(), torch.arange(4.0) * (OPS + 1))
        # the client: every reply was one whole frame read the short way
        assert frames.short - short >= OPS
        # the server: (nearly) no op's request went through websockets' queue, nor its reply
        # through its send (the get may, and an op that came while the command thread was still
        # finishing the store); with the short ways off, all of the OPS would
        assert counted["queued"] - queued <= 4, counted
        assert counted["sent"] - sent <= 4, counted
    finally:
        if bob is not None:
            bob.close()
        stop()
