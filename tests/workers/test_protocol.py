"""The client protocol (workers/protocol.py) with no sockets: WorkerClient over transports
written here in a few lines, the way a new transport (Ray's) is written.

``Loopback`` is a FramedTransport whose "connection" is a WorkerService in this process: its
frames are decoded and answered as a worker process would (streamed messages included).
``Whole`` carries one whole message per call, as a Ray actor method does."""
import collections
import gc
import secrets

import pytest
import torch

import syft_lab as sy
from syft_lab.errors import ObjectNotFoundError, QuotaExceededError, RemoteError, SyftError, WorkerUnavailableError
from syft_lab.wire.allowlist import OpNotAllowedError
from syft_lab.wire.format import CHUNK_SIZE, Decoder
from syft_lab.workers import gather, submit
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.limits import Limits
from syft_lab.workers.protocol import ConnectionLost, FramedTransport, RemoteQuotaExceededError, WorkerClient
from syft_lab.workers.service import WHOLE, Session, WorkerService

aten = torch.ops.aten


class Loopback(FramedTransport):
    """Frames to a WorkerService in this process, answered as the websocket server would."""

    def __init__(self, service, **kw):
        super().__init__(session=secrets.token_urlsafe(24), **kw)
        self.service = service
        self.replies = collections.deque()
        self.sent = []  # commands as they went out
        self.broken = False
        self.on_send = None
        self.server_session = Session(self.session, named=True)

    @property
    def address(self):
        return "loopback"

    def _connect(self):
        if self.broken:
            raise self.unavailable("the loopback is cut")
        self.server_decoder = Decoder()  # a new connection: the same named session
        self.door = ServiceConnection(self.service, self.server_session)  # where its messages are answered

    def _send_frame(self, frame):
        if self.on_send is not None:
            self.on_send()
        if self.broken:
            raise self.unavailable("the loopback is cut", ConnectionLost)
        msg = self.server_decoder.feed(bytes(frame))
        if msg is None:
            return
        self.sent.append(msg.get("c"))
        out = self.door.respond(msg)
        self.replies.extend(bytes(f) for f in out.encoded.frames)
        self.door.sent(out.then)

    def _receive_frame(self):
        if self.broken or not self.replies:
            raise self.unavailable("the loopback is cut", ConnectionLost)
        return self.replies.popleft()

    def _disconnect(self, done):
        if done:
            self.service.end_session(self.server_session)


class Whole(Loopback):
    """One whole message per call and reply (chunk_size WHOLE), answered by respond_whole."""

    chunk_size = WHOLE

    def _send_frame(self, frame):
        self.replies.append(self.door.respond_whole(bytes(frame)))


@pytest.fixture
def service():
    return WorkerService("loop", Limits(max_bytes=2**26, max_objects=1000))


@pytest.fixture
def client(service):
    w = WorkerClient("loop", Loopback(service, progress=False))
    yield w
    w.close()


