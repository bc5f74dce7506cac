"""The crypto provider (a trusted dealer): correlated randomness made on its own worker.

The provider is a worker like any other; it runs no special code, only allow-listed ops
this process sends it (sums, the bilinear op of a triple, XOR, AND, shifts). For one protocol
step it computes every item the step needs in one program, packs each party's part of each
item into one row of an (n, L) int64 tensor, and that tensor comes here in one fetch; each
party then receives only its own row's pieces (inline in its next program).

Randomness: every random word of an item (the uniform a, b, r and the shares that split them)
comes from the cryptographic generator (workers/randomness.py: AES-256-CTR keyed from the OS),
drawn by the provider's own worker service: the program is a ``deal`` command (run_graph whose
random inputs the service fills), which carries the words' shapes, never the words, so a 100x100
relu's ~3.7 MB of material is made where it is used. Never torch's ``randint`` (a Mersenne
Twister: a party given 312 of its raw int64 draws recovers its state and predicts every later
draw, the other parties' pieces included; tests/smpc/test_dealer_randomness.py runs that
attack). The provider never
sees a share of an input (it is never sent one: tests/smpc/test_security.py checks its store),
and no party sees another's row.

The offline phase: Beaver triples for mm and mul are made ahead, up to POOL_MAX at once
(``pooled_triple``, below; the next pool's dealer program rides in the round that uses a pool's
last triple, ``refill_ahead``), and the material of relu and of the sign bit one step ahead
(``made_ahead``, made in the first adder round of the step before), so online steps need no
dealer round of their own after the first of their shape.

``BeaverTriple``: one product's triple and the layouts of Beaver's formula on it (where the triple
comes from, where each party's share is computed); ``protocols.beaver`` is the formula itself.

Items (all uniform over Z_2^64 unless said):

- ``arith_triple(f, sa, sb)``: Beaver triple for a bilinear ``f`` (mul, matmul, conv2d):
  a, b uniform of shapes sa, sb, c = f(a, b), each additively shared.
- ``binary_triple(shape)``: a, b uniform words, c = a & b, each XOR-shared (for AND gates).
- ``binary_pair(shape, k)``: a, b uniform, a & b and a & (a << k), XOR-shared: the two AND gates
  of a Kogge-Stone level, which share their left input (one opened mask for it).
- ``bit_pair(shape)``: a uniform bit r, shared twice: XOR shares (bits) and additive shares
  (for converting a shared bit to an additive sharing, B2A); for relu also [a] and [a * r]
  (a uniform), so that x * r is known before the bit is.
- ``trunc_pair(shape, d)``: r uniform in [0, 2^62) and floor(r / d), additively shared (the
  truncation of products among 3 or more parties).
"""
from __future__ import annotations

import torch

from ..tensors.pointer import PointerTensor
from . import ring
from .runtime import Program, RowPiece, expect, run, stats

# A party's row above this size is stored on it once, as raw bytes (one message per party, all in
# flight: a round trip of its own, for the ids), instead of travelling with the programs that use
# it. Its pieces travel as raw bytes too (run_graph's ``cv``), each in the one round that uses it,
# so storing a row ahead only saves bytes for a row far larger than any round carries.
DELIVER_BYTES = 64 * 2**20

aten = torch.ops.aten
FULL = 64  # a draw of 64 bits: a uniform ring element


