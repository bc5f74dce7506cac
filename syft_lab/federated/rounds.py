"""Rounds of federated averaging: sample clients, train locally, average, evaluate.

    fl = sy.federated.FedAvg(model, fds, loss=F.cross_entropy, lr=0.1, batch_size=32)
    fl.run(5, evaluate=(test_x, test_y), chart=chart)   # a progress bar per round
    fl.round()                                          # one more round; retry after an error

Each client keeps a copy of the model on its worker for the whole training (its parameters
are pointers there). A round copies the global weights into it, trains it for ``local_epochs``
on the client's data and averages the clients on one worker (``aggregator``, by default the
first client's), as a streamed sum (``federated_avg``): only the average comes back here. It
becomes the global model, which is then evaluated here. Local training is plain SGD with
``lr``, the same in both modes:

- op by op (``plans=False``): through pointers, one client after another (each op waits for
  its reply); the weights go in with one ``copy_`` per tensor, all in flight;
- ``plans=True``: a client's whole local training is one plan (traced once per dataset size:
  load the global weights, every batch of every local epoch, the weighted copy for the sum),
  so a client costs a few messages per round, whatever its number of batches: the global
  weights with its shuffle and weight (one message), the plan run, its metrics and its term
  of the sum, which goes to the aggregator. Between Ray workers those four commands are ONE
  actor call per client (``RayWorker.submit_calls``), whose term reply goes actor to actor
  into the aggregator's sum (one add per client): a round is about one actor call per client
  plus one per client on the aggregator, and the training. Every client's messages are in
  flight before any reply is read: the clients train at once. The batches, their order and
  the result are those of the one-after-another loop for a seed (or ``order=``'s).
  (A model with integer state, such as BatchNorm's counter, trains one plan message per batch,
  all clients in flight, instead.)

A ``chart`` gets each client's metrics as it finishes (``RoundChart.client``), then the round.

A round that fails (a worker that went away, a bad batch) raises ``FederatedRoundError``
naming the worker; the global model is only replaced at the end of a successful round, so it is
unchanged, and ``round()`` may be called again (with ``clients=`` to leave a worker out).
"""
from __future__ import annotations

import dataclasses
import time

import torch
import torch.nn.functional as F
from torch import nn

from .. import events, progress as progress_bars
from ..errors import SyftError, WorkerUnavailableError
from ..plans import plan as make_plan
from ..plans.pointer import PlanPointer
from ..tensors.pointer import PointerTensor, wrap_result
from ..workers.base import BaseWorker, WorkerClosedError
from ..workers.protocol import gather, submit
from .averaging import add_into, federated_avg, zeros_on
from .datasets import FederatedDataset, check_alive
from .loader import FederatedDataLoader

aten = torch.ops.aten


class FederatedRoundError(SyftError):
    """A round failed on one worker; the global model is unchanged and the round can be run again."""

    def __init__(self, round_no: int, worker_id: str, phase: str, cause: BaseException):
        self.round, self.worker_id, self.phase, self.cause = round_no, worker_id, phase, cause
        again = (f"leaving {worker_id!r} out (fl.round(clients=[...]))" if isinstance(cause, WorkerClosedError)
                 else f"leaving {worker_id!r} out (fl.round(clients=[...])) or once it is back")
        super().__init__(f"round {round_no}: worker {worker_id!r} failed during {phase}: {type(cause).__name__}: "
                         f"{cause}. The global model is unchanged: run the round again (fl.round()), {again}")


@dataclasses.dataclass
class RoundResult:
    round: int
    clients: dict  # worker id -> {"loss": mean training loss, "accuracy": training accuracy, "samples": n}
    global_: dict  # {"loss", "accuracy"} of the averaged model (empty without evaluate)
    seconds: float

    def as_dict(self) -> dict:
        return {"round": self.round, "clients": self.clients, "global": self.global_, "seconds": self.seconds}


def evaluate_classifier(model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss=F.cross_entropy) -> dict:
    """Loss and accuracy of a local model on local test data."""
    with torch.no_grad():
        out = model(x)
        return {"loss": float(loss(out, y)), "accuracy": float((out.argmax(1) == y).float().mean())}


