"""Datasets whose samples live on workers (PySyft 0.2's BaseDataset / FederatedDataset).

    ds = sy.BaseDataset(data, targets, name="digits")
    fds = ds.federate((bob, alice))          # each worker now holds a slice of it
    fds["bob"]                               # bob's part: pointers to its data and targets
    sy.FederatedDataset.from_workers((bob, alice), "digits")   # found again, in a later session

Each slice is *loaded* (``worker.load``): the worker holds it, no pointer owns it, and it stays
when every pointer to it is gone. Its tags follow the convention of
``syft_lab.inspection.model.DATASET_TAG``: ``#dataset``, ``#<name>``, and ``#data`` or
``#target``, so ``bob.search("#digits", "#data")`` finds it and the views show it as a dataset.
"""
from __future__ import annotations

import re

import torch
from torch.utils.data import Dataset

from ..errors import SyftError, WorkerUnavailableError
from ..inspection.model import DATASET_PARTS, DATASET_TAG, dataset_of
from ..workers.base import BaseWorker

DEFAULT_NAME = "federated"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_RESERVED = {t[1:] for t in (DATASET_TAG, *DATASET_PARTS)}
_TAG_OF_PART = {part: tag for tag, part in DATASET_PARTS.items()}
_DOWN = {"closed", "unreachable", "gone", "stopped"}


def check_name(name) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name) or name in _RESERVED:
        raise SyftError(f"a dataset name is a short word such as 'digits' (letters, digits, _ . -; not "
                        f"{', '.join(sorted(_RESERVED))}), got {name!r}")
    return name


def check_alive(worker) -> None:
    """A clear error for a worker that went away (a closed VirtualWorker would otherwise go on)."""
    state = worker.state
    if state in _DOWN:
        raise WorkerUnavailableError(f"worker {worker.id!r} is {state}: it cannot take part any more")


class BaseDataset(Dataset):
    """A torch ``Dataset`` of two tensors: ``data[i]`` (through ``transform``) and ``targets[i]``."""

    def __init__(self, data: torch.Tensor, targets: torch.Tensor, transform=None, name: str | None = None):
        if not isinstance(data, torch.Tensor) or not isinstance(targets, torch.Tensor):
            raise SyftError(f"BaseDataset takes two tensors (data, targets), got "
                            f"{type(data).__name__} and {type(targets).__name__}")
        if data.dim() == 0 or targets.dim() == 0 or len(data) != len(targets):
            raise SyftError(f"data and targets need one entry per sample: {len(data) if data.dim() else 0} "
                            f"samples of data, {len(targets) if targets.dim() else 0} targets")
        if transform is not None and not callable(transform):
            raise SyftError(f"transform is a function of one sample, got {type(transform).__name__}")
        self.data, self.targets, self.transform = data, targets, transform
        self.name = None if name is None else check_name(name)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index):
        sample = self.data[index]
        return (self.transform(sample) if self.transform else sample), self.targets[index]

    def federate(self, workers, *, name: str | None = None, indices=None) -> "FederatedDataset":
        """Split the samples across ``workers`` and leave each slice on its worker (held by it).

        ``indices``: one sequence of sample indices per worker (disjoint), e.g. from
        ``sy.federated.split_by_label``; by default consecutive, near-equal slices (as PySyft).
        The transform runs here, once per sample, before the data leaves: workers run no Python."""
        workers = _check_workers(workers)
        name = check_name(name if name is not None else self.name or DEFAULT_NAME)
        n = len(self)
        if n < len(workers):
            raise SyftError(f"{n} sample(s) cannot be split across {len(workers)} workers "
                            f"({', '.join(w.id for w in workers)}): each needs at least one")
        slices = _check_indices(indices, n, workers) if indices is not None \
            else list(torch.tensor_split(torch.arange(n), len(workers)))
        for w in workers:
            check_alive(w)
            if w.search(DATASET_TAG, f"#{name}"):
                raise SyftError(f"worker {w.id!r} holds a dataset {name!r} already: use it "
                                f"(sy.FederatedDataset.from_workers(workers, {name!r})), unload it "
                                f"(fds.unload()), or federate this one under another name=")
        data = self.data if self.transform is None else torch.stack([self.transform(d) for d in self.data])
        parts, loaded = [], []
        try:
            for w, idx in zip(workers, slices):
                pointers = {}
                for part, tensor in (("data", data), ("targets", self.targets)):
                    pointers[part] = w.load(tensor[idx], tags=[DATASET_TAG, f"#{name}", _TAG_OF_PART[part]],
                                            description=f"{part} of dataset {name!r}: {len(idx)} of {n} samples")
                    loaded.append(pointers[part])
                parts.append(WorkerDataset(name, pointers["data"], pointers["targets"]))
        except BaseException:
            for p in loaded:  # nothing half-federated stays behind
                try:
                    p.location.unload(p)
                except Exception:
                    pass
            raise
        return FederatedDataset(parts)


