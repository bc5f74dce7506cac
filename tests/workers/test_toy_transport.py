"""A new transport implements four methods of FramedTransport (README, "Workers"): a toy one
here carries whole wire messages over a socket pair to a host thread that answers them with the
service connection's whole-message path (``ServiceConnection.respond_whole``), and the client on it is a worker
like any other."""
import gc
import socket
import struct
import threading

import pytest
import torch

from syft_lab.errors import ObjectNotFoundError, RemoteError
from syft_lab.wire.format import CHUNK_SIZE
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.limits import Limits
from syft_lab.workers.protocol import ConnectionLost, FramedTransport, RemoteQuotaExceededError, WorkerClient
from syft_lab.workers.service import WHOLE, Session, WorkerService

_LEN = struct.Struct("!Q")


def _send(sock, data) -> None:
    sock.sendall(_LEN.pack(len(data)) + bytes(data))


def _recv(sock) -> bytes | None:
    head = sock.recv(_LEN.size, socket.MSG_WAITALL)
    if len(head) < _LEN.size:
        return None
    n, = _LEN.unpack(head)
    return sock.recv(n, socket.MSG_WAITALL) if n else b""


def _host(sock, service) -> None:
    """The worker's side: one whole message in, its whole reply out, until the peer closes."""
    session = Session()
    try:
        while (data := _recv(sock)) is not None:
            _send(sock, ServiceConnection(service, session).respond_whole(data))
    finally:
        service.end_session(session)
        sock.close()


class SocketPairTransport(FramedTransport):
    """Whole messages (``chunk_size = WHOLE``) over a socket pair: only the four methods."""

    chunk_size = WHOLE

    def _connect(self):
        self.sock, theirs = socket.socketpair()
        self.host = threading.Thread(target=_host, args=(theirs, self.service), daemon=True)
        self.host.start()

    def _send_frame(self, frame):
        try:
            _send(self.sock, frame)
        except OSError:
            raise self.unavailable("the socket closed", ConnectionLost) from None

    def _receive_frame(self):
        data = _recv(self.sock)
        if data is None:
            raise self.unavailable("the socket closed", ConnectionLost)
        return data

    def _disconnect(self, done):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # the host's recv sees the end now (close alone may not)
        except OSError:
            pass
        self.sock.close()
        self.host.join(timeout=10)
        assert not self.host.is_alive(), "the toy worker's host thread did not stop"


@pytest.fixture
def service():
    return WorkerService("toy", Limits(max_bytes=2**24, max_objects=100))


@pytest.fixture
def toy(service):
    transport = SocketPairTransport(session="a-session-id-of-the-client")
    transport.service = service  # where _connect finds the worker it starts a host thread for
    w = WorkerClient(None, transport)
    yield w
    w.close()


def test_a_transport_is_four_methods():
    assert {k for k in vars(SocketPairTransport) if not k.startswith("__")} == {
        "chunk_size", "_connect", "_send_frame", "_receive_frame", "_disconnect"}


def test_a_worker_over_the_toy_transport_is_a_worker(toy, service):
    assert toy.id == "toy" and toy.state == "connected"  # its hello named it
    x = torch.arange(6.0).reshape(2, 3)
    p = x.send(toy)
    assert torch.equal((p @ p.t() + 1).get(), x @ x.t() + 1)
    big = torch.randn(CHUNK_SIZE // 4 + 10)  # above a chunk: still one message each way
    assert torch.equal(big.send(toy).get(), big)
    q = torch.ones(3).send(toy)
    obj_id = q.id_at_location
    del q
    gc.collect()
    toy.flush()  # the release travelled with a request: the worker dropped the object
    assert obj_id not in service.core.objects


def test_the_toy_transport_brings_typed_errors(toy):
    p = torch.ones(4).send(toy)
    with pytest.raises(RemoteQuotaExceededError):
        p.expand(2**22, 4) * 2  # 64 MiB, over its 16 MiB quota
    with pytest.raises(ObjectNotFoundError):
        toy._fetch(12345)
    with pytest.raises(RemoteError, match="RuntimeError"):
        p.view(3)
    assert torch.equal(p.get(), torch.ones(4))  # the connection lived on
