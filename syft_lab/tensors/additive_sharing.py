"""AdditiveSharingTensor: a secret split into additive shares over Z_2^64, one per party.

    AdditiveSharingTensor -> [PointerTensor -> alice], [PointerTensor -> bob], ...
                             *crypto provider: carol*

The secret is the sum of the shares modulo 2^64 (int64 arithmetic wraps). Each share is a
PointerTensor to an int64 tensor on its own worker (a party); a share alone is uniformly
random and tells nothing about the secret, so no view ever shows a share's values. Ops
reach this layer through ``__torch_dispatch__``: linear ones (add, sub, neg, multiplication
by a public value, sums, views) run on each party by itself; products of two shared values
and comparisons are protocols with the crypto provider's correlated randomness (syft_lab.smpc,
registered here with ``set_engine``; docs/secure-computation.md).

What the views know of a secret comes from here alone, through the layer protocol: the shares
carry its ``group`` id and their ``share`` index in their inspection nodes and world entries
(``child_fields``; the stored share below a share pointer carries the group too), and its own
world entry carries the group, the crypto provider and the parties it is ``distributed`` over
(``world_fields``).
A shared tensor is never stored on a worker as one object (``remote_storable`` is False): that
worker would hold every share, hence the secret.
"""
from __future__ import annotations

import torch

from ..errors import SyftError
from ..ids import new_id
from ..notebook import and_list, user_scopes
from .base import ChainLayer, make_layer
from .registry import iter_chain, register_layer

_CPU = torch.device("cpu")
aten = torch.ops.aten
_engine = None
EXPLAIN_MAX_NUMEL = 4096  # a reconstructed secret up to this size is kept for sy.explain's numbers
PAIRWISE_MAX = 256  # as the engine's max_dim: all pairs at once up to this length, a tournament beyond


def set_engine(engine) -> None:
    """Register the protocols (syft_lab.smpc registers them when imported)."""
    global _engine
    _engine = engine


def engine():
    if _engine is None:
        raise SyftError("shared tensors need syft_lab.smpc (import syft_lab)")
    return _engine


@register_layer
class AdditiveSharingTensor(ChainLayer):
    kind = "shared"
    wire_code = None  # never sent: its shares travel, each to its own party
    remote_storable = False
    remote_storable_reason = ("one worker holding every share would hold the secret; the shares live on "
                              "their parties, and .get() reconstructs it here")
    node_actions = ("get", "refresh")

    @staticmethod
    def __new__(cls, shares, crypto_provider=None, group: int | None = None):
        shares = list(shares)
        if len(shares) < 2:
            raise SyftError("an AdditiveSharingTensor has at least two shares")
        first = shares[0]
        r = make_layer(cls, first.shape, torch.int64, _CPU)
        r.shares = shares
        r.crypto_provider = crypto_provider
        r.group = new_id() if group is None else group
        return r

    def __init__(self, *args, **kwargs):
        pass

    @property
    def parties(self) -> list:
        """The workers holding the shares, in share order."""
        return [p.location for p in self.shares]

    @property
    def child(self):  # a shared tensor has several children; `shares` names them
        raise AttributeError("an AdditiveSharingTensor has no single child: see .shares")

    # --- what users call ----------------------------------------------------------------------
    def get(self) -> torch.Tensor:
        """Reconstruct the secret here (the sum of the shares); the shares leave their parties.
        A small secret's sum is kept (a copy), for ``sy.explain`` to show the numbers it took:
        the value is the notebook's now, whatever becomes of the result."""
        value = engine().reconstruct(self)
        self.reconstructed = value.detach().clone() if value.numel() <= EXPLAIN_MAX_NUMEL else None
        return value

    def refresh(self) -> "AdditiveSharingTensor":
        """New shares of the same secret (fresh randomness), on the same parties."""
        return engine().refresh(self)

    def __reduce_ex__(self, protocol):
        raise SyftError("an AdditiveSharingTensor cannot be pickled: its shares live on their parties")

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        if func.overloadpacket not in _SAME_SHARES:
            _refuse_reconstructed(args, kwargs or {})
        if func in _EXTREMA and isinstance(args[0], AdditiveSharingTensor):
            return _extremum(func, args, kwargs or {})
        if func.overloadpacket in _INPLACE_VIEWS:
            return _inplace_view(func, args, kwargs or {})
        return engine().dispatch(func, args, kwargs or {})

    # --- the layer protocol ------------------------------------------------------------------
    def layer_children(self) -> list:
        return list(self.shares)

    def node_fields(self) -> dict:
        provider = self.crypto_provider.id if self.crypto_provider is not None else None
        fields = {"group": self.group, "parties": [w.id for w in self.parties], "crypto_provider": provider,
                  "n_shares": len(self.shares), "ring": "Z_2^64"}
        if provider is not None:
            fields["annotations"] = [{"label": "crypto provider", "value": provider}]
        last_op = getattr(self, "last_op", None)  # what made it: {"op", "rounds", "random_words"} (smpc/costs.py)
        if last_op is not None:
            fields["last_op"] = dict(last_op)
        return fields

    child_fields_below = ("group",)  # the stored share a share pointer points to: its secret's group

    def child_fields(self, i: int) -> dict:
        """Share ``i`` says which secret it is part of, and which share of how many."""
        return {"group": self.group, "share": {"index": i, "of": len(self.shares)}}

    def world_fields(self) -> dict:
        fields = {"group": self.group, "distributed": [w.id for w in self.parties]}
        if self.crypto_provider is not None:
            fields["crypto_provider"] = self.crypto_provider.id
        return fields

    def display(self) -> dict:
        # the crypto provider is the node's annotation (node_fields), which every view renders
        lines = [f"{len(self.shares)} shares: {', '.join(w.id for w in self.parties)}"]
        lines.append("a share alone reveals nothing: no values shown")
        last_op = getattr(self, "last_op", None)
        if last_op is not None:  # counts only (smpc/costs.py)
            line = (f"made by {last_op['op']}: {last_op['rounds']} rounds, {last_op['random_words']} random words "
                    f"from the dealer")
            approximation = last_op.get("approximation")
            if approximation:
                line += f"; {approximation['method']}, {approximation['iterations']} iterations"
            lines.append(line)
        return {"label": "AdditiveSharingTensor", "lines": lines, "badge": "shared"}


