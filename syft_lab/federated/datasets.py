"""Datasets whose samples live on workers (PySyft 0.2's BaseDataset / FederatedDataset).

    ds = sy.BaseDataset(data, targets, name="digits")
    fds = ds.federate((bob, alice))          # each worker now holds a slice of it
    fds["bob"]                               # bob's part: pointers to its data and targets
    sy.FederatedDataset.from_workers((bob, alice), "digits")   # found again, in a later session
    TensorDataset(x, y).federate((bob, alice))                 # any map-style torch Dataset (sy.hook())
    sy.FederatedDataset([ds_bob.send(bob), ds_alice.send(alice)])   # from per-worker datasets

Each slice is *loaded* (``worker.load``): the worker holds it, no pointer owns it, and it stays
when every pointer to it is gone. Its tags follow the convention of
``DATASET_TAG`` (below): ``#dataset``, ``#<name>``, and ``#data`` or ``#target``, so
``bob.search("#digits", "#data")`` finds it and the views show it as a dataset (the world entry
marker ``dataset_entry`` is registered with tensors/nodes.py here, in every process that imports
syft_lab: a worker's summary marks the parts it holds).

Federating a name again from the same kernel (a re-run cell) replaces the parts this kernel
loaded before; a dataset of that name that someone else loaded stays, and federate says so.
"""
from __future__ import annotations

import re
import sys

import torch
from torch.utils.data import Dataset, TensorDataset

from ..errors import SyftError, SyftTypeError, SyftValueError, NotFoundError, WorkerUnavailableError
from ..hook import register_methods
from ..tensors.nodes import register_entry_marker
from ..tensors.pointer import PointerTensor
from ..workers.base import BaseWorker, WorkerClosedError, closed_error, resolve_worker

# A part of a federated dataset is a tensor a worker holds with the tags DATASET_TAG, "#<name>"
# and one of DATASET_PARTS: search finds it PySyft's way (bob.search("#digits", "#data")) and the
# views show it as a dataset row (the ``dataset`` field of its world entry).
DATASET_TAG = "#dataset"
DATASET_PARTS = {"#data": "data", "#target": "targets"}


def dataset_of(tags, shape) -> dict | None:
    """The dataset a tensor with these tags is part of: name, part, samples, sample shape."""
    tags = set(tags)
    if DATASET_TAG not in tags:
        return None
    parts = [DATASET_PARTS[t] for t in tags if t in DATASET_PARTS]
    names = [t[1:] for t in tags - {DATASET_TAG} - set(DATASET_PARTS)]
    if len(parts) != 1 or len(names) != 1 or not shape:
        return None
    return {"name": names[0], "part": parts[0], "samples": shape[0], "sample_shape": list(shape[1:])}


def dataset_entry(meta: dict) -> dict | None:
    """The ``dataset`` field of a stored tensor's world entry, from its metadata (tags, shape)."""
    dataset = dataset_of(meta["tags"], meta["shape"])
    return {"dataset": dataset} if dataset is not None else None


register_entry_marker(dataset_entry)

DEFAULT_NAME = "federated"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_RESERVED = {t[1:] for t in (DATASET_TAG, *DATASET_PARTS)}
_TAG_OF_PART = {part: tag for tag, part in DATASET_PARTS.items()}
_DOWN = {"closed", "unreachable", "gone", "stopped", "dead"}  # "dead": a Ray worker whose actor died
# (worker id, dataset name) -> ids of the parts this process loaded: object ids are random 53-bit
# numbers, so finding exactly these on a worker means this kernel federated them (a re-run cell)
_loaded_here: dict[tuple[str, str], set[int]] = {}


def check_name(name) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name) or name in _RESERVED:
        raise SyftValueError(f"a dataset name is a short word such as 'digits' (letters, digits, _ . -; not "
                        f"{', '.join(sorted(_RESERVED))}), got {name!r}")
    return name


def check_alive(worker) -> None:
    """A clear error, before anything is sent, for a worker that went away: a closed one in the
    words of every request to it (``closed_error``), another one down with its state."""
    state = worker.state
    if state == "closed":
        raise closed_error(worker.id)
    if state in _DOWN:
        raise WorkerUnavailableError(f"worker {worker.id!r} is {state}: it cannot take part any more")


