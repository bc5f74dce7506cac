"""Moving a tensor between workers inside autograd: send, move and get keep the graph.

Split learning runs segment 1 on alice, moves its activation to bob and runs the rest there;
``loss.backward()`` must reach segment 1. The graph of a pointer lives in this process (only
values live on workers), so each transfer is an ``autograd.Function`` whose backward carries
the gradient back to where the tensor came from: a move's gradient moves back, a send's
gradient is fetched, a get's gradient is sent.

A tensor with history is copied, not taken: the ops that made it may have saved it for their
backward (``relu`` saves its result), so its original stays where it is until autograd and
its pointers let go of it.
"""
from __future__ import annotations

import torch


class SendWithGrad(torch.autograd.Function):
    """A local tensor with history, sent to ``worker``; its gradient comes back with .get()."""

    @staticmethod
    def forward(ctx, tensor, worker):
        return worker._send_copy(tensor, requires_grad=False)

    @staticmethod
    def backward(ctx, grad):
        return grad.get(), None  # the gradient of a pointer is a pointer on the same worker


class MoveWithGrad(torch.autograd.Function):
    """A pointer with history, copied to ``worker``; its gradient moves back to the source."""

    @staticmethod
    def forward(ctx, pointer, worker):
        ctx.source = pointer.location
        return worker._receive_from(pointer.location, pointer.id_at_location, requires_grad=False,
                                    keep_source=True)

    @staticmethod
    def backward(ctx, grad):
        return grad.move(ctx.source), None


class GetWithGrad(torch.autograd.Function):
    """A pointer with history, copied here; its gradient is sent back to the worker."""

    @staticmethod
    def forward(ctx, pointer):
        ctx.source = pointer.location
        return pointer.location._copy_out(pointer.id_at_location)

    @staticmethod
    def backward(ctx, grad):
        return ctx.source.send(grad)