_SAME_SHARES = {aten.detach, aten.alias, aten.lift_fresh}  # no party is asked: the same shares, wrapped again


def _refuse_reconstructed(args, kwargs) -> None:
    """A shared value whose shares were fetched by its ``.get()`` cannot be computed with: say
    which value it is (a model's parameter by its path, ``cnn[0].weight``) and why, before any
    party is asked for a share it no longer holds (an ObjectNotFoundError deep in a protocol)."""
    for a in (*args, *kwargs.values()):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, AdditiveSharingTensor) and any(
                    getattr(getattr(s, "_ref", None), "gone_how", None) == "fetched" for s in t.shares):
                raise reconstructed_error(t)


def reconstructed_error(shared) -> SyftError:
    """The refusal of a computation on ``shared`` (an AdditiveSharingTensor) after its ``.get()``:
    its name in the notebook (a model's parameter by its path, with what to do instead)."""
    name, model = _shared_name(shared)
    parties = and_list(s.location.id for s in shared.shares)
    what = name or f"a shared value of shape {list(shared.shape)}"
    text = f"{what} was reconstructed with .get(): its shares left {parties}, so it cannot take part in a computation any more"
    if model is not None:
        return SyftError(f"{text} ({model} cannot run). To look at a parameter, reconstruct a copy: "
                         f"{name}.detach().clone().get(); to use the model again, share it again")
    return SyftError(f"{text}: compute with the value .get() returned")


def _shared_name(shared) -> tuple[str | None, str | None]:
    """(the notebook's name of the value whose chain holds ``shared``, the name of the model it
    is a parameter of or None): a variable (``sx``) or a parameter's path (``cnn[0].weight``),
    from the notebook's namespace, else the calling frames outside syft_lab and torch."""
    import torch.nn as nn  # (torch is loaded: a shared tensor exists)

    def holds(v) -> bool:
        return v is shared or (isinstance(v, ChainLayer) and any(layer is shared for layer in iter_chain(v)))

    for scope in user_scopes():
        found = None  # the last name bound in the scope: cnn, of plain and cnn = plain.fix_precision().share(...)
        for k, v in list(scope.items()):
            if k.startswith("_"):
                continue
            if holds(v):
                found = k, None
            elif isinstance(v, nn.Module):
                for path, p in (*v.named_parameters(), *v.named_buffers()):
                    if holds(p):
                        found = k + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in path.split(".")), k
        if found is not None:
            return found
    return None, None


_EXTREMA = {aten.max.dim, aten.min.dim, aten.argmax.default, aten.argmin.default}


def _extremum(func, args, kwargs):
    """max/min along a dim and argmax/argmin of int64 shares (issue 30: they worked on fixed
    precision shares only), by the protocols a FixedPrecisionTensor uses: every pair compared at
    once along a dim of up to 256 elements, a tournament beyond; min is -max(-x) (ties: the first
    index, as torch). Indices come back shared, as plain integers."""
    x = args[0]
    packet = func.overloadpacket
    negate = packet in (aten.min, aten.argmin)
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if negate:
        x = -x
    if dim is None or not x.dim():  # a 0-dim tensor along dim 0 (or -1): its one element, as torch
        if dim is not None and dim not in (0, -1):
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
        x, dim, keepdim = aten.reshape.default(x, [-1]), 0, False
    values_too = packet in (aten.max, aten.min)
    m = x.shape[dim % x.dim()] if x.dim() else 1
    if m > PAIRWISE_MAX:
        values, idx = engine().max_index(x, dim, keepdim)
    else:
        values, onehot = engine().max_dim(x, dim, keepdim, values=values_too)
        idx = engine().index_of(onehot, dim, keepdim)
    if not values_too:
        return idx
    return (-values if negate else values), idx


_INPLACE_VIEWS = {aten.squeeze_, aten.unsqueeze_, aten.t_, aten.transpose_}
_PYTHON_KEYS = (torch._C.DispatchKeySet(torch._C.DispatchKey.Python)
                | torch._C.DispatchKeySet(torch._C.DispatchKey.PythonTLSSnapshot))


def _inplace_view(func, args, kwargs):
    """squeeze_, unsqueeze_, t_, transpose_ (matmul's 1-D @ 2-D squeezes its result in place): each
    party's share takes the view; the wrapper's sizes change by torch's own kernel (metadata only)."""
    x = args[0]
    out_of_place = getattr(getattr(aten, func.overloadpacket.__name__[:-1]), func._overloadname)
    viewed = engine().dispatch(out_of_place, args, kwargs)
    with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEYS):
        func(x, *args[1:], **kwargs)
    x.shares = viewed.shares
    return x
