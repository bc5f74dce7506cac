"""The protocols on additive shares over Z_2^64 (semi-honest parties, a trusted dealer).

Notation: [x] is x additively shared (x = sum_i x_i mod 2^64), <x> is x XOR-shared
(x = XOR_i x_i). "Open" means every party sends its masked part here and the sum (or XOR) is
public. Round trips (RT) are counted for remote parties running in parallel; rounds and
messages per op are in docs/secure-computation.md.

- Linear ops (add, sub, neg, public mul, sums, views): each party alone, 1 message each.
- ``beaver``: [f(x, y)] for a bilinear f (mul, matmul, conv2d) with a triple (a, b, c=f(a, b))
  from the dealer: open e = x - a and d = y - b, then z_i = c_i + f(e, b_i) + f(x_i, d)
  (sum: c + f(e, b) + f(x, d) = f(x, y)). With ``div``, the product is truncated in the same
  message.
- ``truncate``: [x / d] for a public integer d. Two parties: SecureML's local truncation
  (party 0 floor(x_0 / d), party 1 ceil(x_1 / d)), no interaction, off by at most 1, wrong
  with probability |x| / 2^63. Three or more: the dealer's pair (r, floor(r / d)) with r
  uniform in [0, 2^62); open w = x + r (statistically hiding: distance |x| / 2^62), new shares
  floor(w / d) - [floor(r / d)], off by at most 1.
- ``msb``: the sign bit, CrypTen's arithmetic-to-binary conversion: party i's share x_i is a
  number known to i alone (XOR-shared as (x_i at i, 0 elsewhere)); 3 or more such numbers
  are reduced to two by carry-save adders (1 AND round each), then one Kogge-Stone
  carry-lookahead adder computes the carries (7 AND rounds: one for the generate bits, then
  log2(64) = 6 levels); the sum's top bit is the sign. AND gates use binary Beaver triples
  (<a>, <b>, <a & b>) from the dealer: open e = x ^ a, d = y ^ b, z_i = c_i ^ (e & b_i) ^ (x_i & d).
- ``bits_to_arith`` (B2A): with the dealer's bit r shared both ways, open c = b ^ r; then
  [b] = c + [r] - 2c[r].
- ``relu`` = x * (1 - msb(x)); comparisons are msb of a difference; max and argmax along a dim
  are a tournament of groups (``engine._tournament``); ``max_dim`` (pooling's one-hot) compares
  all pairs at once.
"""
from __future__ import annotations

import torch

from ..errors import SyftError
from ..tensors.additive_sharing import AdditiveSharingTensor
from . import ring
from .provider import BeaverTriple, Dealer, made_ahead, take_made_ahead
from .runtime import Program, run

aten = torch.ops.aten
AST = AdditiveSharingTensor
WORD = 64


def _provider(x: AST):
    if x.crypto_provider is None:
        raise SyftError("this op needs a crypto provider: share with crypto_provider=worker")
    return x.crypto_provider


def new_shared(template: AST, shares) -> AST:
    return AST(shares, template.crypto_provider)


def _programs(x: AST):
    return [Program(w) for w in x.parties]


def _sum_opened(progs, k=0, xor=False):
    parts = [p.opened[k] for p in progs]
    return ring.xor_reconstruct(parts) if xor else ring.reconstruct(parts)


def _sum_parts(progs, k=0) -> list:
    """The public sums of the values every party opened with ``open_all`` (group ``k``)."""
    parts = [p.parts(k) for p in progs]
    return [ring.reconstruct([mine[j] for mine in parts]) for j in range(len(parts[0]))]


def _flat(p, v):
    return p.op(aten.reshape.default, v, [-1])


# --- truncation --------------------------------------------------------------------------------

def _trunc_local(p, i, v, d):
    """SecureML's local truncation of one of two shares: floor(x_0 / d) and ceil(x_1 / d)."""
    if i == 0:
        return p.op(aten.div.Tensor_mode, v, d, rounding_mode="floor")
    return p.op(aten.div.Tensor_mode, p.op(aten.add.Tensor, v, d - 1), d, rounding_mode="floor")


