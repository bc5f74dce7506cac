"""Rounds of a protocol: each party's ops of one round, sent as one message per party.

A protocol step is a set of ``Program``s, one per worker (a party or the crypto provider):
the ops that worker runs in that round on the shares it stores and on public values this
process sends along. ``run(programs)`` executes them:

- on an in-process worker (VirtualWorker) op by op, straight into its WorkerCore (the op
  allow-list still checks every op);
- on a remote worker as one message: a graph (``run_graph``, the ``sy.batch`` message, the
  public values inline as constants) whose opened outputs come back in its reply (``ret``),
  sent without waiting (``WorkerClient.submit_request``); every request of a round is in flight
  at once, on every worker, so a round costs about one round trip, not one per party. A round
  that opens nothing (a protocol's last step, an add, a view) is not waited for at all: its
  outputs' ids are chosen here (the graph's ``o``), so their pointers exist at once. It is not
  even sent on its own: it is held back and becomes the first ops of its worker's next program
  (one graph, one message: a product's last step and the next product's first step travel
  together), or is sent just before any other request to that worker (``before_request``), or
  by ``flush``; a worker runs its messages in order, so whatever comes next finds its values.
  Its replies are read with the next ones on the same connection; an error in one is raised by
  the next ``run`` (or ``flush``). Such a round costs no round trip: ``stats["rounds"]`` counts
  the round trips waited for, ``stats["messages"]`` the messages sent.

Values a program ``keep``s stay on its worker as pointers (the next round's inputs); values it
``open``s come back here (masked values only: a protocol never opens a share).

Every message of a protocol carries a ledger note (syft_lab/workers/ledger.py) saying what its
data is, so each worker's ledger tells what it saw: a party's opened masked values ("opened
value", out), the public values opened in the last round that come back to it and the dealer's
pieces it is sent ("opened value" and "dealer material", in: ``expect``), the crypto provider's
material leaving it, counted by item. Counts and sizes only, never a value.
"""
from __future__ import annotations

import functools

import torch

from .. import events
from ..dtypes import dtype_name
from ..commands import NewObject
from ..ids import new_id
from ..plans.graph import Node, PlanGraph, Value
from ..tensors.pointer import PointerTensor, wrap_result

_meta_cache: dict = {}
_STUBS: dict = {}  # per dtype: the empty placeholder a graph lists for a constant sent as raw bytes
aten = torch.ops.aten

# What protocols cost, for the benchmarks: rounds (one round trip each: every message of a
# round is in flight at once), messages (requests to remote workers) and the rounds sent and
# not waited for (they open nothing: no round trip).
stats = {"messages": 0, "rounds": 0, "unwaited": 0}

# Requests of rounds not waited for (see the module docstring): read when the next replies are,
# their errors raised by the next ``run`` or by ``flush``.
_unread: list = []


def reset_stats() -> None:
    stats["messages"] = 0
    stats["rounds"] = 0
    stats["unwaited"] = 0


# What every op costs wherever its workers are (in process too), for the inspection model's
# ``last_op`` (costs.py): protocol steps (rounds) and random words drawn on workers (the dealer's
# material; counts only, never values). Only ever increases.
totals = {"rounds": 0, "random_words": 0}


# What a worker's next program carries that its ledger should name (``expect``): worker id ->
# {(why, peer): bytes}, taken by that worker's next program of a protocol.
_pending: dict = {}


def expect(worker, why: str, peer, nbytes: int) -> None:
    """``worker``'s next program carries ``nbytes`` of ``why`` ("dealer": pieces of the crypto
    provider ``peer``'s material; "opened": public values opened in the last round)."""
    got = _pending.setdefault(worker.id, {})
    got[(why, peer)] = got.get((why, peer), 0) + int(nbytes)


def _carries(worker) -> list:
    got = _pending.pop(worker.id, None)
    if not got:
        return []
    return [{"why": why, "bytes": n, **({"peer": peer} if peer else {})} for (why, peer), n in got.items()]


