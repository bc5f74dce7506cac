"""Workers on different "hosts": each in its own network namespace, joined by veth pairs.

Needs iproute2 (``ip netns``; scripts/setup installs it, and the test fails without it) and root
with the right to make namespaces; skipped with the reason otherwise.
"""
import os
import shutil
import subprocess
import sys
import time

import pytest
import torch

from syft_lab.errors import WorkerUnavailableError
from syft_lab.workers.websocket import WebSocketWorker

from .conftest import ROOT

pytestmark = pytest.mark.network


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def _netns_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"sylprobe{os.getpid()}"
    r = _ip("netns", "add", name, check=False)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


class Host:
    """A network namespace linked to ours by a veth pair: subnet 10.<a>.<b>.0/24."""

    def __init__(self, tag: str, subnet: str):
        self.ns = f"syl{tag}{os.getpid() % 100000}"
        self.outer, self.inner = f"vo{tag}{os.getpid() % 10000}", f"vi{tag}{os.getpid() % 10000}"
        self.gw, self.addr = f"{subnet}.1", f"{subnet}.2"
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
        _ip("link", "set", self.inner, "netns", self.ns)
        _ip("addr", "add", f"{self.gw}/24", "dev", self.outer)
        _ip("link", "set", self.outer, "up")
        _ip("netns", "exec", self.ns, "ip", "addr", "add", f"{self.addr}/24", "dev", self.inner)
        _ip("netns", "exec", self.ns, "ip", "link", "set", self.inner, "up")
        _ip("netns", "exec", self.ns, "ip", "link", "set", "lo", "up")
        self.proc = None

    def start_worker(self, worker_id, token_file):
        cmd = ["ip", "netns", "exec", self.ns, sys.executable, "-m", "syft_lab.worker", "--id", worker_id,
               "--host", self.addr, "--port", "0", "--token-file", str(token_file)]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"worker in {self.ns} did not start: {line!r} {self.proc.stderr.read()}")
        return line.split("listening on", 1)[1].strip()

    def link(self, up: bool):
        _ip("link", "set", self.outer, "up" if up else "down")

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        _ip("link", "del", self.outer, check=False)
        _ip("netns", "del", self.ns, check=False)


@pytest.fixture
def hosts():
    if shutil.which("ip") is None:  # not a reason to skip: setup installs it
        pytest.fail("iproute2 (ip) is not installed: scripts/setup installs the Debian iproute2 package")
    why = _netns_unavailable()
    if why:
        pytest.skip(f"workers in separate network namespaces not tested: {why}")
    made = []
    try:
        base = 100 + os.getpid() % 100
        made.append(Host("a", f"10.{base}.1"))
        made.append(Host("b", f"10.{base}.2"))
        yield made
    finally:
        for h in made:
            h.close()


def test_workers_in_network_namespaces(hosts, token_file, token):
    a, b = hosts
    url_a = a.start_worker("nsbob", token_file)
    url_b = b.start_worker("nsalice", token_file)
    assert a.addr in url_a and b.addr in url_b  # not loopback: the token is required
    bob = WebSocketWorker(url_a, id="nsbob", token=token, timeout=3, progress=False)
    alice = WebSocketWorker(url_b, id="nsalice", token=token, timeout=3, progress=False)
    x = torch.randn(1000, 100)
    p = x.send(bob)
    q = (p * 2).move(alice)
    assert torch.equal(q.get(), x * 2)

    # cut bob's link: clear errors, nothing lost
    keep = torch.arange(10.0).send(alice)
    a.link(False)
    with pytest.raises(WorkerUnavailableError, match="nsbob"):
        p + 1
    assert bob.state == "disconnected"
    with pytest.raises(WorkerUnavailableError, match="nsbob"):
        keep.move(bob)  # the copy cannot reach bob ...
    assert torch.equal((keep + 0).get(), torch.arange(10.0))  # ... so alice still has it
    a.link(True)
    deadline = time.monotonic() + 20
    while True:
        try:
            assert bob.ping()
            break
        except WorkerUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert bob.state == "connected"
    assert torch.equal(p.get(), x)  # the worker kept its objects while the link was down
    moved = keep.move(bob)
    assert torch.equal(moved.get(), torch.arange(10.0))
    bob.close()
    alice.close()
