"""``Optims``: one optimizer per worker for a model that travels (PySyft 0.2's ``Optims``, Part 2).

    optims = sy.Optims(["bob", "alice"], optim=optim.Adam(model.parameters(), lr=0.1))
    for data, target in datasets:
        model.send(data.location)
        opt = optims.get_optim(data.location.id)
        ...; opt.step(); model.get()

An optimizer with state (Adam's moments, SGD's momentum) keeps that state next to the
parameters on the worker where it was made: state from bob's step would meet alice's
parameters on the next one. ``Optims`` gives each worker its own optimizer of the same class
and hyperparameters over the same parameters (they keep their identity through send and get),
so each worker's state stays on that worker.
"""
from __future__ import annotations

import torch

from ..errors import NotFoundError, SyftTypeError, SyftValueError
from ..workers.base import BaseWorker


class Optims:
    def __init__(self, workers, optim: torch.optim.Optimizer):
        if not isinstance(optim, torch.optim.Optimizer):
            raise SyftTypeError(f"Optims takes optim=<a torch.optim optimizer> (its class and settings are copied "
                                f"for each worker), got {type(optim).__name__}")
        ids = [w.id if isinstance(w, BaseWorker) else w for w in workers]
        if not ids or not all(isinstance(i, str) for i in ids):
            raise SyftValueError(f"Optims takes workers or their ids, e.g. ['bob', 'alice'], got {workers!r}")
        self.optim = optim
        self.workers = ids
        groups = [{k: v for k, v in g.items()} for g in optim.param_groups]
        self.optimizers = {}
        for i in ids:
            self.optimizers[i] = type(optim)([dict(g, params=list(g["params"])) for g in groups], **optim.defaults)

    def get_optim(self, worker) -> torch.optim.Optimizer:
        """The optimizer of ``worker`` (a worker or its id)."""
        worker_id = worker.id if isinstance(worker, BaseWorker) else worker
        try:
            return self.optimizers[worker_id]
        except KeyError:
            raise NotFoundError(f"no optimizer for {worker_id!r}: Optims has {', '.join(self.workers)}") from None

    def count(self) -> int:
        return len(self.optimizers)

    def __repr__(self):
        return f"<Optims {type(self.optim).__name__} for {', '.join(self.workers)}>"
