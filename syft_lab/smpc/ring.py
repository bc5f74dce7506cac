"""The ring Z_2^64 as torch int64 tensors, and fixed-point encoding into it.

Every secret, share and triple is an int64 tensor; int64 addition and multiplication wrap
around modulo 2^64 (two's complement), which is exactly the ring's arithmetic. A ring element
read as a signed int64 in [-2^63, 2^63) is the integer it encodes.

Fixed point (syft_lab/tensors/fixed_precision.py) encodes a real x as round(x * 10**3).

Randomness: every random ring element (shares made here, the dealer's triples, masks and
bits) comes from ``workers.randomness`` (AES-256-CTR keyed from the OS), never from torch's generator.
"""
from __future__ import annotations

import threading
import time

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
# products of limbs: with 22-bit limbs a = a0 + a1 2^22 + a2 2^44 (a2: the top 20 bits),
# a @ b mod 2^64 = c0 + c1 2^22 + c2 2^44 with c0 = a0 b0, c1 = a0 b1 + a1 b0,
# c2 = a0 b2 + a1 b1 + a2 b0 (the pairs at 2^66 and above vanish mod 2^64: six limb products of
# nine). Every term is a nonnegative integer, so every partial sum BLAS forms, in any order, is at
# most the whole sum; over an inner dimension k the largest is c1's, below k 2 (2^22)^2 = k 2^45
# (c2's is below k (2^44 + 2 2^42) = k 1.5 2^44), so both stay below 2^53, exact in float64, for
# k <= LIMB_K = 256. Past it: torch's int64 kernel. CrypTen's CUDA path does the same with 16-bit
# limbs.
# Layout: a's limbs side by side along the inner dimension, [a0 | a1 | a2] (m x 3k), b's stacked
# in reverse, [b2; b1; b0] (3k x n), each made by one broadcast shift and mask and one conversion;
# then c2 = [a0 a1 a2] @ [b2; b1; b0], c1 = [a0 a1] @ [b1; b0] and c0 = a0 @ b0 are three BLAS
# calls on views of the two (no copies), six limb products' work.
LIMB_BITS = 22
LIMB_K = 256
_LOW = (1 << LIMB_BITS) - 1
_TOP = (1 << (RING_BITS - 2 * LIMB_BITS)) - 1
_SHIFT_COLS = torch.tensor([0, LIMB_BITS, 2 * LIMB_BITS]).view(3, 1)
_MASK_COLS = torch.tensor([_LOW, _LOW, _TOP]).view(3, 1)
_SHIFT_ROWS = torch.tensor([2 * LIMB_BITS, LIMB_BITS, 0]).view(3, 1, 1)
_MASK_ROWS = torch.tensor([_TOP, _LOW, _LOW]).view(3, 1, 1)


# Scratch for the limbs, kept per thread and reused: a fresh 0.5 MB tensor each product is memory
# the allocator maps from the OS and faults in page by page (on this VM that was ~40% of a 100x200
# ring product's time). A few buffers per thread, by size; they hold the last operands' limbs,
# never shown (no repr, log or error reads them).
_scratch = threading.local()
_SCRATCH_KEYS = 8


SCRATCH_MAX = 2**20  # elements (8 MB): a larger buffer is made for its product and let go


def _buffer(role: str, numel: int, dtype) -> torch.Tensor:
    if numel > SCRATCH_MAX:
        return torch.empty(numel, dtype=dtype)
    cache = getattr(_scratch, "bufs", None)
    if cache is None:
        cache = _scratch.bufs = {}
    key = (role, numel, dtype)
    buf = cache.pop(key, None)
    if buf is None:
        buf = torch.empty(numel, dtype=dtype)
        while len(cache) >= _SCRATCH_KEYS:
            cache.pop(next(iter(cache)))
    cache[key] = buf  # the newest last
    return buf


def _limbs_into(out: torch.Tensor, ints: torch.Tensor, t: torch.Tensor, shifts, masks, dim: int) -> None:
    """t's limbs (t unsqueezed at ``dim``, broadcast against ``shifts``) as float64 into ``out``
    (``ints``: int64 scratch of out's shape)."""
    torch.bitwise_right_shift(t.unsqueeze(dim), shifts, out=ints)
    ints &= masks
    out.copy_(ints)


def _limb_cols_of(parts, role: str = "ac") -> torch.Tensor:
    """(..., m, k_j) int64 matrices -> (..., m, 3K) float64, K = sum k_j: the limbs of [p_0 | p_1 | ...]
    side by side, [t0 | t1 | t2] with t = [p_0 | p_1 | ...] (no int64 concatenation made)."""
    *lead, m, _ = parts[0].shape
    K = sum(int(t.shape[-1]) for t in parts)
    shape = (*lead, m, 3, K)
    numel = 3 * m * K * (int(torch.Size(lead).numel()) if lead else 1)
    ints = _buffer(role + "i", numel, INT64).view(shape)
    out = _buffer(role + "f", numel, torch.float64).view(shape)
    at = 0
    for t in parts:
        k = int(t.shape[-1])
        _limbs_into(out[..., at:at + k], ints[..., at:at + k], t, _SHIFT_COLS, _MASK_COLS, -2)
        at += k
    return out.view(*lead, m, 3 * K)


def _limb_rows_of(parts, role: str = "br") -> torch.Tensor:
    """(..., k_j, n) int64 matrices -> (..., 3K, n) float64: the limbs of [p_0; p_1; ...] stacked,
    [t2; t1; t0] with t = [p_0; p_1; ...]."""
    *lead, _, n = parts[0].shape
    K = sum(int(t.shape[-2]) for t in parts)
    shape = (*lead, 3, K, n)
    numel = 3 * K * n * (int(torch.Size(lead).numel()) if lead else 1)
    ints = _buffer(role + "i", numel, INT64).view(shape)
    out = _buffer(role + "f", numel, torch.float64).view(shape)
    at = 0
    for t in parts:
        k = int(t.shape[-2])
        _limbs_into(out[..., at:at + k, :], ints[..., at:at + k, :], t, _SHIFT_ROWS, _MASK_ROWS, -3)
        at += k
    return out.view(*lead, 3 * K, n)


