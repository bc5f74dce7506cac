"""Per-worker quotas: how much memory and how many objects a worker's clients may make it hold.

Before an op runs, its output size is estimated by running it on meta tensors (shapes, strides
and dtypes only, no data), memoised on the op and its inputs' metadata as PyTorch's DTensor
does; a factory's size comes from its size arguments the same way. The estimate plus what the
worker holds must fit ``Limits.max_bytes``; the op's outputs plus the stored objects must fit
``Limits.max_objects``. What the worker holds is counted per storage (views share one), so
``StorageLedger`` counts a storage once however many stored tensors view it.
"""
from __future__ import annotations

import math
import os
import re
import resource
import threading
from dataclasses import dataclass

import torch

from ..errors import QuotaExceededError
from ..tensors.registry import MAX_DIM_SIZE, MAX_DIMS
from ..wire.meta import run_on_meta, to_meta

GiB = 2**30
DEFAULT_MAX_OBJECTS = 100_000
DEFAULT_MAX_OP_SECONDS = 30.0  # an expensive op still running then is stopped (workers/forked.py)
_MEMO_SIZE = 8192


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 16 * GiB


UNLIMITED_CGROUP = 2**62  # cgroup v1 writes "no limit" as 2**63 - 4096 (PAGE_COUNTER_MAX pages)


def _own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup``: controller -> this process's cgroup path; cgroup v2's under ""."""
    out = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                out[controller] = parts[2]
    return out


def _cgroup_mounts(text: str) -> list[tuple[str, str, str, set]]:
    """``/proc/self/mountinfo``: (fstype, mount root, mount point, super options) of cgroup mounts."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rest = left.split(), right.split()
        if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
            mounts.append((rest[0], fields[3], fields[4], set(rest[2].split(","))))
    return mounts


def _limit_walking_up(mount_point: str, mount_root: str, cgroup: str, filename: str) -> int | None:
    """The smallest limit in ``filename`` from this process's cgroup up to the mount's top: a
    parent's limit binds its children (v1 with use_hierarchy, always in v2)."""
    if not (cgroup == mount_root or cgroup.startswith(mount_root.rstrip("/") + "/")):
        return None  # our cgroup is outside what this mount shows (another namespace)
    rel = cgroup[len(mount_root.rstrip("/")):].strip("/")
    parts = rel.split("/") if rel else []
    found = None
    for depth in range(len(parts), -1, -1):
        path = os.path.join(mount_point, *parts[:depth], filename)
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < UNLIMITED_CGROUP:
            found = int(text) if found is None else min(found, int(text))
    return found


def cgroup_memory_limit(proc_cgroup: str | None = None, mountinfo: str | None = None) -> tuple[int, str] | None:
    """This process's cgroup memory limit and where it was read, or None: cgroup v1's
    ``memory.limit_in_bytes`` under the memory controller's mount, cgroup v2's ``memory.max``,
    each for the process's own cgroup (``/proc/self/cgroup``) and its ancestors."""
    try:
        if proc_cgroup is None:
            with open("/proc/self/cgroup") as f:
                proc_cgroup = f.read()
        if mountinfo is None:
            with open("/proc/self/mountinfo") as f:
                mountinfo = f.read()
    except OSError:
        return None
    own = _own_cgroups(proc_cgroup)
    best = None
    for fstype, root, point, options in _cgroup_mounts(mountinfo):
        if fstype == "cgroup" and "memory" in options and "memory" in own:
            limit = _limit_walking_up(point, root, own["memory"], "memory.limit_in_bytes")
            where = f"cgroup v1 {os.path.join(point, own['memory'].lstrip('/'))}"
        elif fstype == "cgroup2" and "" in own:
            limit = _limit_walking_up(point, root, own[""], "memory.max")
            where = f"cgroup v2 {os.path.join(point, own[''].lstrip('/'))}"
        else:
            continue
        if limit is not None and (best is None or limit < best[0]):
            best = (limit, where)
    return best


