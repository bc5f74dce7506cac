"""How many Jupyter kernels a test run has alive at once (tests/conftest.py starts it).

Every kernel a test starts (tests/conftest.py's ``kernel``, nbclient in tests/notebooks, the
notebooks JupyterLab opens for tests/browser) is a process of this run, a child of pytest, of its
xdist workers or of their JupyterLab, launched with ``-f <connection file>.json``. A
kernel costs a few hundred MB: a test that leaves its kernels running makes a 2-core machine swap.
The census samples the run's process tree, keeps the peak and the tests running at it, writes
them to test-artifacts/kernels.json, and the run fails when the peak passes ``MAX_KERNELS``.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import psutil

# 2 xdist processes: the browser tests' notebooks (3 at once in the sidebar test: a Python, a
# text and a Python-without-syft_lab kernel) beside another process's module kernel and one more
# just shutting down. Past this, some test leaves its kernels running.
MAX_KERNELS = int(os.environ.get("SYFT_LAB_TEST_MAX_KERNELS", "5"))


def is_kernel(argv: list[str]) -> bool:
    """A kernelspec's argv ends with ``-f {connection_file}`` (ipykernel's and the test kernels')."""
    return any(a == "-f" and b.endswith(".json") for a, b in zip(argv, argv[1:]))


def kernel_processes(root: psutil.Process) -> list[psutil.Process]:
    """The kernels among ``root``'s descendants (any depth: JupyterLab's kernels too)."""
    out = []
    for p in root.children(recursive=True):
        try:
            if is_kernel(p.cmdline()):
                out.append(p)
        except psutil.Error:  # gone meanwhile
            continue
    return out


def _describe(p: psutil.Process) -> str:
    try:
        parent = p.parent()
        return f"pid {p.pid} (parent {parent.name() if parent else '?'}): {' '.join(p.cmdline())[:160]}"
    except psutil.Error:
        return f"pid {p.pid} (gone)"


class KernelCensus:
    """Samples this process's tree every ``interval`` seconds in a daemon thread."""

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.root = psutil.Process()
        self.running: dict[str, float] = {}  # test node id -> when it started (from the run's reports)
        self.peak, self.peak_at, self.peak_tests, self.peak_kernels = 0, None, [], []
        self.started = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="kernel-census", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> int:
        kernels = kernel_processes(self.root)
        if len(kernels) > self.peak:
            self.peak, self.peak_at = len(kernels), round(time.time() - self.started, 1)
            self.peak_tests = sorted(list(self.running))  # a copy: the main thread adds and removes tests
            self.peak_kernels = [_describe(p) for p in kernels]
        return len(kernels)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def report(self) -> dict:
        return {"peak": self.peak, "limit": MAX_KERNELS, "seconds_into_run": self.peak_at,
                "tests_running_at_peak": self.peak_tests, "kernels_at_peak": self.peak_kernels}

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.report(), indent=2) + "\n")

    def verdict(self) -> str | None:
        """None when the run stayed within MAX_KERNELS, else what to look at."""
        if self.peak <= MAX_KERNELS:
            return None
        return (f"{self.peak} Jupyter kernels were alive at once (at most {MAX_KERNELS}): a test leaves its "
                f"kernels running. Running then: {', '.join(self.peak_tests) or '?'}; kernels: "
                + "; ".join(self.peak_kernels))
