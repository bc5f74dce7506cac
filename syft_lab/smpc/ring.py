"""The ring Z_2^64 as torch int64 tensors, and fixed-point encoding into it.

Every secret, share and triple is an int64 tensor; int64 addition and multiplication wrap
around modulo 2^64 (two's complement), which is exactly the ring's arithmetic. A ring element
read as a signed int64 in [-2^63, 2^63) is the integer it encodes.

Fixed point (syft_lab/tensors/fixed_precision.py) encodes a real x as round(x * 10**3).

Randomness: every random ring element (shares made here, the dealer's triples, masks and
bits) comes from ``workers.randomness`` (AES-256-CTR keyed from the OS), never from torch's generator.
"""
from __future__ import annotations

import torch

from ..workers.randomness import random_words


RING_BITS = 64
INT64 = torch.int64
RING_MIN, RING_MAX = -2**63, 2**63 - 1

def random_ring(shape) -> torch.Tensor:
    """Uniform ring elements from the cryptographic generator (``workers.randomness``)."""
    return random_words(shape)


def split(secret: torch.Tensor, n: int) -> list[torch.Tensor]:
    """n additive shares of ``secret`` (int64): n-1 uniform, the last makes the sum."""
    shares = [random_ring(secret.shape) for _ in range(n - 1)]
    last = secret.clone()
    for s in shares:
        last = last - s
    shares.append(last)
    return shares


def reconstruct(shares) -> torch.Tensor:
    """The sum of additive shares, modulo 2^64 (a new tensor)."""
    out = shares[0] + shares[1]
    for s in shares[2:]:
        out += s
    return out


def xor_reconstruct(shares) -> torch.Tensor:
    """The XOR of XOR shares (a new tensor)."""
    out = shares[0] ^ shares[1]
    for s in shares[2:]:
        out ^= s
    return out