class _Client:
    """One worker's copy of the model, its optimizer and (with plans) its sent training step."""

    def __init__(self, worker, global_model: nn.Module, lr: float, build_step=None):
        self.worker = worker
        self.model = global_model.copy()
        plan = build_step(self.model) if build_step is not None else None  # traced on local tensors
        self.model.send(worker)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)
        # the plan's state is self.model, on the worker now: calls use its pointers, nothing else is sent
        self.step = plan.send(worker) if plan is not None else None

    def alive(self) -> bool:
        return all(not p._ref.released for p in self.model.parameters() if isinstance(p, PointerTensor))

    def load(self, global_model: nn.Module) -> None:
        """Copy the global weights into this client's model, on its worker (in place): one
        ``copy_`` per tensor carrying its values, all in flight, one round trip."""
        pending = [self.worker.submit_request({"c": "run", "op": "aten.copy_.default",
                                               "a": [mine._ref, theirs.detach()], "k": None}, detach=True)
                   for mine, theirs in zip(self.model.state_dict(keep_vars=True).values(),
                                           global_model.state_dict(keep_vars=True).values())]
        gather(pending)


class _RoundClient:
    """With plans: one worker's copy of the model, its local-round plan (stored there without
    state: it runs on the model's pointers) and its inbox (the global weights, the round's
    shuffle and the client's weight, written by one message per round)."""

    def __init__(self, worker, global_model: nn.Module, builds, inbox_size: int):
        self.worker = worker
        self.model = global_model.copy().send(worker)
        self.state = [t for t in (*self.model.parameters(), *self.model.buffers())]
        self.inbox = worker.send(torch.zeros(inbox_size, dtype=self.state[0].dtype))
        self.plan = PlanPointer(worker, worker._store_plan(builds, [], [], "a client's local round of FedAvg"),
                                {"name": builds.name, "single_output": False})

    def alive(self) -> bool:
        return all(not p._ref.released for p in (*self.state, self.inbox)) and not self.plan._ref.released