def _finish_trunc_many(x: AST, dealer: Dealer, item: int, progs, k: int):
    """Three or more parties: w = x + r was opened as ``opened[k]``; the new shares are
    floor(w / d) - [floor(r / d)] (party 0) and -[floor(r / d)]_i (the others)."""
    d = dealer.d
    w = _sum_opened(progs, k)
    top = torch.div(w, d, rounding_mode="floor")
    fresh = _programs(x)
    for i, p in enumerate(fresh):
        rt = dealer.local(item, i)[1]
        p.keep(p.op(aten.clone.default, top - rt if i == 0 else -rt))
    run(fresh)
    return new_shared(x, [p.kept[0] for p in fresh])


def truncate(x: AST, d: int) -> AST:
    if type(d) is not int or d < 1:
        raise SyftError(f"truncation divides by a positive integer, got {d!r}")
    if d == 1:
        return x
    progs = _programs(x)
    if len(progs) == 2:
        for i, p in enumerate(progs):
            p.keep(_trunc_local(p, i, x.shares[i], d))
        run(progs)
        return new_shared(x, [p.kept[0] for p in progs])
    dealer = Dealer(_provider(x), len(progs))
    dealer.d = d
    item = dealer.trunc_pair(tuple(x.shape), d)
    dealer.generate(x.parties)
    for i, p in enumerate(progs):
        r = dealer.part(item, i)[0]
        p.open(p.op(aten.add.Tensor, x.shares[i], r))
    run(progs)
    return _finish_trunc_many(x, dealer, item, progs, 0)


# --- Beaver multiplication of two shared values -------------------------------------------------

def beaver(f, x: AST, y: AST, extra=(), div: int = 1) -> AST:
    """[f(x, y, *extra)] for a bilinear op f, by Beaver's formula; ``div``: divided by that
    public integer too, in the same message.

    With the dealer's triple [a], [b], [c] = [f(a, b)]: open e = x - a and d = y - b, then
    z = c + f(e, b) + f(x, d) = f(x, y), each party's share z_i = c_i + f(e, b_i) + f(x_i, d).
    Where the triple comes from and where each z_i is computed (here from the party's own
    pieces, or on the party; fused or not): the layouts of ``BeaverTriple`` (provider.py)."""
    n = len(x.shares)
    triple = BeaverTriple(_provider(x), x.parties, f, x is y, tuple(x.shape), tuple(y.shape), extra, div)
    progs = _programs(x)
    for i, p in enumerate(progs):  # open e = x - a and d = y - b (a square: e alone, d = e)
        p.open_all(triple.masked(p, i, x.shares[i], y.shares[i]))
    run(progs + triple.riding_along())  # the next pool's dealer program: not waited for
    e, d = triple.opened(_sum_parts(progs, 0))
    progs = _programs(x)
    for i, p in enumerate(progs):
        up = div - 1 if div != 1 and n == 2 and i == 1 else 0  # party 1's ceil(z / div) = floor((z + div - 1) / div)
        z = triple.share(p, i, x.shares[i], e, d, plus=up)  # c_i + f(e, b_i) + f(x_i, d) (+ up)
        if div == 1:
            p.keep(p.op(aten.clone.default, z) if isinstance(z, torch.Tensor) else z)  # (z computed here: sent)
        elif n == 2:  # SecureML's local truncation: floor(z_0 / div), ceil(z_1 / div)
            p.keep(p.op(aten.div.Tensor_mode, z, div, rounding_mode="floor"))
        else:  # three or more: open z + r, the dealer's truncation pair
            p.open(p.op(aten.add.Tensor, z, triple.truncation_mask(i)))
    run(progs)
    if div != 1 and n > 2:
        return _finish_trunc_many(x, triple.dealer, triple.trunc_item, progs, 0)
    return new_shared(x, [p.kept[0] for p in progs])


