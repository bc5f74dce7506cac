"""Real worker processes for the network tests: ``python -m syft_lab.worker`` on 127.0.0.1.

Each worker gets a free port (``--port 0``; the ready line tells which) and a token file; a
fixture waits for the ready line and kills the process afterwards.
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 180  # a worker process imports torch: ~2 s idle, 30 s and more on a loaded 2-core machine


class WorkerProcess:
    """One ``python -m syft_lab.worker`` process."""

    def __init__(self, worker_id: str, token_file: Path | None, extra=(), port: int = 0, preexec_fn=None):
        self.worker_id, self.token_file, self.extra = worker_id, token_file, list(extra)
        self.preexec_fn = preexec_fn  # e.g. resource limits for the worker process
        self.port = port
        self.proc = None
        self.url = None
        self.stderr_lines: list[str] = []

    def start(self) -> "WorkerProcess":
        cmd = [sys.executable, "-m", "syft_lab.worker", "--id", self.worker_id, "--port", str(self.port), "--threads", "1",
               *self.extra]
        if self.token_file is not None:
            cmd += ["--token-file", str(self.token_file)]
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("SYFT_LAB_TOKEN", None)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     cwd=str(ROOT), preexec_fn=self.preexec_fn)
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        line = [None]

        def read():
            line[0] = self.proc.stdout.readline()

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(READY_TIMEOUT)
        if not line[0] or "listening on" not in line[0]:
            self.kill()
            raise RuntimeError(f"worker {self.worker_id} did not start: {line[0]!r} {''.join(self.stderr_lines)}")
        self.url = line[0].split("listening on", 1)[1].strip()
        self.port = int(self.url.rsplit(":", 1)[1])
        return self

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> "WorkerProcess":
        self.kill()
        return self.start()  # same port


@pytest.fixture(scope="session")
def token() -> str:
    return secrets.token_urlsafe(24)


@pytest.fixture(scope="session")
def token_file(tmp_path_factory, token) -> Path:
    p = tmp_path_factory.mktemp("token") / "token"
    p.write_text(token + "\n")
    p.chmod(0o600)
    return p


def start_processes(worker_ids, token_file) -> dict:
    """Worker processes for these ids, started side by side; a test fails if one does not start."""
    procs = {wid: WorkerProcess(wid, token_file) for wid in worker_ids}
    threads = [threading.Thread(target=p.start) for p in procs.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs.values():
        if p.url is None:
            for q in procs.values():
                q.kill()
            pytest.fail(f"worker {p.worker_id} did not start: {''.join(p.stderr_lines)}")
    return procs


@pytest.fixture(scope="session")
def worker_procs(token_file):
    """bob and alice, started once for the session."""
    procs = start_processes(("bob", "alice"), token_file)
    yield procs
    for p in procs.values():
        p.kill()


@pytest.fixture
def spawn(token_file):
    """Start extra workers for one test: spawn("carol", extra=[...], token=True)."""
    started = []

    def start(worker_id, extra=(), use_token=True, preexec_fn=None):
        p = WorkerProcess(worker_id, token_file if use_token else None, extra, preexec_fn=preexec_fn).start()
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


@pytest.fixture
def remote(worker_procs, token):
    """Clients for the session's bob and alice (fresh connections for each test)."""
    from syft_lab.workers.websocket import WebSocketWorker

    bob = WebSocketWorker(worker_procs["bob"].url, id="bob", token=token, progress=False)
    alice = WebSocketWorker(worker_procs["alice"].url, id="alice", token=token, progress=False)
    yield bob, alice
    bob.close()
    alice.close()
