"""Progress bars only where a person sees them (syft_lab/progress.py): a FedAvg round's bar and a
large transfer's bar are drawn in a terminal and a notebook, never into a pipe or a log file."""
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios

import pytest

from syft_lab import progress

# one FedAvg round over in-process workers: tqdm draws "round 1" where it draws anything
ROUND = """
import torch
from torch import nn
import syft_lab as sy
sy.hook()
workers = [sy.VirtualWorker(name) for name in ("bob", "alice")]
x, y = torch.randn(20, 4), torch.arange(20) % 3
fds = sy.BaseDataset(x, y, name="blobs").federate(workers, indices=[range(0, 10), range(10, 20)])
fl = sy.federated.FedAvg(nn.Linear(4, 3), fds, lr=0.1, batch_size=2, seed=1)
fl.run(1)
print("trained", len(fl.history), "round")
"""


def _in_a_pipe(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _in_a_terminal(code: str) -> str:
    """What a person at a terminal sees: the process's stdout and stderr on a pseudo-terminal."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdio is the terminal, 120 columns wide (a new pty has 0: tqdm draws nothing)
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
        os.execve(sys.executable, [sys.executable, "-c", code], {**os.environ, "PYTHONUNBUFFERED": "1"})
    seen = b""
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], 240)
            if not ready:
                raise AssertionError(f"no output for 240 s; so far: {seen[-2000:]!r}")
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, seen.decode(errors="replace")[-2000:]
    return seen.decode(errors="replace")


@pytest.mark.slow
def test_a_round_writes_no_progress_bar_into_a_pipe():
    done = _in_a_pipe(ROUND)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trained 1 round" in done.stdout
    assert "round 1" not in done.stderr and "batch" not in done.stderr, done.stderr[-2000:]


@pytest.mark.slow
def test_a_round_shows_its_progress_bar_in_a_terminal():
    seen = _in_a_terminal(ROUND)
    assert "trained 1 round" in seen
    assert "round 1" in seen and "batch" in seen  # tqdm's bar: "round 1: 100%|...| 10/10 [...batch/s]"


def test_progress_false_is_never_and_true_is_always(capsys):
    quiet = progress.bar(10, show=False, desc="never")
    quiet.update(5)
    quiet.close()
    shown = progress.bar(10, show=True, desc="always", file=sys.stderr)
    shown.update(10)
    shown.close()
    err = capsys.readouterr().err
    assert "never" not in err and "always" in err and "10/10" in err


# a large transfer's bar goes through the same rule (workers/protocol.py FramedTransport._bar)
TRANSFER_BAR = """
from syft_lab.workers.protocol import FramedTransport
t = FramedTransport(session="s")
bar = t._bar(100, "send -> bob")
bar.update(100)
bar.close()
print("sent")
"""


def test_a_transfer_bar_is_drawn_in_a_terminal_and_not_into_a_pipe():
    piped = _in_a_pipe(TRANSFER_BAR)
    assert piped.returncode == 0 and "sent" in piped.stdout, piped.stderr[-2000:]
    assert "send -> bob" not in piped.stderr
    assert "send -> bob" in _in_a_terminal(TRANSFER_BAR)


@pytest.mark.slow
def test_in_a_notebook_a_bar_is_a_widget_in_the_cells_output(kernel):
    """A Jupyter kernel (stderr not a terminal) counts as someone watching: the bar is
    tqdm's notebook widget, shown in the cell's output."""
    out = kernel.run("from syft_lab import progress\nprint(progress.someone_watches())\n"
                     "b = progress.bar(3, desc='round 1')\nb.update(3)\nb.close()")
    assert out["error"] is None, out
    assert out["stdout"].strip() == "True"
    assert any("application/vnd.jupyter.widget-view+json" in d for d in out["data"]), out["data"]