class FedAvg:
    """Federated averaging of ``model`` (local; it becomes the global model) over ``fds``.

    ``loss(output, target)``: the training loss; ``lr``, ``batch_size``, ``local_epochs``: each
    client's SGD; ``clients_per_round``: how many clients a round samples (all by default);
    ``plans``: one plan message per batch, all clients in flight, instead of op by op (sequential); ``aggregator``: the worker that
    averages (the first client's by default); ``accuracy``: also count correct argmax
    predictions (classifiers); ``seed``: the shuffling and client sampling, repeatable.

    ``order``: the sample order of each client's local epochs, given instead of drawn (to run
    the very batches another framework runs, or a curriculum): ``order(round, worker_id, epoch)``
    returns a permutation of ``range(len(fds[worker_id]))`` (the client's own sample indices),
    cut into batches of ``batch_size`` in that order. Without it each client's samples are
    shuffled anew each epoch, one ``torch.randperm`` per sampled client (in the round's client
    order) and epoch, drawn from ``torch.Generator().manual_seed(seed)``."""

    def __init__(self, model: nn.Module, fds: FederatedDataset, *, loss=F.cross_entropy, lr: float = 0.1,
                 batch_size: int = 32, local_epochs: int = 1, clients_per_round: int | None = None,
                 plans: bool = False, aggregator=None, accuracy: bool = True, seed: int | None = 0,
                 order=None):
        if not isinstance(model, nn.Module) or any(isinstance(p, PointerTensor) for p in model.parameters()):
            raise SyftError("FedAvg trains a local nn.Module (call model.get() first if it was sent)")
        if not isinstance(fds, FederatedDataset):
            raise SyftError(f"FedAvg takes a sy.FederatedDataset, got {type(fds).__name__}")
        if clients_per_round is not None and not 1 <= clients_per_round <= len(fds.workers):
            raise SyftError(f"clients_per_round is between 1 and {len(fds.workers)}, got {clients_per_round}")
        if aggregator is not None and not isinstance(aggregator, BaseWorker):
            raise SyftError(f"aggregator is a worker (e.g. a trusted secure_worker), got {type(aggregator).__name__}")
        if order is not None and not callable(order):
            raise SyftError(f"order is a function (round, worker_id, epoch) -> a permutation of the client's sample "
                            f"indices, got {type(order).__name__}")
        self.order = order
        self.model, self.fds, self.loss, self.lr = model, fds, loss, lr
        self.local_epochs, self.clients_per_round, self.plans = local_epochs, clients_per_round, plans
        self.aggregator, self.accuracy = aggregator, accuracy
        self.generator = torch.Generator().manual_seed(seed) if seed is not None else None
        self.loader = FederatedDataLoader(fds, batch_size=batch_size, shuffle=True, generator=self.generator)
        self.history: list[RoundResult] = []
        self._clients: dict = {}  # worker id -> _Client (op by op, per-batch plans) or _RoundClient
        state = [*model.parameters(), *model.buffers()]
        # plans: a whole local round per message when every state tensor is a float of one dtype
        # that holds the shuffle's indices exactly (the inbox carries them as floats)
        self._whole = (plans and bool(state) and state[0].dtype in (torch.float32, torch.float64)
                       and all(t.dtype == state[0].dtype for t in state)
                       and max(len(fds[w]) for w in fds.workers) * local_epochs < 2**24)
        self._round_plan = None  # the traced local round (one build per client dataset size)

    @property
    def clients(self) -> dict:
        """Worker id -> that client's state (``.model``: its copy of the model, on its worker)."""
        return dict(self._clients)

    def _inspection_items(self):
        """What the views name its pointers by: ``fl.clients['bob'].model`` (a client's copy)."""
        yield ".model", self.model
        yield ".fds", self.fds
        for wid, client in self._clients.items():
            yield f".clients[{wid!r}].model", client.model
            for part in ("inbox", "plan", "step"):  # a round client's inbox and plan, a client's step
                if getattr(client, part, None) is not None:
                    yield f".clients[{wid!r}].{part}", getattr(client, part)

    # --- one round ------------------------------------------------------------------------
    def sample_clients(self) -> list[str]:
        workers = self.fds.workers
        if self.clients_per_round is None:
            return workers
        picked = torch.randperm(len(workers), generator=self.generator)[:self.clients_per_round]
        return [workers[i] for i in sorted(picked.tolist())]

    def round(self, *, clients=None, evaluate=None, chart=None, progress: bool | None = None) -> RoundResult:
        """One round; on failure FederatedRoundError, with the global model unchanged."""
        number = len(self.history) + 1
        clients = list(clients) if clients is not None else self.sample_clients()
        unknown = [c for c in clients if c not in self.fds.workers]
        if not clients or unknown:
            raise SyftError(f"clients are some of {', '.join(self.fds.workers)}; got {clients}")
        for wid in clients:  # a client (or the aggregator) that went away is named before anything is sent
            self._guard(number, wid, "sending the model", lambda: check_alive(self.fds[wid].location))
        if self.aggregator is not None:
            self._guard(number, self.aggregator.id, "averaging", lambda: check_alive(self.aggregator))
        t0 = time.perf_counter()
        # every client's sample order, drawn (or asked of ``order``) before anything is sent, in
        # the round's client order: the one-after-another loop's draws, whatever the mode
        orders = {wid: self._batch_order(number, wid) for wid in clients}
        total = sum(self.loader.num_batches(c) for c in clients) * self.local_epochs
        # a bar where a person sees it (a notebook, a terminal); progress=False: never (progress.py)
        bar = progress_bars.bar(total, show=progress, desc=f"round {number}", unit="batch", leave=False)
        def finished(wid, m):  # the chart shows each client as it finishes, while the round runs
            if chart is not None:
                chart.client(number, wid, m)

        try:
            metrics = {}
            if self._whole:
                prepared = {wid: self._client(number, wid) for wid in clients}
                ray = all(hasattr(c.worker, "submit_calls") for c in prepared.values()) and hasattr(
                    self.aggregator or prepared[clients[0]].worker, "submit_calls")  # Ray workers, all
                train = self._train_whole_ray if ray else self._train_whole
                metrics, state = train(number, prepared, orders, bar, finished)
            else:
                if self.plans:
                    prepared = {wid: self._client(number, wid) for wid in clients}
                    metrics = self._train_in_flight(number, prepared, orders, bar, finished)
                else:  # op by op: one client after another (each op waits for its reply)
                    for wid in clients:
                        client = self._client(number, wid)
                        metrics[wid] = self._guard(number, wid, "local training",
                                                   lambda: self._train(wid, orders[wid], client, bar))
                        finished(wid, metrics[wid])
                trained = {wid: self._clients[wid].model for wid in clients}
                where = self.aggregator or self._clients[clients[0]].worker
                state = self._guard(number, where.id, "averaging", lambda: federated_avg(
                    trained, {wid: len(self.fds[wid]) for wid in clients}, to=where).get()).state_dict()
        finally:
            bar.close()
        self.model.load_state_dict(state)  # only now: a failed round changes nothing
        # the views' History names the step (diff.describe); the op-by-op average says so itself
        events.activity("trained", clients=list(clients), round=number)
        if self._whole:
            events.activity("averaged", worker=self.aggregator.id if self.aggregator is not None else None,
                            models=len(clients))
        scores = {}
        if evaluate is not None:
            scores = evaluate(self.model) if callable(evaluate) else evaluate_classifier(self.model, *evaluate,
                                                                                        loss=self.loss)
        result = RoundResult(number, metrics, scores, time.perf_counter() - t0)
        self.history.append(result)
        if chart is not None:
            chart.add(result)
        return result

    def run(self, rounds: int, *, evaluate=None, chart=None, progress: bool | None = None) -> list[RoundResult]:
        """``rounds`` more rounds; returns their results (also in ``history``)."""
        return [self.round(evaluate=evaluate, chart=chart, progress=progress) for _ in range(rounds)]

    # --- the steps --------------------------------------------------------------------------
    @staticmethod
    def _guard(number, worker_id, phase, fn):
        try:
            return fn()
        except FederatedRoundError:
            raise
        except SyftError as e:
            raise FederatedRoundError(number, worker_id, phase, e) from e

    def _client(self, number, wid) -> _Client:
        """The client's model on its worker, holding the global weights."""
        worker = self.fds[wid].location

        def prepare():
            check_alive(worker)
            client = self._clients.get(wid)
            if client is not None and client.worker is worker and client.alive():
                if self._whole:
                    return client  # the round's first message loads the weights
                try:
                    client.load(self.model)
                    return client
                except SyftError:  # its copy is gone (the worker restarted): make a new one
                    pass
            if self._whole:
                client = self._clients[wid] = _RoundClient(worker, self.model, self._local_round().builds(),
                                                           self._flat_size + len(self.fds[wid]) * self.local_epochs + 1)
                return client
            build = (lambda m: self._plan_for(m, wid)) if self.plans else None
            client = self._clients[wid] = _Client(worker, self.model, self.lr, build)
            return client

        return self._guard(number, wid, "sending the model", prepare)

    def _plan_for(self, model: nn.Module, wid: str):
        """A training step of ``model`` (plain SGD) as a plan, built for every batch size of ``wid``."""
        loss_fn, lr, with_acc = self.loss, self.lr, self.accuracy

        def train_step(x, y):
            out = model(x)
            loss = loss_fn(out, y)
            grads = torch.autograd.grad(loss, list(model.parameters()))
            with torch.no_grad():
                for p, g in zip(model.parameters(), grads):
                    p.sub_(lr * g)
            correct = (out.argmax(1) == y).sum() if with_acc else loss.detach() * 0
            return loss.detach(), correct

        ds, bs = self.fds[wid], self.loader.batch_size
        sizes = {min(bs, len(ds))} | ({len(ds) % bs} if len(ds) % bs else set())
        step = make_plan(train_step, state=model, name="train_step")
        for n in sorted(sizes):
            step.build(torch.empty((n, *ds.sample_shape), dtype=ds.data.dtype),
                       torch.empty((n, *ds.targets.shape[1:]), dtype=ds.targets.dtype))
        return step

    @property
    def _flat_size(self) -> int:
        return sum(t.numel() for t in (*self.model.parameters(), *self.model.buffers()))

    def _local_round(self):
        """The plan of one client's local round, built for every client dataset size (traced
        on a copy of the model: its state is given at each run, the client's own pointers).
        Its input is the inbox ``[global weights, shuffle (as floats), weight]``, the client's
        data and targets; its outputs ``[loss sum, correct]`` and ``weight * new weights``."""
        if self._round_plan is not None:
            return self._round_plan
        template = self.model.copy()
        state = [*template.parameters(), *template.buffers()]
        sizes = [t.numel() for t in state]
        flat, epochs, bs = sum(sizes), self.local_epochs, self.loader.batch_size
        loss_fn, lr, with_acc, drop_last = self.loss, self.lr, self.accuracy, self.loader.drop_last

        def local_round(inbox, data, targets):
            n = data.shape[0]
            params = list(template.parameters())  # read here: the tracer gives the module its own
            state = [*params, *template.buffers()]
            with torch.no_grad():
                off = 0
                for t, k in zip(state, sizes):
                    t.copy_(inbox[off:off + k].view(t.shape))
                    off += k
            order = inbox[flat:flat + epochs * n].long()
            loss_sum = correct = None
            for e in range(epochs):
                for start in range(0, n - n % bs if drop_last else n, bs):
                    idx = order[e * n + start:e * n + min(start + bs, n)]
                    x, y = data.index_select(0, idx), targets.index_select(0, idx)
                    out = template(x)
                    loss = loss_fn(out, y)
                    grads = torch.autograd.grad(loss, params)
                    with torch.no_grad():
                        for p, g in zip(params, grads):
                            p.sub_(lr * g)
                    part = loss.detach() * idx.shape[0]
                    right = (out.argmax(1) == y).sum().to(part.dtype) if with_acc else part * 0
                    loss_sum = part if loss_sum is None else loss_sum + part
                    correct = right if correct is None else correct + right
            weight = inbox[flat + epochs * n:]
            return torch.stack([loss_sum, correct]), torch.cat([t.detach().reshape(-1) for t in state]) * weight

        plan = make_plan(local_round, state=template, name="local_round")
        dtype = state[0].dtype
        for wid in self.fds.workers:
            ds = self.fds[wid]
            n = len(ds)
            if n == 0 or (drop_last and n < bs):
                raise SyftError(f"client {wid!r} has {n} samples: no batch of {bs} to train on")
            example = (torch.empty(flat + epochs * n + 1, dtype=dtype),
                       torch.empty((n, *ds.sample_shape), dtype=ds.data.dtype),
                       torch.empty((n, *ds.targets.shape[1:]), dtype=ds.targets.dtype))
            if plan.is_built and plan.builds().find(state + list(example)) is not None:
                continue  # one build per dataset size
            plan.build(*example)
        self._round_plan = plan
        return plan

    def _train_whole(self, number: int, clients: dict, orders: dict, bar, finished):
        """Plans, a whole local round per client: every client's inbox and plan run are sent
        before any reply is read; as each client's run is read, its metrics are fetched and its
        term of the sum sent to the aggregator (``add_into``: in flight). Returns the metrics
        and the average as a state dict."""
        names = list(self.model.state_dict())
        shapes = [t.shape for t in self.model.state_dict().values()]
        template = [*self.model.parameters(), *self.model.buffers()]
        dtype = template[0].dtype
        with torch.no_grad():
            flat = torch.cat([t.detach().reshape(-1) for t in template])
        total = float(sum(len(self.fds[wid]) for wid in clients))
        where = self.aggregator or clients[next(iter(clients))].worker
        acc = self._guard(number, where.id, "averaging", lambda: (check_alive(where),
                                                                  zeros_on(where, (flat.numel(),), dtype))[1])
        runs = {}
        for wid, c in clients.items():
            inbox = torch.cat([flat, orders[wid].to(dtype), torch.tensor([len(self.fds[wid]) / total], dtype=dtype)])
            ds = self.fds[wid]
            runs[wid] = self._guard(number, wid, "local training", lambda: (
                c.worker.submit_request({"c": "run", "op": "aten.copy_.default", "a": [c.inbox._ref, inbox],
                                         "k": None}, detach=True),
                c.worker.submit_request(
                    {"c": "run_plan", "id": c.plan._ref.id,
                     "a": [c.inbox._ref.id, ds.data.id_at_location, ds.targets.id_at_location],
                     "s": [t._ref.id for t in c.state]})))
        acc = self._guard(number, where.id, "averaging", acc.result)
        metrics, adds, failed = {}, [], None
        n_batches = {wid: self.loader.num_batches(wid) * self.local_epochs for wid in clients}
        for wid, (sent, run) in runs.items():
            c = clients[wid]
            try:
                sent.result()
                stats, term = (wrap_result(PointerTensor, o, c.worker) for o in run.result())
            except SyftError as e:
                failed = failed or (wid, e)
                continue
            bar.update(n_batches[wid])
            if failed is not None:
                continue
            try:  # its replies may have arrived before it died: asking for more finds it gone
                check_alive(c.worker)  # (closed meanwhile: named here, before its term is added)
                fetched = c.worker.submit_request({"c": "fetch", "id": stats.id_at_location, "keep": False})
            except SyftError as e:
                failed = (wid, e)
                continue
            adds.append((wid, *self._guard(number, wid, "averaging", lambda: add_into(acc, term))))
            try:
                check_alive(c.worker)
                loss_sum, correct = fetched.result().tolist()
            except SyftError as e:
                failed = (wid, e)
                continue
            n = self._trained(wid) * self.local_epochs
            metrics[wid] = {"loss": loss_sum / n, "samples": self._trained(wid)}
            if self.accuracy:
                metrics[wid]["accuracy"] = correct / n
            finished(wid, metrics[wid])
        if failed is not None:
            raise FederatedRoundError(number, failed[0], "local training", failed[1]) from failed[1]
        for wid, p, _term in adds:
            try:
                p.result()
            except SyftError as e:
                raise FederatedRoundError(number, _averaging_culprit(clients, where, wid, e), "averaging", e) from e
        return metrics, self._fetched_average(number, where, acc, names, shapes)

    def _train_whole_ray(self, number: int, clients: dict, orders: dict, bar, finished):
        """``_train_whole`` between Ray workers: ONE actor call per client and one add on the
        aggregator. The call (``RayWorker.submit_calls``) carries the round's inbox (the global
        weights, the shuffle, the weight), the plan run and the fetches of its two outputs; the
        metrics' reply is read here, the weighted term's reply goes actor to actor into the
        aggregator's sum (``submit_run_from(ref=)``). Every client's call and every add are in
        flight before any reply is read; the adds run in the clients' order. Same results as
        ``_train_whole``."""
        names = list(self.model.state_dict())
        shapes = [t.shape for t in self.model.state_dict().values()]
        template = [*self.model.parameters(), *self.model.buffers()]
        dtype = template[0].dtype
        with torch.no_grad():
            flat = torch.cat([t.detach().reshape(-1) for t in template])
        total = float(sum(len(self.fds[wid]) for wid in clients))
        where = self.aggregator or clients[next(iter(clients))].worker
        acc = self._guard(number, where.id, "averaging", lambda: (check_alive(where),
                                                                  zeros_on(where, (flat.numel(),), dtype))[1])
        calls = {}
        try:
            for wid, c in clients.items():
                inbox = torch.cat([flat, orders[wid].to(dtype),
                                   torch.tensor([len(self.fds[wid]) / total], dtype=dtype)])
                ds = self.fds[wid]
                calls[wid] = self._guard(number, wid, "local training", lambda: c.worker.submit_calls([
                    {"c": "run", "op": "aten.copy_.default", "a": [c.inbox._ref, inbox], "k": None},
                    {"c": "run_plan", "id": c.plan._ref.id,
                     "a": [c.inbox._ref.id, ds.data.id_at_location, ds.targets.id_at_location],
                     "s": [t._ref.id for t in c.state]},
                    {"c": "fetch", "@o": 0, "keep": False},  # [loss sum, correct]: read here
                    {"c": "fetch", "@o": 1, "keep": False},  # weight * new weights: to the aggregator
                ], elsewhere=1))
        except FederatedRoundError:
            try:  # the sum's start becomes a pointer, dropped at once: the aggregator releases it
                acc.result()
            except SyftError:
                pass
            raise
        acc = self._guard(number, where.id, "averaging", acc.result)
        adds, failed = {}, None
        for wid, (_, (term,)) in calls.items():
            p = self._guard(number, where.id, "averaging", lambda: where.submit_run_from(
                clients[wid].worker, None, "aten.add_.Tensor", [acc._ref, None], slot=1, ref=term))
            if p is None:  # its worker is no longer a live Ray worker (its calls' replies say why)
                failed = failed or (wid, WorkerUnavailableError(f"Ray worker {wid!r} is unavailable"))
            else:
                adds[wid] = p
        metrics = {}
        n_batches = {wid: self.loader.num_batches(wid) * self.local_epochs for wid in clients}
        for wid, (pending, _) in calls.items():
            try:
                loss_sum, correct = gather(pending)[2].tolist()
            except SyftError as e:
                failed = failed or (wid, e)
                continue
            bar.update(n_batches[wid])
            if failed is not None:
                continue
            n = self._trained(wid) * self.local_epochs
            metrics[wid] = {"loss": loss_sum / n, "samples": self._trained(wid)}
            if self.accuracy:
                metrics[wid]["accuracy"] = correct / n
            finished(wid, metrics[wid])
        errors = {}
        for wid, p in adds.items():  # every reply read, then the first failure named
            try:
                p.result()
            except SyftError as e:
                errors[wid] = e
        if failed is not None:
            raise FederatedRoundError(number, failed[0], "local training", failed[1]) from failed[1]
        for wid, e in errors.items():
            raise FederatedRoundError(number, _averaging_culprit(clients, where, wid, e), "averaging", e) from e
        return metrics, self._fetched_average(number, where, acc, names, shapes)

    def _fetched_average(self, number: int, where, acc, names, shapes) -> dict:
        """The aggregator's streamed sum, fetched (and dropped there), as the model's tensors by name."""
        average = self._guard(number, where.id, "averaging", lambda: where.submit_request(
            {"c": "fetch", "id": acc.id_at_location, "keep": False}).result())
        values, off = {}, 0
        for name, shape in zip(names, shapes):
            k = shape.numel()
            values[name] = average[off:off + k].view(shape)
            off += k
        return values

    def _trained(self, wid: str) -> int:
        """The samples of ``wid`` one local epoch trains on (a short last batch dropped, or not)."""
        n, bs = len(self.fds[wid]), self.loader.batch_size
        return n - n % bs if self.loader.drop_last else n

    def _epoch_order(self, number: int, wid: str, epoch: int) -> torch.Tensor:
        """The sample order of one local epoch of ``wid``: ``order``'s, checked, or a shuffle drawn
        as the loader draws it."""
        n = len(self.fds[wid])
        if self.order is None:
            return torch.randperm(n, generator=self.generator) if self.loader.shuffle else torch.arange(n)
        got = self.order(number, wid, epoch)
        got = torch.as_tensor(got)
        if (got.dim() != 1 or got.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8)
                or not torch.equal(torch.sort(got.long()).values, torch.arange(n))):
            raise SyftError(f"order({number}, {wid!r}, {epoch}) gave {tuple(got.shape)} {got.dtype} values: it returns "
                            f"a permutation of range({n}), the indices of {wid!r}'s samples")
        return got.long()

    def _batch_order(self, number: int, wid: str) -> torch.Tensor:
        """The sample order of ``wid``'s local epochs, one shuffle each, drawn as the loader does."""
        return torch.cat([self._epoch_order(number, wid, e) for e in range(self.local_epochs)])

    def _batch_indices(self, wid: str, order: torch.Tensor) -> list[torch.Tensor]:
        """The sample indices of every batch of ``wid``'s local epochs (``order``: theirs, one
        after another), cut as the loader cuts them."""
        n, bs, loader = len(self.fds[wid]), self.loader.batch_size, self.loader
        stop = n - n % bs if loader.drop_last else n
        batches = []
        for e in range(self.local_epochs):
            batches += [order[e * n + start:e * n + min(start + bs, n)] for start in range(0, stop, bs)]
        return batches

    def _train_in_flight(self, number: int, clients: dict, orders: dict, bar, finished) -> dict:
        """Plans: batch k of every client is sent before any reply is read, so the clients train
        at once and a round costs about the round trips of one client's batches. A batch is three
        requests per client (its indices, the two index_selects, the plan), each step's in flight
        together; the plans' replies are read at the end."""
        indices = {wid: self._batch_indices(wid, orders[wid]) for wid in clients}
        outputs = {wid: [] for wid in clients}
        for k in range(max(len(b) for b in indices.values())):
            step = {wid: clients[wid] for wid in clients if k < len(indices[wid])}
            for wid, c in step.items():
                self._guard(number, wid, "local training", lambda: check_alive(c.worker))
            ids = _read_replies(number, {wid: c.worker.submit_request(
                {"c": "store", "o": indices[wid][k]}, detach=True, label="send") for wid, c in step.items()})
            index = {wid: PointerTensor(c.worker, ids[wid], indices[wid][k].shape, indices[wid][k].dtype)
                     for wid, c in step.items()}
            cut = {}
            for wid in step:
                ds = self.fds[wid]
                cut[wid] = (submit(aten.index_select.default, (ds.data, 0, index[wid])),
                            submit(aten.index_select.default, (ds.targets, 0, index[wid])))
            xs = _read_replies(number, {wid: x for wid, (x, _) in cut.items()})
            ys = _read_replies(number, {wid: y for wid, (_, y) in cut.items()})
            for wid, c in step.items():
                plan = c.step
                state = plan._state_refs()
                outputs[wid].append((c.worker, xs[wid].shape[0], xs[wid], ys[wid], c.worker.submit_request(
                    {"c": "run_plan", "id": plan._ref.id, "a": [xs[wid]._ref.id, ys[wid]._ref.id],
                     "s": None if state is None else [r.id for r in state]})))
                bar.update(1)
        metrics = {}
        for wid, runs in outputs.items():
            losses, corrects, sizes = [], [], []
            for worker, size, _x, _y, p in runs:  # the batch's pointers lived until its plan ran
                loss, correct = (wrap_result(PointerTensor, o, worker) for o in _read_replies(number, {wid: p})[wid])
                losses.append(loss)
                corrects.append(correct)
                sizes.append(size)
            def read(worker=clients[wid].worker):
                check_alive(worker)
                return self._metrics(losses, corrects, sizes)

            metrics[wid] = self._guard(number, wid, "local training", read)
            finished(wid, metrics[wid])
        return metrics

    def _train(self, wid: str, order: torch.Tensor, client: _Client, bar) -> dict:
        """Op by op: the loader's batches (cut on the worker by index ops), one after another."""
        losses, corrects, sizes = [], [], []
        model, opt, ds = client.model, client.opt, self.fds[wid]
        for idx in self._batch_indices(wid, order):
            check_alive(client.worker)
            index = client.worker.send(idx)
            x, y = ds.data.index_select(0, index), ds.targets.index_select(0, index)
            if client.step is not None:
                loss, correct = client.step(x, y)
            else:
                opt.zero_grad()
                out = model(x)
                loss = self.loss(out, y)
                loss.backward()
                opt.step()
                with torch.no_grad():
                    correct = (out.argmax(1) == y).sum() if self.accuracy else None
                loss = loss.detach()
            losses.append(loss)
            corrects.append(correct)
            sizes.append(x.shape[0])
            bar.update(1)
        return self._metrics(losses, corrects, sizes)

    def _metrics(self, losses, corrects, sizes) -> dict:
        n = sum(sizes)
        batch_losses = torch.stack(losses).get()
        result = {"loss": float((batch_losses * torch.tensor(sizes, dtype=batch_losses.dtype)).sum() / n),
                  "samples": n // self.local_epochs}
        if self.accuracy:
            result["accuracy"] = float(torch.stack(corrects).sum().get()) / n
        return result


def _read_replies(number: int, pending: dict) -> dict:
    """Worker id -> the result of its request in flight. Every reply is read, so no worker is left
    with one unread; then the first client that failed is named."""
    results, failed = {}, None
    for wid, p in pending.items():
        try:
            results[wid] = p.result()
        except SyftError as e:
            failed = failed or (wid, e)
    if failed is not None:
        raise FederatedRoundError(number, failed[0], "local training", failed[1]) from failed[1]
    return results


def run_rounds(model: nn.Module, fds: FederatedDataset, rounds: int, *, evaluate=None, chart=None,
               progress: bool | None = None, **options) -> list[RoundResult]:
    """``FedAvg(model, fds, **options).run(rounds, ...)``: the global model is ``model``, trained in place."""
    return FedAvg(model, fds, **options).run(rounds, evaluate=evaluate, chart=chart, progress=progress)


def _averaging_culprit(clients, where, wid: str, e) -> str:
    """Whom a failed add into the aggregator's sum names: the term's worker if it went away (or its
    term could not be moved), else the aggregator."""
    try:
        check_alive(clients[wid].worker)
        return where.id if "MoveSourceError" not in str(e) else wid
    except SyftError:
        return wid
