import json
from pathlib import Path

import pytest

from syft_lab.widget import live
from widget_isolation import forget_earlier_tests

FIXTURES = Path(__file__).resolve().parents[1] / "js" / "fixtures"


def _idle(scheduler) -> None:
    scheduler.loop, scheduler.in_cell, scheduler.dirty, scheduler.scheduled = None, False, False, False


@pytest.fixture(autouse=True)
def close_widgets():
    """Each test's widgets are closed at its end, so no test refreshes another's; no test
    inherits an event loop or an open cell from another (Playwright runs a loop too), nor the
    garbage of another (forget_earlier_tests)."""
    forget_earlier_tests()
    _idle(live.scheduler)
    before = set(map(id, live.widgets()))
    yield
    _idle(live.scheduler)
    for w in live.widgets():
        if id(w) not in before:
            w.close()


@pytest.fixture
def plan_node():
    return json.loads((FIXTURES / "plan_node.json").read_text())


class Sent(list):
    """Captures what a widget sends to the browser."""

    def of(self, type_):
        return [m for m in self if m.get("type") == type_]


@pytest.fixture
def capture():
    """capture(widget) -> the list of messages the widget sends from then on."""
    def start(widget) -> Sent:
        sent = Sent()
        widget.send = lambda msg, buffers=None: sent.append(msg)
        return sent

    return start
