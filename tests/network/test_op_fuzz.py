"""Ops on a worker process: the allow-list survives a fuzzer, admits what training needs, and
the quotas refuse what would not fit.

The fuzzer is deterministic: for each allowed overload, one baseline case (every required
argument takes the first value of its type's pool), then one case per other pool value of each
argument (empty, 0-dim, huge sizes such as 2**40, negative ints and dims, mismatched shapes,
wrong dtypes, None for optionals), and a second baseline with consistent channels. The cases go
out as raw ``run`` commands in batches to a worker under an RLIMIT_AS memory limit; after each
batch the worker must still answer a ping. A batch that kills the worker is replayed case by
case on a fresh worker to name the culprit.
"""
from __future__ import annotations

import copy
import resource
import threading
import time

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy
from syft_lab.errors import RemoteError
from syft_lab.ids import new_id
from syft_lab.plans.graph import Node, PlanGraph, Value
from syft_lab.wire.allowlist import ALLOWED
from syft_lab.wire.format import decode, encode
from syft_lab.commands import NewObject, Ref
from syft_lab.workers.websocket import WebSocketWorker

aten = torch.ops.aten

pytestmark = pytest.mark.network

MEMORY_LIMIT = 3 * 2**30  # RLIMIT_AS of the fuzzed worker: a runaway op fails there, not on this machine
BATCH = 200
MAX_CASES_PER_OP = 64
CASE_TIMEOUT = 30  # seconds for one batch's replies: a stall is a finding too


def limit_memory():  # runs in the worker process, before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def pool_tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "f34": torch.randn(3, 4, generator=g),
        "f0d": torch.tensor(1.5),
        "empty": torch.empty(0),
        "f2345": torch.randn(2, 3, 4, 5, generator=g),
        "i64": torch.tensor([0, 1, 2]),
        "bool": torch.tensor([[True, False], [False, True]]),
        "f1": torch.randn(1, generator=g),
        "f1x3x8x8": torch.randn(1, 3, 8, 8, generator=g),
        "f3": torch.randn(3, generator=g),  # one value per channel of f2345 and f1x3x8x8
    }


TENSOR_NAMES = list(pool_tensors())
NAN, INF = float("nan"), float("inf")
POOLS = {
    "int": [1, 0, -1, 2, 2**40, -2**40],
    "List[int]": [[2], [], [0], [-1], [2**40], [3, 4], [2**31, 2**31], [1, 1], [-2**40, 2]],
    "float": [0.5, 0.0, -1.0, 1e308, NAN, INF],
    "List[float]": [[1.0], [], [NAN]],
    "bool": [False, True],
    "List[bool]": [[True, True, True], [False, False, False], [True]],
    "number": [2, 0.5, True, -1, 2**62, NAN],
    "ScalarType": [torch.float32, torch.int64, torch.bool, torch.float64],
    "Layout": [torch.strided],
    "Device": [torch.device("cpu"), torch.device("meta")],
    "MemoryFormat": [torch.contiguous_format, torch.channels_last],
    "str": ["none", "mean", "sum", "tanh", "floor", ""],
    "Generator": [None],
}


