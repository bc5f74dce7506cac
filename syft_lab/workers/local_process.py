"""Start a websocket worker process on this machine and connect to it (demos, %syft worker --port).

    bob = sy.start_worker("bob", port=8777)     # python -m syft_lab.worker, on 127.0.0.1
    ...
    bob.close()                                 # also stops the process

The token is random and travels to the child through a file only it and we can read.
"""
from __future__ import annotations

import atexit
import os
import secrets
import subprocess
import sys
import tempfile
import threading

from ..errors import SyftError
from .base import check_worker_id
from .heap import worker_environment
from .websocket import WebSocketWorker

READY_TIMEOUT = 60.0
_started: list = []


class LocalProcessWorker(WebSocketWorker):
    """A WebSocketWorker whose server process this kernel started (and stops on close)."""

    kind = "websocket"

    def __init__(self, url, worker_id, token, process, token_dir):
        self.process = process
        self._token_dir = token_dir
        super().__init__(url, id=worker_id, token=token)

    def close(self) -> None:
        super().close()
        stop_process(self.process)
        self._token_dir.cleanup()


def stop_process(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def start_worker(worker_id: str, port: int = 0, host: str = "127.0.0.1", threads: int = 1) -> LocalProcessWorker:
    """Start ``python -m syft_lab.worker`` on ``host:port`` (0: a free port) and connect to it.

    The worker shares this machine's cores with the notebook, so it runs one torch thread by
    default: oversubscribed intra-op threads made small ops 10-50x slower here."""
    check_worker_id(worker_id)
    token = secrets.token_urlsafe(24)
    token_dir = tempfile.TemporaryDirectory(prefix="syft-lab-")
    token_file = os.path.join(token_dir.name, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(token)
    env = worker_environment({k: v for k, v in os.environ.items() if k != "SYFT_LAB_TOKEN"})  # (heap.py)
    cmd = [sys.executable, "-m", "syft_lab.worker", "--id", worker_id, "--host", host, "--port", str(port),
           "--token-file", token_file, "--threads", str(threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    first = [""]
    reader = threading.Thread(target=lambda: first.__setitem__(0, proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(READY_TIMEOUT)
    line = first[0]
    if "listening on" not in line:
        stop_process(proc)
        err = proc.stderr.read().strip().splitlines()
        token_dir.cleanup()
        raise SyftError(f"worker {worker_id!r} did not start on port {port}: "
                        f"{err[-1] if err else line.strip() or 'no output'}")
    # keep draining the pipes so a chatty worker never blocks on a full pipe
    for stream in (proc.stdout, proc.stderr):
        threading.Thread(target=lambda s=stream: [None for _ in s], daemon=True).start()
    url = line.split("listening on", 1)[1].strip()
    worker = LocalProcessWorker(url, worker_id, token, proc, token_dir)
    _started.append(proc)
    return worker


@atexit.register
def _stop_all():
    for proc in _started:
        try:
            stop_process(proc)
        except Exception:
            pass