def _cell(msg: dict) -> dict:
    """The notebook cell on a message to a remote worker (a worker process has no notebook)."""
    cell = events.current_cell.number
    if cell is not None:
        msg["cell"] = cell
    return msg


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


class Val:
    """A value of a program: the output of one op (or, in process, its pointer already)."""

    __slots__ = ("index", "shape", "dtype", "ptr")  # no reference to its program: no cycle keeps pointers alive

    def __init__(self, index, shape, dtype, ptr=None):
        self.index, self.shape, self.dtype, self.ptr = index, shape, dtype, ptr
        if ptr is not None:
            self.shape, self.dtype = tuple(ptr.shape), ptr.dtype


class RowPiece:
    """A piece of the dealer's row that a party already stores (``Dealer.deliver``): the
    program slices it out of the stored row instead of carrying it as a constant."""

    __slots__ = ("row", "offset", "numel", "shape")

    def __init__(self, row, offset, numel, shape):
        self.row, self.offset, self.numel, self.shape = row, offset, numel, tuple(shape)


def _value(v: Val) -> Value:
    """The graph value of ``v``: a node's output, or a random input (``Program.draw``)."""
    return v.index if type(v.index) is Value else Value("node", v.index)


def _drawn_input(j: int, shape) -> dict:
    return {"name": f"rand{j}", "role": "input", "shape": list(shape), "dtype": "int64"}


def _meta(sig):
    kind = sig[0]
    if kind == "t":
        return torch.empty(sig[1], dtype=sig[2], device="meta")
    if kind == "l":
        return [_meta(b) for b in sig[1]]
    return sig[1]