class Dealer:
    """The correlated randomness of one protocol step, generated in one program on the provider."""

    def __init__(self, provider, n_parties: int):
        self.provider = provider
        self.n = n_parties
        self.prog = Program(provider, role="dealer")
        self.labels: dict = {}  # items by what they are (the provider's ledger counts them)
        self.parties = None  # the workers the rows go to (``generate``)
        self._told: set = set()  # (item, party) whose pieces a party's ledger was told of
        self.blocks = []  # Vals of shape (n, L_i)
        self.items: list[list[tuple]] = []  # per item: [(shape, offset, numel), ...] per piece
        self._width = 0
        self._packed = None
        self.rows = None  # per party: a pointer to its stored row, or None (pieces travel inline)
        self._programmed = False

    @property
    def packed(self):
        """The pack of every party's row here (a deferred program's reply is read on first use)."""
        if self._packed is None and self.prog._pending:
            self.prog.finish()
            self._packed = self.prog.opened if self.prog.local else self.prog.opened[0]
        return self._packed

    @packed.setter
    def packed(self, value):
        self._packed = value

    def program_ahead(self) -> Program:
        """``program()``, sent with a round whose parties do not wait for it: the material for a
        later step (its reply is read when that step first uses the pack)."""
        prog = self.program()
        prog.deferred = True
        return prog

    @classmethod
    def planned(cls, provider, n_parties: int, key, build):
        """A dealer whose items ``build(dealer)`` records; for a remote provider the recorded
        program (its ops, and the shapes of its random draws: never the draws) is kept per
        ``key`` and reused (the provider draws fresh words each run), so a step of the same shape
        records nothing.
        Returns (dealer, build's result)."""
        d = cls(provider, n_parties)
        if d.prog.local:
            return d, build(d)
        t = _templates.get(key)
        if t is None:
            made = build(d)
            d.program()
            if len(_templates) >= TEMPLATE_KEYS:
                _templates.pop(next(iter(_templates)))
            _templates[key] = (d.prog.nodes, d.prog._open[0], d.items, d._width, made, d.prog.inputs,
                               d.prog.draw_bits, dict(d.labels))
            return d, made
        nodes, out, items, width, made, inputs, bits, labels = t
        # read only from here on: the template's lists; the provider draws fresh words for each run
        d.prog.nodes, d.prog._open, d.prog.inputs, d.prog.draw_bits = nodes, [out], inputs, bits
        d.items, d._width, d._programmed = items, width, True
        d.labels = d.prog.items = dict(labels)
        return d, made

    # --- helpers on the provider ------------------------------------------------------------
    def _rand(self, shape, bits: int = FULL):
        """A random value of the program: words the provider's service draws from its CSPRNG
        (``Program.draw``, the ``deal`` command); the program carries only their shape."""
        return self.prog.draw(shape, bits)

    def _xor_all(self, stacked, count):
        p = self.prog
        out = p.op(aten.select.int, stacked, 0, 0)
        for i in range(1, count):
            out = p.op(aten.bitwise_xor.Tensor, out, p.op(aten.select.int, stacked, 0, i))
        return out

    def _piece(self, full, shape):
        """Add one piece (an (n, *shape) Val: one share per party) to the pack. In process the
        pieces come here one by one (no packing ops); from a remote provider in one pack."""
        numel = 1
        for s in shape:
            numel *= int(s)
        if self.prog.local:
            self.blocks.append(full)
            entry = (tuple(shape), len(self.blocks) - 1, None, None)
        else:
            self.blocks.append(self.prog.op(aten.reshape.default, full, [self.n, numel]))
            entry = (tuple(shape), self._width, numel, None)
            self._width += numel
        return entry

    def _pieces(self, full, shape, count):
        """``count`` pieces of one shape at once: ``full`` is (n, count, *shape); one block."""
        numel = 1
        for s in shape:
            numel *= int(s)
        shape = tuple(shape)
        if self.prog.local:
            self.blocks.append(full)
            return [(shape, len(self.blocks) - 1, None, k) for k in range(count)]
        self.blocks.append(self.prog.op(aten.reshape.default, full, [self.n, count * numel]))
        base = self._width
        self._width += count * numel
        return [(shape, base + k * numel, numel, None) for k in range(count)]

    def _additive(self, secret, shape):
        """(n, *shape) additive shares of ``secret`` (a Val on the provider)."""
        p, n = self.prog, self.n
        rest = self._rand([n - 1, *shape])
        others = rest if n == 2 else p.op(aten.sum.dim_IntList, rest, [0], True)
        last = p.op(aten.sub.Tensor, secret, others)  # (1, *shape): broadcast
        return p.op(aten.cat.default, [rest, last], 0)

    def _xored(self, secret, shape, bits=False):
        p, n = self.prog, self.n
        rest = self._rand([n - 1, *shape], 1) if bits else self._rand([n - 1, *shape])
        last = p.op(aten.bitwise_xor.Tensor, secret, self._xor_all(rest, n - 1))
        return p.op(aten.cat.default, [rest, p.op(aten.unsqueeze.default, last, 0)], 0)

    # --- items --------------------------------------------------------------------------------
    def arith_triple(self, f, sa, sb, *extra) -> int:
        """A Beaver triple for ``c = f(a, b, *extra)``; returns the item's index. ``f`` SQUARE:
        a square pair (a, a^2), its item (a, a, a^2) so the product's formula is unchanged."""
        if f is SQUARE:
            return self.arith_triples(SQUARE, sa, sb, 1)[0]
        p, n = self.prog, self.n
        A, B = self._rand([n, *sa]), self._rand([n, *sb])
        a, b = p.op(aten.sum.dim_IntList, A, [0]), p.op(aten.sum.dim_IntList, B, [0])
        c = _ring_mm(p, a, b, tuple(sa), tuple(sb)) if f is aten.mm.default else p.op(f, a, b, *extra)
        sc = tuple(c.shape)
        C = self._additive(c, sc)
        self.items.append([self._piece(A, sa), self._piece(B, sb), self._piece(C, sc)])
        self._count(f"Beaver triple ({_op_label(f)})")
        return len(self.items) - 1

    def arith_triples(self, f, sa, sb, count: int) -> list[int]:
        """``count`` Beaver triples for ``f`` (mm or elementwise mul) drawn at once: one randint
        per operand and one batched product (bmm, or a broadcast mul) for all of them."""
        p, n = self.prog, self.n
        if f is SQUARE:  # x * x: (a, a^2), one opened value (e = x - a) instead of two
            A = self._rand([n, count, *sa])
            a = p.op(aten.sum.dim_IntList, A, [0])
            C = self._additive(p.op(aten.mul.Tensor, a, a), (count, *sa))
            pa, pc = self._pieces(A, sa, count), self._pieces(C, sa, count)
            first = len(self.items)
            self.items.extend([pa[k], pa[k], pc[k]] for k in range(count))
            self._count("Beaver square (mul)", count)
            return list(range(first, first + count))
        A, B = self._rand([n, count, *sa]), self._rand([n, count, *sb])
        a, b = p.op(aten.sum.dim_IntList, A, [0]), p.op(aten.sum.dim_IntList, B, [0])
        if f is aten.mm.default:
            c = _ring_mm(p, a, b, tuple(sa), tuple(sb), batched=True)
        else:  # broadcasting aligns from the right: pad both to one rank behind the count
            r = max(len(sa), len(sb))
            a = p.op(aten.reshape.default, a, [count, *([1] * (r - len(sa))), *sa])
            b = p.op(aten.reshape.default, b, [count, *([1] * (r - len(sb))), *sb])
            c = p.op(aten.mul.Tensor, a, b)
        sc = tuple(c.shape)[1:]
        C = self._additive(c, (count, *sc))
        pa, pb, pc = self._pieces(A, sa, count), self._pieces(B, sb, count), self._pieces(C, sc, count)
        first = len(self.items)
        self.items.extend([pa[k], pb[k], pc[k]] for k in range(count))
        self._count(f"Beaver triple ({_op_label(f)})", count)
        return list(range(first, first + count))

    def binary_triple(self, shape) -> int:
        p, n = self.prog, self.n
        A, B = self._rand([n, *shape]), self._rand([n, *shape])
        c = p.op(aten.bitwise_and.Tensor, self._xor_all(A, n), self._xor_all(B, n))
        C = self._xored(c, shape)
        self.items.append([self._piece(A, shape), self._piece(B, shape), self._piece(C, shape)])
        self._count("binary triple (AND gate)")
        return len(self.items) - 1

    def binary_pair(self, shape, k: int) -> int:
        """Two AND gates sharing their left input X: X & Y and X & (X << k). Pieces <a>, <b>,
        <a & b>, <a & (a << k)>: X is opened once as X ^ a, and the second gate's right mask is
        a << k, so its masked input (X << k) ^ (a << k) = (X ^ a) << k is known unopened."""
        p, n = self.prog, self.n
        A, B = self._rand([n, *shape]), self._rand([n, *shape])
        a = self._xor_all(A, n)
        c1 = p.op(aten.bitwise_and.Tensor, a, self._xor_all(B, n))
        c2 = p.op(aten.bitwise_and.Tensor, a, p.op(aten.bitwise_left_shift.Tensor_Scalar, a, k))
        self.items.append([self._piece(A, shape), self._piece(B, shape), self._piece(self._xored(c1, shape), shape),
                           self._piece(self._xored(c2, shape), shape)])
        self._count("binary pair (adder level)")
        return len(self.items) - 1

    def bit_pair(self, shape, masked: bool = False) -> int:
        """<r> and [r] for a uniform bit r; ``masked``: also [a] and [a * r] for a uniform a."""
        r = self._rand(shape, 1)
        pieces = [self._piece(self._xored(r, shape, bits=True), shape),
                  self._piece(self._additive(r, shape), shape)]
        if masked:
            A = self._rand([self.n, *shape])
            ar = self.prog.op(aten.mul.Tensor, self.prog.op(aten.sum.dim_IntList, A, [0]), r)
            pieces += [self._piece(A, shape), self._piece(self._additive(ar, shape), shape)]
        self.items.append(pieces)
        self._count("random bit (relu)" if masked else "random bit (sign)")
        return len(self.items) - 1

    def trunc_pair(self, shape, d: int) -> int:
        p = self.prog
        r = self._rand(shape, 62)
        rt = p.op(aten.div.Tensor_mode, r, d, rounding_mode="floor")
        self.items.append([self._piece(self._additive(r, shape), shape),
                           self._piece(self._additive(rt, shape), shape)])
        self._count("truncation pair")
        return len(self.items) - 1

    def bernoulli_mask(self, shape, keep: float) -> int:
        """[b] for b ~ Bernoulli(keep), one per element (dropout's mask: 1 keeps a unit), additively
        shared (b itself exists only in the provider's program; its shares reach the parties in their
        rows, as every item's do). u is drawn uniform in [0, 2^62) and
        b = [u < round(keep * 2^62)], as 0 - ((u - t) >> 63) (an arithmetic shift: -1 or 0)."""
        p = self.prog
        t = round(float(keep) * 2**62)
        u = self._rand(shape, 62)
        below = p.op(aten.bitwise_right_shift.Tensor_Scalar, p.op(aten.sub.Tensor, u, t), 63)
        b = p.op(aten.neg.default, below)
        self.items.append([self._piece(self._additive(b, shape), shape)])
        self._count("dropout mask (Bernoulli)")
        return len(self.items) - 1

    def _count(self, label: str, n: int = 1) -> None:
        self.labels[label] = self.labels.get(label, 0) + n

    # --- delivery -----------------------------------------------------------------------------
    def program(self) -> Program:
        """The provider's program, ready to run (alone or in a round with the parties')."""
        if self._programmed:
            return self.prog
        self._programmed = True
        self.prog.items = dict(self.labels)
        if self.prog.local:
            for b in self.blocks:
                self.prog.open(b)
        else:
            self.prog.open(self.prog.op(aten.cat.default, self.blocks, 1))
        return self.prog

    def generate(self, deliver_to=None) -> None:
        """Run the provider's program and bring the pack here (one message and one fetch);
        ``deliver_to``: the parties, to store their rows on them when the rows are large."""
        if deliver_to is not None:
            self.parties = list(deliver_to)
        if self.packed is None:
            run([self.program()])
            self.collect()
        if deliver_to is not None and self.rows is None:  # a pooled dealer's rows are stored once
            self.deliver(deliver_to)

    def deliver(self, parties) -> None:
        """Store each remote party's row on it (raw bytes, every store in flight at once)."""
        if self.prog.local or self.packed.shape[1] * 8 < DELIVER_BYTES or all(
                getattr(w, "_lock", None) is None for w in parties):
            return
        self.rows = [None] * len(parties)
        pending = []
        for i, w in enumerate(parties):
            if getattr(w, "_lock", None) is not None:  # remote: a store message; in process: inline
                row = self.packed[i].contiguous()
                msg = {"c": "store", "o": row, "note": {"why": "dealer", "peer": self.provider.id}}
                pending.append((i, w, row, w.submit_request(msg, detach=True, label="send")))
        stats["rounds"] += 1
        stats["messages"] += len(pending)
        for i, w, row, p in pending:
            self.rows[i] = PointerTensor(w, p.result(), row.shape, row.dtype)

    def collect(self) -> None:
        if self.prog._pending:  # a deferred program: its reply is read on first use (``packed``)
            return
        self.packed = self.prog.opened if self.prog.local else self.prog.opened[0]

    def part(self, item: int, party: int) -> list:
        """Party ``party``'s pieces of ``item`` as its programs take them: pieces of its stored
        row, or views of its row here (sent inline). A party is sent its row, nothing else."""
        row = self.rows[party] if self.rows is not None else None
        if row is not None:  # its row was stored on it: that store was its dealer material
            return [RowPiece(row, off, numel, shape) for shape, off, numel, _ in self.items[item]]
        pieces = self.local(item, party)
        if self.parties is not None and (item, party) not in self._told:  # inline in its next program
            self._told.add((item, party))
            unique = {id(entry): t for entry, t in zip(self.items[item], pieces)}  # a square's a is its b
            expect(self.parties[party], "dealer", self.provider.id, sum(t.numel() * 8 for t in unique.values()))
        return pieces

    def local(self, item: int, party: int) -> list[torch.Tensor]:
        """Party ``party``'s pieces of ``item`` here (for what this process computes for it)."""
        if self.prog.local:
            return [self.packed[k][party] if sub is None else self.packed[k][party][sub]
                    for shape, k, _, sub in self.items[item]]
        row = self.packed[party]
        return [row[off:off + numel].view(shape) for shape, off, numel, _ in self.items[item]]


