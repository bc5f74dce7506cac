"""A worker process's heap hands out zeros, never what a freed tensor left (issue 37, item 3;
syft_lab/workers/heap.py): the class behind every kernel that leaves part of its output
unwritten, closed in the allocator rather than op by op."""
import os
import subprocess
import sys

import pytest

from syft_lab.workers.heap import TUNABLES, worker_environment

from .conftest import WorkerProcess

pytestmark = pytest.mark.network

# Frees tensors full of a secret, then allocates as an op's output would (torch.empty: no
# fill), at sizes from the allocator's small bins to its large ones; prints what it saw.
PROBE = """
import torch
seen = 0
for n in (1, 2, 7, 16, 63, 100, 255, 1000, 4096, 50_000, 1_000_000):
    for _ in range(30):
        secret = torch.full((n,), 1234.5, dtype=torch.float64)
        del secret
        fresh = torch.empty(n, dtype=torch.float64)
        seen += int((fresh == 1234.5).sum()) + int((fresh != 0).any())
print(seen)
"""


def _probe(env) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def test_a_worker_processes_environment_makes_fresh_memory_zeros():
    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    assert _probe(plain) > 0  # (without it, freed secrets come back: the probe can see them)
    assert _probe(worker_environment(plain)) == 0


def test_a_worker_started_by_hand_runs_with_the_tunables(token_file):
    """``python -m syft_lab.worker`` without them re-executes itself once, with them."""
    w = WorkerProcess("heap_by_hand", token_file).start()
    try:
        with open(f"/proc/{w.proc.pid}/environ", "rb") as f:
            started_with = f.read()
        # (glibc splits the variable in place as it reads it: each tunable is there, NUL-ended)
        assert b"\0GLIBC_TUNABLES=" + b"\0".join(t.encode() for t in TUNABLES.split(":")) in started_with
        assert "GLIBC_TUNABLES" not in os.environ or TUNABLES not in os.environ["GLIBC_TUNABLES"]
    finally:
        w.kill()


def test_worker_environment_keeps_the_users_own_tunables():
    env = worker_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "PATH": "/bin"})
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:" + TUNABLES and env["PATH"] == "/bin"
    assert worker_environment(env) == env  # (once only)
