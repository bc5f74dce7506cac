"""Helpers for widget tests in a real kernel (tests/conftest.py's ``kernel``): the browser's end
of a widget's comm, speaking ipywidgets' protocol (``update`` of state, ``custom`` messages)."""
from __future__ import annotations

import time


class WidgetComm:
    """The browser's end of one widget's comm."""

    def __init__(self, kernel, comm_id):
        self.kernel, self.id = kernel, comm_id
        self.seen = len(kernel.comm_msgs)

    def _send(self, data) -> None:
        c = self.kernel.client
        c.shell_channel.send(c.session.msg("comm_msg", {"comm_id": self.id, "data": data}))

    def update(self, state) -> None:
        """A state update, as a browser that writes the model sends it."""
        self._send({"method": "update", "state": state, "buffer_paths": []})

    def custom(self, content) -> None:
        self._send({"method": "custom", "content": content})

    def new(self) -> list[dict]:
        """The data of the messages that arrived for this comm since the last call."""
        out = []
        msgs = self.kernel.comm_msgs
        while self.seen < len(msgs):
            m = msgs[self.seen]
            self.seen += 1
            if m["content"].get("comm_id") == self.id:
                out.append(m["content"]["data"])
        return out

    def request(self, content, timeout=30) -> tuple[dict, list]:
        """Send a custom message; returns the reply with the same req and what came before it."""
        self.custom(content)
        end = time.monotonic() + timeout
        before = []
        while True:
            for data in self.new():
                body = data.get("content", {}) if data.get("method") == "custom" else {}
                if body.get("type") == "reply" and body.get("req") == content.get("req"):
                    return body, before
                before.append(data)
            if time.monotonic() > end:
                raise TimeoutError(f"no reply to {content!r:.200} (got {before!r:.2000})")
            self.kernel.read_iopub(0.2)

    def sync(self) -> list[dict]:
        """Every custom message the kernel sent this comm before it answered a sentinel sent now
        (a message the widget does not understand gets an error reply carrying its req)."""
        WidgetComm._sentinels += 1
        req = f"sync-{WidgetComm._sentinels}"
        _, before = self.request({"type": "sync", "req": req})
        return [d["content"] for d in before if d.get("method") == "custom"]

    _sentinels = 0


def world_widget_comm(kernel, start: int) -> tuple[str, dict]:
    """The comm id and the world of the world widget opened since ``kernel.comm_msgs[start]``
    (its opening state, then the state updates the kernel sent it)."""
    comm_id, world = None, None
    for m in kernel.comm_msgs[start:]:
        data = m["content"].get("data", {})
        if m["msg_type"] == "comm_open" and data.get("state", {}).get("view") == "world":
            comm_id = m["content"]["comm_id"]
        if comm_id is not None and m["content"].get("comm_id") == comm_id and "world" in data.get("state", {}):
            world = data["state"]["world"]
    assert comm_id is not None and world and world.get("workers"), "no world widget comm was opened"
    return comm_id, world
