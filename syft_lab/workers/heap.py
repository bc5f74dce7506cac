"""A worker process's heap hands out zeros, never the bytes a freed tensor left (issue 37).

Clients of one worker process share its heap: after client A takes its tensors back, the
allocator gives their memory to the next allocation, and any kernel that leaves part of its
output unwritten (an `empty`, a backward op given an empty gradient, a resize) would hand A's
values to client B. Zero-filling the ops known to do so closes known cases only; the property
fuzzer kept finding more (37 cases in 9 overloads). The class is closed in the allocator:

- glibc's ``perturb`` tunable at 255 fills every chunk ``malloc`` hands out with 0x00 and every
  chunk ``free`` takes back with 0xFF (memory mapped fresh from the kernel is zeros already);
- the per-thread cache (``tcache``), which skips both fills, is turned off.

glibc reads tunables only when a process starts, so the processes that start workers pass them
in their environment (``worker_environment``), and a worker started without them re-executes
itself once with them (``ensure_zeroing_heap``). Where that cannot be (a Ray actor in a cluster
started elsewhere), ``zero_fresh_allocations`` sets the perturb byte at run time (mallopt): the
fills then apply to every chunk but those the thread cache keeps. Elsewhere than glibc (musl,
macOS) the tunables are ignored: docs/wire-format.md's threat model says so.
"""
from __future__ import annotations

import ctypes
import os
import sys

TUNABLES = "glibc.malloc.tcache_count=0:glibc.malloc.perturb=255"
_REEXECUTED = "SYFT_LAB_HEAP_REEXECUTED"  # set on the re-execution: never a second one
_M_PERTURB = -6  # glibc's mallopt parameter


def worker_environment(env: dict | None = None) -> dict:
    """``env`` (default os.environ) with the tunables a worker process starts with."""
    env = dict(os.environ if env is None else env)
    current = env.get("GLIBC_TUNABLES", "")
    if TUNABLES not in current:
        env["GLIBC_TUNABLES"] = f"{current}:{TUNABLES}" if current else TUNABLES
    return env


def heap_zeroes_fresh_memory() -> bool:
    """True when this process started with the tunables (its allocations come zeroed)."""
    return TUNABLES in os.environ.get("GLIBC_TUNABLES", "")


def ensure_zeroing_heap(module_args: list) -> None:
    """Re-execute this process as ``python <module_args>`` with the tunables, unless it has them
    (or is not on Linux, or is that re-execution already)."""
    if heap_zeroes_fresh_memory() or not sys.platform.startswith("linux") or os.environ.get(_REEXECUTED):
        zero_fresh_allocations()
        return
    env = worker_environment()
    env[_REEXECUTED] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *module_args], env)


def zero_fresh_allocations() -> bool:
    """Set glibc's perturb byte now (what the tunable does from the start, but for chunks the
    thread cache holds). False where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_PERTURB, 0xFF))
    except (OSError, AttributeError):
        return False
