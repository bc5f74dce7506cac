"""Helpers for the sidebar tests: a real IPython kernel (jupyter_client), and the browser's
end of a comm to the sidebar's target, opened as the lab extension opens it (a silent
bootstrap execute, then comm_open)."""
from __future__ import annotations

import ast
import queue
import time
import uuid

BOOTSTRAP = '__import__("syft_lab.sidebar", fromlist=["register"]).register()'
TARGET = "syft_lab.sidebar"


class Kernel:
    def __init__(self, client):
        self.client = client
        self.comm_msgs: list[dict] = []  # every comm_msg/comm_close from the kernel, in order

    def _collect(self, msg) -> None:
        if msg["msg_type"] in ("comm_msg", "comm_close", "comm_open"):
            self.comm_msgs.append(msg)

    def run(self, code: str, timeout: float = 120, silent: bool = False) -> dict:
        """Execute code; returns {"stdout", "stderr", "error", "reply"}; comm messages seen on
        the way are kept in comm_msgs."""
        msg_id = self.client.execute(code, silent=silent, store_history=not silent)
        out = {"stdout": "", "stderr": "", "error": None}
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
            elif t == "status" and c["execution_state"] == "idle":
                break
        while True:
            reply = self.client.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                out["reply"] = reply["content"]
                return out

    def eval(self, expr: str):
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


class Comm:
    """The browser's end of one sidebar comm."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.id = uuid.uuid4().hex
        self.seen = 0  # index into kernel.comm_msgs up to which this comm has read

    def open(self, data=None) -> None:
        k = self.kernel
        msg = k.client.session.msg("comm_open", {"comm_id": self.id, "target_name": TARGET,
                                                 "data": data if data is not None else {"type": "hello", "version": 1}})
        k.client.shell_channel.send(msg)

    def send(self, data) -> None:
        msg = self.kernel.client.session.msg("comm_msg", {"comm_id": self.id, "data": data})
        self.kernel.client.shell_channel.send(msg)

    def close(self) -> None:
        msg = self.kernel.client.session.msg("comm_close", {"comm_id": self.id, "data": {}})
        self.kernel.client.shell_channel.send(msg)

    def new(self) -> list[dict]:
        """The data of the messages that arrived for this comm since the last call."""
        out = []
        msgs = self.kernel.comm_msgs
        while self.seen < len(msgs):
            m = msgs[self.seen]
            self.seen += 1
            if m["content"].get("comm_id") == self.id and m["msg_type"] == "comm_msg":
                out.append(m["content"]["data"])
        return out

    def wait(self, pred, timeout: float = 20) -> tuple[dict, list[dict]]:
        """The first new message for which pred(data) holds, and the ones before it; the
        messages after it stay unread."""
        end = time.monotonic() + timeout
        skipped = []
        msgs = self.kernel.comm_msgs
        while True:
            while self.seen < len(msgs):
                m = msgs[self.seen]
                self.seen += 1
                if m["content"].get("comm_id") != self.id or m["msg_type"] != "comm_msg":
                    continue
                d = m["content"]["data"]
                if pred(d):
                    return d, skipped
                skipped.append(d)
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no such message from the sidebar comm (got {skipped!r:.2000})")
            self.kernel.drain(min(left, 0.2))