class Slot:
    """A pool tensor in a case, bound to the ids of each batch's freshly stored copy."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return self.name


SLOTS = {n: Slot(n) for n in TENSOR_NAMES}


def pool_for(type_str: str) -> list:
    optional = type_str.startswith("Optional[")
    inner = type_str[len("Optional["):-1] if optional else type_str
    t = SLOTS
    if inner == "Tensor":
        values = list(SLOTS.values())
    elif inner == "List[Tensor]":
        values = [[t["f34"], t["f34"]], [], [t["f34"], t["i64"]], [t["f0d"]], [t["f1x3x8x8"], t["f1x3x8x8"]]]
    elif inner == "List[Optional[Tensor]]":
        values = [[t["i64"]], [None, t["i64"]], [t["bool"]], [], [t["f34"]]]
    else:
        values = list(POOLS.get(inner, [None]))
    return ([None] + values) if optional else values


def cases_for(op) -> list[tuple[list, dict]]:
    """(args, kwargs) lists for one overload: a baseline, then one argument varied at a time."""
    schema_args = op._schema.arguments
    pools = [pool_for(str(a.real_type)) for a in schema_args]
    required = [not a.has_default_value() for a in schema_args]
    baseline = [p[1] if (p and p[0] is None and len(p) > 1) else (p[0] if p else None) for p in pools]

    def build(values: dict[int, object]):
        args, kwargs = [], {}
        for i, a in enumerate(schema_args):
            if i in values:
                v = values[i]
            elif required[i]:
                v = baseline[i]
            else:
                continue
            if a.kwarg_only:
                kwargs[a.name] = v
            elif len(args) == i:
                args.append(v)
            else:  # an earlier optional was left out: name this one
                kwargs[a.name] = v
        return args, kwargs

    cases = [build({})]
    for i, pool in enumerate(pools):
        for v in pool:
            if required[i] and v is baseline[i]:
                continue
            cases.append(build({i: v}))
    # A second baseline with consistent channels (an N,C,H,W input, then per-channel tensors),
    # its non-tensor arguments varied: kernels that trust their mode flags show up here.
    tensor_args = [i for i, a in enumerate(schema_args) if "Tensor" in str(a.real_type)
                   and "List" not in str(a.real_type)]
    if tensor_args:
        channel = {i: SLOTS["f2345" if k == 0 else "f3"] for k, i in enumerate(tensor_args)}
        cases.append(build(channel))
        for i, pool in enumerate(pools):
            if i not in channel:
                for v in pool:
                    cases.append(build({**channel, i: v}))
        cases += [build({**channel, i: None}) for i in tensor_args if pools[i][0] is None]
    return cases[:MAX_CASES_PER_OP]


class Fuzzer:
    def __init__(self, proc, token):
        self.proc, self.token = proc, token
        self.ws = None
        self.rid = 0
        self.to_release: list[int] = []
        self.stats = {"cases": 0, "ok": 0, "error": 0}

    def connect(self):
        from websockets.sync.client import connect

        self.ws = connect(self.proc.url, additional_headers={"Authorization": f"Bearer {self.token}"},
                          compression=None, max_size=None, open_timeout=30, legacy=True)

    def restart(self):
        self.close()
        self.proc.restart()
        self.to_release = []
        self.connect()

    def close(self):
        if self.ws is not None:
            self.ws.close()
            self.ws = None

    def request(self, header: dict):
        self.rid += 1
        header["r"] = self.rid
        self.ws.send(encode(header).frames[0])
        return decode(self.ws.recv(timeout=CASE_TIMEOUT))

    def store_pool(self) -> dict:
        return {name: Ref(self.request({"c": "store", "o": t})["ok"]) for name, t in pool_tensors().items()}

    def run_batch(self, batch: list[tuple[str, list, dict]]) -> None:
        """Send every case, then read every reply (raises on a dead worker or a stall)."""
        for name, args, kwargs in batch:
            self.rid += 1
            header = {"c": "run", "op": name, "a": args, "k": kwargs, "r": self.rid}
            if self.to_release:
                header["rel"], self.to_release = self.to_release, []
            self.ws.send(encode(header).frames[0])
        for _ in batch:
            reply = decode(self.ws.recv(timeout=CASE_TIMEOUT))
            self.stats["cases"] += 1
            if "err" in reply:
                self.stats["error"] += 1
                continue
            self.stats["ok"] += 1
            out = reply.get("ok")
            for o in (out if isinstance(out, (list, tuple)) else [out]):
                if type(o) is NewObject:
                    self.to_release.append(o.id)

    def alive(self) -> bool:
        try:
            return self.proc.proc.poll() is None and self.request({"c": "ping"}).get("ok") == "pong"
        except Exception:
            return False


def all_cases() -> list[tuple[str, list, dict]]:
    return [(name, args, kwargs) for name, op in sorted(ALLOWED.items()) for args, kwargs in cases_for(op)]


def bind(value, refs: dict):
    """A case's value with its slots bound to this batch's stored tensors."""
    if type(value) is Slot:
        return refs[value.name]
    if type(value) is list:
        return [bind(v, refs) for v in value]
    if type(value) is dict:
        return {k: bind(v, refs) for k, v in value.items()}
    return value


def run_cases(fuzz: Fuzzer, cases) -> bool:
    """One batch on fresh pool tensors (in-place cases wrote to the last ones); True if the worker lives."""
    try:
        refs = fuzz.store_pool()
        fuzz.run_batch([(name, bind(args, refs), bind(kwargs, refs)) for name, args, kwargs in cases])
        fuzz.to_release += [r.id for r in refs.values()]
        return fuzz.alive()
    except Exception:  # the connection died with the worker, or a reply never came
        return False


def bisect(fuzz: Fuzzer, batch) -> list:
    """Replay a fatal batch one case at a time on fresh workers: the cases that kill or stall it."""
    found = []
    fuzz.restart()
    for case in batch:
        if not run_cases(fuzz, [case]):
            found.append(case)
            fuzz.restart()
    return found


def test_every_allowed_op_survives_edge_arguments(spawn, token, record_property):
    started = time.monotonic()
    fuzz = Fuzzer(spawn("fuzz", preexec_fn=limit_memory), token)
    fuzz.connect()
    cases = all_cases()
    crashes, batches = [], 0
    try:
        for start in range(0, len(cases), BATCH):
            batch = cases[start:start + BATCH]
            batches += 1
            if not run_cases(fuzz, batch):
                crashes += bisect(fuzz, batch)
    finally:
        fuzz.close()
    summary = (f"op fuzz: {len(ALLOWED)} allowed overloads, {len(cases)} cases in {batches} batches: "
               f"{fuzz.stats['ok']} ran, {fuzz.stats['error']} refused or failed cleanly, {len(crashes)} crashed "
               f"or stalled the worker ({time.monotonic() - started:.0f} s)")
    print(summary)
    record_property("allowed_overloads", len(ALLOWED))
    record_property("fuzz_cases", len(cases))
    assert len(cases) > 5 * len(ALLOWED)  # every overload got its baseline and variations
    assert not crashes, f"{summary}: " + "; ".join(f"{n}{tuple(a)} {k}" for n, a, k in crashes[:20])


# --- the list admits what training needs ------------------------------------------------------

class CnnLstm(nn.Module):
    """Conv2d, BatchNorm, ReLU, max-pool, Embedding, LSTM and GRU cells, Dropout, Linear."""

    def __init__(self, p_drop=0.0):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1, bias=False)  # no bias before a BatchNorm
        self.bn = nn.BatchNorm2d(4)
        self.emb = nn.Embedding(10, 6)
        self.lstm = nn.LSTMCell(4 * 4 * 4 + 6, 8)
        self.gru = nn.GRUCell(8, 8)
        self.drop = nn.Dropout(p_drop)
        self.fc = nn.Linear(8, 3)

    def forward(self, img, tok, h0):
        h = F.max_pool2d(F.relu(self.bn(self.conv(img))), 2).flatten(1)
        hx, _ = self.lstm(torch.cat([h, self.emb(tok)], dim=1), (h0, h0))
        return self.fc(self.drop(self.gru(hx, h0)))


def training_data():
    g = torch.Generator().manual_seed(0)
    img, tok, y = torch.randn(6, 1, 8, 8, generator=g), torch.randint(0, 10, (6,), generator=g), torch.randint(0, 3, (6,), generator=g)
    return img, tok, y, F.one_hot(y, 3).float(), torch.zeros(6, 8)


def loss_of(out, y, target):
    return (F.cross_entropy(out, y) + F.mse_loss(F.softmax(out, 1), target)
            + F.nll_loss(F.log_softmax(out, 1), y))


def train_eagerly(model, batch, make_opt, steps=3):
    img, tok, y, target, h0 = batch
    opt = make_opt(model.parameters())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_of(model(img, tok, h0), y, target)
        loss.backward()
        opt.step()
        losses.append(loss)
    return losses


@pytest.mark.parametrize("make_opt", [lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
                                      lambda p: torch.optim.Adam(p, lr=0.01)], ids=["sgd-momentum", "adam"])
def test_cnn_lstm_trains_through_remote_pointers_as_it_does_locally(remote, make_opt):
    bob, _ = remote
    torch.manual_seed(0)
    local = CnnLstm()
    far = copy.deepcopy(local)
    batch = training_data()
    local_losses = [loss.item() for loss in train_eagerly(local, batch, make_opt)]
    far.send(bob)
    far_losses = [loss.get().item() for loss in train_eagerly(far, [t.send(bob) for t in batch], make_opt)]
    far.get()
    assert far_losses == pytest.approx(local_losses, rel=1e-5) and far_losses[-1] < far_losses[0]
    for (name, a), (_, b) in zip(local.state_dict().items(), far.state_dict().items()):
        assert torch.allclose(a.float(), b.float(), atol=1e-5), name


def test_dropout_trains_through_remote_pointers(remote):
    bob, _ = remote
    torch.manual_seed(0)
    model = CnnLstm(p_drop=0.5)
    model.send(bob)
    loss = train_eagerly(model, [t.send(bob) for t in training_data()], lambda p: torch.optim.SGD(p, lr=0.05), 1)[0]
    assert torch.isfinite(loss.get())
    model.get()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_cnn_lstm_training_step_plan_runs_on_a_remote_worker(remote):
    bob, _ = remote
    torch.manual_seed(0)
    model = CnnLstm()
    eager = copy.deepcopy(model)
    batch = training_data()

    def train_step(img, tok, y, target, h0):
        loss = loss_of(model(img, tok, h0), y, target)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(0.05 * g)
        return loss

    step = sy.plan(train_step, state=model).build(*batch)
    plan_ops = {n.name for n in step._graph.nodes}
    assert {"aten.convolution_backward.default", "aten.native_batch_norm_backward.default",
            "aten.max_pool2d_with_indices_backward.default", "aten.embedding_dense_backward.default"} <= plan_ops
    far_step = step.send(bob)  # the worker validates every node against its allow-list here
    args = [t.send(bob) for t in batch]
    model.send(bob)
    plan_losses = [far_step(*args).get().item() for _ in range(3)]
    model.get()
    eager_losses = [loss.item() for loss in train_eagerly(eager, batch, lambda p: torch.optim.SGD(p, lr=0.05))]
    assert plan_losses == pytest.approx(eager_losses, rel=1e-5)
    for (name, a), (_, b) in zip(eager.state_dict().items(), model.state_dict().items()):
        assert torch.allclose(a.float(), b.float(), atol=1e-5), name


# --- quotas: a worker under a memory limit refuses what would not fit, and lives on -------------

def limited_worker(spawn, token):
    proc = spawn("quota", preexec_fn=limit_memory)
    return proc, WebSocketWorker(proc.url, id="quota", token=token, progress=False)


def run_op(worker, name, *args, **kwargs):
    return worker._request({"c": "run", "op": name, "a": list(args), "k": kwargs})


def test_ops_whose_outputs_exceed_the_quota_are_refused_and_the_worker_keeps_everything(spawn, token):
    proc, w = limited_worker(spawn, token)
    kept = torch.arange(10.).send(w)
    col, row = torch.ones(40000, 1).send(w), torch.ones(1, 40000).send(w)
    rows = torch.ones(200_000, 1).send(w)
    broadcast = kept[0].expand(2**40)  # a view: no memory, but 2**40 elements to compute on
    attacks = {
        "ones 4 GiB": lambda: run_op(w, "aten.ones.default", [2**30]),
        "empty 8 GiB": lambda: run_op(w, "aten.empty.memory_format", [2**31]),
        "mm [40000,1] x [1,40000]": lambda: col @ row,
        "repeat to 8 GB": lambda: col.repeat(50_000, 1),
        "unbind into 200,000 objects": lambda: rows.unbind(0),
        "sum over a 2**40-element broadcast view": lambda: broadcast.sum(),
    }
    before = len(w.objects)
    for what, attack in attacks.items():
        with pytest.raises(RemoteError) as info:
            attack()
        assert info.value.remote_type == "QuotaExceededError", what
        assert "nothing ran" in info.value.remote_message and "limit" in info.value.remote_message, what
        assert proc.proc.poll() is None and w.ping(), what
    w.flush()
    assert len(w.objects) == before  # no result was stored
    assert torch.equal(kept.get(), torch.arange(10.))
    assert torch.equal((col * 2).sum().get(), torch.tensor(80000.))  # the worker still computes
    w.close()


def test_a_5000_node_plan_frees_its_intermediates_and_fits_the_quota(spawn, token):
    """Each node makes 4 MiB: kept alive, the chain would need 20 GB; freed after their last
    use, two values are alive at a time. The worker's address space is 3 GiB."""
    proc, w = limited_worker(spawn, token)
    n, size = 5000, 2**20
    nodes = [Node(aten.add.Tensor, [Value("input", 0) if k == 0 else Value("node", k - 1), 1.0], {},
                  [((size,), "float32")]) for k in range(n)]
    graph = PlanGraph("chain", [{"name": "x", "role": "input", "shape": [size], "dtype": "float32"}], [], nodes,
                      [Value("node", n - 1)], True)
    x = torch.zeros(size).send(w)
    out_id = new_id()
    (result,) = w._run_graph(graph, [x.id_at_location], [out_id])
    assert result.id == out_id and list(result.shape) == [size]
    out = w._fetch(out_id)
    assert torch.equal(out, torch.full((size,), float(n)))
    # one node too big for the quota: refused before it runs, the worker and its objects live on
    huge = [Node(aten.repeat.default, [Value("input", 0), [1000]], {}, [((size * 1000,), "float32")])]
    graph = PlanGraph("huge", graph.inputs, [], huge, [Value("node", 0)], True)
    with pytest.raises(RemoteError) as info:
        w._run_graph(graph, [x.id_at_location], [new_id()])
    assert info.value.remote_type == "QuotaExceededError" and "aten.repeat.default" in info.value.remote_message
    assert proc.proc.poll() is None and torch.equal(x.get(), torch.zeros(size))
    w.close()