def public_op(f, x: AST, args_for, div: int = 1) -> AST:
    """Each party applies ``f(*args_for(i, share_i))`` (linear in its share), then the
    result is divided by ``div`` (in the same message for two parties)."""
    progs = _programs(x)
    n = len(progs)
    for i, p in enumerate(progs):
        z = p.op(f, *args_for(i, x.shares[i]))
        if div != 1 and n == 2:
            z = _trunc_local(p, i, z, div)
        p.keep(z)
    run(progs)
    out = new_shared(x, [p.kept[0] for p in progs])
    if div != 1 and n > 2:
        return truncate(out, div)
    return out


def each_round(x: AST, build) -> list:
    """One round in which each party builds several values from its share: ``build(i, p,
    share_i)`` returns a list of values (the same length for every party); returns one shared
    tensor per value."""
    progs = _programs(x)
    count = None
    for i, p in enumerate(progs):
        vals = build(i, p, x.shares[i])
        count = len(vals)
        for v in vals:
            p.keep(v)
    run(progs)
    return [new_shared(x, [p.kept[k] for p in progs]) for k in range(count)]


# --- binary circuits: the sign bit ---------------------------------------------------------------

def _and_open(p, X, Y, pieces):
    """Round A of an AND gate: open e = X ^ a and d = Y ^ b (one value: both, flattened)."""
    a, b, _ = pieces
    e = p.op(aten.bitwise_xor.Tensor, X, a)
    d = p.op(aten.bitwise_xor.Tensor, Y, b)
    return p.op(aten.cat.default, [_flat(p, e), _flat(p, d)])


def _and_finish(p, X, e, d, pieces):
    """Round B: z_i = c_i ^ (e & b_i) ^ (X_i & d)."""
    _, b, c = pieces
    z = p.op(aten.bitwise_xor.Tensor, c, p.op(aten.bitwise_and.Tensor, e, b))
    return p.op(aten.bitwise_xor.Tensor, z, p.op(aten.bitwise_and.Tensor, X, d))


def _split_ed(opened, shape):
    n = opened.numel() // 2
    return opened[:n].view(shape), opened[n:].view(shape)


def _shl(p, v, k):
    return p.op(aten.bitwise_left_shift.Tensor_Scalar, v, k)


def _xor(p, a, b):
    return p.op(aten.bitwise_xor.Tensor, a, b)


def _stack(p, vs):
    return p.op(aten.stack.default, vs, 0)


def _sel(p, v, i):
    return p.op(aten.select.int, v, 0, i)


def _plan_msb(dealer: Dealer, n: int, shape, masked: bool = False):
    """The dealer items the sign-bit circuit of n parties needs (``masked``: relu's [a], [a r] too)."""
    two = (2, *shape)
    csa = [dealer.binary_triple(two) for _ in range(max(0, n - 2))]
    g0 = dealer.binary_triple(shape)
    levels = [dealer.binary_pair(shape, 1 << j) for j in range(5)] + [dealer.binary_triple(shape)]
    bit = dealer.bit_pair(shape, masked=masked)
    return csa, g0, levels, bit