# A product of a shared value with itself (exp's squarings, x ** 2): a square pair (a, a^2) for
# ``f``, whose item is (a, a, a^2): Beaver's formula with b = a opens e = x - a alone (d = e), half
# the opened words and two thirds of the dealer's.
SQUARE = "square"


# --- the offline phase: Beaver triples made ahead of need -----------------------------------------
# A shared product takes its triple from a small pool per (crypto provider, parties, op, shapes);
# an empty pool is refilled with up to POOL_MAX triples (at most POOL_BYTES of a party's row): the
# first in a dealer round of its own, the later ones in the opening round of the product that
# takes the last triple, so products are their one online round trip alone. Each triple is used once. The pool holds the same material a single
# product's dealer round brings here, for at most POOL_KEYS shapes.
TEMPLATE_KEYS = 16
_templates: dict = {}  # Dealer.planned: recorded dealer programs (no values in them) per step and shape
POOL_MAX = 16
POOL_BYTES = 2 * 1024 * 1024
POOL_KEYS = 32
_pool: dict = {}


# The offline phase of relu and of the sign bit (protocols.relu, msb_arith): per (kind, provider,
# parties, shape), the dealer material of the next such step, made in the first adder round of the
# last one; kept here, sent with the programs that use it.
RELU_READY_KEYS = 8
relu_ready: dict = {}


