"""A worker process knows its real memory limit and keeps every route under it.

Workers here run inside a memory cgroup the test makes (cgroup v1 on this machine class): past
its limit the kernel kills the worker and every client loses its objects, so each attack
below must be refused before anything is allocated.
"""
import pytest
import torch

from syft_lab.commands import Ref
from syft_lab.errors import QuotaExceededError
from syft_lab.wire.format import decode, encode, encode_bytes
from syft_lab.workers.websocket import WebSocketWorker

from .conftest import WorkerProcess
from .memory_cgroup import MemoryCgroup

pytestmark = pytest.mark.network

GiB, MiB = 2**30, 2**20
LIMIT = 1 * GiB


def _worker(worker_id, cgroup, token_file, token, extra=()):
    w = WorkerProcess(worker_id, token_file, extra, preexec_fn=cgroup.enter()).start()
    return w, WebSocketWorker(w.url, id=worker_id, token=token, progress=False)


@pytest.fixture(scope="module")
def boxed(token_file, token):
    """A worker process in a 1 GiB memory cgroup, with its default budget, and a client."""
    cgroup = MemoryCgroup(LIMIT)
    try:
        w, client = _worker("boxed", cgroup, token_file, token)
        yield client, w, cgroup
        client.close()
    finally:
        cgroup.close()


@pytest.fixture(scope="module")
def small_worker(token_file, token):
    cgroup = MemoryCgroup(LIMIT)
    try:
        w, client = _worker("small", cgroup, token_file, token, ["--max-memory", "64M"])
        yield client, w, cgroup
        client.close()
    finally:
        cgroup.close()


@pytest.fixture
def small(small_worker):
    """A worker with a 64 MiB budget in a 1 GiB memory cgroup, and a client; each test leaves
    it empty."""
    client = small_worker[0]
    yield small_worker
    client.flush()
    assert client.objects == {}


def test_the_default_budget_is_half_of_the_workers_own_cgroup_limit(boxed):
    client, w, cgroup = boxed
    limits = client.limits
    assert limits["max_bytes"] == LIMIT // 2
    assert limits["source"] == f"half of 1.0 GiB: cgroup v1 {cgroup.path}"
    assert any("memory budget 512.0 MiB (half of 1.0 GiB: cgroup v1" in line for line in w.stderr_lines)
    # and it is enforced: an mm whose output needs more than the budget is refused, the worker lives
    a = torch.ones(16384, 1).send(client)
    b = torch.ones(1, 16384).send(client)
    with pytest.raises(QuotaExceededError, match="memory limit: nothing ran"):
        a.mm(b)  # 1 GiB of float32
    assert torch.equal((a + 1).get()[:2], torch.full((2, 1), 2.0))
    assert cgroup.oom_kills() == 0


def test_what_an_op_or_a_reply_materialises_is_refused_before_it_is_allocated(boxed):
    client, w, cgroup = boxed
    one = torch.ones(1).send(client)
    keep = torch.tensor([3.0, 4.0]).send(client)
    wide = one.expand(2**15, 2**15)  # a view: nothing allocated
    attacks = {
        # a get of a view makes it whole: 2 GiB of float32 from 4 bytes
        "get of an expand": lambda: one.expand(2**29 - 2**16).get(),
        "contiguous of an expand": lambda: client._request(
            {"c": "run", "op": "aten.contiguous.default", "a": [Ref(wide.id_at_location)], "k": None}),
        # 9 Mi bools of 64 dimensions: nonzero could make 4.5 GiB of indices
        "nonzero amplification": lambda: torch.ones([9 * 2**20] + [1] * 63, dtype=torch.bool).send(client).nonzero(),
        # 128 KiB of output, 9.1 GB of im2col workspace
        "conv workspace": lambda: torch.nn.functional.conv2d(
            torch.ones(1, dtype=torch.float64).send(client).expand(1, 64, 160, 160),
            torch.ones(1, dtype=torch.float64).send(client).expand(1, 64, 33, 33)),
    }
    for name, attack in attacks.items():
        with pytest.raises(QuotaExceededError, match="nothing ran|before anything was allocated"):
            attack()
        assert torch.equal((keep + 0).get(), torch.tensor([3.0, 4.0])), name  # the worker and its objects live on
    assert cgroup.oom_kills() == 0 and w.proc.poll() is None


