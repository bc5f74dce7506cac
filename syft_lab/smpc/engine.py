"""The ops of AdditiveSharingTensor: which protocol each aten op becomes.

Registered with the layer (``tensors/additive_sharing.set_engine``) when syft_lab.smpc is
imported. Arguments of an op are shared tensors (all among the same parties, in the same
order), public int64 tensors and Python ints; anything else is a clear SyftError.
"""
from __future__ import annotations

import functools

import torch

from ..errors import SyftError
from ..tensors.additive_sharing import AdditiveSharingTensor, set_engine
from ..tensors.base import ChainLayer, flat_layers
from ..tensors.pointer import PointerTensor
from ..workers.base import BaseWorker
from . import protocols, ring, runtime

aten = torch.ops.aten
AST = AdditiveSharingTensor
INT64 = torch.int64

# Ops every party applies to its own share with the same other arguments.
_PER_SHARE = {aten.view, aten._unsafe_view, aten.reshape, aten.t, aten.transpose, aten.permute, aten.expand,
              aten.unsqueeze, aten.squeeze, aten.select, aten.slice, aten.flip, aten.index_select, aten.repeat,
              aten.narrow, aten.flatten, aten.sum, aten.neg, aten.unfold, aten.unfold_backward, aten.contiguous, aten.movedim,
              aten.constant_pad_nd,  # padding with 0: each party pads its share (0 is a sharing of 0)
              aten.cumsum, aten.diagonal, aten.trace, aten.gather, aten.take}  # issue 41: a public index or none
_BILINEAR = {aten.mul, aten.mm, aten.bmm, aten.convolution, aten.matmul}
PAIRWISE_MAX = 256  # max_dim compares all m^2 pairs at once: the caller's one-hot (pooling windows) only
# The estimate that picks a reduction's group sizes (Engine.reduction_plan), from bench_smpc on 2
# shared cores: a round between worker processes (its round trip and the programs' handling) took
# 2.5 ms at load 2 and 15 ms at load 20, an element through a sign bit 6-8 us; between the two.
ROUND_SECONDS = 5e-3
ELEMENT_SECONDS = 6e-6
SIGN_ROUNDS = 8  # round trips of one batch of sign bits (a relu, a comparison) for two parties
GROUP_MAX = 32  # the largest group a level compares pairwise
BIG = 2**40  # the padding of a level's last group: below any encoded value (|x| scale m < 2^40)


def _tree_rounds(size: int, index: bool) -> int:
    """Rounds after a level's sign bits: the products of each element's size - 1 wins (and its
    value, for the values alone; two elements: the relu needs none)."""
    if not index:
        return 0 if size == 2 else (size - 1).bit_length()
    return (size - 2).bit_length() + 1