class BaseDataset(Dataset):
    """A torch ``Dataset`` of two tensors: ``data[i]`` (through ``transform``) and ``targets[i]``.

    The tensors may be here or, as PySyft's Part 7 builds them from search results, pointers to
    one worker (``sy.BaseDataset(data_ptr, target_ptr)``, or ``ds.send(bob)``): such a dataset is
    one worker's part of a ``sy.FederatedDataset([...])``."""

    def __init__(self, data: torch.Tensor, targets: torch.Tensor, transform=None, name: str | None = None):
        if not isinstance(data, torch.Tensor) or not isinstance(targets, torch.Tensor):
            raise SyftTypeError(f"BaseDataset takes two tensors (data, targets), got "
                                f"{type(data).__name__} and {type(targets).__name__}")
        if data.dim() == 0 or targets.dim() == 0 or len(data) != len(targets):
            raise SyftValueError(f"data and targets need one entry per sample: {len(data) if data.dim() else 0} "
                                 f"samples of data, {len(targets) if targets.dim() else 0} targets")
        if transform is not None and not callable(transform):
            raise SyftTypeError(f"transform is a function of one sample, got {type(transform).__name__}")
        remote = [isinstance(t, PointerTensor) for t in (data, targets)]
        if any(remote) and not (all(remote) and data.location is targets.location):
            raise SyftValueError("a BaseDataset's data and targets are both here or both pointers to one worker, got "
                                 f"{_where(data)} and {_where(targets)}")
        if any(remote) and transform is not None:
            raise SyftValueError("a transform runs here, before the data leaves (workers run no Python): "
                                 "give it to the BaseDataset of local tensors, then .send(worker) or .federate(...)")
        self.data, self.targets, self.transform = data, targets, transform
        self.name = None if name is None else check_name(name)

    @property
    def location(self):
        """The worker holding the data (a sent dataset), or None for local data."""
        return self.data.location if isinstance(self.data, PointerTensor) else None

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index):
        sample = self.data[index]
        return (self.transform(sample) if self.transform else sample), self.targets[index]

    def _local_tensors(self) -> tuple:
        """Data (through the transform, once per sample) and targets, ready to leave."""
        data = self.data if self.transform is None else torch.stack([self.transform(d) for d in self.data])
        return data, self.targets

    def send(self, worker) -> "BaseDataset":
        """A BaseDataset of pointers to copies of the data and targets on ``worker`` (this one is
        left as it is, as ``x.send`` leaves ``x``); the pointers own the copies. To leave data on a
        worker for good, found again by its tags, ``federate`` it instead."""
        worker = resolve_worker(worker)
        if self.location is not None:
            raise SyftValueError(f"this dataset is on {self.location.id!r} already: move its tensors, or "
                                 f"build the dataset from local tensors")
        check_alive(worker)
        data, targets = self._local_tensors()
        return BaseDataset(worker.send(data), worker.send(targets), name=self.name)

    def federate(self, workers, *, name: str | None = None, indices=None) -> "FederatedDataset":
        """Split the samples across ``workers`` and leave each slice on its worker (held by it).

        ``indices``: one sequence of sample indices per worker (disjoint), e.g. from
        ``sy.federated.split_by_label``; by default consecutive, near-equal slices (as PySyft).
        The transform runs here, once per sample, before the data leaves: workers run no Python.
        Federating ``name`` again from this kernel replaces the parts it loaded before."""
        if self.location is not None:
            raise SyftValueError(f"this dataset is on {self.location.id!r} already: it is one worker's part, "
                                 f"so put it in sy.FederatedDataset([...]) with the other workers' parts")
        workers = _check_workers(workers)
        name = check_name(name if name is not None else self.name or DEFAULT_NAME)
        n = len(self)
        if n < len(workers):
            raise SyftValueError(f"{n} sample(s) cannot be split across {len(workers)} workers "
                                 f"({', '.join(w.id for w in workers)}): each needs at least one")
        slices = _check_indices(indices, n, workers) if indices is not None \
            else list(torch.tensor_split(torch.arange(n), len(workers)))
        earlier = {}  # worker id -> the parts this kernel loaded before under this name
        for w in workers:
            check_alive(w)
            found = w.search(DATASET_TAG, f"#{name}")
            if found and {p.id_at_location for p in found} <= _loaded_here.get((w.id, name), set()):
                earlier[w.id] = found
            elif found:
                raise SyftError(f"worker {w.id!r} holds a dataset {name!r} that this kernel did not federate: use "
                                f"it (sy.FederatedDataset.from_workers(workers, {name!r})), unload it "
                                f"(fds.unload()), or federate this one under another name=")
        data, targets = self._local_tensors()
        parts, loaded = [], []
        try:
            for w, idx in zip(workers, slices):
                pointers = {}
                for part, tensor in (("data", data), ("targets", targets)):
                    pointers[part] = w.load(tensor[idx], tags=[DATASET_TAG, f"#{name}", _TAG_OF_PART[part]],
                                            description=f"{part} of dataset {name!r}: {len(idx)} of {n} samples")
                    loaded.append(pointers[part])
                parts.append(WorkerDataset(name, pointers["data"], pointers["targets"]))
        except BaseException:
            for p in loaded:  # nothing half-federated stays behind; the earlier parts are still there
                try:
                    p.location.unload(p)
                except Exception:
                    pass
            raise
        for w in workers:  # the new parts are in place: only now the earlier ones go
            for p in earlier.get(w.id, ()):
                w.unload(p)
        for d in parts:
            _loaded_here[(d.location.id, name)] = {d.data.id_at_location, d.targets.id_at_location}
        if earlier:
            print(f"syft: replaced dataset {name!r} on {', '.join(earlier)} (federated before from this kernel)",
                  file=sys.stdout)
        return FederatedDataset(parts)


