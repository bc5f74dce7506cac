"""A real IPython kernel (jupyter_client) for the magics tests."""
from __future__ import annotations

import queue

import pytest
from jupyter_client.manager import start_new_kernel


class Kernel:
    def __init__(self, client):
        self.client = client

    def run(self, code: str, timeout: float = 120) -> dict:
        """Execute code; returns {"stdout", "stderr", "error", "data": [display data dicts]}."""
        msg_id = self.client.execute(code, store_history=True)
        out = {"stdout": "", "stderr": "", "error": None, "data": []}
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"kernel did not finish: {code!r}")
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
        self.client.get_shell_msg(timeout=timeout)
        return out

    def eval(self, expr: str):
        """The value of a Python expression in the kernel (via repr)."""
        import ast

        r = self.run(f"print(repr(({expr})))")
        assert r["error"] is None, r["error"]
        return ast.literal_eval(r["stdout"].strip())


@pytest.fixture(scope="module")
def kernel():
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        yield Kernel(kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