def _address_space_left() -> int | None:
    """What RLIMIT_AS (``ulimit -v``) leaves this process beyond what it maps already."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        used = 0
    return max(soft - used, 0)


def memory_limits() -> list[tuple[int, str]]:
    """Every bound found on this process's memory, with where it comes from."""
    found = [(_physical_memory(), "physical memory")]
    cgroup = cgroup_memory_limit()
    if cgroup is not None:
        found.append(cgroup)
    left = _address_space_left()
    if left is not None:
        found.append((left, "RLIMIT_AS left"))
    return found


def default_budget() -> tuple[int, str]:
    """``(bytes, where it comes from)``: 8 GiB, or half of the tightest bound on this process's
    memory if that is less (physical memory, its cgroup's limit, what RLIMIT_AS leaves). Half,
    because torch itself, its allocator and uncounted temporaries take some."""
    limit, where = min(memory_limits())
    if limit // 2 >= 8 * GiB:
        return 8 * GiB, "the default"
    return limit // 2, f"half of {fmt_bytes(limit)}: {where}"


def default_max_bytes() -> int:
    return default_budget()[0]


@dataclass(frozen=True)
class Limits:
    """A worker's quotas. ``Limits()`` takes the defaults (see ``default_max_bytes``)."""

    max_bytes: int | None = None
    max_objects: int = DEFAULT_MAX_OBJECTS
    source: str = "given"  # where max_bytes comes from (the default says which bound it halves)
    # seconds an expensive op may run before it is stopped; None: never stopped (only the per-op
    # cost bound holds), as in a Ray actor, whose threads a fork must not copy
    max_op_seconds: float | None = DEFAULT_MAX_OP_SECONDS

    def __post_init__(self):
        if self.max_bytes is None:
            budget, source = default_budget()
            object.__setattr__(self, "max_bytes", budget)
            object.__setattr__(self, "source", source)
        if type(self.max_bytes) is not int or self.max_bytes <= 0:
            raise ValueError(f"max_bytes must be a positive number of bytes, got {self.max_bytes!r}")
        if type(self.max_objects) is not int or self.max_objects <= 0:
            raise ValueError(f"max_objects must be a positive integer, got {self.max_objects!r}")
        if self.max_op_seconds is not None and not (type(self.max_op_seconds) in (int, float)
                                                    and 0 < self.max_op_seconds < float("inf")):
            raise ValueError(f"max_op_seconds must be a positive number of seconds or None, "
                             f"got {self.max_op_seconds!r}")


def fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


# --- what the worker holds -------------------------------------------------------------------

def storages_of(obj):
    """The CPU storages an object keeps alive: a tensor's, a chain layer's innermost tensor's."""
    while obj is not None:
        if type(obj) is torch.Tensor or type(obj) is torch.nn.Parameter:
            yield obj.untyped_storage()
            return
        if isinstance(obj, torch.Tensor):
            obj = getattr(obj, "child", None)  # a chain layer (LoggingTensor): its data is its child's
            continue
        return  # a pointer (no local data), a plan (its state is stored separately), other


# Python-side memory of what a worker stores, beyond tensor bytes. Measured (tracemalloc, and the
# worker's RSS; issue 37): a log record is 110-200 B plus ~120 B per tensor input plus 8 B per
# dimension of its shape (32 more per dimension past 256, an int object each), so a record of
# three 8-dimensional inputs takes 665 B where a flat 320 B per record was counted; a stored plan
# of 100k nodes held ~2.2 KB per node in RSS after its first runs (parsed graph, compiled program,
# learned verdicts; 11 MB of JSON), where 8x its JSON text (~0.9 KB a node) was counted.
TAG_BYTES = 64  # a str object, plus its characters
LOG_RECORD_BYTES = 200  # a record's own objects (a tuple or an OpRecord, its inputs' container, slack)
LOG_INPUT_BYTES = 128  # per tensor input: its (shape, dtype) pair and the torch.Size
LOG_DIM_BYTES = 8  # per dimension of an input's shape (a slot of the torch.Size)
LOG_BIG_DIM_BYTES = 32  # per dimension past 256 (not a cached small int: an object of its own)
PLAN_EXPANSION = 10  # a stored plan, per byte of its JSON text (graph objects and their arguments)
PLAN_NODE_BYTES = 2560  # and at least this per node (program, slots and verdicts a replay adds)