def _where(t) -> str:
    return f"a pointer to {t.location.id!r}" if isinstance(t, PointerTensor) else "a local tensor"


def dataset_tensors(dataset) -> tuple:
    """(data, targets) of any map-style torch Dataset of (sample, target) pairs, stacked here: a
    TensorDataset's own two tensors, otherwise ``dataset[i]`` for every i (so a torchvision-style
    dataset's transform runs, as a DataLoader would run it)."""
    if isinstance(dataset, BaseDataset):
        return dataset._local_tensors()
    if isinstance(dataset, TensorDataset) and len(dataset.tensors) == 2:
        return dataset.tensors
    kind = type(dataset).__name__
    try:
        n = len(dataset)
    except TypeError:
        raise SyftTypeError(f"federate splits a map-style Dataset (with __len__ and __getitem__); a {kind} has no "
                            f"length") from None
    if n == 0:
        raise SyftValueError(f"this {kind} is empty: nothing to federate")
    samples, targets = [], []
    for i in range(n):
        pair = dataset[i]
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise SyftValueError(f"federate takes a dataset of (data, target) pairs; {kind}[{i}] is a "
                                 f"{type(pair).__name__}{f' of {len(pair)}' if isinstance(pair, (tuple, list)) else ''}")
        for value, into, what in ((pair[0], samples, "data"), (pair[1], targets, "target")):
            try:
                into.append(torch.as_tensor(value))
            except (TypeError, RuntimeError, ValueError):
                raise SyftTypeError(f"{kind}[{i}]'s {what} is a {type(value).__name__}, not a tensor or number: give "
                                    f"the dataset a transform that makes tensors (torchvision's ToTensor())") from None
    try:
        return torch.stack(samples), torch.stack(targets)
    except RuntimeError:
        shapes = sorted({tuple(t.shape) for t in samples} | {tuple(t.shape) for t in targets})
        raise SyftValueError(f"the samples of this {kind} differ in shape ({shapes[:4]}): federate stacks them "
                             f"into one tensor per worker, so make them one shape (a transform)") from None


def federate_dataset(dataset, workers, *, name: str | None = None, indices=None) -> "FederatedDataset":
    """``dataset.federate(workers)`` for any torch Dataset (sy.hook() adds it, as PySyft did):
    a TensorDataset, a torchvision-style dataset, a Dataset subclass of (sample, target) pairs.
    The samples are read here (through the dataset's own transform), then federated as a
    BaseDataset's (see ``BaseDataset.federate``)."""
    data, targets = dataset_tensors(dataset)
    return BaseDataset(data, targets).federate(workers, name=name, indices=indices)


register_methods(Dataset, {"federate": federate_dataset})


def _check_workers(workers) -> list:
    if isinstance(workers, (BaseWorker, str)):
        workers = [workers]
    workers = list(workers or ())
    if not workers:
        raise SyftValueError("federate needs at least one worker, e.g. ds.federate((bob, alice))")
    workers = [resolve_worker(w, "each of federate's workers") for w in workers]
    ids = [w.id for w in workers]
    if len(set(ids)) != len(ids):
        raise SyftValueError(f"each worker may appear once, got {ids}")
    return workers


