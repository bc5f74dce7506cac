"""Helpers for the sidebar tests: the browser's end of a comm to the sidebar's target, opened
as the lab extension opens it (a silent bootstrap execute, then comm_open), on the real kernel
of tests/conftest.py."""
from __future__ import annotations

import time
import uuid

BOOTSTRAP = '__import__("syft_lab.sidebar", fromlist=["register"]).register()'
TARGET = "syft_lab.sidebar"


class Comm:
    """The browser's end of one sidebar comm."""

    def __init__(self, kernel):
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
            self.kernel.read_iopub(min(left, 0.2))

    def sync(self) -> list[dict]:
        """Every message the kernel sent on this comm before it handled a sentinel sent now.

        The sentinel is a message the sidebar does not understand, so it answers it with an error
        reply carrying the sentinel's req and changes nothing. Messages are handled in order, so
        whatever the kernel pushed before (after a cell, an action) has arrived before that reply:
        an empty list means it pushed nothing, with no waiting for time to pass."""
        Comm._sentinels += 1
        req = f"sync-{Comm._sentinels}"
        self.send({"type": "sync", "req": req})
        _, before = self.wait(lambda d: d.get("type") == "reply" and d.get("req") == req)
        return before

    _sentinels = 0