class Program:
    """The ops one worker runs in one round."""

    def __init__(self, worker, role: str = "party"):
        self.worker = worker
        # in process (a VirtualWorker, or any in-process transport): op by op into its service; else messages
        self.local = bool(getattr(getattr(worker, "transport", None), "in_process", False))
        self.role = role  # "party", or "dealer": a crypto provider's program (its opened values are material)
        self.items: dict = {}  # a dealer's items by label (counts), for its ledger
        self.inputs: list[dict] = []
        self.input_ids: list[int] = []
        self._input_index: dict[int, int] = {}
        self._pieces: dict = {}
        self._hold: list = []  # the input pointers: alive until the program has run
        self.draw_bits: list[int] = []  # per random input (the last inputs): its width, drawn on the worker
        self.constants: list[torch.Tensor] = []
        self._const_index: dict[int, int] = {}
        self._const_src: list = []  # the tensors themselves: their ids stay theirs while recorded
        self.nodes: list[Node] = []
        self._keep: list = []
        self._open: list[Val] = []
        self.kept: list[PointerTensor] = []
        self.opened: list[torch.Tensor] = []
        self._groups: list[tuple] = []  # open_all: how each group's values were brought here
        # a dealer's program made ahead (the next relu's material): sent with a round, its reply read
        # when the material is first used (``finish``), so the round does not wait for the dealer
        self.deferred = False
        self._pending: list = []
        # a round held back for this worker and sent with this one (``_after``): how this
        # program's recorded node indices move, the held round's outputs, its ledger carries
        self._node_offset = 0
        self._prefix_outputs: tuple = ([], [])
        self._held_carries: list = []
        self._made: dict = {}
        self._out_values: list = []
        self._out_ids: list = []

    # --- recording ------------------------------------------------------------------------
    def _arg(self, a):
        """(argument for the worker, signature: what its meta stand-in is made from) of one op argument."""
        if isinstance(a, Val):
            if self.local:
                return a.ptr._ref, None
            return _value(a), ("t", a.shape, a.dtype)
        if isinstance(a, RowPiece):
            return self._arg(self._piece(a))
        if isinstance(a, PointerTensor):
            a._check_alive()
            if self.local:
                return a._ref, None
            ref_id = a.id_at_location
            j = self._input_index.get(ref_id)
            if j is None:
                if self.draw_bits:
                    raise RuntimeError("a program's random inputs come after its stored inputs")
                j = self._input_index[ref_id] = len(self.inputs)
                self._hold.append(a)
                self.input_ids.append(ref_id)
                self.inputs.append({"name": f"in{j}", "role": "input", "shape": list(a.shape),
                                    "dtype": dtype_name(a.dtype)})
            return Value("input", j), ("t", tuple(a.shape), a.dtype)
        if isinstance(a, torch.Tensor):  # a public value this process sends along
            if self.local:
                return a, None
            j = self._const_index.get(id(a))
            if j is None:  # once per tensor, however many ops use it (self.constants keeps it alive)
                j = self._const_index[id(a)] = len(self.constants)
                self.constants.append(a.contiguous())
                self._const_src.append(a)
            return Value("const", j), ("t", tuple(a.shape), a.dtype)
        if type(a) in (list, tuple):
            pairs = [self._arg(b) for b in a]
            return [p[0] for p in pairs], ("l", tuple(p[1] for p in pairs))
        return a, ("v", a)

    def constant(self, t: torch.Tensor) -> int:
        """Register ``t`` as a public value this program carries (remote only); its index."""
        self._arg(t)
        return self._const_index[id(t)]

    def draw(self, shape, bits: int = 64) -> Val:
        """Uniform random int64 words of ``shape`` (64 bits: ring elements; fewer: integers below
        2^bits) made on the worker itself (the service's ``deal`` command), never here: the
        program carries their shapes only. In process, one deal of the draw alone."""
        shape = tuple(int(s) for s in shape)
        if self.local:
            totals["random_words"] += _numel(shape)
            graph = PlanGraph("deal", [_drawn_input(0, shape)], [], [], [Value("input", 0)], False)
            out = self.worker.submit_request({"c": "deal", "g": graph.to_json(), "i": [], "o": [new_id()],
                                              "bits": [bits]}).result()
            return Val(None, None, None, wrap_result(PointerTensor, out[0], self.worker))
        self.inputs.append(_drawn_input(len(self.inputs), shape))
        self.draw_bits.append(int(bits))
        return Val(Value("input", len(self.inputs) - 1), shape, torch.int64)

    def _piece(self, piece: RowPiece) -> Val:
        key = (id(piece.row), piece.offset)
        v = self._pieces.get(key)
        if v is None:
            flat = self.op(aten.slice.Tensor, piece.row, 0, piece.offset, piece.offset + piece.numel)
            v = self._pieces[key] = self.op(aten.reshape.default, flat, list(piece.shape))
        return v

    def op(self, func, *args, **kwargs) -> Val:
        """Run (in process) or record (remote) ``func`` on this worker; returns its value."""
        pairs = [self._arg(a) for a in args]
        wire_args = [p[0] for p in pairs]
        if kwargs:
            kw_pairs = {k: self._arg(v) for k, v in kwargs.items()}
            wire_kw = {k: p[0] for k, p in kw_pairs.items()}
        else:
            kw_pairs, wire_kw = {}, {}
        if self.local:
            carries = _carries(self.worker) if _pending else None
            if carries:  # the first op that uses them says what its public values are
                out = self.worker.submit_request({"c": "run", "op": func, "a": wire_args, "k": wire_kw or None,
                                                  "note": {"carries": carries}}).result()
            else:
                out = self.worker._run(func, wire_args, wire_kw or None)
            return Val(None, None, None, wrap_result(PointerTensor, out, self.worker))
        key = (func, tuple(p[1] for p in pairs), tuple((k, p[1]) for k, p in kw_pairs.items()))
        hit = _meta_cache.get(key)
        if hit is None:
            m = func(*[_meta(p[1]) for p in pairs], **{k: _meta(p[1]) for k, p in kw_pairs.items()})
            hit = _meta_cache[key] = (tuple(m.shape), m.dtype)
        shape, dtype = hit
        self.nodes.append(Node(func, wire_args, wire_kw, [(shape, dtype_name(dtype))]))
        return Val(len(self.nodes) - 1, shape, dtype)

    def keep(self, v) -> int:
        """Keep ``v`` (a value, or an input pointer) on the worker: after ``run``,
        ``self.kept[i]`` is a pointer to it."""
        self._keep.append(v)
        return len(self._keep) - 1

    def open(self, v: Val) -> int:
        """Bring ``v`` here after the round (a masked value): ``self.opened[i]``."""
        self._open.append(v)
        return len(self._open) - 1

    def open_all(self, vals) -> int:
        """Bring several values here after the round: ``self.parts(k)`` is the list of them, each
        in its shape. Wherever the worker is: in process each value is fetched as it is (no
        packing ops), from a remote worker they come as one value of the reply (stacked when
        their shapes agree, else flattened and concatenated)."""
        vals = list(vals)
        if self.local or len(vals) == 1:  # one value (a square's e) comes as it is: no stack
            self._groups.append(("each", [self.open(v) for v in vals]))
        elif len({tuple(v.shape) for v in vals}) == 1:
            self._groups.append(("stacked", self.open(self.op(aten.stack.default, vals)), len(vals)))
        else:
            flat = [self.op(aten.reshape.default, v, [-1]) for v in vals]
            self._groups.append(("cat", self.open(self.op(aten.cat.default, flat)), [tuple(v.shape) for v in vals]))
        return len(self._groups) - 1

    def parts(self, k: int) -> list[torch.Tensor]:
        """The values of ``open_all``'s group ``k``, after the round."""
        group = self._groups[k]
        if group[0] == "each":
            return [self.opened[i] for i in group[1]]
        value = self.opened[group[1]]
        if group[0] == "stacked":
            return list(value.unbind(0))
        out, offset = [], 0
        for shape in group[2]:
            n = _numel(shape)
            out.append(value[offset:offset + n].view(shape))
            offset += n
        return out

    # --- running ------------------------------------------------------------------------------
    def _note(self, carries=None) -> dict:
        """The ledger note of this program's message: what its opened values and carried public
        values are (counts and sizes only); ``carries`` given: those (a held round's), else
        what its worker's next program was said to carry (``expect``)."""
        note = {"why": "dealer" if self.role == "dealer" else "opened"}
        if self.items:
            note["items"] = dict(self.items)
        if carries is None:
            carries = _carries(self.worker)
        if carries:
            note["carries"] = carries
        return note

    def _execute_local(self):
        self.kept = [v if isinstance(v, PointerTensor) else v.ptr for v in self._keep]
        self.opened = []
        note = self._note() if self._open else None
        for v in self._open:
            ref = v.ptr._ref
            self.opened.append(self.worker.submit_request({"c": "fetch", "id": ref.id, "keep": False,
                                                           "note": note}).result())
            note = {"why": note["why"]}  # the item counts go with the first value only
            ref.released = True

    def _prepare(self) -> bool:
        """Choose the ids of this program's outputs and make its kept values' pointers from them
        and the shapes recorded (``self.kept``): they exist before the message is sent. False if
        it has nothing to keep or open (and so nothing to send)."""
        kept_vals = [v for v in self._keep if isinstance(v, Val)]
        outs = kept_vals + self._open
        pre_vals, pre_ids = self._prefix_outputs
        if not outs and not pre_ids:
            self.kept = list(self._keep)
            return False
        w = self.worker
        ids = [new_id() for _ in outs]
        made = iter(wrap_result(PointerTensor, NewObject(i, v.shape, v.dtype), w)
                    for i, v in zip(ids, kept_vals))
        self.kept = [next(made) if isinstance(v, Val) else v for v in self._keep]
        values = [self._shifted(_value(v)) for v in outs]
        self._made.update(zip(ids, values[:len(kept_vals)]))  # obj id -> its value in this graph
        self._out_values, self._out_ids = pre_vals + values, pre_ids + ids
        return True

    def _shifted(self, value: Value) -> Value:
        """``value`` (of this program's own recording) in the graph after a held round's ops."""
        off = self._node_offset
        return Value("node", value.index + off) if off and value.kind == "node" else value

    def _after(self, held: "Program") -> None:
        """Run this program's ops after those of ``held`` (a round held back for the same worker,
        ``_hold_back``), in one message: one graph of both, its inputs the union of both programs',
        a value ``held`` keeps read in place (the pointer made for it names an object not made
        yet) and ``held``'s kept values stored under the ids already given to their pointers."""
        off_n, off_c = len(held.nodes), len(held.constants)
        inputs, input_ids, index = list(held.inputs), list(held.input_ids), dict(held._input_index)
        remap = {}
        for j, ref_id in enumerate(self.input_ids):
            v = held._made.get(ref_id)
            if v is None:
                k = index.get(ref_id)
                if k is None:
                    k = index[ref_id] = len(inputs)
                    inputs.append(dict(self.inputs[j], name=f"in{k}"))
                    input_ids.append(ref_id)
                v = Value("input", k)
            remap[j] = v

        def moved(a):
            if type(a) is Value:
                if a.kind == "input":
                    return remap[a.index]
                return Value(a.kind, a.index + (off_n if a.kind == "node" else off_c))
            if type(a) in (list, tuple):
                return type(a)(moved(b) for b in a)
            return a

        self.nodes = held.nodes + [Node(n.op, moved(n.args), {k: moved(v) for k, v in n.kwargs.items()}
                                        if n.kwargs else n.kwargs, n.outputs) for n in self.nodes]
        self.inputs, self.input_ids, self._input_index = inputs, input_ids, index
        self.constants = held.constants + self.constants
        self._const_src = held._const_src + self._const_src
        # the held round's own pointers too: alive until this message has gone, so a release of one
        # the user dropped meanwhile follows the message that makes its object (as any release does)
        self._hold = held._hold + [k for k in held.kept if isinstance(k, PointerTensor)] + self._hold
        self._node_offset = off_n
        self._prefix_outputs = (held._out_values, held._out_ids)
        self._made = dict(held._made)
        self._held_carries = held._held_carries

    def _send(self, alone: bool = False) -> list:
        """Send this program (prepared: one run_graph, its opened values in the reply) without
        waiting; returns the requests in flight. ``alone``: a held round sent ahead of another
        request (its ledger note: what it carried when it was held, nothing of the next one's)."""
        w = self.worker
        # the public values travel as raw tensor bytes beside the JSON graph (``cv``), which lists
        # empty placeholders for them
        stubs = [_STUBS.setdefault(c.dtype, torch.empty(0, dtype=c.dtype)) for c in self.constants]
        graph = PlanGraph("smpc", self.inputs, stubs, self.nodes, self._out_values, False)
        ids = self._out_ids
        opened = ids[len(ids) - len(self._open):] if self._open else []
        msg = {"c": "run_graph", "g": graph.to_json(), "i": list(self.input_ids), "o": ids}
        if self.constants:
            msg["cv"] = list(self.constants)
        if self.draw_bits:  # a dealer's program: its random inputs are drawn on the worker
            msg["c"], msg["bits"] = "deal", list(self.draw_bits)
            totals["random_words"] += sum(_numel(spec["shape"]) for spec in self.inputs[-len(self.draw_bits):])
        if opened:  # the opened values come back in the reply (never stored on the worker)
            msg["ret"] = opened
        if alone:
            note = self._note(self._held_carries)
        else:
            note = self._note()
            if self._held_carries:
                note["carries"] = self._held_carries + note.get("carries", [])
        if not opened:
            note.pop("why")
        msg["note"] = note
        stats["messages"] += 1
        return [w.submit_request(_cell(msg))]

    def _submit(self) -> list:
        """Send this program without waiting; returns the requests in flight."""
        return self._send() if self._prepare() else []

    def finish(self) -> None:
        """Read the reply of a deferred program (``deferred``) sent with an earlier round."""
        pending, self._pending = self._pending, []
        if pending:
            self._collect([q.result() for q in pending])

    def _collect(self, results) -> None:
        """The opened values from the reply (the kept ones' pointers were made when it was sent)."""
        self._hold = []
        self.opened = list(results[0][len(results[0]) - len(self._open):]) if results and self._open else []