def take_made_ahead(kind: str, provider, parties, shape):
    """(dealer, items) of the material made ahead for a ``kind`` step ("relu", "msb") of ``shape``
    among ``parties`` (``made_ahead``), or None; each is used once."""
    key = (kind, provider.id, tuple(w.id for w in parties), tuple(shape))
    ready = relu_ready.pop(key, None)
    if ready is None or ready[0].provider is not provider or any(a is not b for a, b in zip(ready[1], parties)):
        return None
    return ready[0], ready[2]


def made_ahead(kind: str, provider, parties, shape, dealer, items) -> None:
    """Keep ``dealer``'s material (its program run, its pack here) for the next ``kind`` step of
    ``shape``; at most RELU_READY_KEYS of them (the oldest goes)."""
    while len(relu_ready) >= RELU_READY_KEYS:
        relu_ready.pop(next(iter(relu_ready)))
    relu_ready[(kind, provider.id, tuple(w.id for w in parties), tuple(shape))] = (dealer, list(parties), items)


def clear_pool() -> None:
    """Forget every pooled triple (their rows on the parties are released with them) and every
    relu's material made ahead."""
    _pool.clear()
    relu_ready.clear()


def _usable(entry, provider, parties) -> bool:
    dealer, workers, items = entry
    if not items or dealer.provider is not provider or any(a is not b for a, b in zip(workers, parties)):
        return False
    return dealer.rows is None or not any(r is not None and r._ref.released for r in dealer.rows)