def log_record_bytes(e) -> int:
    """The Python-side size of one raw log record: a ``(func, inputs, graph task id, cell)``
    tuple appended by an op, or an OpRecord decoded from the wire or a pickle."""
    if type(e) is tuple:
        inputs = e[1] if len(e) > 1 else ()
        n = LOG_RECORD_BYTES
    else:
        inputs = getattr(e, "inputs", ())
        func = getattr(e, "func", None)
        n = LOG_RECORD_BYTES + (len(func) + TAG_BYTES if type(func) is str else 0)
    for i in inputs:
        n += LOG_INPUT_BYTES
        shape = i[0] if type(i) is tuple and i else ()
        for d in shape:
            n += LOG_DIM_BYTES if -5 <= d <= 256 else LOG_DIM_BYTES + LOG_BIG_DIM_BYTES
    return n


def _plan_bytes(obj, given: int) -> int:
    """A stored plan's size: its JSON-based size (``given``), at least PLAN_NODE_BYTES per node."""
    builds = getattr(obj, "builds", None)
    graphs = getattr(builds, "graphs", None)
    if type(graphs) is not list:
        return given
    return max(given, PLAN_NODE_BYTES * sum(len(getattr(g, "nodes", ())) for g in graphs))


def python_bytes(obj, log_sizes: dict | None = None, sized: bool = True) -> list[tuple[int, int]]:
    """``(key, bytes)`` of the Python objects a stored object keeps: the tags and description of
    each layer, a LoggingTensor's log (keyed by the log, which results share; sized record by
    record, and with ``log_sizes`` (a ledger's) only the records added since it was last sized),
    and a size set as ``_python_bytes`` by whoever stored it (a plan's, from its JSON text, at
    least PLAN_NODE_BYTES per node). ``sized=False``: the keys only (sizes 0), in O(1)."""
    out = []
    while obj is not None:
        tags, description = getattr(obj, "tags", None), getattr(obj, "description", None)
        n = (sum(len(t) + TAG_BYTES for t in tags if type(t) is str) if isinstance(tags, (set, list)) else 0)
        n += len(description) if type(description) is str else 0
        if n:
            out.append((id(obj), n))
        given = getattr(obj, "_python_bytes", None)  # set by whoever stores it (a plan: from its JSON text)
        if type(given) is int and given > 0:
            out.append((-id(obj), _plan_bytes(obj, given) if sized else 0))
        log = getattr(obj, "log", None)
        if type(log) is not list and isinstance(log, list):  # a LoggingTensor's OpLog
            out.append((id(log), log_bytes(log, log_sizes) if sized else 0))
        obj = getattr(obj, "child", None) if isinstance(obj, torch.Tensor) else None
    return out


def log_bytes(log: list, log_sizes: dict | None = None) -> int:
    """A log's size, record by record; ``log_sizes`` (id(log) -> [log, records sized, bytes])
    remembers how far it was sized, so a log that grows by one record per op is sized in O(1)."""
    entry = log_sizes.get(id(log)) if log_sizes is not None else None
    if entry is None or entry[0] is not log:
        entry = [log, 0, 0]
        if log_sizes is not None:
            log_sizes[id(log)] = entry
    length = len(log)
    if length > entry[1]:
        get = list.__getitem__  # (the raw records: an OpLog's own __getitem__ makes OpRecords)
        entry[2] += sum(log_record_bytes(get(log, i)) for i in range(entry[1], length))
        entry[1] = length
    return entry[2]