def _check_workers(workers) -> list:
    if isinstance(workers, BaseWorker):
        workers = [workers]
    workers = list(workers or ())
    if not workers:
        raise SyftError("federate needs at least one worker, e.g. ds.federate((bob, alice))")
    bad = [w for w in workers if not isinstance(w, BaseWorker)]
    if bad:
        raise SyftError(f"federate takes workers (sy.VirtualWorker, sy.WebSocketWorker), got {type(bad[0]).__name__}")
    ids = [w.id for w in workers]
    if len(set(ids)) != len(ids):
        raise SyftError(f"each worker may appear once, got {ids}")
    return workers


def _check_indices(indices, n, workers) -> list:
    indices = [torch.as_tensor(i, dtype=torch.long).reshape(-1) for i in indices]
    if len(indices) != len(workers):
        raise SyftError(f"indices= gives one index sequence per worker: {len(indices)} for {len(workers)} workers")
    seen = torch.cat(indices)
    if len(seen) and (seen.min() < 0 or seen.max() >= n):
        raise SyftError(f"indices must lie in 0..{n - 1}")
    if len(seen.unique()) != len(seen):
        raise SyftError("indices= must not give one sample to two workers (or twice)")
    empty = [w.id for w, i in zip(workers, indices) if len(i) == 0]
    if empty:
        raise SyftError(f"indices= gives no sample to {', '.join(empty)}")
    return indices


def split_by_label(targets: torch.Tensor, n_parts: int) -> list[torch.Tensor]:
    """A non-IID split: sample indices sorted by label, cut into ``n_parts`` consecutive
    slices, so each part sees only a few classes (for ``federate(..., indices=...)``)."""
    order = torch.sort(torch.as_tensor(targets), stable=True).indices
    return list(torch.tensor_split(order, n_parts))


class WorkerDataset:
    """One worker's part of a federated dataset: pointers to its data and targets (not owning
    them: the worker holds them). ``len`` is its number of samples."""

    def __init__(self, name: str, data, targets):
        if data.location is not targets.location:
            raise SyftError(f"a worker dataset's data and targets must be on one worker, got "
                            f"{data.location.id!r} and {targets.location.id!r}")
        if data.shape[0] != targets.shape[0]:
            raise SyftError(f"dataset {name!r} on {data.location.id!r} has {data.shape[0]} samples of data "
                            f"but {targets.shape[0]} targets")
        self.name, self.data, self.targets = name, data, targets

    @property
    def location(self):
        return self.data.location

    def __len__(self) -> int:
        return self.data.shape[0]

    @property
    def sample_shape(self) -> tuple:
        return tuple(self.data.shape[1:])

    def batches(self, batch_size: int, *, shuffle: bool = False, drop_last: bool = False, generator=None):
        """One epoch of (data, target) pointers, cut on the worker by index ops on its data."""
        n = len(self)
        order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
        stop = n - n % batch_size if drop_last else n
        for start in range(0, stop, batch_size):
            check_alive(self.location)
            index = self.location.send(order[start:start + batch_size])
            yield self.data.index_select(0, index), self.targets.index_select(0, index)

    def num_batches(self, batch_size: int, drop_last: bool = False) -> int:
        return len(self) // batch_size if drop_last else -(-len(self) // batch_size)

    def unload(self) -> None:
        """Remove this part from its worker."""
        for p in (self.data, self.targets):
            self.location.unload(p)

    def __repr__(self):
        shape = "x".join(map(str, self.sample_shape)) or "scalar"
        return (f"<WorkerDataset {self.name!r} on {self.location.id}: {len(self)} samples of {shape} "
                f"{str(self.data.dtype).replace('torch.', '')}>")