def _pool_key(provider, parties, f, sa, sb):
    return (provider.id, tuple(w.id for w in parties), f, tuple(sa), tuple(sb))


def _new_pool(provider, parties, f, sa, sb):
    """A dealer with the next pool's triples recorded (its program not run yet) and their items."""
    if f is SQUARE:
        per = 8 * 2 * _numel(sa)
    else:
        meta = f(torch.empty(sa, dtype=torch.int64, device="meta"), torch.empty(sb, dtype=torch.int64, device="meta"))
        per = 8 * (_numel(sa) + _numel(sb) + meta.numel())
    count = max(1, min(POOL_MAX, POOL_BYTES // max(per, 1)))
    dealer = Dealer(provider, len(parties))
    return dealer, dealer.arith_triples(f, tuple(sa), tuple(sb), count)


def _keep_pool(key, dealer, parties, items):
    while len(_pool) >= POOL_KEYS:
        _pool.pop(next(iter(_pool)))
    _pool[key] = (dealer, list(parties), items)
    return _pool[key]


def pooled_triple(provider, parties, f, sa, sb) -> tuple:
    """(dealer, item) of a fresh Beaver triple for ``f`` (mm, mul, or SQUARE: x * x) of shapes sa, sb."""
    key = _pool_key(provider, parties, f, sa, sb)
    entry = _pool.get(key)
    if entry is None or not _usable(entry, provider, parties):
        _pool.pop(key, None)
        dealer, items = _new_pool(provider, parties, f, sa, sb)
        dealer.generate(parties)
        entry = _keep_pool(key, dealer, parties, items)
    item = entry[2].pop(0)
    if not entry[2]:
        _pool.pop(key, None)
    return entry[0], item


def refill_ahead(provider, parties, f, sa, sb):
    """When the pool of these triples is used up (``pooled_triple`` gave its last): the next pool's
    dealer, whose program rides in the round that uses the last triple (``Dealer.program()``);
    ``keep_refill`` stores it after that round. None while the pool has triples left."""
    key = _pool_key(provider, parties, f, sa, sb)
    if key in _pool:
        return None
    dealer, items = _new_pool(provider, parties, f, sa, sb)
    return key, dealer, list(parties), items


def keep_refill(refill) -> None:
    key, dealer, parties, items = refill
    dealer.collect()
    dealer.parties = list(parties)
    _keep_pool(key, dealer, parties, items)


# --- Beaver's formula, laid out (protocols.beaver is the formula) -------------------------------
_FUSED = {aten.mm.default: aten.addmm.default, aten.mul.Tensor: aten.addcmul.default}
# the same, computed in this process on a party's own pieces (ring.addmm: float64 BLAS, exact)
_FUSED_HERE = {aten.mm.default: ring.addmm, aten.mul.Tensor: lambda c, u, v: c + u * v}
_POOLED = (aten.mm.default, aten.mul.Tensor)


class BeaverTriple:
    """The triple of one product [f(x, y)] and the layouts of Beaver's formula on it.

    Where the triple comes from: a pool made ahead (mm and mul, ``pooled_triple``; when this
    product takes the pool's last, the next pool's dealer program rides in its opening round), or
    a dealer round of its own; x * x takes a square pair (a, a^2): e alone is opened. A product
    divided among three or more parties takes a truncation pair too.
    Where party i's share z_i = c_i + f(e, b_i) + f(x_i, d) is computed (``share``): for mm and
    mul with the party's pieces here, here (it is a function of its own pieces and the public e,
    d: z_i = c_i + f(e, b_i) + f(a_i, d) + [i = 0] f(e, d); an mm for every party at once in two
    ring products), and sent as the one value it stores; with its pieces stored on it, on the
    party in two fused ops (addmm, addcmul); any other f (conv2d, ...) on the party, f twice."""

    def __init__(self, provider, parties, f, same, sx, sy, extra=(), div: int = 1):
        n = len(parties)
        self.f, self.extra, self.n = f, extra, n
        self.square = f is aten.mul.Tensor and same and not extra
        kind = SQUARE if self.square else f
        self.refill = self.trunc_item = self.stacked = None
        if f in _POOLED and not extra and (div == 1 or n == 2):  # the offline phase: a triple made ahead
            self.dealer, self.item = pooled_triple(provider, parties, kind, sx, sy)
            # the pool used up: the next pool's dealer program rides in this product's opening round
            self.refill = refill_ahead(provider, parties, kind, sx, sy)
        else:
            self.dealer = Dealer(provider, n)
            self.item = self.dealer.arith_triple(kind, sx, sy, *extra)
        if div != 1 and n > 2:
            zshape = tuple(f(torch.empty(sx, dtype=torch.int64, device="meta"),
                             torch.empty(sy, dtype=torch.int64, device="meta"), *extra).shape)
            self.dealer.d = div
            self.trunc_item = self.dealer.trunc_pair(zshape, div)
        self.dealer.generate(parties)

    def masked(self, p, i: int, x_i, y_i) -> list:
        """Party i's e_i = x_i - a_i and d_i = y_i - b_i, to open (a square: e_i alone)."""
        a, b, _ = self.dealer.part(self.item, i)
        if self.square:
            return [p.op(aten.sub.Tensor, x_i, a)]
        return [p.op(aten.sub.Tensor, x_i, a), p.op(aten.sub.Tensor, y_i, b)]

    def riding_along(self) -> list:
        """The programs that ride in the opening round (the next pool's dealer's), not waited for."""
        return [self.refill[1].program_ahead()] if self.refill is not None else []

    def opened(self, sums: list) -> tuple:
        """(e, d) from the opened sums (a square's d is its e); the next pool kept."""
        if self.refill is not None:
            keep_refill(self.refill)
        e, d = (sums[0], sums[0]) if self.square else sums
        if self.f is aten.mm.default and self.dealer.rows is None:  # every party's z_i here
            self.stacked = self._stacked_mm(e, d)
        return e, d

    def _stacked_mm(self, e, d) -> list:
        """f(e, b_i) + f(a_i, d) (+ f(e, d) for party 0) for every party in two ring products."""
        pieces = [self.dealer.local(self.item, i) for i in range(self.n)]  # (a_i, b_i, c_i)
        m, r = d.shape[1], e.shape[0]
        if 2 * e.shape[1] <= ring.LIMB_K:  # per party one ring product [e | a_i] @ [b_i (+ d); d]
            return [ring.matmul_sum([(e, pc[1] + d if i == 0 else pc[1]), (pc[0], d)])
                    for i, pc in enumerate(pieces)]
        # e [b_0 + d, b_1, ...] and [a_0; a_1; ...] d: one ring product each
        eb = ring.matmul(e, torch.cat([pc[1] + d if i == 0 else pc[1] for i, pc in enumerate(pieces)], 1))
        ad = ring.matmul(torch.cat([pc[0] for pc in pieces], 0), d)
        return [eb[:, i * m:(i + 1) * m] + ad[i * r:(i + 1) * r] for i in range(self.n)]

    def share(self, p, i: int, x_i, e, d, plus: int = 0):
        """Party i's z_i = c_i + f(e, b_i) + f(x_i, d) + ``plus`` (a public integer: it rides
        on c_i when c_i is here): a tensor computed here, or a value of program ``p``."""
        f, extra = self.f, self.extra
        _, b, c = self.dealer.part(self.item, i)
        if plus and isinstance(c, torch.Tensor):
            c, plus = c + plus, 0
        fused = _FUSED.get(f)
        if fused is not None and isinstance(b, torch.Tensor):
            # party i's pieces are here (not stored on it): its share is a function of its own
            # pieces and the public e, d alone, so it is computed here (ring.matmul: float64 limbs)
            # and sent as the one value the party stores (what it is sent, it could compute
            # itself from what it would be sent otherwise); its share of x is not needed again
            if self.stacked is not None:
                z = c + self.stacked[i]
            else:
                a_i = self.dealer.local(self.item, i)[0]
                here = _FUSED_HERE[f]
                z = here(here(c, e, b + d if i == 0 else b), a_i, d)
        elif fused is not None:  # c + f(e, b) + f(x, d) in two ops (addmm, addcmul)
            z = p.op(fused, p.op(fused, c, e, b), x_i, d)
        else:
            z = p.op(aten.add.Tensor, c, p.op(f, e, b, *extra))
            z = p.op(aten.add.Tensor, z, p.op(f, x_i, d, *extra))
        return p.op(aten.add.Tensor, z, plus) if plus else z

    def truncation_mask(self, i: int):
        """Party i's share of r, the truncation pair's mask (three or more parties, ``div``)."""
        return self.dealer.part(self.trunc_item, i)[0]


def _ring_mm(p, a, b, sa, sb, batched: bool = False):
    """c = a @ b mod 2^64 (``batched``: bmm) recorded on the provider's program ``p``: on float64
    limbs (ring.matmul's method: 22-bit limbs, six exact float64 products on BLAS) when the inner
    dimension allows it (k <= ring.LIMB_K), else the int64 kernel (no BLAS); an in-process provider
    takes the int64 kernel while ring.matmul measures it the faster here."""
    mm, acc = (aten.bmm.default, aten.baddbmm.default) if batched else (aten.mm.default, aten.addmm.default)
    if len(sa) != 2 or len(sb) != 2 or sa[1] > ring.LIMB_K or (p.local and not ring.prefer_limbs()):
        return p.op(mm, a, b)  # in process: the int64 kernel where it is the faster here (ring._dispatch)
    bits = ring.LIMB_BITS

    def limbs(t):
        out = []
        for j, width in ((0, bits), (1, bits), (2, ring.RING_BITS - 2 * bits)):
            v = t if j == 0 else p.op(aten.bitwise_right_shift.Tensor_Scalar, t, j * bits)
            v = p.op(aten.bitwise_and.Scalar, v, (1 << width) - 1)
            out.append(p.op(aten._to_copy.default, v, dtype=torch.float64))
        return out

    a0, a1, a2 = limbs(a)
    b0, b1, b2 = limbs(b)
    c0 = p.op(mm, a0, b0)
    c1 = p.op(acc, p.op(mm, a0, b1), a1, b0)
    c2 = p.op(acc, p.op(acc, p.op(mm, a0, b2), a1, b1), a2, b0)

    def ring_word(v, shift):
        w = p.op(aten._to_copy.default, v, dtype=torch.int64)
        return w if not shift else p.op(aten.bitwise_left_shift.Tensor_Scalar, w, shift)

    c = p.op(aten.add.Tensor, ring_word(c0, 0), ring_word(c1, bits))
    return p.op(aten.add.Tensor, c, ring_word(c2, 2 * bits))


def _op_label(f) -> str:
    """mul, mm, convolution: the name of the op a triple serves."""
    if f is SQUARE:
        return "mul"
    return getattr(f, "_opname", None) or getattr(f, "__name__", "op")


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n