def msb_arith(x: AST, then=None, dealer: Dealer | None = None, items=None, first=None, share_of=None,
              negate: bool = False, along=None) -> AST:
    """[msb(x)] as an additive sharing of 0/1 (1: x is negative as a signed int64).

    ``first(i, p)``: optional, a value each party opens in the first adder round (relu's mask);
    ``then(i, p, c, opened_first)``: optional, builds each party's result in the last round from
    the opened bit c = msb ^ r (the dealer's r) instead of keeping [msb]; msb_arith then
    returns those programs, not run. ``share_of(i, p)``: party i's share of the number whose
    sign is wanted, computed in the first program (two parties: a comparison's difference
    costs no round of its own); ``negate``: [1 - msb] instead."""
    shape = tuple(x.shape)
    ahead = None
    if dealer is None:  # a sign bit of its own: its material made during the last one, the next one's now
        dealer, items, ahead = _msb_material(x)
        along = ahead[0].program_ahead()  # sent with the first adder round, not waited for
    csa, g0, levels, bit = items[:4]
    progs, state = _carry_save(x, dealer, csa, share_of)
    # Kogge-Stone: G = A & B, P = A ^ B; level j: G ^= P & (G << 2^j), P &= P << 2^j.
    for i, p in enumerate(progs):
        A, B = state[i]
        P0 = _xor(p, A, B)
        p.open(_and_open(p, A, B, dealer.part(g0, i)))
        if first is not None:
            p.open(first(i, p))
        p.keep(A)
        p.keep(P0)
    run(progs + ([along] if along is not None else []))  # along: the next step's dealer program
    if ahead is not None:
        ahead[0].collect()
        made_ahead("msb", x.crypto_provider, x.parties, shape, *ahead)
    e, d = _split_ed(_sum_opened(progs, xor=True), shape)
    opened_first = _sum_opened(progs, 1) if first is not None else None
    prev, last_pieces, e, d = _carry_levels(x, dealer, g0, levels, progs, e, d)
    c = _open_sign_bit(x, dealer, bit, prev, last_pieces, e, d)
    last = _programs(x)
    if then is not None:
        for i, p in enumerate(last):
            then(i, p, c, opened_first)
        return last
    return _bit_to_arith(x, dealer, bit, c, last, negate)


def _msb_material(x: AST):
    """(dealer, items, ahead) of a sign bit of its own: the material made during the last one of
    this shape (or now), and ``ahead``, the next one's (dealer, items), recorded now: its program
    rides in this one's first adder round."""
    n, shape = len(x.shares), tuple(x.shape)
    provider = _provider(x)
    plan = ("msb", n, shape)
    ready = take_made_ahead("msb", provider, x.parties, shape)
    dealer, items = ready if ready is not None else Dealer.planned(provider, n, plan,
                                                                    lambda d: _plan_msb(d, n, shape))
    dealer.generate(x.parties)
    ahead = Dealer.planned(provider, n, plan, lambda d: _plan_msb(d, n, shape))
    return dealer, items, ahead


def _carry_save(x: AST, dealer: Dealer, csa, share_of):
    """Carry-save adders: the parties' numbers x_0..x_{n-1} -> two numbers (A, B), one AND round
    each. Returns the programs of the next round (not run) and per party its XOR shares (A, B)."""
    n, shape = len(x.shares), tuple(x.shape)
    zero_cache = {}

    def number(p, i, j):
        """Party i's XOR share of the number x_j (party j's arithmetic share)."""
        if i == j:
            return share_of(i, p) if share_of is not None else x.shares[i]
        z = zero_cache.get(i)
        if z is None:
            z = zero_cache[i] = p.op(aten.zeros_like.default, x.shares[i])
        return z

    progs = _programs(x)
    state = [(number(p, i, 0), number(p, i, 1)) for i, p in enumerate(progs)]
    for k in range(n - 2):
        # open AND(A, B) and AND(C, A ^ B), stacked
        for i, p in enumerate(progs):
            (A, B), C = state[i], number(p, i, k + 2)
            AB = _xor(p, A, B)
            X = _stack(p, [A, C])
            Y = _stack(p, [B, AB])
            p.open(_and_open(p, X, Y, dealer.part(csa[k], i)))
            p.keep(X)
            p.keep(_xor(p, AB, C))  # S
        run(progs)
        e, d = _split_ed(_sum_opened(progs, xor=True), (2, *shape))
        nxt = _programs(x)
        for i, p in enumerate(nxt):
            X, S = progs[i].kept
            z = _and_finish(p, X, e, d, dealer.part(csa[k], i))
            maj = _xor(p, _sel(p, z, 0), _sel(p, z, 1))
            state[i] = (S, _shl(p, maj, 1))
        progs = nxt
        zero_cache.clear()
    return progs, state