# --- the security review's attacks (issue 12, items 1, 2 and 6) -------------------------------

def test_the_reviews_memory_attacks_are_refused_and_the_worker_lives(remote, worker_procs):
    bob, _ = remote
    buf = torch.arange(16.).send(bob)  # 64 bytes
    buf_id = Ref(buf.id_at_location)
    alive = []

    def ref(t):  # a stored tensor for a raw command (its pointer kept alive)
        alive.append(t.send(bob))
        return Ref(alive[-1].id_at_location)

    attacks = {
        "a view past the end of a 64-byte buffer": ("aten._reshape_alias.default", [buf_id, [4096], [1]], {}),
        "as_strided with an offset outside it": ("aten.as_strided.default", [buf_id, [4], [1], 10**6], {}),
        "a sparse tensor writing at a chosen index": (
            "aten._sparse_coo_tensor_unsafe.default", [ref(torch.tensor([[10**9]])), buf_id,
                                                       [10**9 + 1]], {}),
        "batch norm in eval mode without statistics (a segfault)": (
            "aten.native_batch_norm.default", [ref(torch.ones(2, 3, 4)), None, None, None,
                                               None, False, 0.1, 1e-5], {}),
        "batch norm without stats, eval (a segfault)": (
            "aten._native_batch_norm_legit.no_stats", [ref(torch.ones(2, 3)), None, None,
                                                       False, 0.1, 1e-5], {}),
        "an fft internal": ("aten._fft_r2c.default", [buf_id, [0], 0, True], {}),
        "a vmap internal": ("aten._remove_batch_dim.default", [buf_id, 0, 1, 0], {}),
        "a polynomial of degree 2**40 (a 19 s stall)": ("aten.special_laguerre_polynomial_l.default",
                                                        [buf_id, 2**40], {}),
    }
    for what, (op, args, kwargs) in attacks.items():
        with pytest.raises(RemoteError) as info:
            run_op(bob, op, *args, **kwargs)
        assert info.value.remote_type == "OpNotAllowedError", what
        assert worker_procs["bob"].proc.poll() is None and bob.ping(), what
    assert torch.equal(buf.get(), torch.arange(16.))


