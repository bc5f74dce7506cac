"""Ops on a worker process: the op policy survives a fuzzer, admits what training needs, and
the quotas refuse what would not fit.

The fuzzer is benchmarks/fuzz_ops.py's (cases built from each overload's schema, edge arguments
from its pools, raw ``run`` commands in batches to a worker under an RLIMIT_AS memory limit, a
ping after each batch, a fatal batch replayed case by case). Here it runs bounded: every allowed
overload, ``CASES_PER_OP`` cases each (the baseline and variations taken evenly from its list);
the script runs the long version and writes benchmarks/fuzz_report.md.
"""
from __future__ import annotations

import copy
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy
from syft_lab.errors import RemoteError
from syft_lab.ids import new_id
from syft_lab.plans.graph import Node, PlanGraph, Value
from syft_lab.wire.allowlist import ALLOWED
from syft_lab.commands import Ref
from syft_lab.workers.websocket import WebSocketWorker

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import fuzz_ops  # noqa: E402  (the fuzzer lives beside its long-run script)

aten = torch.ops.aten

pytestmark = pytest.mark.network

CASES_PER_OP = 3
limit_memory = fuzz_ops.limit_memory


def test_every_allowed_op_survives_edge_arguments(spawn, token, record_property):
    cases = fuzz_ops.all_cases(CASES_PER_OP)
    summary = fuzz_ops.fuzz(spawn("fuzz", preexec_fn=limit_memory), token, cases)
    text = (f"op fuzz: {summary['overloads']} allowed overloads, {summary['cases']} cases: {summary['ran']} ran, "
            f"{summary['refused']} refused by the policy, {summary['failed']} failed with the op's own error, "
            f"{len(summary['crashes'])} crashed or stalled the worker ({summary['seconds']:.0f} s)")
    print(text)
    record_property("allowed_overloads", len(ALLOWED))
    record_property("fuzz_cases", len(cases))
    assert summary["overloads"] == len(ALLOWED)  # every overload got its baseline at least
    assert summary["ran"] > len(ALLOWED) // 2 and summary["refused"] > 0  # it computes, and it refuses
    assert not summary["crashes"], f"{text}: " + "; ".join(fuzz_ops.describe(c) for c in summary["crashes"][:20])


def test_the_fuzzers_pools_reach_the_edges(spawn, token):
    """The broadcast, overlapping and out-of-range index tensors are made on the worker and used."""
    cases = [("aten.sum.default", [fuzz_ops.SLOTS["bcast34"]], {}),  # 2**34 elements: refused
             ("aten.index_select.default", [fuzz_ops.SLOTS["f34"], 0, fuzz_ops.SLOTS["bigidx"]], {}),
             ("aten.add.Tensor", [fuzz_ops.SLOTS["overlap"], fuzz_ops.SLOTS["overlap"]], {})]
    summary = fuzz_ops.fuzz(spawn("edges", preexec_fn=limit_memory), token, cases)
    assert summary["crashes"] == [] and summary["ran"] == 1
    assert summary["by_type"] == {"QuotaExceededError": 1, "IndexError": 1}


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
        "an fft over a dim the input lacks": ("aten._fft_r2c.default", [buf_id, [5], 0, True], {}),
        "a vmap internal": ("aten._remove_batch_dim.default", [buf_id, 0, 1, 0], {}),
        "a polynomial of degree 2**40 (a 19 s stall)": ("aten.special_laguerre_polynomial_l.default",
                                                        [buf_id, 2**40], {}),
    }
    costly = {"a polynomial of degree 2**40 (a 19 s stall)"}  # refused by its cost bound
    for what, (op, args, kwargs) in attacks.items():
        with pytest.raises(RemoteError) as info:
            run_op(bob, op, *args, **kwargs)
        expected = "QuotaExceededError" if what in costly else "OpNotAllowedError"
        assert info.value.remote_type == expected, what
        assert worker_procs["bob"].proc.poll() is None and bob.ping(), what
    assert torch.equal(buf.get(), torch.arange(16.))


def test_no_command_can_free_or_reshape_a_tensor_while_a_reply_streams_it(remote, token, worker_procs):
    """Client A fetches a 64 MiB tensor while client B tries to resize it or write into it with
    out=: B is refused (those overloads are denied), A gets exactly what was stored. (In-place view
    ops such as t_ are allowed: they change no storage, and a reply is copied between commands.)"""
    bob, _ = remote
    data = torch.arange(16 * 2**20, dtype=torch.float32)
    p = data.send(bob)
    target = Ref(p.id_at_location)
    other = WebSocketWorker(worker_procs["bob"].url, id="bob", token=token, progress=False)
    try:  # a failing check must not leave this second session (and its objects) open
        one = torch.ones(1).send(other)
        got = {}
        reader = threading.Thread(target=lambda: got.setdefault("copy", bob._copy_out(p.id_at_location)))
        reader.start()
        refused = []
        for op, args, kwargs in [("aten.resize_.default", [target, [1]], {}),
                                 ("aten.resize_as_.default", [target, Ref(one.id_at_location)], {}),
                                 ("aten.add.out", [target, 1.0], {"out": target}),
                                 ("aten.set_.source_Tensor", [target, Ref(one.id_at_location)], {})]:
            with pytest.raises(RemoteError) as info:
                run_op(other, op, *args, **kwargs)
            refused.append(info.value.remote_type)
        reader.join(60)
        del one
    finally:
        other.close()
    assert refused == ["OpNotAllowedError"] * 4
    assert torch.equal(got["copy"], data) and torch.equal(p.get(), data)
