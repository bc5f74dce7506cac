"""torch.nn.init on fixed precision and shared tensors: the values are drawn here, as torch draws them
for a plain tensor of the same shape (the same random numbers for the same seed), then written in by
``copy_``, which encodes them and, for a shared tensor, shares them among its parties
(tensors/fixed_precision_views.py): the tensor stays shared. Without this, init functions that compute on the
drawn values (``trunc_normal_``'s erfinv, ``orthogonal_``'s QR) would run on secret shares, which
they cannot. Plain tensors go straight to torch's own function.
"""
from __future__ import annotations

import functools

import torch

from ..tensors.fixed_precision import FixedPrecisionTensor

_init = torch.nn.init
# torch.nn.init's in-place initializers (each takes the tensor first)
INITIALIZERS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
                "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
                "sparse_")


def _drawn_here(original):
    @functools.wraps(original)
    def initializer(tensor, *args, **kwargs):
        if not isinstance(tensor, FixedPrecisionTensor):
            return original(tensor, *args, **kwargs)
        plain = torch.empty(tuple(tensor.shape))
        original(plain, *args, **kwargs)
        with torch.no_grad():
            tensor.copy_(plain)
        return tensor

    initializer.__syft_drawn_here__ = original
    return initializer


for _name in INITIALIZERS:
    _fn = getattr(_init, _name, None)
    if _fn is not None and not hasattr(_fn, "__syft_drawn_here__"):
        setattr(_init, _name, _drawn_here(_fn))
