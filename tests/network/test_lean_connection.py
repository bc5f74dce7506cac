"""The WebSocketWorker's connection reads its socket in the calling thread (websocket.py's
_LeanConnection), with a keepalive thread answering the server's pings while no call reads:
an idle client keeps its connection (and so its session's objects), and what arrives while it
is idle waits for its next read."""
import asyncio
import threading
import time

import pytest
from websockets.asyncio.server import serve

import syft_lab.workers.websocket as websocket_module
from syft_lab.workers.websocket import _LeanConnection


@pytest.fixture
def echo_server():
    """An asyncio websockets server in a thread that pings every 0.2 s and drops a client whose
    pong is 0.5 s late; "push" makes it send a message unasked 0.3 s later."""
    loop = asyncio.new_event_loop()
    ready, state = threading.Event(), {}

    async def handler(ws):
        async for m in ws:
            if m == b"push":
                await asyncio.sleep(0.3)
                await ws.send(b"pushed")
            else:
                await ws.send(m)
        state["closed_by_client"] = ws.close_code

    async def main():
        async with serve(handler, "127.0.0.1", 0, ping_interval=0.2, ping_timeout=0.5, compression=None) as s:
            state["port"] = s.sockets[0].getsockname()[1]
            state["stop"] = asyncio.Event()
            ready.set()
            await state["stop"].wait()

    t = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    t.start()
    assert ready.wait(30)
    yield state
    loop.call_soon_threadsafe(state["stop"].set)
    t.join(10)


def test_an_idle_connection_answers_pings_and_stays_open(echo_server, monkeypatch):
    monkeypatch.setattr(websocket_module, "KEEPALIVE", 0.05)
    c = _LeanConnection(f"ws://127.0.0.1:{echo_server['port']}", None, 2**20, 10.0)
    try:
        c.send(b"one")
        assert c.recv(timeout=10) == b"one"
        time.sleep(2.0)  # 10 of the server's pings, each dropped after 0.5 s unanswered
        c.send(b"two")
        assert c.recv(timeout=10) == b"two"
    finally:
        c.close()


def test_without_the_keepalive_an_idle_connection_is_dropped(echo_server, monkeypatch):
    # the other side of the test above: the server does drop a client that stops answering
    monkeypatch.setattr(websocket_module, "KEEPALIVE", 3600.0)
    c = _LeanConnection(f"ws://127.0.0.1:{echo_server['port']}", None, 2**20, 10.0)
    try:
        time.sleep(2.0)
        with pytest.raises(OSError):
            c.send(b"late")
            c.recv(timeout=10)
    finally:
        c.close()


def test_a_message_that_arrives_while_idle_waits_for_the_next_read(echo_server, monkeypatch):
    monkeypatch.setattr(websocket_module, "KEEPALIVE", 0.05)
    c = _LeanConnection(f"ws://127.0.0.1:{echo_server['port']}", None, 2**20, 10.0)
    try:
        c.send(b"push")
        with pytest.raises(TimeoutError):  # nothing has come yet
            c.recv(timeout=0)
        time.sleep(1.0)  # arrives at 0.3 s; the keepalive thread reads it meanwhile
        assert c.recv(timeout=0) == b"pushed"
        c.send(b"after")
        assert c.recv(timeout=10) == b"after"
    finally:
        c.close()
    assert c.state.name == "CLOSED"


def test_close_sends_the_code_the_client_gives(echo_server):
    c = _LeanConnection(f"ws://127.0.0.1:{echo_server['port']}", None, 2**20, 10.0)
    c.send(b"x")
    assert c.recv(timeout=10) == b"x"
    c.close(1000)
    deadline = time.monotonic() + 10
    while "closed_by_client" not in echo_server and time.monotonic() < deadline:
        time.sleep(0.05)
    assert echo_server.get("closed_by_client") == 1000