@functools.lru_cache(maxsize=256)
def _plan(rows: int, m: int, index: bool) -> tuple:
    """Engine.reduction_plan: the least estimated time over every sequence of group sizes."""
    @functools.lru_cache(maxsize=None)
    def best(w):
        if w == 1:
            return 0.0, ()
        options = []
        for g in range(2, min(w, GROUP_MAX) + 1):
            groups = -(-w // g)
            cost = ((SIGN_ROUNDS + _tree_rounds(g, index)) * ROUND_SECONDS
                    + rows * groups * g * (g - 1) // 2 * ELEMENT_SECONDS)
            rest_cost, rest = best(groups)
            options.append((cost + rest_cost, (g, *rest)))
        return min(options)

    return best(m)[1]


def _pair_tables(g: int):
    """For each element i of a group and each other j (in order): which pair's bit
    [k_a > k_b] (a < b) says i beats j, and the public (sign, constant) making it so: the bit
    itself for i < j, 1 - the bit for j < i."""
    first, second = torch.triu_indices(g, g, 1)
    number = {(int(a), int(b)): n for n, (a, b) in enumerate(zip(first, second))}
    pair = torch.zeros(g, g - 1, dtype=INT64)
    sign = torch.ones(g, g - 1, dtype=INT64)
    const = torch.zeros(g, g - 1, dtype=INT64)
    for i in range(g):
        for slot, j in enumerate(j for j in range(g) if j != i):
            pair[i, slot] = number[(min(i, j), max(i, j))]
            if j < i:
                sign[i, slot], const[i, slot] = -1, 1
    return pair, sign, const


def check_same_parties(tensors) -> AST:
    first = tensors[0]
    for t in tensors[1:]:
        if [w.id for w in t.parties] != [w.id for w in first.parties] or any(
                a is not b for a, b in zip(t.parties, first.parties)):
            raise SyftError(f"an op mixes values shared among {[w.id for w in first.parties]} with values shared "
                            f"among {[w.id for w in t.parties]}: share both among the same workers, in the same order")
        if (t.crypto_provider is not None and first.crypto_provider is not None
                and t.crypto_provider is not first.crypto_provider):
            raise SyftError(f"an op mixes values with crypto provider {first.crypto_provider.id!r} and "
                            f"{t.crypto_provider.id!r}: use one crypto provider")
    if first.crypto_provider is None:
        for t in tensors[1:]:
            if t.crypto_provider is not None:
                return t
    return first


def _public(a):
    """A public ring operand: a Python int or a plain int64 tensor."""
    if isinstance(a, bool):
        return int(a)
    if isinstance(a, int):
        return a
    if isinstance(a, torch.Tensor) and not isinstance(a, ChainLayer):
        if a.is_floating_point() or a.is_complex():
            raise SyftError(f"a shared int64 value mixes only with integers, got a {a.dtype} tensor: encode reals "
                            f"with .fix_precision() first")
        return a.detach().to(INT64)
    if isinstance(a, float):
        raise SyftError("a shared int64 value mixes only with integers: use .fix_precision() for real numbers")
    raise SyftError(f"cannot mix a {type(a).__name__} into an op on shared values")


class Engine:
    # --- sharing -------------------------------------------------------------------------------
    def share(self, secret, workers, crypto_provider=None) -> AST:
        if len(workers) == 1 and isinstance(workers[0], (list, tuple)):
            workers = tuple(workers[0])
        if len(workers) < 2:
            raise SyftError(f"additive sharing needs at least two workers (parties), got {len(workers)}: a single "
                            f"worker would hold the secret itself")
        for w in workers:
            if not isinstance(w, BaseWorker):
                raise SyftError(f"share() takes workers, got {type(w).__name__}")
        if len({id(w) for w in workers}) != len(workers) or len({w.id for w in workers}) != len(workers):
            raise SyftError(f"each share goes to its own worker, got {[w.id for w in workers]}")
        if crypto_provider is not None:
            if not isinstance(crypto_provider, BaseWorker):
                raise SyftError(f"crypto_provider is a worker, got {type(crypto_provider).__name__}")
            if any(crypto_provider is w or crypto_provider.id == w.id for w in workers):
                raise SyftError(f"the crypto provider {crypto_provider.id!r} is also a party: it would see a share "
                                f"and the randomness that masks the others. Pick a worker that is not a party")
        if isinstance(secret, PointerTensor):
            return self._share_where_it_lives(secret, workers, crypto_provider)
        if isinstance(secret, ChainLayer) or not isinstance(secret, torch.Tensor):
            raise SyftError(f"share() splits a plain int64 tensor (or a fixed precision one), got "
                            f"{type(secret).__name__}")
        if secret.dtype != INT64:
            raise SyftError(f"share() splits int64 tensors; encode {secret.dtype} values with .fix_precision() first")
        parts = ring.split(secret.detach(), len(workers))
        shares = [w.send(s) for w, s in zip(workers, parts)]
        return AST(shares, crypto_provider)

    def _share_where_it_lives(self, secret: PointerTensor, workers, crypto_provider) -> AST:
        """Shares of the int64 tensor a pointer points to, made on its worker (the data owner):
        it draws n - 1 uniform shares itself (a ``deal``), keeps x - their sum as its own share
        and each other share moves to its party. The owner must be a party: its share never
        leaves it, so the shares that pass through this process on their way (uniform words)
        never add up to x here."""
        secret._check_alive()
        owner = secret.location
        if secret.dtype != INT64:
            raise SyftError(f"share() splits int64 tensors; encode the {secret.dtype} values on their worker with "
                            f"ptr.fix_precision() first")
        mine = [i for i, w in enumerate(workers) if w is owner]
        if not mine:
            raise SyftError(f"a tensor on {owner.id!r} is shared from there among parties {owner.id!r} is one of "
                            f"(got {[w.id for w in workers]}): the other shares pass through this process on their "
                            f"way, and with the owner's share among them they would add up to the secret here")
        prog = runtime.Program(owner)
        own = prog.op(aten.clone.default, secret)  # the stored input comes before the drawn ones
        drawn = [prog.draw(tuple(secret.shape)) for _ in range(len(workers) - 1)]
        for r in drawn:
            own = prog.op(aten.sub.Tensor, own, r)
        keys = [prog.keep(r) for r in drawn]
        own_key = prog.keep(own)
        runtime.run([prog])
        others = iter(prog.kept[k] for k in keys)
        shares = [prog.kept[own_key] if i == mine[0] else next(others).move(w) for i, w in enumerate(workers)]
        return AST(shares, crypto_provider)

    def reconstruct(self, x: AST) -> torch.Tensor:
        parts = [p.get() for p in x.shares]
        return ring.reconstruct(parts)

    def refresh(self, x: AST) -> AST:
        """Fresh shares: each party adds its share of a fresh sharing of zero."""
        zeros = ring.split(torch.zeros(x.shape, dtype=INT64), len(x.shares))
        return protocols.public_op(aten.add.Tensor, x, lambda i, s: (s, zeros[i]))

    # --- dispatch ------------------------------------------------------------------------------
    def dispatch(self, func, args, kwargs):
        shared = flat_layers(AST, list(args) + list(kwargs.values()))
        x = check_same_parties(shared)
        packet = func.overloadpacket
        if packet in (aten.detach, aten.alias, aten.lift_fresh):  # the same value: the same shares
            return AST(list(args[0].shares), args[0].crypto_provider, args[0].group)
        if packet is aten.clone:
            return protocols.public_op(aten.clone.default, x, lambda i, s: (s,))
        if packet in (aten.add, aten.sub, aten.rsub):
            return self._add(func, args, kwargs, x)
        if packet in _PER_SHARE:
            if not isinstance(args[0], AST):
                raise SyftError(f"{func} on shared values takes the shared tensor first")
            if packet is aten.constant_pad_nd and (args[2] if len(args) > 2 else kwargs.get("value", 0)) != 0:
                raise SyftError("a shared tensor pads with 0 only")
            if func in (aten.view.default, aten._unsafe_view.default):
                func = aten.reshape.default  # a share may not be contiguous where the wrapper is
            return protocols.public_op(func, x, lambda i, s: (s, *args[1:]))
        if packet in _BILINEAR:
            return self.bilinear(func, args, kwargs)
        if packet in (aten.cat, aten.stack):
            return self._listed(func, args, kwargs, x)
        if packet in (aten.gt, aten.lt, aten.ge, aten.le):
            a, b = args[0], args[1]
            return protocols.compare(packet.__name__, a if isinstance(a, AST) else _public(a),
                                     b if isinstance(b, AST) else _public(b))
        if packet is aten.relu:
            return self.relu(args[0])
        if packet in (aten.max, aten.amax) and len(args) == 1:
            return self.max(args[0])
        raise SyftError(f"{func} is not supported on shared tensors (supported: add, sub, neg, mul, matmul, conv2d, "
                        f"sum, comparisons, relu, max, views)")

    def _add(self, func, args, kwargs, x):
        alpha = kwargs.get("alpha", 1)
        if type(alpha) is not int:
            raise SyftError(f"alpha must be an integer on shared values, got {alpha!r}")
        a, b = args[0], args[1]
        if func.overloadpacket is aten.rsub:
            a, b = b, a
            neg_b = True
        else:
            neg_b = func.overloadpacket is aten.sub
        sign = -alpha if neg_b else alpha
        if isinstance(a, AST) and isinstance(b, AST):
            return self._combine(a, b, sign)
        if isinstance(a, AST):
            p = _public(b)
            return self._add_public(a, p, sign)
        p = _public(a)
        # p + sign * b: negate b's shares when sign is -1, then add p
        bb = b if sign == 1 else protocols.public_op(aten.mul.Tensor, b, lambda i, s: (s, sign))
        return self._add_public(bb, p, 1)

    def _combine(self, a, b, sign):
        if sign not in (1, -1):
            b = protocols.public_op(aten.mul.Tensor, b, lambda i, s: (s, sign))
            sign = 1
        op = aten.add.Tensor if sign == 1 else aten.sub.Tensor
        return protocols.public_op(op, a, lambda i, s: (s, b.shares[i]))

    def _add_public(self, x: AST, p, sign):
        """x + sign * p: party 0 adds the public value, the others copy their share (broadcast
        to the result's shape), so the result owns its shares (a .get() of it leaves x alone)."""
        shape = list(torch.broadcast_shapes(tuple(x.shape), tuple(p.shape) if isinstance(p, torch.Tensor) else ()))

        def args_for(i, s):
            if i == 0:
                return (s, p if sign == 1 else -p)
            return (s, torch.zeros(shape, dtype=INT64) if shape != list(x.shape) else 0)

        return protocols.public_op(aten.add.Tensor, x, args_for)

    def bilinear(self, func, args, kwargs, div: int = 1) -> AST:
        """f(a, b) with at least one shared; divided by ``div`` (a public integer) too."""
        if func.overloadpacket is aten.matmul:
            func = aten.mm.default if args[0].dim() == 2 and args[1].dim() == 2 else func
        if func.overloadpacket is aten.convolution:
            a, b, bias = args[0], args[1], args[2]
            if bias is not None:
                raise SyftError("a shared convolution takes its bias separately")
            extra = (None, *args[3:])
        else:
            a, b = args[0], args[1]
            extra = ()
        if kwargs:
            raise SyftError(f"{func} on shared values takes no keyword arguments")
        if isinstance(a, AST) and isinstance(b, AST):
            check_same_parties([a, b])
            return protocols.beaver(func, a, b, extra, div)
        if isinstance(a, AST):
            p = _public(b)
            return protocols.public_op(func, a, lambda i, s: (s, p, *extra), div)
        p = _public(a)
        return protocols.public_op(func, b, lambda i, s: (p, s, *extra), div)

    def _listed(self, func, args, kwargs, x):
        items = args[0]
        if not all(isinstance(t, AST) for t in items):
            raise SyftError(f"{func} on shared values takes shared tensors only")
        check_same_parties(items)
        return protocols.public_op(func, x, lambda i, s: ([t.shares[i] for t in items], *args[1:]))

    # --- protocols FixedPrecisionTensor calls ---------------------------------------------------
    def put(self, base, coords, values) -> AST:
        """``base`` with ``values`` at the public positions ``coords`` (index_put: a write through a
        view, tensors/fixed_precision_views.py): each party puts its share of the values into its share of the base;
        public values are party 0's share (the others put 0). A shared value is not written into a
        public tensor: that would make part of it secret, the rest public."""
        if not isinstance(base, AST):
            raise SyftError("a shared value written into part of a public fixed precision tensor: share the "
                            "whole tensor first (x.share(...)), then write into it")
        if isinstance(values, AST):
            check_same_parties([base, values])
            return protocols.public_op(aten.index_put.default, base, lambda i, s: (s, coords, values.shares[i]))
        public = _public(values)
        zeros = torch.zeros_like(public)
        return protocols.public_op(aten.index_put.default, base,
                                   lambda i, s: (s, coords, public if i == 0 else zeros))

    def each_share(self, func, x: AST, args_for) -> AST:
        """Each party applies ``func(*args_for(share_i))``: an op linear in ``x``'s share, whose other
        arguments are public and the same for every party (``index_add(zeros, dim, index, share)``: the
        caller puts the share where the op takes it). No round with the others."""
        return protocols.public_op(func, x, lambda i, s: args_for(s))

    def product(self, op, a, b, extra, d: int) -> AST:
        if op is aten.convolution.default:
            return self.bilinear(op, (a, b, *extra), {}, div=d)
        return self.bilinear(op, (a, b), {}, div=d)

    def truncate(self, x: AST, d: int) -> AST:
        return protocols.truncate(x, d)

    def compare(self, name, a, b) -> AST:
        return protocols.compare(name, a if isinstance(a, AST) else _public(a), b if isinstance(b, AST) else _public(b))

    def relu(self, x: AST) -> AST:
        return protocols.relu(x)

    def msb(self, x: AST) -> AST:
        """[1 if x < 0 else 0] elementwise (the sign bit; a comparison's rounds)."""
        return protocols.msb_arith(x)

    def max(self, x: AST) -> AST:
        """The largest element: the reduction along one dim (``max_values``) of x as one row."""
        row = protocols.public_op(aten.reshape.default, x, lambda i, s: (s, [1, -1]))
        return protocols.public_op(aten.reshape.default, self.max_values(row, 1), lambda i, s: (s, []))

    # --- reductions along a dim: a tournament of groups -------------------------------------------
    def reduction_plan(self, rows: int, m: int, index: bool = False) -> tuple:
        """The group size of each level of the tournament reducing ``rows`` rows of ``m`` elements
        (``_level``): the sizes with the least estimated time, rounds times ROUND_SECONDS plus
        comparisons times ELEMENT_SECONDS. A level is one batch of sign bits on every pair of each
        group (g (g - 1) / 2 comparisons a group) and a product tree picking each group's largest
        (log2 g rounds): pairs while many elements are left (few comparisons), larger groups at the
        end (few levels). CrypTen halves int(ln m) times (a comparison and a product each), then
        compares every pair of what is left."""
        return _plan(rows, m, index)

    def _last(self, x: AST, dim: int) -> AST:
        return x if dim == x.dim() - 1 else protocols.public_op(aten.movedim.int, x, lambda i, s: (s, dim, -1))

    def _tournament(self, last: AST, index: bool):
        """(max, index or None) along the last dim: levels of ``_level`` until one element is left."""
        m = last.shape[-1]
        idx = self._add_public(last * 0, torch.arange(m, dtype=INT64), 1) if index else None
        vals = last
        for g in self.reduction_plan(last.numel() // max(m, 1), m, index):
            vals, idx = self._level(vals, idx, g, m)
        squeeze = lambda t: protocols.public_op(aten.squeeze.dim, t, lambda i, s: (s, -1))  # noqa: E731
        return squeeze(vals), (squeeze(idx) if index else None)

    def _level(self, vals: AST, idx, g: int, m: int):
        """One level: the last dim in groups of g (the last group padded with -BIG), each group's
        largest (and its index). Distinct keys order the elements, ties to the lowest index as
        torch's argmax: x * m + (m - 1 - index) with indices, else x * g + (g - 1 - position).
        [key_i > key_j] for the pairs i < j of every group is one batch of sign bits; element i
        wins its group when it beats every other: the product of its g - 1 bits (1 - the bit for
        j < i), a tree of Beaver products of 0/1 ring integers (exact), with its value (and index)
        as one more factor. Two elements, values alone: b + relu(a - b)."""
        w = vals.shape[-1]
        if idx is None and g == 2:
            return self._halve(vals), None
        padded, groups = -(-w // g) * g, -(-w // g)
        shape = list(vals.shape[:-1]) + [groups, g]
        fill = torch.zeros(padded, dtype=INT64)
        fill[w:] = -BIG
        offsets = torch.arange(g - 1, -1, -1, dtype=INT64)
        first, second = torch.triu_indices(g, g, 1)

        def grouped(i, p, share, pad_value=None):
            if padded != w:
                share = p.op(aten.constant_pad_nd.default, share, [0, padded - w])
                if pad_value is not None and i == 0:
                    share = p.op(aten.add.Tensor, share, pad_value)
            return p.op(aten.reshape.default, share, shape)

        def prepare(i, p, s):  # the groups, the keys and their differences: one message, no round trip
            v = grouped(i, p, s, fill)
            if idx is None:
                key = p.op(aten.mul.Tensor, v, g)
                key = p.op(aten.add.Tensor, key, offsets) if i == 0 else key
                out = [v]
            else:
                d = grouped(i, p, idx.shares[i])
                key = p.op(aten.sub.Tensor, p.op(aten.mul.Tensor, v, m), d)
                key = p.op(aten.add.Tensor, key, m - 1) if i == 0 else key
                out = [v, d]
            diff = p.op(aten.sub.Tensor, p.op(aten.index_select.default, key, -1, second),
                        p.op(aten.index_select.default, key, -1, first))
            return out + [diff]

        prepared = protocols.each_round(vals, prepare)
        beats = protocols.msb_arith(prepared[-1])  # [k_i > k_j] for the pairs i < j
        pair, sign, const = _pair_tables(g)

        def winners(i, p, s):  # element i's g - 1 factors (and its value, for the values alone)
            b = p.op(aten.reshape.default, p.op(aten.index_select.default, s, -1, pair.reshape(-1)), shape + [g - 1])
            b = p.op(aten.mul.Tensor, b, sign)
            b = p.op(aten.add.Tensor, b, const) if i == 0 else b
            if idx is None:
                b = p.op(aten.cat.default, [b, p.op(aten.unsqueeze.default, prepared[0].shares[i], -1)], -1)
            return [b]

        wins = protocols.each_round(beats, winners)[0]
        if idx is None:
            best = self._product_last(wins)
            return protocols.public_op(aten.sum.dim_IntList, best, lambda i, s: (s, [-1])), None
        onehot = self._product_last(wins)
        both = protocols.each_round(onehot, lambda i, p, s: [
            p.op(aten.stack.default, [prepared[0].shares[i], prepared[1].shares[i]]),
            p.op(aten.clone.default, p.op(aten.expand.default, p.op(aten.unsqueeze.default, s, 0), [2, *shape]))])
        picked = protocols.beaver(aten.mul.Tensor, both[1], both[0])
        picked = protocols.each_round(picked, lambda i, p, s: [
            p.op(aten.select.int, p.op(aten.sum.dim_IntList, s, [-1]), 0, k) for k in (0, 1)])
        return picked[0], picked[1]

    def _product_last(self, f: AST) -> AST:
        """The product along the last dim, a tree: one batch of Beaver products a level (the
        slices in a message of their own that waits for nothing)."""
        while f.shape[-1] > 1:
            n = f.shape[-1]
            half = n // 2
            parts = protocols.each_round(f, lambda i, p, s: [
                p.op(aten.slice.Tensor, s, -1, a, b) for a, b in ((0, half), (half, 2 * half), (2 * half, n))
                if b > a])
            prod = protocols.beaver(aten.mul.Tensor, parts[0], parts[1])
            f = prod if n % 2 == 0 else protocols.each_round(prod, lambda i, p, s: [
                p.op(aten.cat.default, [s, parts[2].shares[i]], -1)])[0]
        return protocols.public_op(aten.squeeze.dim, f, lambda i, s: (s, -1))

    def _halve(self, v: AST) -> AST:
        """The larger of the pairs (j, half + j) along the last dim: b + relu(a - b), every pair in
        one relu; an odd last element passes. The slices, the difference and the sum are each
        formed in a message that opens nothing (no round trip of its own)."""
        w = v.shape[-1]
        half, odd = w // 2, w % 2

        def split(i, p, s):
            a = p.op(aten.slice.Tensor, s, -1, 0, half)
            b = p.op(aten.slice.Tensor, s, -1, half, 2 * half)
            rest = [p.op(aten.slice.Tensor, s, -1, w - 1, w)] if odd else []
            return [b, p.op(aten.sub.Tensor, a, b), *rest]

        parts = protocols.each_round(v, split)
        gain = protocols.relu(parts[1])

        def join(i, p, s):
            best = p.op(aten.add.Tensor, parts[0].shares[i], gain.shares[i])
            return [best if not odd else p.op(aten.cat.default, [best, parts[2].shares[i]], -1)]

        return protocols.each_round(v, join)[0]

    def max_values(self, x: AST, dim: int, keepdim: bool = False) -> AST:
        """The max along ``dim`` (values only: softmax's shift), by ``_tournament``."""
        dim = dim % x.dim() if x.dim() else 0
        vals = self._tournament(self._last(x, dim), index=False)[0]
        return protocols.public_op(aten.unsqueeze.default, vals, lambda i, s: (s, dim)) if keepdim else vals

    def max_dim(self, x: AST, dim: int, keepdim: bool = False, values: bool = True):
        """(max along ``dim``, one-hot [argmax] along it): every pair compared at once."""
        dim = dim % x.dim() if x.dim() else 0
        m = x.shape[dim]
        if m > PAIRWISE_MAX:
            raise SyftError(f"a one-hot of the maximum along a dimension of {m} > {PAIRWISE_MAX} elements compares "
                            f"every pair: max/argmax take max_index (a tournament) there")
        last = protocols.public_op(aten.movedim.int, x, lambda i, s: (s, dim, -1))
        # distinct values, ties to the lowest index: x * m + (m - 1 - index)
        offsets = torch.arange(m - 1, -1, -1, dtype=INT64)
        keyed = self._add_public(protocols.public_op(aten.mul.Tensor, last, lambda i, s: (s, m)), offsets, 1)
        col = protocols.public_op(aten.unsqueeze.default, keyed, lambda i, s: (s, -1))
        row = protocols.public_op(aten.unsqueeze.default, keyed, lambda i, s: (s, -2))
        wins = protocols.msb_arith(row - col)  # [x_i > x_j] at [..., i, j]: msb(x_j - x_i)
        count = protocols.public_op(aten.sum.dim_IntList, wins, lambda i, s: (s, [-1]))
        onehot = protocols.msb_arith(self._add_public(-count, torch.tensor(m - 2), 1))  # count > m - 2
        vals = None
        if values:
            vals = protocols.public_op(aten.sum.dim_IntList, protocols.beaver(aten.mul.Tensor, onehot, last),
                                       lambda i, s: (s, [-1]))
            if keepdim:
                vals = protocols.public_op(aten.unsqueeze.default, vals, lambda i, s: (s, dim))
        onehot = protocols.public_op(aten.movedim.int, onehot, lambda i, s: (s, -1, dim))
        return vals, onehot

    def max_index(self, x: AST, dim: int, keepdim: bool = False, values: bool = True):
        """(max along ``dim``, its index) for dims of any length, by ``_tournament``: the first
        index among equal maxima, as torch's argmax. ``values``: kept for the callers (the
        value rides in the index's products: no round of its own)."""
        dim = dim % x.dim() if x.dim() else 0
        vals, idx = self._tournament(self._last(x, dim), index=True)
        if keepdim:
            vals, idx = (protocols.public_op(aten.unsqueeze.default, t, lambda i, s: (s, dim)) for t in (vals, idx))
        return vals, idx

    def index_of(self, onehot: AST, dim: int, keepdim: bool = False) -> AST:
        dim = dim % onehot.dim()
        m = onehot.shape[dim]
        shape = [1] * onehot.dim()
        shape[dim] = m
        idx = torch.arange(m, dtype=INT64).view(shape)
        return protocols.public_op(aten.sum.dim_IntList, protocols.public_op(aten.mul.Tensor, onehot,
                                                                             lambda i, s: (s, idx)),
                                   lambda i, s: (s, [dim], keepdim))


ENGINE = Engine()
set_engine(ENGINE)