def _limb_cols(t: torch.Tensor) -> torch.Tensor:
    """(..., m, k) int64 -> (..., m, 3k) float64: [t0 | t1 | t2] (its limbs, low first)."""
    return _limb_cols_of([t])


def _limb_rows(t: torch.Tensor) -> torch.Tensor:
    """(..., k, n) int64 -> (..., 3k, n) float64: [t2; t1; t0] (its limbs, top first)."""
    return _limb_rows_of([t])


def limbs_fit(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``matmul(a, b)`` runs on float64 limbs: int64 matrices (or batches of them, the same
    rank) whose inner dimension is at most LIMB_K."""
    return (a.dtype == INT64 and b.dtype == INT64 and a.dim() == b.dim() and a.dim() in (2, 3)
            and a.shape[-1] <= LIMB_K)


def _limb_product(A: torch.Tensor, B: torch.Tensor, k: int) -> torch.Tensor:
    """The ring word of [a0 a1 a2] @ [b2; b1; b0] (``_limb_cols``, ``_limb_rows``, inner dim k)."""
    mm = torch.mm if A.dim() == 2 else torch.bmm
    out = mm(A[..., :k], B[..., 2 * k:, :]).long()
    c1 = mm(A[..., :2 * k], B[..., k:, :]).long()
    c2 = mm(A, B).long()
    c1 <<= LIMB_BITS
    c2 <<= 2 * LIMB_BITS
    out += c1
    out += c2
    return out


# Which exact kernel is faster depends on the machine and its load: unloaded on 2 AVX-512 cores
# torch's int64 kernel took 150-170 us for a 100x100 product and the limbs 300-350 us, while in a
# loaded full benchmark run the int64 kernel took 2.2-2.4 ms and the limbs 0.7-1.0 ms. Both are the
# same product mod 2^64 (bit for bit), so the choice changes no value: each product runs on the
# path with the lower recent cost per multiply-add (CPU time of this thread, an average over the
# last few products of that path), and every EXPLORE-th product runs on the other path to keep its
# figure current.
EXPLORE = 32
_cost = {"limbs": None, "int64": None}  # ns per multiply-add, a moving average
_calls = [0]


def prefer_limbs() -> bool:
    """Whether the float64 limbs are the faster exact path here now (no figure yet: yes)."""
    lim, i64 = _cost["limbs"], _cost["int64"]
    return lim is None or i64 is None or lim <= i64


def _timed(path: str, fn, work: int):
    t0 = time.thread_time_ns()
    out = fn()
    cost = (time.thread_time_ns() - t0) / max(work, 1)
    old = _cost[path]
    _cost[path] = cost if old is None else 0.75 * old + 0.25 * cost
    return out


SMALL = 2**15  # multiply-adds: below, the int64 kernel (the limbs' fixed costs dominate)


def _dispatch(work: int, limbs, int64):
    if work < SMALL:
        return int64()
    _calls[0] += 1
    use = prefer_limbs()
    if _calls[0] % EXPLORE == 0 or _cost["int64" if use else "limbs"] is None and _calls[0] > 1:
        use = not use
    return _timed("limbs", limbs, work) if use else _timed("int64", int64, work)


def _work(a: torch.Tensor, b: torch.Tensor) -> int:
    return int(a.numel()) * int(b.shape[-1])


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b of int64 matrices (or batches of them: bmm) modulo 2^64 (the ring's product): on
    float64 limbs (when the inner dimension allows it exactly, k <= LIMB_K) or torch's int64
    kernel, whichever is faster here (``_dispatch``; the same value either way)."""
    if not limbs_fit(a, b):
        return a @ b
    return _dispatch(_work(a, b), lambda: _limb_product(_limb_cols(a), _limb_rows(b), a.shape[-1]), lambda: a @ b)


def limb_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b mod 2^64 on float64 limbs, always (k <= LIMB_K; ``matmul`` chooses)."""
    if not limbs_fit(a, b):
        raise ValueError(f"limb products take int64 matrices with an inner dimension <= {LIMB_K}")
    return _limb_product(_limb_cols(a), _limb_rows(b), a.shape[-1])


def _int64_sum(pairs):
    out = pairs[0][0] @ pairs[0][1]
    for a, b in pairs[1:]:
        out += a @ b
    return out


def matmul_sum(pairs) -> torch.Tensor:
    """sum_j a_j @ b_j modulo 2^64 for int64 matrices (a_j: m x k_j, b_j: k_j x n; or batches of
    them): one ring product of [a_0 | a_1 | ...] and [b_0; b_1; ...], on float64 limbs while
    K = sum k_j <= LIMB_K (the limbs are written side by side, no int64 concatenation), else, or
    where it is faster (``_dispatch``), torch's int64 kernel on each pair."""
    pairs = list(pairs)
    K = sum(int(a.shape[-1]) for a, _ in pairs)
    if K > LIMB_K or not all(limbs_fit(a, b) for a, b in pairs):
        return _int64_sum(pairs)
    return _dispatch(sum(_work(a, b) for a, b in pairs),
                     lambda: _limb_product(_limb_cols_of([a for a, _ in pairs]), _limb_rows_of([b for _, b in pairs]), K),
                     lambda: _int64_sum(pairs))


def addmm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """c + a @ b in the ring (``matmul``)."""
    return c + matmul(a, b)
