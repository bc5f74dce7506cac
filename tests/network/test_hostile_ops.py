"""A hostile client against a real worker process (issue 37): enum-typed arguments that killed
the worker, broadcast views whose cost estimate materialised them, and uninitialised memory that
showed one client what another had taken back.

The worker runs in a memory cgroup of 4 GiB with ``--max-memory 1G`` (as the issue's attacker
ran it): past the cgroup's limit the kernel kills it, so a refusal must come before anything is
allocated. A segfault kills the worker process, never this one.
"""
import os

import pytest
import torch

from syft_lab.commands import Ref
from syft_lab.errors import QuotaExceededError
from syft_lab.wire.allowlist import OpNotAllowedError
from syft_lab.workers.websocket import WebSocketWorker

from .conftest import WorkerProcess
from .memory_cgroup import MemoryCgroup

pytestmark = pytest.mark.network

GiB = 2**30


@pytest.fixture(scope="module")
def hostile(token_file, token):
    """A worker process in a 4 GiB memory cgroup with a 1 GiB budget, and two clients of it."""
    cgroup = MemoryCgroup(4 * GiB)
    w = None
    try:
        w = WorkerProcess("hostile", token_file, ["--max-memory", "1G"], preexec_fn=cgroup.enter()).start()
        a = WebSocketWorker(w.url, id="hostile", token=token, progress=False)
        b = WebSocketWorker(w.url, id="hostile", token=token, progress=False)
        yield a, b, w, cgroup
        a.close()
        b.close()
    finally:
        if w is not None:
            w.kill()
        cgroup.close()


def _run(client, op, args, kwargs=None):
    return client._request({"c": "run", "op": op, "a": args, "k": kwargs})


def _cgroup_file(cgroup, name):
    return os.path.join(cgroup.path, name)


_peak_before = 0


def _reset_peak(cgroup):
    """Start the cgroup's peak memory count afresh (cgroup v1: write to max_usage_in_bytes)."""
    global _peak_before
    with open(_cgroup_file(cgroup, "memory.max_usage_in_bytes"), "w") as f:
        f.write("0")
    with open(_cgroup_file(cgroup, "memory.usage_in_bytes")) as f:
        _peak_before = int(f.read())


def _peak(cgroup) -> int:
    with open(_cgroup_file(cgroup, "memory.max_usage_in_bytes")) as f:
        return int(f.read())


def _alive(client, w, cgroup):
    probe = torch.tensor([3.0, 4.0]).send(client)
    assert torch.equal((probe + 1).get(), torch.tensor([4.0, 5.0]))
    assert w.proc.poll() is None and cgroup.oom_kills() == 0


ENUM_ATTACKS = [
    ("aten.clone.default", lambda x: [x], {"memory_format": -1}),
    ("aten.zeros_like.default", lambda x: [x], {"memory_format": -1}),
    ("aten.ones_like.default", lambda x: [x], {"memory_format": -1}),
    ("aten.empty_like.default", lambda x: [x], {"memory_format": -1}),
    ("aten.full_like.default", lambda x: [x, 2.0], {"memory_format": -1}),
    ("aten.randint_like.default", lambda x: [x, 5], {"memory_format": -1}),
    ("aten.contiguous.default", lambda x: [x], {"memory_format": 99}),
    ("aten.mse_loss.default", lambda x: [x, x, -1], None),  # a reduction code
    ("aten.grid_sampler_2d.default", None, None),  # an interpolation mode
    ("aten._fft_r2c.default", lambda x: [x, [0], 9, True], None),  # a normalization code
]


@pytest.mark.parametrize("op,make_args,kwargs", ENUM_ATTACKS, ids=[a[0] + str(i) for i, a in enumerate(ENUM_ATTACKS)])
def test_an_enum_argument_out_of_its_range_is_refused_and_the_worker_lives(hostile, op, make_args, kwargs):
    a, b, w, cgroup = hostile
    kept = torch.arange(6.0).send(b)  # another client's object, which a crash would lose
    x = torch.ones(4).send(a)
    image, grid = torch.ones(1, 1, 4, 4).send(a), torch.zeros(1, 2, 2, 2).send(a)  # (kept alive here)
    if make_args is None:
        args = [Ref(image.id_at_location), Ref(grid.id_at_location), 9, 0, False]
    else:
        args = make_args(Ref(x.id_at_location))
    with pytest.raises(OpNotAllowedError, match="legal values|not a memory format"):
        _run(a, op, args, kwargs)
    _alive(a, w, cgroup)
    assert torch.equal(kept.get(), torch.arange(6.0))