class StorageLedger:
    """Bytes held by stored objects, each storage counted once (views share one), plus the
    Python-side size of their tags, descriptions, logs and plans (each counted once too)."""

    __slots__ = ("_storages", "_extras", "_log_sizes", "bytes")

    def __init__(self):
        self._storages: dict[int, list] = {}  # data_ptr -> [nbytes, number of stored objects using it]
        self._extras: dict[int, list] = {}  # id of a Python object -> [bytes counted, users]
        self._log_sizes: dict[int, list] = {}  # id of a stored log -> [the log, records sized, bytes]
        self.bytes = 0

    def add(self, obj) -> None:
        for s in storages_of(obj):
            key = s.data_ptr()
            entry = self._storages.get(key)
            if entry is None:
                n = s.nbytes()
                self._storages[key] = [n, 1]
                self.bytes += n
            else:
                entry[1] += 1
        self._count_extras(obj, 1)

    def refresh(self, obj) -> None:
        """Count what a stored object's Python side grew by since it was counted (an in-place op
        on a LoggingTensor appends to its log and stores nothing new)."""
        self._count_extras(obj, 0)

    def _count_extras(self, obj, users: int) -> None:
        for key, n in python_bytes(obj, self._log_sizes):
            entry = self._extras.get(key)
            if entry is None:
                if not users:  # (not stored: nothing to refresh, no size to remember)
                    self._log_sizes.pop(key, None)
                    continue
                self._extras[key] = [n, users]
                self.bytes += n
            else:  # a log that grew since: counted at its size now
                self.bytes += max(n - entry[0], 0)
                entry[0], entry[1] = max(n, entry[0]), entry[1] + users

    def remove(self, obj) -> None:
        for s in storages_of(obj):
            key = s.data_ptr()
            entry = self._storages.get(key)
            if entry is None:
                continue
            entry[1] -= 1
            if entry[1] == 0:
                del self._storages[key]
                self.bytes -= entry[0]
        for key in {key for key, _ in python_bytes(obj, sized=False)}:
            entry = self._extras.get(key)
            if entry is None:
                continue
            entry[1] -= 1
            if entry[1] == 0:
                del self._extras[key]
                self._log_sizes.pop(key, None)
                self.bytes -= entry[0]


class MemoryBudget:
    """One memory budget for everything a worker holds: its stored objects (the ledger) and
    what is in flight (reserved): messages being received or waiting for the command thread,
    replies being sent. ``reserve`` and ``release`` may be called from any thread."""

    def __init__(self, limits: Limits, ledger: StorageLedger):
        self.limits, self.ledger = limits, ledger
        self.reserved = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self.ledger.bytes + self.reserved

    def reserve(self, nbytes: int, what: str) -> None:
        with self._lock:
            if self.ledger.bytes + self.reserved + nbytes > self.limits.max_bytes:
                raise QuotaExceededError(
                    f"{what} needs {fmt_bytes(nbytes)} while the worker holds {fmt_bytes(self.ledger.bytes)} and "
                    f"has {fmt_bytes(self.reserved)} in flight, of its {fmt_bytes(self.limits.max_bytes)} memory "
                    f"limit: refused before anything was allocated. Release objects you no longer need, send or "
                    f"fetch smaller pieces, or start the worker with a larger --max-memory")
            self.reserved += nbytes

    def try_hold(self, nbytes: int) -> bool:
        """Count ``nbytes`` as held if they fit the limit with what is held now; False if not."""
        with self._lock:
            if self.ledger.bytes + self.reserved + nbytes > self.limits.max_bytes:
                return False
            self.reserved += nbytes
            return True

    def hold(self, nbytes: int) -> None:
        """Count memory that exists already (an object taken out of the store, still being sent)."""
        with self._lock:
            self.reserved += nbytes

    def release(self, nbytes: int) -> None:
        with self._lock:
            self.reserved -= nbytes


# --- what an op will make ----------------------------------------------------------------------

def _key(a):
    if isinstance(a, torch.Tensor):
        return (a.shape, a.stride(), a.dtype)  # a torch.Size hashes and compares as a tuple
    if type(a) in (list, tuple):
        return tuple([_key(b) for b in a])
    if type(a) is float and a != a:
        return "nan"
    return a


# ops returning a list whose length follows from their arguments: counted before any meta run
def _dim_size(t, dim):
    return t.shape[dim] if t.dim() else 1


def _count_unbind(args, kwargs):
    return _dim_size(args[0], args[1] if len(args) > 1 else (kwargs or {}).get("dim", 0))


def _count_split(args, kwargs):
    size = args[1] if len(args) > 1 else (kwargs or {}).get("split_size")
    dim = args[2] if len(args) > 2 else (kwargs or {}).get("dim", 0)
    if type(size) in (list, tuple):
        return len(size)
    return math.ceil(_dim_size(args[0], dim) / size) if type(size) is int and size > 0 else 0


