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


# --- products in the ring on float64 BLAS ---------------------------------------------------------
# torch's int64 matmul has no BLAS kernel. A ring product a @ b (mod 2^64) is exact from float64
# products of limbs: with 22-bit limbs a = a0 + a1 2^22 + a2 2^44 (a2: 20 bits), a @ b mod 2^64 =
# a0b0 + (a0b1 + a1b0) 2^22 + (a0b2 + a1b1 + a2b0) 2^44 (the terms at 2^66 and above vanish), and
# each float64 sum of at most 3k products of 22-bit limbs is an integer below 2^53 (exact) while
# 3k 2^44 < 2^53, i.e. for an inner dimension k <= LIMB_K. CrypTen's CUDA path does the same with
# 16-bit limbs.
LIMB_BITS = 22
LIMB_K = (2**53) // (3 * 2**(2 * LIMB_BITS))  # 170
_LOW = (1 << LIMB_BITS) - 1


def _limbs(t: torch.Tensor) -> list[torch.Tensor]:
    return [(t & _LOW).double(), ((t >> LIMB_BITS) & _LOW).double(),
            ((t >> (2 * LIMB_BITS)) & ((1 << (RING_BITS - 2 * LIMB_BITS)) - 1)).double()]


def limbs_fit(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``matmul(a, b)`` runs on float64 limbs: int64 matrices (or batches of them, the same
    rank) whose inner dimension is at most LIMB_K."""
    return (a.dtype == INT64 and b.dtype == INT64 and a.dim() == b.dim() and a.dim() in (2, 3)
            and a.shape[-1] <= LIMB_K)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b of int64 matrices (or batches of them: bmm) modulo 2^64 (the ring's product), through
    float64 BLAS when the inner dimension allows it exactly (k <= LIMB_K), else torch's int64
    kernel. (Stacking a limb's terms along the inner dimension, one BLAS call per limb, measured
    1.5x slower here at 100x100.)"""
    if not limbs_fit(a, b):
        return a @ b
    mm, acc = (torch.mm, torch.addmm) if a.dim() == 2 else (torch.bmm, torch.baddbmm)
    a0, a1, a2 = _limbs(a)
    b0, b1, b2 = _limbs(b)
    c0 = mm(a0, b0).long()
    c1 = acc(mm(a0, b1), a1, b0).long()
    c2 = acc(acc(mm(a0, b2), a1, b1), a2, b0).long()
    return c0 + (c1 << LIMB_BITS) + (c2 << (2 * LIMB_BITS))


def addmm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """c + a @ b in the ring (``matmul``)."""
    return c + matmul(a, b)