def _closed(client) -> bool:
    transport = getattr(client, "transport", None)
    return transport is not None and transport.state == "closed"


def _check_unread(wait: bool = False) -> None:
    """Raise the first error of a request not waited for (``wait``: read every reply first)."""
    if not _unread:
        return
    left, first = [], None
    for q in _unread:
        if _closed(q.client):  # its worker was closed here: nothing will use what it made
            continue
        if wait or q.done:
            try:
                q.result()
            except Exception as e:  # every reply is read before we go on
                first = first or e
        else:
            left.append(q)
    _unread[:] = left
    if first is not None:
        raise first


# Rounds held back (remote workers only): a round that opens nothing is not sent at once but
# with its worker's next program, as the first ops of the same graph (``Program._after``), so a
# protocol's last step and the next op's first step are one message, not two; any other request
# to that worker sends it first (``WorkerClient.before_request``), as does ``flush``. Its kept
# values' pointers exist from the start (their ids chosen here), as for a round not waited for.
_held: dict = {}  # id(worker) -> Program


def _hold_back(p: Program) -> None:
    p._held_carries = p._held_carries + _carries(p.worker)
    _held[id(p.worker)] = p
    p.worker.before_request = functools.partial(_send_held, p.worker)


def _send_held(worker) -> None:
    """Send the round held back for ``worker`` (if any) as a message of its own."""
    p = _held.pop(id(worker), None)
    worker.before_request = None
    if p is not None and not _closed(worker):
        _unread.extend(p._send(alone=True))
        p._hold = []  # (a held program keeps its input and kept pointers alive until sent)


