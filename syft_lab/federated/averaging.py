"""Federated averaging: one model from several, weighted by how many samples each saw.

    avg = sy.federated_avg({"bob": m1, "alice": m2}, fds)       # weights: fds.counts
    avg = sy.federated_avg(models, {"bob": 600, "alice": 300})   # or given counts

Each floating tensor of the result is ``sum_k (n_k / N) * theta_k``, summed in the models'
order (without weights: by the samples of the dataset the keys' workers hold, else a plain
mean); integer buffers (BatchNorm's batch counter) come from
the first model. The input models are left as they are.

Where it happens:
- local models: here, and the result is a local module;
- models on workers: a streamed sum on one worker, ``to`` (by default the first model's
  worker), never N models in this process. Each model's worker weighs its own tensors
  (``theta_k * n_k / N``, all workers at once); ``to`` starts from zeros and adds the terms in the
  models' order, every add in flight (``add_into``). Between Ray workers a term goes actor to
  actor through Ray's object store; between websocket workers it travels through this client
  process, one tensor at a time, since worker processes never connect to each other (bound to
  no name here and dropped at once). The inputs stay as they were; the result's parameters are
  pointers on ``to``, and ``avg.get()`` brings only the average to the notebook. About two
  round trips in all, whatever the number of models. That worker sees every model: name a
  trusted aggregator, as PySyft's Part 4 does with ``secure_worker``.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from .. import events
from ..commands import LOCAL_OWNER
from ..errors import SyftError
from ..tensors.pointer import PointerTensor
from ..workers.base import BaseWorker
from ..workers.protocol import gather, submit
from ..workers.registry import all_workers
from .datasets import FederatedDataset, check_alive

aten = torch.ops.aten


def _counts_held(models: dict):
    """Sample counts from the datasets the keys' workers hold, when that says it unambiguously:
    every key names a worker holding datasets, and one dataset name is common to all of them."""
    known = {w.id: w for w in all_workers()}
    workers = [known.get(k) if isinstance(k, str) else None for k in models]
    if any(w is None for w in workers):
        return None
    held = {w.id: w.datasets for w in workers}
    if not all(held.values()):
        return None
    common = set.intersection(*(set(d) for d in held.values()))
    if len(common) != 1:
        raise SyftError(f"cannot tell which dataset the models trained on (the workers hold "
                        f"{', '.join(sorted(set().union(*held.values())))}): pass weights=, a "
                        f"FederatedDataset or a dict of sample counts")
    name = common.pop()
    return {k: len(held[k][name]) for k in models}


def _weights(models: dict, weights) -> dict[str, float]:
    if weights is None:
        counts = _counts_held(models) or {k: 1 for k in models}
    elif isinstance(weights, FederatedDataset):
        counts = weights.counts
    elif isinstance(weights, dict):
        counts = weights
    else:
        raise SyftError(f"weights are a dict of sample counts or a sy.FederatedDataset, got {type(weights).__name__}")
    missing = [k for k in models if k not in counts]
    if missing:
        raise SyftError(f"no weight (sample count) for {', '.join(map(repr, missing))}; weights are given for "
                        f"{', '.join(map(repr, counts)) or 'none'}")
    bad = {k: counts[k] for k in models if isinstance(counts[k], bool) or not isinstance(counts[k], (int, float))
           or not counts[k] > 0}
    if bad:
        raise SyftError(f"weights are positive numbers, got {bad}")
    total = float(sum(counts[k] for k in models))
    return {k: counts[k] / total for k in models}


def _tensors(model: nn.Module) -> dict:
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


def _location(t):
    return t.location if isinstance(t, PointerTensor) else None


def _to(t, worker):
    """``t`` on ``worker`` (itself if it is there already; else a copy, the source untouched)."""
    t = t.detach() if not isinstance(t, PointerTensor) else t
    if worker is None:
        if isinstance(t, PointerTensor):
            raise SyftError("internal: a remote tensor in a local average")
        return t
    if isinstance(t, PointerTensor):
        if t.location is worker:
            return t
        t._check_alive()
        return copy_between(t.location, t.id_at_location, worker, t.shape, t.dtype)
    return worker.send(t, requires_grad=False)


def copy_between(source, obj_id: int, target, shape, dtype) -> PointerTensor:
    """A copy of object ``obj_id`` of ``source`` on ``target`` (the source keeps it), each
    message noted as a worker-to-worker flow, so both ledgers say who sent what to whom
    ("moved ↑ to aggregator" on a hospital, "moved ↓ from hospital" on the aggregator), not a
    fetch by the notebook and a store from it. Between Ray workers: actor to actor."""
    if getattr(source, "kind", None) == "ray" and getattr(target, "kind", None) == "ray":
        return target._receive_from(source, obj_id, requires_grad=False, keep_source=True)
    obj = source.submit_request({"c": "fetch", "id": obj_id, "keep": True,
                                 "note": {"why": "move", "peer": target.id}}).result()
    new_id = target.submit_request({"c": "store", "o": obj, "note": {"why": "move", "peer": source.id}},
                                   detach=True).result()
    return PointerTensor(target, new_id, torch.Size(shape), dtype)


def zeros_on(worker, shape, dtype):
    """A Pending whose result is a pointer to zeros of ``shape`` on ``worker`` (a sum's start)."""
    p = worker.submit_request({"c": "store", "o": torch.zeros(shape, dtype=dtype)}, detach=True)
    p.wrap = lambda obj_id: PointerTensor(worker, obj_id, torch.Size(shape), dtype)
    return p


def add_into(acc: PointerTensor, term):
    """``acc += term`` on acc's worker without waiting: ``(Pending, what must live until it is
    read)``. ``term``: a local tensor (carried in the message), a pointer on that worker, or a
    pointer elsewhere: between Ray workers it goes actor to actor and leaves its worker;
    otherwise it is copied there first (between worker processes through this one)."""
    to = acc.location
    if not isinstance(term, PointerTensor):
        return to.submit_request({"c": "run", "op": "aten.add_.Tensor", "a": [acc._ref, term.detach()], "k": None},
                                 detach=True), None
    if term.location is not to:
        from_source = getattr(to, "submit_run_from", None)  # a Ray worker: actor to actor
        p = None if from_source is None else from_source(term.location, term.id_at_location, "aten.add_.Tensor",
                                                         [acc._ref, None], slot=1)
        if p is not None:
            return p, term
        term._check_alive()
        term = copy_between(term.location, term.id_at_location, to, term.shape, term.dtype)
    return submit(aten.add_.Tensor, (acc, term)), term


def _streamed_sum(tensors: dict, w: dict, to: BaseWorker) -> dict:
    """The weighted sums on ``to`` (see the module doc): the terms made where each model is and
    zeros on ``to``, all in flight; then every add in flight, in the models' order."""
    first = next(iter(tensors))
    floats = [n for n, t in tensors[first].items() if t.is_floating_point()]
    terms = {(k, n): (submit(aten.mul.Tensor, (ts[n], w[k])) if isinstance(ts[n], PointerTensor)
                      else ts[n].detach() * w[k]) for k, ts in tensors.items() for n in floats}
    starts = {n: zeros_on(to, tuple(tensors[first][n].shape), tensors[first][n].dtype) for n in floats}
    remote = [t for t in terms.values() if not isinstance(t, torch.Tensor)]
    done = iter(gather(remote + list(starts.values())))
    terms = {key: t if isinstance(t, torch.Tensor) else next(done) for key, t in terms.items()}
    sums = {n: next(done) for n in floats}
    adds = [add_into(sums[n], terms[(k, n)]) for k in tensors for n in floats]
    gather([p for p, _ in adds])
    out = {n: sums[n] if n in sums else _to(t, to).clone() for n, t in tensors[first].items()}  # counters: the first's
    return out


def federated_avg(models: dict, weights=None, *, to: BaseWorker | None = None) -> nn.Module:
    """The weighted average of ``models`` (a dict such as ``{"bob": m1, "alice": m2}``): a new module.

    ``weights``: sample counts by the same keys, or a FederatedDataset (its counts), or None:
    then the samples of the dataset the keys' workers hold (``{"bob": m1}`` with bob holding one
    federated dataset), else a plain mean. ``to``: the worker that averages remote models (see the module doc)."""
    if not isinstance(models, dict) or not models:
        raise SyftError("federated_avg takes a non-empty dict of models, e.g. {'bob': m1, 'alice': m2}")
    bad = [k for k, m in models.items() if not isinstance(m, nn.Module)]
    if bad:
        raise SyftError(f"federated_avg averages nn.Modules; {bad[0]!r} is a {type(models[bad[0]]).__name__}")
    w = _weights(models, weights)
    tensors = {k: _tensors(m) for k, m in models.items()}
    first_key = next(iter(models))
    layout = {n: tuple(t.shape) for n, t in tensors[first_key].items()}
    for k, ts in tensors.items():
        if {n: tuple(t.shape) for n, t in ts.items()} != layout:
            raise SyftError(f"model {k!r} does not have the same parameters and shapes as {first_key!r}")
    for k, ts in tensors.items():  # a model on a worker that went away is named before anything is sent
        for loc in {id(loc): loc for t in ts.values() if (loc := _location(t)) is not None}.values():
            try:
                check_alive(loc)
            except SyftError as e:
                raise type(e)(f"model {k!r} cannot be averaged: {e}. Leave it out of the models") from None
    locations = {id(loc): loc for ts in tensors.values() for t in ts.values() if (loc := _location(t)) is not None}
    if to is None and locations:
        to = next((loc for t in tensors[first_key].values() if (loc := _location(t)) is not None),
                  next(iter(locations.values())))
    if to is not None:
        if not isinstance(to, BaseWorker):
            raise SyftError(f"to= is the worker that averages, got {type(to).__name__}")
        check_alive(to)
    averaged = {}
    with torch.no_grad():
        if to is not None:
            averaged = _streamed_sum(tensors, w, to)
        else:
            for name, t0 in tensors[first_key].items():
                if not t0.is_floating_point():
                    averaged[name] = t0.detach().clone()  # a counter, not a weight: the first model's
                    continue
                acc = None
                for k in models:
                    term = tensors[k][name].detach() * w[k]
                    acc = term if acc is None else acc + term
                averaged[name] = acc
    # A copy of the first model whose tensors are the averages (deepcopy's memo swaps them in).
    memo = {}
    for name, t0 in tensors[first_key].items():
        value = averaged[name]
        if isinstance(value, PointerTensor):  # nn.Parameter(pointer) drops requires_grad: set it on the pointer
            memo[id(t0)] = value.requires_grad_(True) if t0.requires_grad else value
        else:
            memo[id(t0)] = nn.Parameter(value, requires_grad=t0.requires_grad) if isinstance(t0, nn.Parameter) else value
    result = copy.deepcopy(models[first_key], memo)
    events.activity("averaged", worker=to.id if to is not None else LOCAL_OWNER, models=len(models))
    if to is not None:
        result.location = to
    else:
        result.__dict__.pop("location", None)
    return result