def test_no_command_can_free_or_reshape_a_tensor_while_a_reply_streams_it(remote, token, worker_procs):
    """Client A fetches a 64 MiB tensor while client B tries to resize it or write into it with
    out=: B is refused (those overloads are off the list), A gets exactly what was stored."""
    bob, _ = remote
    data = torch.arange(16 * 2**20, dtype=torch.float32)
    p = data.send(bob)
    target = Ref(p.id_at_location)
    other = WebSocketWorker(worker_procs["bob"].url, id="bob", token=token, progress=False)
    one = torch.ones(1).send(other)
    got = {}
    reader = threading.Thread(target=lambda: got.setdefault("copy", bob._copy_out(p.id_at_location)))
    reader.start()
    refused = []
    for op, args, kwargs in [("aten.resize_.default", [target, [1]], {}),
                             ("aten.resize_as_.default", [target, Ref(one.id_at_location)], {}),
                             ("aten.add.out", [target, 1.0], {"out": target}),
                             ("aten.set_.source_Tensor", [target, Ref(one.id_at_location)], {}),
                             ("aten.t_.default", [target], {})]:
        with pytest.raises(RemoteError) as info:
            run_op(other, op, *args, **kwargs)
        refused.append(info.value.remote_type)
    reader.join(60)
    del one
    other.close()
    assert refused == ["OpNotAllowedError"] * 5
    assert torch.equal(got["copy"], data) and torch.equal(p.get(), data)
