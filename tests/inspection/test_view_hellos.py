"""A browser that floods a chain view with ``hello`` messages (issue 37, item 4).

A ChainWidget kept every view name a browser sent and refreshed its chain for each (5,000
hellos, and the next cell waited 18.9 s). Now it keeps at most MAX_VIEWS names and a hello
refreshes it only when it wakes a widget no view showed, at most HELLO_REFRESHES times a second;
a widget shown in a view is refreshed after every cell anyway."""
import time

import pytest
import torch

import syft_lab as sy
from syft_lab.widget import ChainWidget, live
from syft_lab.widget.widgets import HELLO_REFRESHES, MAX_VIEWS


@pytest.fixture
def counted_view():
    bob = sy.VirtualWorker("hello-bob")
    x_ptr = torch.ones(3).send(bob)
    w = ChainWidget(x_ptr, namespace={"x_ptr": x_ptr})
    w.send = lambda msg, buffers=None: None
    computed = []
    real = w._compute
    w._compute = lambda: computed.append(1) or real()
    yield w, computed, x_ptr
    w.close()
    bob.close()


def test_five_thousand_hellos_keep_a_few_names_and_cost_one_refresh(counted_view):
    w, computed, _ = counted_view
    for i in range(5000):
        w.handle_message({"type": "hello", "view": f"v{i}"})
    assert len(w._views) <= MAX_VIEWS
    assert len(computed) == 1  # the first hello woke it; the others found it shown
    assert w.active


def test_hellos_and_byes_in_turn_refresh_at_most_a_few_times_a_second(counted_view):
    w, computed, x_ptr = counted_view
    t0 = time.monotonic()
    for i in range(5000):
        w.handle_message({"type": "hello", "view": "v1"})
        w.handle_message({"type": "bye", "view": "v1"})
    seconds = time.monotonic() - t0
    assert len(computed) <= HELLO_REFRESHES * (int(seconds) + 1)
    assert not w._views and not w.active


def test_a_view_shown_after_a_quiet_while_still_catches_up_at_once(counted_view):
    w, computed, x_ptr = counted_view
    w.handle_message({"type": "hello", "view": "v1"})
    w.handle_message({"type": "bye", "view": "v1"})
    x_ptr.add_(1)
    w.handle_message({"type": "hello", "view": "v2"})  # woken again within the second: still refreshed
    assert len(computed) == 2 and w.active
    live.refresh_all()  # shown: refreshed after every cell as before
    assert len(computed) == 3