def raw(url, token):
    from websockets.sync.client import connect

    return connect(url, additional_headers={"Authorization": f"Bearer {token}"}, compression=None, max_size=None,
                   legacy=True, open_timeout=10, max_queue=1, close_timeout=0.5)  # a blocked reader: no wait


def test_messages_in_flight_count_against_the_budget(small, token):
    client, w, cgroup = small
    streaming = raw(w.url, token)  # starts a 40 MiB store and never finishes it
    streaming.send(encode({"c": "store", "r": 1, "o": torch.zeros(10 * MiB)}).frames[0])
    late = raw(w.url, token)
    second = encode({"c": "store", "r": 1, "o": torch.zeros(7 * MiB)})  # 28 MiB more does not fit
    for f in second.frames:
        late.send(f)
    r = decode(late.recv(timeout=30))
    assert r["r"] == 1 and r["err"]["t"] == "QuotaExceededError"
    assert "a message's tensors needs 28.0 MiB while the worker holds 0 B and has 40.0 MiB in flight" in r["err"]["m"]
    late.send(encode_bytes({"c": "ping", "r": 2}))  # the refused message was read past: in step
    assert decode(late.recv(timeout=30)) == {"r": 2, "ok": "pong"}
    streaming.close()
    late.close()

    # copies for fetches with keep that nobody reads: each holds its 12 MiB until sent
    obj = torch.zeros(3 * MiB).send(client)
    readers = []
    for k in range(4):
        ws = raw(w.url, token)
        ws.send(encode_bytes({"c": "hello", "r": 1}))
        decode(ws.recv(timeout=30))
        readers.append(ws)
    for ws in readers:
        ws.send(encode_bytes({"c": "fetch", "r": 2, "id": obj.id_at_location, "keep": True}))
    fifth = raw(w.url, token)
    fifth.send(encode_bytes({"c": "fetch", "r": 3, "id": obj.id_at_location, "keep": True}))
    r = decode(fifth.recv(timeout=30))
    assert r["r"] == 3 and r["err"]["t"] == "QuotaExceededError"
    assert r["err"]["m"].startswith(f"a copy of object {obj.id_at_location} to send needs 12.0 MiB while the worker "
                                    f"holds 12.0 MiB and has 48.0 MiB in flight")
    for ws in [*readers, fifth]:
        ws.close()
    assert torch.equal((obj[:2] + 1).get(), torch.ones(2))
    assert cgroup.oom_kills() == 0 and w.proc.poll() is None


def test_tags_logs_and_plans_count_against_the_budget(small):
    from syft_lab.plans.graph import Node, PlanBuilds, PlanGraph, Value
    from syft_lab.tensors.logging import LoggingTensor

    client, w, cgroup = small
    tags = [f"#{k:03d}" + "x" * 4000 for k in range(256)]  # ~1 MiB of tags on an empty tensor
    loaded = []
    with pytest.raises(QuotaExceededError, match=r"(of|its) 64.0 MiB"):
        for _ in range(300):
            loaded.append(client._request({"c": "load", "o": torch.empty(0), "tags": tags}))
    assert 40 < len(loaded) < 64
    for i in loaded:
        client._request({"c": "delete", "id": i})

    aten = torch.ops.aten
    n = 10_000
    nodes = [Node(aten.add.Tensor, [Value("input", 0) if k == 0 else Value("node", k - 1), 1.0], {},
                  [((2,), "float32")]) for k in range(n)]
    text = PlanBuilds("long", [PlanGraph("long", [{"name": "x", "role": "input", "shape": [2], "dtype": "float32"}],
                                         [], nodes, [Value("node", n - 1)], True)]).to_json()
    plans = []
    with pytest.raises(QuotaExceededError, match=r"(of|its) 64.0 MiB"):
        for _ in range(20):
            plans.append(client._request({"c": "store_plan", "g": text, "s": []}))
    assert 2 <= len(plans) < 8  # a 10,000-node plan counts about 25.6 MB (2.5 KB a node)
    for i in plans:
        client._request({"c": "delete", "id": i})

    lt = LoggingTensor(torch.ones(1))
    for _ in range(10_000):
        lt = lt + 1
    sent = []
    with pytest.raises(QuotaExceededError, match=r"(of|its) 64.0 MiB"):
        for _ in range(30):  # each copy's log: 10,000 records
            sent.append(lt.send(client))
    assert 10 <= len(sent) < 21

    assert cgroup.oom_kills() == 0 and w.proc.poll() is None
