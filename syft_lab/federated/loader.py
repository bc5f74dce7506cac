"""FederatedDataLoader: batches of a federated dataset, one worker at a time.

    for data, target in sy.FederatedDataLoader(fds, batch_size=32, shuffle=True):
        model.send(data.location); ...; model.get()

Batches are cut where the data is: the loader sends a batch's sample indices to the worker
and takes two ``index_select``s of its data and targets there. No sample value comes here,
and no batch mixes workers. Every sample is in exactly one batch per epoch (the last batch of
a worker may be smaller, unless ``drop_last``). With ``shuffle``, each worker's samples are
permuted anew each epoch, drawn from ``generator`` (a ``torch.Generator``) for a repeatable order.

``iter_per_worker=True`` (PySyft's websockets tutorial): each step yields one batch of every
worker that has one left, as ``{worker: (data, target)}``. As in PySyft, ``iter(loader)`` starts
an epoch and ``next(loader)`` takes its next step.
"""
from __future__ import annotations

import torch

from ..errors import SyftTypeError, SyftValueError
from .datasets import FederatedDataset


class FederatedDataLoader:
    def __init__(self, federated_dataset: FederatedDataset, batch_size: int = 8, shuffle: bool = False,
                 drop_last: bool = False, generator: torch.Generator | None = None, *,
                 iter_per_worker: bool = False):
        if not isinstance(federated_dataset, FederatedDataset):
            raise SyftTypeError(f"FederatedDataLoader takes a sy.FederatedDataset (ds.federate(workers)), got "
                                f"{type(federated_dataset).__name__}")
        if type(batch_size) is not int:
            raise SyftTypeError(f"batch_size is a positive int, got {batch_size!r}")
        if batch_size < 1:
            raise SyftValueError(f"batch_size is a positive int, got {batch_size!r}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise SyftTypeError(f"generator is a torch.Generator, got {type(generator).__name__}")
        self.federated_dataset = federated_dataset
        self.batch_size, self.shuffle, self.drop_last, self.generator = batch_size, shuffle, drop_last, generator
        self.iter_per_worker = bool(iter_per_worker)
        self._epoch = None  # the epoch next(loader) steps through (PySyft's loader was its own iterator)

    @property
    def workers(self) -> list[str]:
        return self.federated_dataset.workers

    def batches(self, worker_id: str):
        """One epoch of one worker's batches: (data, target) pointers on that worker."""
        return self.federated_dataset[worker_id].batches(self.batch_size, shuffle=self.shuffle,
                                                         drop_last=self.drop_last, generator=self.generator)

    def num_batches(self, worker_id: str) -> int:
        return self.federated_dataset[worker_id].num_batches(self.batch_size, self.drop_last)

    def __iter__(self):
        self._epoch = self._per_worker() if self.iter_per_worker else self._one_worker_at_a_time()
        return self._epoch

    def __next__(self):
        if self._epoch is None:
            iter(self)
        return next(self._epoch)

    def _one_worker_at_a_time(self):
        for worker_id in self.workers:
            yield from self.batches(worker_id)

    def _per_worker(self):
        running = {self.federated_dataset[w].location: self.batches(w) for w in self.workers}
        while running:
            step = {}
            for worker, batches in list(running.items()):
                batch = next(batches, None)
                if batch is None:
                    del running[worker]
                else:
                    step[worker] = batch
            if step:
                yield step

    def __len__(self) -> int:
        """Batches per epoch (with ``iter_per_worker``: steps, the most batches of one worker)."""
        counts = [self.num_batches(w) for w in self.workers]
        return max(counts) if self.iter_per_worker else sum(counts)

    def __repr__(self):
        return (f"<FederatedDataLoader {len(self)} batches of {self.batch_size} over {', '.join(self.workers)}"
                f"{', shuffled' if self.shuffle else ''}{', drop_last' if self.drop_last else ''}"
                f"{', per worker' if self.iter_per_worker else ''}>")