def worker_datasets(worker) -> dict[str, WorkerDataset]:
    """The datasets ``worker`` holds, by name (from its tags: one search). Parts that miss their
    data or targets are left out."""
    found: dict[str, dict] = {}
    for p in worker.search(DATASET_TAG):
        info = dataset_of(p.tags, list(p.shape))
        if info is None:
            continue
        parts = found.setdefault(info["name"], {})
        if info["part"] in parts:
            raise SyftError(f"worker {worker.id!r} holds two {info['part']} parts of dataset {info['name']!r}: "
                            f"unload one of them ({worker.id}.unload(ptr), ptr from {worker.id}.search)")
        parts[info["part"]] = p
    return {name: WorkerDataset(name, parts["data"], parts["targets"])
            for name, parts in sorted(found.items()) if len(parts) == 2}


class FederatedDataset:
    """A dataset split across workers: one ``WorkerDataset`` per worker, by worker id."""

    def __init__(self, datasets):
        datasets = list(datasets.values() if isinstance(datasets, dict) else datasets)
        if not datasets:
            raise SyftError("a FederatedDataset needs at least one worker's dataset")
        if not all(isinstance(d, WorkerDataset) for d in datasets):
            raise SyftError("a FederatedDataset is made of WorkerDatasets (ds.federate(workers) makes one)")
        self.datasets = {}
        for d in datasets:
            if d.location.id in self.datasets:
                raise SyftError(f"worker {d.location.id!r} appears twice in the federated dataset")
            self.datasets[d.location.id] = d
        names = {d.name for d in datasets}
        self.name = names.pop() if len(names) == 1 else None

    @classmethod
    def from_workers(cls, workers, name: str) -> "FederatedDataset":
        """The dataset ``name`` as the workers hold it (after the pointers were lost, or in a
        new session): found by its tags, nothing is sent."""
        name = check_name(name)
        workers = _check_workers(workers)
        parts = []
        for w in workers:
            ds = worker_datasets(w).get(name)
            if ds is None:
                raise SyftError(f"worker {w.id!r} holds no dataset {name!r} (it holds: "
                                f"{', '.join(worker_datasets(w)) or 'none'})")
            parts.append(ds)
        return cls(parts)

    @property
    def workers(self) -> list[str]:
        """The ids of the workers holding parts (as PySyft's ``dataset.workers``)."""
        return list(self.datasets)

    def __getitem__(self, worker_id: str) -> WorkerDataset:
        try:
            return self.datasets[worker_id]
        except KeyError:
            raise SyftError(f"no part of this dataset is on {worker_id!r}; workers: {', '.join(self.datasets)}") from None

    def __iter__(self):
        return iter(self.datasets.values())

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets.values())

    @property
    def counts(self) -> dict[str, int]:
        """Samples per worker: the weights of ``sy.federated_avg``."""
        return {w: len(d) for w, d in self.datasets.items()}

    def unload(self) -> None:
        """Remove every part from its worker."""
        for d in self.datasets.values():
            d.unload()

    def __repr__(self):
        parts = ", ".join(f"{w} ({len(d)})" for w, d in self.datasets.items())
        return f"<FederatedDataset {self.name!r}: {len(self)} samples on {parts}>"