def _check_indices(indices, n, workers) -> list:
    indices = [torch.as_tensor(i, dtype=torch.long).reshape(-1) for i in indices]
    if len(indices) != len(workers):
        raise SyftValueError(f"indices= gives one index sequence per worker: {len(indices)} for {len(workers)} workers")
    seen = torch.cat(indices)
    if len(seen) and (seen.min() < 0 or seen.max() >= n):
        raise SyftValueError(f"indices must lie in 0..{n - 1}")
    if len(seen.unique()) != len(seen):
        raise SyftValueError("indices= must not give one sample to two workers (or twice)")
    empty = [w.id for w, i in zip(workers, indices) if len(i) == 0]
    if empty:
        raise SyftValueError(f"indices= gives no sample to {', '.join(empty)}")
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
            raise SyftValueError(f"a worker dataset's data and targets must be on one worker, got "
                            f"{data.location.id!r} and {targets.location.id!r}")
        if data.shape[0] != targets.shape[0]:
            raise SyftValueError(f"dataset {name!r} on {data.location.id!r} has {data.shape[0]} samples of data "
                            f"but {targets.shape[0]} targets")
        self.name, self.data, self.targets = name, data, targets

    @property
    def location(self):
        return self.data.location

    def _inspection_items(self):
        """What the views name its pointers by: ``fds['bob'].data``, ``fds['bob'].targets``."""
        return ((".data", self.data), (".targets", self.targets))

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
            # made by a call: a paused epoch holds no pointer (its index tensor's would stay on
            # the worker, unnamed in the views, after the notebook let go of the batch)
            yield self._batch(order[start:start + batch_size])

    def _batch(self, indices: torch.Tensor):
        index = self.location.send(indices)
        return self.data.index_select(0, index), self.targets.index_select(0, index)

    def num_batches(self, batch_size: int, drop_last: bool = False) -> int:
        return len(self) // batch_size if drop_last else -(-len(self) // batch_size)

    def unload(self) -> None:
        """Remove this part from its worker."""
        for p in (self.data, self.targets):
            self.location.unload(p)
        _loaded_here.pop((self.location.id, self.name), None)

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


# ``bob.datasets["digits"]`` (README, notebook 07): the accessor lives here, beside the datasets;
# the workers package sits below federated and knows nothing of datasets
BaseWorker.datasets = property(worker_datasets, doc="The datasets this worker holds (``ds.federate``), by "
                                                    "name: ``bob.datasets[\"digits\"]``.")


def _worker_part(d) -> "WorkerDataset":
    """One worker's part: a WorkerDataset, or a BaseDataset of pointers to one worker."""
    if isinstance(d, WorkerDataset):
        return d
    if isinstance(d, BaseDataset) and d.location is not None:
        return WorkerDataset(d.name or DEFAULT_NAME, d.data, d.targets)
    if isinstance(d, BaseDataset):
        raise SyftValueError("a FederatedDataset's parts are on workers: this BaseDataset is local, so "
                             "ds.send(worker) it first, or ds.federate(workers) it whole")
    raise SyftTypeError(f"a FederatedDataset is made of per-worker datasets (BaseDatasets of pointers, "
                        f"ds.send(worker), or the parts of ds.federate(workers)), got {type(d).__name__}")


class FederatedDataset:
    """A dataset split across workers: one ``WorkerDataset`` per worker, by worker id.

    ``sy.FederatedDataset([bob_part, alice_part])`` builds one from per-worker datasets (PySyft's
    Part 7): BaseDatasets of pointers (``sy.BaseDataset(data_ptr, target_ptr)``, ``ds.send(bob)``)."""

    def __init__(self, datasets):
        datasets = [_worker_part(d) for d in (datasets.values() if isinstance(datasets, dict) else datasets)]
        if not datasets:
            raise SyftValueError("a FederatedDataset needs at least one worker's dataset")
        self.datasets = {}
        for d in datasets:
            if d.location.id in self.datasets:
                raise SyftValueError(f"worker {d.location.id!r} appears twice in the federated dataset")
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
                raise NotFoundError(f"worker {w.id!r} holds no dataset {name!r} (it holds: "
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
            raise NotFoundError(f"no part of this dataset is on {worker_id!r}; workers: "
                                     f"{', '.join(self.datasets)}") from None

    def __iter__(self):
        return iter(self.datasets.values())

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets.values())

    @property
    def counts(self) -> dict[str, int]:
        """Samples per worker: the weights of ``sy.federated_avg``."""
        return {w: len(d) for w, d in self.datasets.items()}

    def unload(self) -> None:
        """Remove every part from its worker. A part on a closed worker stays there (a closed
        worker takes no request): the others go, then a SyftError names what stayed."""
        kept = []
        for d in self.datasets.values():
            try:
                d.unload()
            except WorkerClosedError as e:
                kept.append(f"the part on {d.location.id!r} stays ({e})")
        if kept:
            what = f"dataset {self.name!r}" if self.name else "the dataset"
            raise SyftError(f"{what} was unloaded from its other workers; " + "; ".join(kept))

    def _inspection_items(self):
        """Its parts, by the paths a person writes (``fds['bob']``)."""
        return ((f"[{w!r}]", d) for w, d in dict.items(self.datasets))

    def __repr__(self):
        parts = ", ".join(f"{w} ({len(d)})" for w, d in self.datasets.items())
        return f"<FederatedDataset {self.name!r}: {len(self)} samples on {parts}>"