def _take_held(p: Program) -> None:
    """Before ``p`` is sent: the round held for its worker goes first, inside ``p`` where it can."""
    if id(p.worker) not in _held:
        return
    if p.draw_bits or p.deferred or _closed(p.worker):  # a dealer's program (never a party's round)
        _send_held(p.worker)
        return
    p.worker.before_request = None
    p._after(_held.pop(id(p.worker)))


def send_held() -> None:
    """Send every round held back, without waiting (at the end of a cell: its messages name it)."""
    for held in list(_held.values()):
        _send_held(held.worker)


events.cell_ends.append(send_held)


def flush() -> None:
    """Send every round held back, wait for every request of a round not waited for; raise the
    first error among them."""
    send_held()
    _check_unread(wait=True)


def run(programs) -> None:
    """Execute one round: every program; remote ones all at once (every request of the round is
    in flight before the first reply is read, so the round costs about one round trip). A round
    that opens nothing is held back and sent with the next (the module docstring)."""
    programs = [p for p in programs if p is not None]
    if any(p._keep or p._open for p in programs):  # as remotely: a program with no output sends nothing
        totals["rounds"] += 1
    for p in programs:
        if p.local:
            p._execute_local()
    remote = [p for p in programs if not p.local]
    if _held:
        for p in remote:
            _take_held(p)
    waited = [p for p in remote if not p.deferred]
    if waited and not any(p._open for p in waited):  # nothing comes back: held for the next message
        held_any = False
        for p in waited:
            if p._prepare():
                _hold_back(p)
                held_any = True
            else:
                p._hold = []
            p.opened = []
        if held_any:
            stats["unwaited"] += 1
        for p in remote:
            if p.deferred:
                p._pending = p._submit()
        _check_unread()
        return
    sent = [(p, p._submit()) for p in remote]
    if any(p.deferred for p in remote):  # read later (Program.finish): the round does not wait for them
        for p, pending in sent:
            if p.deferred:
                p._pending = pending
        sent = [(p, pending) for p, pending in sent if not p.deferred]
        remote = [p for p in remote if not p.deferred]
    if remote:
        stats["rounds"] += 1
    errors = []
    for p, pending in sent:
        results = []
        for q in pending:
            try:
                results.append(q.result())
            except Exception as e:  # every reply is read before we go on
                errors.append(e)
        if not errors:
            p._collect(results)
    if errors:
        raise errors[0]
    _check_unread()
    parties = [p for p in programs if p.role == "party" and p.opened]
    if len(parties) > 1:  # a masked value was opened: its public sum goes back to every party
        for p in parties:
            expect(p.worker, "opened", None, sum(o.numel() * o.element_size() for o in p.opened
                                                 if isinstance(o, torch.Tensor)))