def _carry_levels(x: AST, dealer: Dealer, g0, levels, progs, e, d):
    """The Kogge-Stone adder's generate gate (opened as ``e``, ``d`` by ``progs``) and its six
    levels, one AND round each; returns the last level's programs, the pieces of its gates, and
    its opened e and d."""
    shape = tuple(x.shape)
    prev_pieces = lambda i: dealer.part(g0, i)  # noqa: E731
    prev = progs
    kind = "g0"
    for level in range(6):
        shift = 1 << level
        nxt = _programs(x)
        for i, p in enumerate(nxt):
            if kind == "g0":
                A, P0 = prev[i].kept
                G = _and_finish(p, A, e, d, prev_pieces(i))
                P = P0
            else:  # the pair of gates sharing P: G ^= P & (G << k), P = P & (P << k)
                X, G, P0 = prev[i].kept
                a, b, c1, c2 = prev_pieces(i)
                k = 1 << (level - 1)
                G = _xor(p, G, _and_finish(p, X, e, d, (a, b, c1)))
                P = _and_finish(p, X, e, _shl(p, e, k), (a, _shl(p, a, k), c2))
            # open P ^ a once and (G << k) ^ b (a level's second gate's masked input is (P ^ a) << k)
            p.open(_and_open(p, P, _shl(p, G, shift), dealer.part(levels[level], i)[:3]))
            p.keep(P)
            p.keep(G)
            p.keep(P0 if kind == "g0" else prev[i].kept[2])
        run(nxt)
        e, d = _split_ed(_sum_opened(nxt, xor=True), shape)
        prev_pieces = (lambda lv: (lambda i: dealer.part(levels[lv], i)))(level)
        prev, kind = nxt, "level"
    return prev, prev_pieces, e, d


def _open_sign_bit(x: AST, dealer: Dealer, bit, prev, prev_pieces, e, d):
    """The carries are known after the last level's gates: bit 63 of the sum is the sign; open
    c = msb ^ r (r: the dealer's bit, B2A) and return c."""
    nxt = _programs(x)
    for i, p in enumerate(nxt):
        X, G, P0 = prev[i].kept
        z = _and_finish(p, X, e, d, prev_pieces(i))
        G = _xor(p, G, z)
        s = _xor(p, P0, _shl(p, G, 1))
        b = p.op(aten.bitwise_and.Scalar, p.op(aten.bitwise_right_shift.Tensor_Scalar, s, WORD - 1), 1)
        rb = dealer.part(bit, i)[0]
        p.open(_xor(p, b, rb))
    run(nxt)
    return _sum_opened(nxt, xor=True)


def _bit_to_arith(x: AST, dealer: Dealer, bit, c, progs, negate: bool) -> AST:
    """[b] = c + [r] - 2 c [r] (party 0 adds c), from the opened c = b ^ r; ``negate``: [1 - b]."""
    coef = 1 - 2 * c
    for i, p in enumerate(progs):
        ra = dealer.local(bit, i)[1]
        bi = ra * coef  # computed here: public coefficients times the dealer's piece for party i
        if i == 0:
            bi = bi + c
        if negate:
            bi = (1 - bi) if i == 0 else -bi
        p.keep(p.op(aten.clone.default, bi))
    run(progs)
    return new_shared(x, [p.kept[0] for p in progs])


def compare(name: str, a, b) -> AST:
    """[a > b] etc. as additive 0/1 shares (a, b: shared or public ring values):
    a > b is msb(b - a), a >= b is 1 - msb(a - b)."""
    if name == "gt":
        return _msb_of_difference(b, a)
    if name == "lt":
        return _msb_of_difference(a, b)
    if name == "ge":
        return _msb_of_difference(a, b, negate=True)
    if name == "le":
        return _msb_of_difference(b, a, negate=True)
    raise SyftError(f"comparison {name!r} is not supported on shared tensors (gt, lt, ge, le are)")