def _count_chunk(args, kwargs):
    chunks = args[1] if len(args) > 1 else (kwargs or {}).get("chunks")
    dim = args[2] if len(args) > 2 else (kwargs or {}).get("dim", 0)
    if type(chunks) is not int or chunks <= 0:
        return 0
    size = _dim_size(args[0], dim)
    return chunks if size == 0 else min(chunks, size)  # (an empty dimension gives `chunks` empty pieces)


_COUNTS = {
    "aten.chunk.default": _count_chunk,
    "aten.unbind.int": _count_unbind,
    "aten.split.Tensor": _count_split,
    "aten.unsafe_split.Tensor": _count_split,
    "aten.unsafe_chunk.default": _count_chunk,
    "aten.split.sizes": _count_split,
    "aten.split_with_sizes.default": _count_split,
    "aten.split_copy.Tensor": _count_split,
    "aten.unbind_copy.int": _count_unbind,
    "aten.unsafe_split_with_sizes.default": _count_split,
    "aten.split_with_sizes_copy.default": _count_split,
}


class Estimate:
    """``new_bytes``: memory the op makes (new outputs, workspace); ``outputs``: its tensors;
    ``uncarriable``: why the wire could not carry an output (65 dimensions), or None."""

    __slots__ = ("new_bytes", "outputs", "uncarriable")

    def __init__(self, new_bytes: int, outputs: int, uncarriable: str | None = None):
        self.new_bytes, self.outputs, self.uncarriable = new_bytes, outputs, uncarriable


def uncarriable(t: torch.Tensor) -> str | None:
    """Why the wire format could not carry tensor ``t`` (its shape), or None."""
    shape = t.shape
    if len(shape) > MAX_DIMS:
        return f"a tensor of {len(shape)} dimensions (the wire carries at most {MAX_DIMS})"
    if shape and max(shape) > MAX_DIM_SIZE:
        return f"a dimension of size {max(shape)} (the wire carries at most {MAX_DIM_SIZE})"
    return None


_UNKNOWN = Estimate(0, 0)

# id(op) -> (op, its name, whether it only returns a view), for the checks every op of a worker runs:
# str(op) and op._schema.returns are Python work (~1 us each). The entry keeps the op alive, so
# its id is never reused.
_op_info: dict[int, tuple] = {}


def _info(op) -> tuple:
    entry = _op_info.get(id(op))
    if entry is None or entry[0] is not op:
        aliases = [r.alias_info for r in op._schema.returns if r.alias_info is not None]
        # a view computes nothing; an in-place op (``Tensor(a!)``) aliases its input too, but writes every
        # element of it: rrelu_ into a 2**31-element broadcast view makes temporaries at that size
        only_a_view = bool(aliases) and not any(a.is_write for a in aliases)
        entry = _op_info[id(op)] = (op, str(op), only_a_view)
    return entry


def _repeat_interleave_bytes(op, args, kwargs) -> int:
    """repeat_interleave with tensor repeats: its size is in the data (a meta run cannot tell)."""
    name = str(op)
    repeats = args[0] if name == "aten.repeat_interleave.Tensor" else (args[1] if len(args) > 1 else None)
    if not isinstance(repeats, torch.Tensor) or repeats.is_floating_point() or repeats.is_complex():
        return 0  # the op refuses it itself
    total = int(repeats.sum()) if repeats.numel() else 0
    if name == "aten.repeat_interleave.Tensor":
        return max(total, 0) * 8
    x = args[0]
    per_repeat = x.numel() if repeats.numel() == 1 else x.numel() // max(repeats.numel(), 1)
    return max(total, 0) * max(per_repeat, 1) * x.element_size()


def _broadcast_numel(tensors) -> int:
    try:
        return math.prod(torch.broadcast_shapes(*[t.shape for t in tensors]))
    except RuntimeError:
        return 0  # the op refuses it itself


def _nonzero_bytes(op, args, kwargs) -> int:
    """nonzero/argwhere: at most one int64 index per element and dimension, known before running
    (a bool of 9M elements and 64 dimensions may make 4.6 GB of indices)."""
    x = args[0]
    return x.numel() * max(x.dim(), 1) * 8


def _masked_select_bytes(op, args, kwargs) -> int:
    return _broadcast_numel(args[:2]) * args[0].element_size()


