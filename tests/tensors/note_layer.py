"""NoteTensor: a toy third layer that attaches a string to each op done to it.

Why it exists: the proof of the layer protocol (issue #13, "Done when"). This file is the only
code a NoteTensor needs: it registers itself with ``register_layer`` and declares what the
wire format, the workers' stores and the views read (kind, wire code and schema, children,
node fields, display, actions, stored copy, wire codec). Nothing else in syft_lab names it.
tests/tensors/test_layer_protocol.py sends one through a real websocket worker process (which
imports this module) and renders it in the text and SVG views.
"""
from __future__ import annotations

import torch

from syft_lab.errors import SyftError
from syft_lab.tensors.base import ChainLayer, forward_to_child, layer_like
from syft_lab.tensors.registry import register_layer, wire_list, wire_text

_seq = (list, tuple)


def _short(func) -> str:
    return str(func).split(".")[1] if str(func).startswith("aten.") else str(func)


@register_layer
class NoteTensor(ChainLayer):
    """Forwards each op to ``child``; the result carries the same ``note`` and one more entry
    in ``notes``: ``"<op>: <note>"``."""

    kind = "note"
    wire_code = 40
    wire_schema = {"note": str, "notes": list}
    node_actions = ("send",)

    @staticmethod
    def __new__(cls, child, note: str, notes=()):
        if not isinstance(child, torch.Tensor):
            raise TypeError(f"NoteTensor wraps a tensor, got {type(child).__name__}")
        rg = child.requires_grad
        r = layer_like(cls, child, rg)
        r.child = child.detach() if rg else child
        r.note = note
        r.notes = list(notes)
        return r

    def __init__(self, child, note, notes=()):
        pass

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        found = []

        def unwrap(layer):
            found.append(layer)
            return layer.child

        inner_args, inner_kwargs = forward_to_child(args, kwargs, unwrap, cls)  # the one unwrap rule (base.py)
        out = func(*inner_args, **(inner_kwargs or {}))
        first = found[0]
        notes = first.notes + [f"{_short(func)}: {first.note}"]

        def wrap(o):
            for orig, u in zip(args, inner_args):
                if o is u and isinstance(orig, cls):  # in place: the caller's own object
                    orig.notes = notes
                    return orig
            if isinstance(o, torch.Tensor):
                return cls(o, first.note, notes)
            if type(o) in _seq:
                return type(o)(wrap(x) for x in o)
            return o

        return wrap(out)

    # --- the layer protocol ---------------------------------------------------------------
    def node_fields(self) -> dict:
        return {"note": self.note, "notes": self.notes[-5:]}

    def display(self) -> dict:
        n = len(self.notes)
        lines = [f"{n} op{'s' if n != 1 else ''} noted"] + self.notes[-2:]
        return {"label": "NoteTensor", "lines": lines, "badge": f"note: {self.note[:40]}"}

    def stored_copy(self, copy_child):
        return type(self)(copy_child(self.child), self.note, self.notes)

    def wire_fields(self) -> dict:
        return {"note": self.note, "notes": self.notes}

    @classmethod
    def from_wire(cls, fields, children):
        if len(children) != 1:
            raise SyftError("a NoteTensor has one child")
        notes = [wire_text(n, "a note") for n in wire_list(fields["notes"], "notes", 100_000)]
        return cls(children[0], wire_text(fields["note"], "a note"), notes)