def _msb_of_difference(a, b, negate=False) -> AST:
    """[msb(a - b)] (or [1 - msb(a - b)]); with two parties the difference is taken in the
    circuit's first message."""
    t = a if isinstance(a, AST) else b
    pub_shape = () if isinstance(a, AST) and isinstance(b, AST) else tuple(
        getattr(b if isinstance(a, AST) else a, "shape", ()))
    same_shape = tuple(torch.broadcast_shapes(tuple(t.shape), pub_shape)) == tuple(t.shape)
    if len(t.shares) != 2 or not same_shape:
        return msb_arith(_sub(a, b), negate=negate)

    def share_of(i, p):
        if isinstance(a, AST) and isinstance(b, AST):
            return p.op(aten.sub.Tensor, a.shares[i], b.shares[i])
        if isinstance(a, AST):
            return p.op(aten.sub.Tensor, a.shares[i], b) if i == 0 else a.shares[i]
        pa = a if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=torch.int64)
        return p.op(aten.rsub.Tensor, b.shares[i], pa) if i == 0 else p.op(aten.neg.default, b.shares[i])

    return msb_arith(t, share_of=share_of, negate=negate)


def _sub(a, b):
    """a - b in one round, for shared or public a and b (one of them shared)."""
    if isinstance(a, AST):
        return a - b
    if not isinstance(a, torch.Tensor):
        a = torch.tensor(a, dtype=torch.int64)
    shape = list(torch.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    zeros = torch.zeros(shape, dtype=torch.int64)
    return public_op(aten.sub.Tensor, b, lambda i, s: (a if i == 0 else zeros, s))


def relu(x: AST) -> AST:
    """x - x * msb(x), with the product folded into the sign bit's rounds.

    The dealer's bit r (the one B2A uses) comes with [a] and [a * r] for a uniform a: the
    parties open e = x - a in the adder's first round, so [x * r] = [a * r] + e [r] is known
    before the sign is. Once c = msb ^ r is open, x * msb = c x + (1 - 2c) x r is linear:
    relu(x)_i = x_i (1 - c) - (1 - 2c) [x r]_i, one message, not waited for. 8 round trips; the first relu of a shape adds the
    dealer's (later ones find their material made during the previous relu: its first adder round)."""
    n = len(x.shares)
    shape = tuple(x.shape)
    provider = _provider(x)
    plan = ("relu", n, shape)
    ready = take_made_ahead("relu", provider, x.parties, shape)  # made during the last relu of this shape
    if ready is not None:
        dealer, items = ready
    else:
        dealer, items = Dealer.planned(provider, n, plan, lambda d: _plan_msb(d, n, shape, masked=True))
    bit = items[3]
    dealer.generate(x.parties)
    # The next relu's material: its dealer program rides in this relu's first adder round.
    nxt, nxt_items = Dealer.planned(provider, n, plan, lambda d: _plan_msb(d, n, shape, masked=True))

    def first(i, p):
        a = dealer.part(bit, i)[2]
        return p.op(aten.sub.Tensor, x.shares[i], a)

    def then(i, p, c, e):
        _, r, _, ar = dealer.local(bit, i)
        k = (1 - 2 * c) * (ar + e * r)  # party i's [x r]_i times a public factor: its own pieces
        p.keep(p.op(aten.sub.Tensor, p.op(aten.mul.Tensor, x.shares[i], 1 - c), k))

    progs = msb_arith(x, then=then, dealer=dealer, items=items, first=first, along=nxt.program_ahead())
    nxt.collect()
    made_ahead("relu", provider, x.parties, shape, nxt, nxt_items)
    dealer.rows = None  # the last round needs no stored row: its release rides in this round's messages
    run(progs)
    return new_shared(x, [p.kept[0] for p in progs])
