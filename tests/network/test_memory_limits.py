"""A worker process knows its real memory limit and keeps every route under it.

Workers here run inside a memory cgroup the test makes (cgroup v1 on this machine class): past
its limit the kernel kills the worker and every client loses its objects, so each attack
below must be refused before anything is allocated.
"""
import pytest
import torch

from syft_lab.errors import QuotaExceededError
from syft_lab.workers.websocket import WebSocketWorker

from .memory_cgroup import MemoryCgroup

pytestmark = pytest.mark.network

GiB, MiB = 2**30, 2**20
LIMIT = 1 * GiB


@pytest.fixture
def cgroup():
    cg = MemoryCgroup(LIMIT)
    yield cg
    cg.close()


@pytest.fixture
def boxed(cgroup, spawn, token):
    """A worker process in a 1 GiB memory cgroup, with its default budget, and a client."""
    w = spawn("boxed", preexec_fn=cgroup.enter())
    client = WebSocketWorker(w.url, id="boxed", token=token, progress=False)
    yield client, w, cgroup
    client.close()


def test_the_default_budget_is_half_of_the_workers_own_cgroup_limit(boxed):
    client, w, cgroup = boxed
    limits = client.limits
    assert limits["max_bytes"] == LIMIT // 2
    assert limits["source"] == f"half of 1.0 GiB: cgroup v1 {cgroup.path}"
    assert any("memory budget 512.0 MiB (half of 1.0 GiB: cgroup v1" in line for line in w.stderr_lines)
    # and it is enforced: an mm whose output needs more than the budget is refused, the worker lives
    a = torch.ones(16384, 1).send(client)
    b = torch.ones(1, 16384).send(client)
    with pytest.raises(QuotaExceededError, match="memory limit: nothing ran"):
        a.mm(b)  # 1 GiB of float32
    assert torch.equal((a + 1).get()[:2], torch.full((2, 1), 2.0))
    assert cgroup.oom_kills() == 0