def _unique_bytes(op, args, kwargs) -> int:
    """The values, and at most as many inverse indices and counts."""
    x = args[0]
    return x.numel() * (x.element_size() + 16)


def _bins_estimate(op, args, kwargs) -> Estimate:
    """An op with an int (or int list) ``bins`` makes a count per bin of each dimension and each
    dimension's edges, whatever its data (its meta run cannot tell: the edges come from the data):
    histc and histogram count along one dimension, histogramdd along each of the input's last
    dimension's D (an int ``bins`` is each dimension's). histogramdd.int_bins(x of [0, 5], 2**31 - 1)
    asked for (2**31)**5 counts and the cgroup killed the worker (the seed-48 fuzz)."""
    index = _bins_index(op)
    bins = args[index] if index < len(args) else (kwargs or {}).get("bins")
    x = args[0]
    if not isinstance(x, torch.Tensor):
        return _UNKNOWN
    if type(bins) is int:
        dims = x.shape[-1] if "histogramdd" in _info(op)[1] and x.dim() >= 1 else 1
        bins = [bins] * dims
    if type(bins) not in (list, tuple) or not all(type(b) is int for b in bins):
        return _UNKNOWN  # the op refuses it itself
    counts = math.prod(max(b, 0) for b in bins) if bins else 0
    return Estimate((counts + sum(max(b, 0) + 1 for b in bins)) * x.element_size(), 1 + len(bins))


_bins_args: dict[int, tuple] = {}


def _bins_index(op) -> int:
    """The position of ``op``'s int or int-list ``bins`` argument, or -1."""
    entry = _bins_args.get(id(op))
    if entry is None or entry[0] is not op:
        index = next((i for i, a in enumerate(op._schema.arguments) if a.name == "bins"
                      and str(a.type) in ("int", "List[int]", "int[]", "SymInt", "List[SymInt]")), -1)
        entry = _bins_args[id(op)] = (op, index)
    return entry[1]


_DATA_SIZED = {"aten.repeat_interleave.Tensor": _repeat_interleave_bytes,
               "aten.repeat_interleave.self_Tensor": _repeat_interleave_bytes,
               "aten.nonzero.default": _nonzero_bytes, "aten.argwhere.default": _nonzero_bytes,
               "aten.nonzero_numpy.default": _nonzero_bytes,
               "aten.masked_select.default": _masked_select_bytes,
               "aten._unique2.default": _unique_bytes, "aten.unique_dim.default": _unique_bytes,
               "aten.unique_consecutive.default": _unique_bytes, "aten._unique.default": _unique_bytes}


# --- workspace: memory an op allocates beyond its outputs -------------------------------------

