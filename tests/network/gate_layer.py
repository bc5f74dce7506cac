"""A layer type whose decoding waits at a gate the test controls (a worker imports it with
``--layers tests.network.gate_layer``).

Why: to show that a slow decode does not hold up the event loop, the test needs a decode that
is certainly in progress while it pings, without guessing how long a big frame takes. Its
``from_wire`` says "started" through one FIFO, waits for a byte on another, then refuses the
value (so nothing is ever stored).
"""
import os

from syft_lab.errors import SyftError
from syft_lab.tensors.base import ChainLayer
from syft_lab.tensors.registry import register_layer

GATE_DIR = "SYFT_LAB_TEST_GATE"  # environment variable: the folder holding the FIFOs


@register_layer
class GateTensor(ChainLayer):
    kind = "gate"
    wire_code = 77
    wire_schema = {"gate": str}

    @classmethod
    def from_wire(cls, fields, children):
        folder = os.environ[GATE_DIR]
        with open(os.path.join(folder, "started"), "wb") as f:
            f.write(b"1")
        with open(os.path.join(folder, "go"), "rb") as f:
            f.read(1)
        raise SyftError("the gate opened: a gate is never stored")
