import ast
import queue
import time

import pytest
import torch

import syft_lab as sy


@pytest.fixture(autouse=True)
def hooked():
    sy.hook()
    yield


@pytest.fixture
def workers():
    """Fresh bob and alice for one test; their stores must be empty again at the end."""
    bob, alice = sy.VirtualWorker("bob"), sy.VirtualWorker("alice")
    yield bob, alice
    bob.close()
    alice.close()


@pytest.fixture
def bob(workers):
    return workers[0]


@pytest.fixture
def alice(workers):
    return workers[1]


def pytest_configure(config):
    torch.manual_seed(0)


class Kernel:
    """A real IPython kernel driven through jupyter_client, as a notebook front end drives it."""

    def __init__(self, client):
        self.client = client
        self.comm_msgs: list[dict] = []  # every comm message from the kernel, in order

    def _collect(self, msg) -> None:
        if msg["msg_type"] in ("comm_msg", "comm_close", "comm_open"):
            self.comm_msgs.append(msg)

    def run(self, code: str, timeout: float = 120, silent: bool = False) -> dict:
        """Execute code; returns {"stdout", "stderr", "error", "data" (display bundles), "reply"}."""
        msg_id = self.client.execute(code, silent=silent, store_history=not silent)
        out = {"stdout": "", "stderr": "", "error": None, "data": []}
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"kernel did not finish: {code!r}")
            self._collect(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            t, c = msg["msg_type"], msg["content"]
            if t == "stream":
                out[c["name"]] += c["text"]
            elif t == "error":
                out["error"] = f"{c['ename']}: {c['evalue']}"
            elif t in ("display_data", "execute_result"):
                out["data"].append(c["data"])
            elif t == "status" and c["execution_state"] == "idle":
                break
        while True:
            reply = self.client.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                out["reply"] = reply["content"]
                return out

    def eval(self, expr: str):
        """The value of a Python expression in the kernel (through its repr)."""
        r = self.run(f"print(repr(({expr})))")
        assert r["error"] is None, r["error"]
        return ast.literal_eval(r["stdout"].strip())

    def drain(self, seconds: float = 0.3) -> None:
        """Read iopub for a while (messages pushed between cells)."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            try:
                self._collect(self.client.get_iopub_msg(timeout=left))
            except queue.Empty:
                return


@pytest.fixture(scope="module")
def kernel():
    """One real kernel per test module (magics, sidebar comm)."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        yield Kernel(kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
