"""The lean connection's own framing and kernel timeouts (websocket.py's _LeanConnection): what
a user sees is unchanged. Messages of every websocket length form (7-bit, 16-bit, 64-bit, and
the 4 MiB chunks of a streamed tensor) arrive intact both ways; a reply that does not come in
time raises WorkerUnavailableError after about the timeout, and the next call works."""
import time

import pytest
import torch

import syft_lab as sy
from syft_lab.errors import WorkerUnavailableError
from syft_lab.workers.websocket import WebSocketWorker


@pytest.fixture
def bob(worker_procs, token):
    sy.hook()
    w = WebSocketWorker(worker_procs["bob"].url, id="bob", token=token, progress=False)
    yield w
    w.close()


# payload element counts around the frame-length boundaries (125/126 bytes, 65535/65536 bytes)
# and above the chunk size (a streamed message: several 4 MiB frames)
@pytest.mark.parametrize("n", [1, 20, 24, 16300, 16400, 200_000, 1_200_000])
def test_tensors_of_every_frame_length_round_trip(bob, n):
    x = torch.arange(n, dtype=torch.float32)
    p = x.send(bob)
    assert torch.equal((p + 1).get(), x + 1)
    assert torch.equal(p.get(), x)


def test_a_late_reply_times_out_after_about_the_timeout_and_the_next_call_works(bob):
    x = torch.randn(1500, 1500)
    p = x.send(bob)
    bob.timeout = 0.05
    t0 = time.monotonic()
    with pytest.raises(WorkerUnavailableError, match=r"'bob'.*no reply within 0.05 s"):
        for _ in range(20):  # a product of seconds on the worker's one thread
            p @ p @ p
    assert time.monotonic() - t0 < 10
    bob.timeout = 60
    assert torch.equal(p.get(), x)  # reconnected into the same session
    assert bob.ping()


def test_a_worker_gone_while_idle_is_seen_before_the_next_call(spawn, token):
    w = spawn("leanframes")
    c = WebSocketWorker(w.url, id="leanframes", token=token, progress=False)
    try:
        assert c.ping()
        w.kill()
        deadline = time.monotonic() + 10
        while c.state == "connected" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert c.state == "disconnected"  # the zero-wait read saw the close
        with pytest.raises(WorkerUnavailableError, match="leanframes"):
            c.ping()
    finally:
        c.close()