def _conv_columns(inp, weight, out_spatial, transposed: bool) -> int:
    """The im2col columns buffer of CPU convolution (slow_conv2d/3d and their transposes): one
    column of in_channels x kernel elements per output position, for the whole batch."""
    if inp.dim() < 3 or weight.dim() != inp.dim():
        return 0
    kernel = math.prod(weight.shape[2:])
    batch = inp.shape[0]
    if transposed:  # columns over the input's positions, out_channels x kernel each
        channels, positions = weight.shape[1] * max(inp.shape[1] // max(weight.shape[0], 1), 1), inp.shape[2:]
    else:
        channels, positions = inp.shape[1], out_spatial
    return batch * channels * kernel * math.prod(positions) * inp.element_size()


def _convolution_workspace(margs, mkw, outs) -> int:
    inp, weight = margs[0], margs[1]
    transposed = margs[6] if len(margs) > 6 and type(margs[6]) is bool else False
    if not (isinstance(inp, torch.Tensor) and isinstance(weight, torch.Tensor)) or not outs:
        return 0
    return _conv_columns(inp, weight, outs[0].shape[2:], transposed)


def _plain_conv_workspace(margs, mkw, outs) -> int:  # conv1d/2d/3d(input, weight, ...)
    inp, weight = margs[0], margs[1]
    if not (isinstance(inp, torch.Tensor) and isinstance(weight, torch.Tensor)) or not outs:
        return 0
    return _conv_columns(inp, weight, outs[0].shape[2:], False)


def _conv_backward_workspace(margs, mkw, outs) -> int:
    """convolution_backward: columns for the input's gradient and again for the weight's."""
    grad_out, inp, weight = margs[0], margs[1], margs[2]
    transposed = margs[7] if len(margs) > 7 and type(margs[7]) is bool else False
    if not all(isinstance(t, torch.Tensor) for t in (grad_out, inp, weight)):
        return 0
    return 2 * _conv_columns(inp, weight, grad_out.shape[2:], transposed)


def _mvlgamma_workspace(margs, mkw, outs) -> int:
    """mvlgamma(x, p) computes lgamma of x.unsqueeze(-1) + arange(p): an arange of p, then
    numel(x) x p temporaries (twice: the sum and its lgamma) before reducing them, whatever its
    output's size (an empty x still makes the arange)."""
    x = margs[0]
    p = margs[1] if len(margs) > 1 else mkw.get("p")
    if not isinstance(x, torch.Tensor) or type(p) is not int or p <= 0:
        return 0
    return (2 * x.numel() + 1) * p * max(x.element_size(), 4)


_WORKSPACE = {"aten.mvlgamma.default": _mvlgamma_workspace, "aten.mvlgamma_.default": _mvlgamma_workspace,
              "aten.special_multigammaln.default": _mvlgamma_workspace,  # (torch.special's alias of mvlgamma)
              "aten.convolution.default": _convolution_workspace, "aten._convolution.default": _convolution_workspace,
              "aten.conv1d.default": _plain_conv_workspace, "aten.conv2d.default": _plain_conv_workspace,
              "aten.conv3d.default": _plain_conv_workspace,
              "aten.convolution_backward.default": _conv_backward_workspace}


class OutputEstimator:
    """Output bytes and count of an op, from a memoised run on meta tensors."""

    def __init__(self):
        self._memo: dict = {}

    def estimate(self, op, args, kwargs) -> Estimate:
        """The op's new bytes (outputs that alias an input count 0) and its number of tensor
        outputs. Unknown (0, 0) when the op has no meta kernel or its output depends on data;
        ``WorkerCore`` then checks the result after the op instead."""
        name = _info(op)[1]
        data_sized = _DATA_SIZED.get(name)
        if data_sized is not None:
            return Estimate(data_sized(op, args, kwargs), 1)
        if _bins_index(op) >= 0:
            return _bins_estimate(op, args, kwargs)
        try:  # keyed by the op's name: an OpOverload hashes in Python
            key = (name, _key(args), tuple((k, _key(v)) for k, v in kwargs.items()) if kwargs else None)
            hash(key)
        except (TypeError, RuntimeError):
            key = None
        if key is not None:
            hit = self._memo.get(key)
            if hit is not None:
                return hit
        est = self._run_on_meta(op, args, kwargs)
        if key is not None:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
            self._memo[key] = est
        return est

    def _run_on_meta(self, op, args, kwargs) -> Estimate:
        schema = op._schema
        margs = [to_meta(a) for a in args]
        mkw = {k: to_meta(v) for k, v in kwargs.items()} if kwargs else {}
        try:
            out = run_on_meta(op, margs, mkw)
        except Exception:  # no meta kernel, data-dependent output, or bad arguments: the real run decides,
            return _sized_by_int_lists(schema, margs, mkw)  # bounded by the sizes its int lists name
        outs = out if type(out) in (list, tuple) else [out]
        aliased = [r.alias_info is not None for r in schema.returns]
        writes = [r.alias_info is not None and r.alias_info.is_write for r in schema.returns] + [False] * len(outs)
        inputs = {a.untyped_storage()._cdata for a in _tensors_in([*margs, *mkw.values()])}
        new_bytes = count = 0
        why = None
        for i, o in enumerate(outs):
            if isinstance(o, torch.Tensor):
                count += 1
                why = why or uncarriable(o)
                # an output that may alias an input (contiguous, reshape) is new memory unless it
                # shares that input's storage: contiguous of an expand materialises it
                may_alias = aliased[i] if i < len(aliased) else aliased and aliased[-1]
                if not (may_alias and o.untyped_storage()._cdata in inputs):
                    new_bytes += _nbytes(o)
                elif writes[i] and o.numel() * o.element_size() > o.untyped_storage().nbytes():
                    # a write into a broadcast view: some ops (rrelu_) make temporaries at its full size
                    # before torch refuses the overlapping write
                    new_bytes += o.numel() * o.element_size()
        workspace = _WORKSPACE.get(_info(op)[1])
        if workspace is not None:
            new_bytes += workspace(margs, mkw, [o for o in outs if isinstance(o, torch.Tensor)])
        return Estimate(new_bytes, count, why)


_SIZE_LIST = re.compile(r"(^|_)(size|sizes|shape)$")


def _sized_by_int_lists(schema, margs, mkw) -> Estimate:
    """An op whose meta run cannot tell may still allocate before it checks anything:
    _pack_padded_sequence_backward makes zeros(input_size) first, then reads batch_sizes' data
    (count the largest ``*size``/``*sizes``/``*shape`` int list as an output of the widest
    argument dtype); rrelu_ into a broadcast view makes temporaries at the view's full size, then
    refuses the overlapping write the meta run met first (count the written view). Unknown (0, 0)
    when neither says anything."""
    largest = written = 0
    for i, a in enumerate(schema.arguments):
        v = margs[i] if i < len(margs) else mkw.get(a.name)
        if a.alias_info is not None and a.alias_info.is_write and isinstance(v, torch.Tensor):
            if v.numel() * v.element_size() > v.untyped_storage().nbytes():
                written = max(written, v.numel() * v.element_size())
        elif _SIZE_LIST.search(a.name) and str(a.type).startswith(("int[", "SymInt[", "List[int]")):
            if type(v) in (list, tuple) and v and all(type(n) is int for n in v):
                largest = max(largest, math.prod(abs(n) for n in v))
    if not (largest or written):
        return _UNKNOWN
    width = max((t.element_size() for t in _tensors_in([*margs, *mkw.values()])), default=8)
    return Estimate(max(largest * width, written), 1)


def _nbytes(t: torch.Tensor) -> int:
    if t.numel() == 0:
        return 0
    extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return extent * t.element_size()


def output_count(op, args, kwargs) -> int | None:
    """The number of tensors an op returns, where its arguments tell it cheaply."""
    count = _COUNTS.get(_info(op)[1])
    if count is None:
        return None
    try:
        return count(args, kwargs)
    except (IndexError, TypeError, AttributeError, ZeroDivisionError):
        return None


def _tensors_in(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif type(a) in (list, tuple):
            yield from (b for b in a if isinstance(b, torch.Tensor))


def check_input_sizes(limits: Limits, op, args, kwargs) -> None:
    """Refuse computing on a tensor larger than the memory limit: only a broadcast view (an
    ``expand`` to 2**40 elements of one stored number) can be, and a reduction over it would
    occupy the worker for hours. View ops on it stay allowed (they compute nothing); in-place ops
    into it do not (they visit every element, and some make temporaries at its full size)."""
    if _info(op)[2]:
        return
    for t in _tensors_in(list(args) + list(kwargs.values() if kwargs else ())):
        if t.numel() * t.element_size() > limits.max_bytes:
            raise QuotaExceededError(
                f"{op} would compute on {t.numel()} elements ({fmt_bytes(t.numel() * t.element_size())}, a broadcast "
                f"view), more than the worker's {fmt_bytes(limits.max_bytes)} memory limit holds: nothing ran. "
                f"Compute on the tensor before expanding it")


def check_quota(limits: Limits, held_bytes: int, held_objects: int, op, est: Estimate) -> None:
    if held_bytes + est.new_bytes > limits.max_bytes:
        raise QuotaExceededError(
            f"{op} would make {fmt_bytes(est.new_bytes)} while the worker holds {fmt_bytes(held_bytes)} of its "
            f"{fmt_bytes(limits.max_bytes)} memory limit: nothing ran. Release objects you no longer need "
            f"(del their pointers), work in smaller pieces, or start the worker with a larger --max-memory")
    if held_objects + est.outputs > limits.max_objects:
        raise QuotaExceededError(
            f"{op} would make {est.outputs} objects while the worker holds {held_objects} of its limit of "
            f"{limits.max_objects}: nothing ran. Release objects, or start the worker with a larger --max-objects")