SCALAR_FIRST_POLYNOMIALS = [f"aten.special_{kind}_polynomial_{letter}.x_scalar"
                            for kind, letters in (("chebyshev", "tuvw"), ("shifted_chebyshev", "tuvw"),
                                                  ("hermite", "he"), ("laguerre", "l"), ("legendre", "p"))
                            for letter in (letters if kind not in ("hermite",) else ("h", "he"))]


def test_the_twelve_scalar_first_polynomials_exist():
    from syft_lab.wire.allowlist import ALLOWED

    assert len(SCALAR_FIRST_POLYNOMIALS) == 12 and all(n in ALLOWED for n in SCALAR_FIRST_POLYNOMIALS)


@pytest.mark.parametrize("elements", [2**28, 2**31])
def test_a_scalar_first_polynomial_of_a_broadcast_view_is_refused_before_it_allocates(hostile, elements):
    a, b, w, cgroup = hostile
    one = torch.ones(1).send(a)
    view = one.expand(elements)  # a view: nothing allocated
    for op in SCALAR_FIRST_POLYNOMIALS:
        _reset_peak(cgroup)
        with pytest.raises(QuotaExceededError, match="nothing ran"):
            _run(a, op, [1e308, Ref(view.id_at_location)])
        # refused from sizes alone: nothing the size of the view was made (2**28 float32: 1 GiB;
        # the cost estimate's abs() of the view made it, and the worker reached 2.36 GB)
        assert _peak(cgroup) - _peak_before < 256 * 2**20, op
    _alive(a, w, cgroup)


UNINITIALISED_OPS = [
    ("aten.empty.memory_format", lambda n, like: [[n]], {"dtype": torch.float64}),
    ("aten.empty_strided.default", lambda n, like: [[n], [1]], {"dtype": torch.float64}),
    ("aten.empty_permuted.default", lambda n, like: [[n], [0]], {"dtype": torch.float64}),
    ("aten.new_empty.default", lambda n, like: [like, [n]], None),
    ("aten.new_empty_strided.default", lambda n, like: [like, [n], [1]], None),
    ("aten.empty_like.default", lambda n, like: [like], None),
    ("aten.empty_strided.default", lambda n, like: [[n, 2], [1, 2 * n]], {"dtype": torch.float64}),  # gaps
]
SECRET = 1234.5  # (its sums are exact)


@pytest.mark.parametrize("op,make_args,kwargs", UNINITIALISED_OPS, ids=[f"{o[0]}{i}" for i, o in
                                                                        enumerate(UNINITIALISED_OPS)])
def test_a_client_never_reads_what_another_took_back(hostile, op, make_args, kwargs):
    a, b, w, cgroup = hostile
    for n in (16, 1000, 40_000, 300_000):
        for _ in range(3):  # client A stores its data and takes it back: its memory is freed on the worker
            assert torch.equal(torch.full((n,), SECRET, dtype=torch.float64).send(a).get()[:1],
                               torch.tensor([SECRET], dtype=torch.float64))
            assert float(torch.full((n,), SECRET, dtype=torch.float64).send(a).sum().get()) == SECRET * n
        like = torch.zeros(n, dtype=torch.float64).send(b)
        made = _run(b, op, make_args(n, Ref(like.id_at_location)), kwargs)
        got = b._fetch(made.id)
        storage = torch.tensor([], dtype=torch.uint8).set_(got.untyped_storage())
        assert got.numel() >= n and not storage.any(), (op, n, int((got == SECRET).sum()))


def test_a_view_over_a_fresh_results_storage_shows_zeros_only(hostile):
    """A strided empty result with gaps: its whole storage is zero, so no as_strided view of it
    reads anything but zeros."""
    a, b, w, cgroup = hostile
    for _ in range(3):
        torch.full((5000,), SECRET, dtype=torch.float64).send(a).get()
    made = _run(b, "aten.empty_strided.default", [[50], [100]], {"dtype": torch.float64})
    whole = _run(b, "aten.as_strided.default", [Ref(made.id), [4901], [1]], None)
    assert not b._fetch(whole.id).any()