def test_a_worker_over_any_framed_transport_behaves_like_any_worker(client, service):
    x = torch.tensor([1.0, 2.0])
    p = x.send(client)
    assert p.location is client and client.state == "connected"
    assert torch.equal((p * 2 + 1).get(), x * 2 + 1)
    big = torch.randn(CHUNK_SIZE // 4 + 10)  # streamed in chunks both ways
    assert torch.equal(big.send(client).get(), big)
    assert client.transport.sent[:2] == ["hello", "store"]


def test_a_whole_message_transport_never_splits_a_message(service):
    w = WorkerClient(None, Whole(service, progress=False))  # the hello names the worker
    try:
        assert w.id == "loop"
        big = torch.randn(CHUNK_SIZE // 4 + 10)
        assert torch.equal(big.send(w).get(), big)
    finally:
        w.close()


def test_errors_arrive_typed(client):
    p = torch.ones(4).send(client)
    with pytest.raises(RemoteQuotaExceededError) as info:
        p.expand(2**23, 4) * 2  # 128 MiB, over the 64 MiB quota
    assert isinstance(info.value, QuotaExceededError) and isinstance(info.value, RemoteError)
    assert info.value.worker_id == "loop"
    with pytest.raises(OpNotAllowedError):
        client._request({"c": "run", "op": "aten.set_.source_Tensor", "a": [], "k": None})
    with pytest.raises(ObjectNotFoundError):
        client._fetch(12345)
    with pytest.raises(RemoteError, match="RuntimeError"):
        p.view(3)


def test_releases_wait_for_the_next_request(client, service):
    p = torch.ones(1).send(client)
    obj_id = p.id_at_location
    del p
    gc.collect()
    assert list(client._releases) == [obj_id] and obj_id in service.core.objects
    client.ping()
    assert not client._releases and obj_id not in service.core.objects


def test_releases_survive_a_connection_that_broke_on_the_way(client, service):
    p = torch.ones(1).send(client)
    obj_id = p.id_at_location
    del p
    gc.collect()
    client.transport.broken = True
    with pytest.raises(WorkerUnavailableError):
        client.ping()
    assert list(client._releases) == [obj_id] and client.state == "disconnected"
    client.transport.broken = False
    client.ping()  # reconnects, same session: the release goes out now
    assert obj_id not in service.core.objects


def test_a_restarted_worker_is_noticed_and_old_releases_are_dropped(client, service):
    p = torch.ones(1).send(client)
    stale = p.id_at_location
    client.transport.service = WorkerService("loop")  # "the process restarted": empty, new instance
    client.transport.server_session = Session(client.transport.session, named=True)
    client.transport.drop()
    del p
    gc.collect()
    assert client.ping() and client.restarted and not client._releases
    with pytest.raises(ObjectNotFoundError) as info:
        client._fetch(stale)
    assert any("restarted" in n for n in info.value.__notes__)


def test_submitted_requests_are_in_flight_together_and_come_back_in_order(client):
    ps = [torch.full((2,), float(i)).send(client) for i in range(3)]
    before = len(client.transport.sent)
    pending = [submit(aten.mul.Tensor, (p, 10.0)) for p in ps]
    assert len(client.transport._in_flight) == 3 and not any(q.done for q in pending)
    assert client.transport.sent[before:] == ["run", "run", "run"]  # all out before any reply was read
    outs = gather(pending)
    assert [o.get()[0].item() for o in outs] == [0.0, 10.0, 20.0]


def test_an_in_place_submit_gives_back_the_callers_pointer(client):
    p = torch.ones(2).send(client)
    assert gather([submit(aten.add_.Tensor, (p, 1.0))]) == [p]
    assert torch.equal(p.get(), torch.full((2,), 2.0))


def test_gather_reads_every_reply_then_raises_the_first_error(client):
    a, b = torch.ones(3).send(client), torch.ones(2).send(client)
    pending = [submit(aten.view.default, (a, [2])), submit(aten.neg.default, (b,))]
    with pytest.raises(RemoteError, match="RuntimeError"):
        gather(pending)
    assert pending[1].done and torch.equal(pending[1].result().get(), -torch.ones(2))
    assert client.ping()  # nothing left unread


def test_a_plain_request_reads_the_replies_in_flight_first(client):
    p = torch.ones(2).send(client)
    q = submit(aten.neg.default, (p,))
    assert torch.equal((p + 1).get(), torch.full((2,), 2.0))  # a synchronous op meanwhile
    assert q.done and torch.equal(q.result().get(), -torch.ones(2))


def test_submit_spans_workers_and_refuses_mixed_ones(client, bob):
    here, there = torch.ones(1).send(client), torch.ones(1).send(bob)
    outs = gather([submit(aten.add.Tensor, (here, here)), submit(aten.add.Tensor, (there, there))])
    assert [o.location for o in outs] == [client, bob]
    with pytest.raises(SyftError, match="mixes data on worker 'loop' with data on worker 'bob'"):
        submit(aten.add.Tensor, (here, there))
    with pytest.raises(SyftError, match="needs at least one PointerTensor"):
        submit(aten.add.Tensor, (torch.tensor(1.0), torch.tensor(2.0)))
    with pytest.raises(SyftError, match="pointers and 0-dim local tensors only"):
        submit(aten.add.Tensor, (here, torch.ones(3)))


def test_a_request_from_inside_a_request_is_refused(client):
    seen = []

    def reenter():
        client.transport.on_send = None
        try:
            client.ping()
        except SyftError as e:
            seen.append(str(e))

    client.transport.on_send = reenter
    assert client.ping()
    assert seen and "re-entrant call on worker 'loop'" in seen[0]


def test_closing_ends_the_session_and_the_worker(service):
    w = WorkerClient("loop", Loopback(service, progress=False))
    p = torch.ones(1).send(w)
    obj_id = p.id_at_location
    w.close()
    assert w.state == "closed" and obj_id not in service.core.objects
    assert sy.workers.registry.lookup("loop") is None
    with pytest.raises(SyftError, match="was closed"):
        w.ping()


def test_describe_gives_the_root_of_the_chain_tree_without_values(client, bob):
    for w in (client, bob):
        p = sy.LoggingTensor(torch.tensor([4321.5])).send(w)
        root = w.describe(p.id_at_location)
        assert root["kind"] == "logging" and root["id"] == p.id_at_location
        # "4321.5", not "4321": the tree's random integer ids may hold any run of digits
        assert [c["kind"] for c in root["children"]] == ["tensor"] and "4321.5" not in repr(root)


def test_a_command_can_be_submitted_as_a_message(client, bob):
    for w in (client, bob):
        p = w.submit_request({"c": "store", "o": torch.ones(2)}, detach=True)
        obj_id = p.result()
        assert obj_id in w.service.core.objects if w is bob else obj_id in client.transport.service.core.objects
        assert torch.equal(w.submit_request({"c": "fetch", "id": obj_id, "keep": False}).result(), torch.ones(2))


def test_an_op_off_the_list_is_refused_in_the_same_words_everywhere(client, bob):
    said = []
    for w in (client, bob):
        p = torch.ones(2).send(w)
        with pytest.raises(OpNotAllowedError) as info:
            torch.ops.aten.resize_(p, [100])
        e = info.value
        said.append(e.remote_message if isinstance(e, RemoteError) else str(e))  # remote: under "on worker ..."
    assert said[0] == said[1] and "is denied by the worker's op policy" in said[0]
