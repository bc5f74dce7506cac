"""A memory cgroup made for one test, for worker processes whose memory must really be bounded.

RLIMIT_AS turns an allocation past the limit into a clean error; a cgroup kills the process
instead (what a container host does), so only a cgroup shows the attacks a quota must stop
before anything is allocated. This machine class mounts cgroup v1, writable as root.
"""
from __future__ import annotations

import os
import secrets
import signal
import time

import pytest

V1_MEMORY = "/sys/fs/cgroup/memory"


def _own_memory_cgroup() -> str | None:
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                return path
    return None


class MemoryCgroup:
    """A cgroup v1 memory cgroup under this process's own, limited to ``limit`` bytes."""

    def __init__(self, limit: int):
        self.limit = limit
        own = _own_memory_cgroup()
        if own is None or not os.path.isfile(os.path.join(V1_MEMORY, "memory.limit_in_bytes")):
            pytest.skip("no cgroup v1 memory controller mounted at /sys/fs/cgroup/memory: cannot make a "
                        "memory cgroup for the worker on this machine")
        self.path = os.path.join(V1_MEMORY, own.lstrip("/"), f"syft-lab-test-{secrets.token_hex(4)}")
        try:
            os.mkdir(self.path)
            with open(os.path.join(self.path, "memory.limit_in_bytes"), "w") as f:
                f.write(str(limit))
        except OSError as e:
            self._remove()
            pytest.skip(f"cannot make a memory cgroup at {self.path} ({e}): needs root and a writable cgroup v1 "
                        f"memory controller")

    def enter(self):
        """preexec_fn for a worker process: it runs inside this cgroup."""
        procs = os.path.join(self.path, "cgroup.procs")

        def apply():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        return apply

    def oom_kills(self) -> int:
        with open(os.path.join(self.path, "memory.oom_control")) as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        return 0

    def close(self) -> None:
        # the worker processes started in this cgroup (and only those) are ended first
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._remove()

    def _remove(self) -> None:
        for _ in range(200):  # clean-up only: a killed process takes a moment to leave the cgroup
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)
