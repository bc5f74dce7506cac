"""Reconstructing a secret, as a lesson: ``sy.explain(sx)``.

A shared value is held by nobody: each party holds one share, a uniform int64 that alone says
nothing, and the value is the sum of all the shares modulo 2^64 (then decoded, for fixed
precision). ``explain_dict`` says that about one shared value, from the layers' own fields and
the parties' ledgers (workers/ledger.py): which parties hold a share, which must send theirs to
reconstruct it (every one), that no lane holds the value, and, once the user has reconstructed
it (an explicit ``.get()``), in which cell each party sent its share. Never a share's value nor
the secret: names, ids, counts.

The world view shows the same dict on a shared value's row (its ``explain`` entry, "Explain"),
and ``sy.explain(sx)`` returns it as an ``Explanation`` (text repr, HTML in a notebook).
"""
from __future__ import annotations

import html
import sys

from ..commands import LOCAL_OWNER
from ..errors import SyftError
from ..notebook import and_list, notebook_namespace
from ..tensors.base import ChainLayer
from ..tensors.registry import iter_chain
from ..workers.ledger import read_ledger

RING = "2^64"
DECODE_FIELDS = ("base", "precision", "scale")  # a fixed-point encoding's node fields


def _shared_layers(value):
    """(the decode of an encoding above the split or None, the layer that splits the value or
    None), read through the layer protocol alone: the split is the layer whose ``child_fields``
    tell its children which ``share`` they are; an encoding says its ``base``, ``precision``
    and ``scale`` in ``node_fields`` (a fixed precision tensor)."""
    decode = None
    for layer in iter_chain(value) if isinstance(value, ChainLayer) else ():
        if not isinstance(layer, ChainLayer):
            continue
        if layer.layer_children() and "share" in layer.child_fields(0):
            return decode, layer
        if decode is None:
            fields = layer.node_fields()
            if all(k in fields for k in DECODE_FIELDS):
                decode = {k: fields[k] for k in DECODE_FIELDS}
    return decode, None


def _shares(layer):
    """(share index from 1, of how many, the share's ref: its worker, id and whether it left)
    for each child of the splitting layer, from what the layer tells it (``child_fields``)."""
    out = []
    for i, child in enumerate(layer.layer_children()):
        told = layer.child_fields(i)["share"]
        ref = child.__dict__.get("_ref")
        if ref is None or not hasattr(ref, "location"):
            raise SyftError(f"share {i + 1} of this value is not a pointer to its party: nothing to explain")
        out.append((told["index"] + 1, told["of"], ref))
    return out


def explain_dict(value, name: str | None = None, *, ledgers: bool = False) -> dict:
    """What reconstructing ``value`` (a shared tensor) takes. ``ledgers``: also read each
    party's ledger (a round trip per remote party) for the cells its share was sent in."""
    decode, split = _shared_layers(value)
    if split is None:
        raise SyftError(f"sy.explain takes a secret-shared tensor (x.fix_precision().share(alice, bob, "
                        f"crypto_provider=carol)), got a {type(value).__name__}: nothing to reconstruct")
    secret = name or "the value"
    shares = _shares(split)
    n = len(shares)
    parties = []
    for index, of, ref in shares:
        entry = {"worker": ref.location.id, "share": index, "of": of, "id_at_location": ref.id}
        entry["sent"] = bool(getattr(ref, "released", False) and getattr(ref, "gone_how", None) == "fetched")
        parties.append(entry)
    provider = split.world_fields().get("crypto_provider")
    if ledgers:
        for entry, (_i, _of, ref) in zip(parties, shares):
            try:
                records = read_ledger(ref.location)
            except Exception:  # a party that is down: its ledger is unknown, not empty
                entry["ledger"] = "unreadable"
                continue
            sent = [r for r in records if r["id"] == entry["id_at_location"] and r["direction"] == "out"
                    and r["kind"] in ("fetched", "moved")]
            entry["sent"] = bool(sent)
            if sent:
                entry["sent_cell"] = sent[-1]["cell"]
                entry["sent_to"] = sent[-1]["peer"]
                entry["sent_bytes"] = sent[-1]["bytes"]
    names = [p["worker"] for p in parties]
    sent = [p for p in parties if p["sent"]]
    done = len(sent) == n
    where = "from" if done else "on"  # after a .get() each share came from its party
    terms = " + ".join(f"share {p['share']} ({where} {p['worker']})" for p in parties)
    numbers = _numbers(getattr(split, "reconstructed", None), decode) if done else None
    ring_sum = f"{secret} = ({terms}) mod {RING}" + (f" = {numbers[0]}" if numbers else "")
    ring_sum += (f", then / {decode['scale']} (fixed precision)" + (f" = {numbers[1]}" if numbers else "")) if decode else ""
    if done:  # after a .get(): the value is here now (its numbers, when kept), the shares are gone
        cells = sorted({p["sent_cell"] for p in sent if p.get("sent_cell") is not None})
        when = f" in cell {', '.join(f'[{c}]' for c in cells)}" if cells else ""
        value = f": {numbers[1]}" if numbers else " (the result of .get())"
        first = (f"{secret} is held by me now{value}, reconstructed{when} from the shares {and_list(names)} sent to me; "
                 f"no party holds a share of it any more.")
    else:
        first = (f"{secret} is held by nobody: {and_list(names)} each hold one share, a uniform int64 that alone "
                 f"reveals nothing.")
    lines = [first, ring_sum]
    if done:
        lines.append(f"Reconstructing it took every share: {and_list(names)} each sent theirs to me."
                     + (f" {provider}, the crypto provider, held no share." if provider else ""))
    else:
        lines.append(f"Reconstructing it needs every share: {and_list(names)} must each send theirs to me "
                     f"(Reconstruct, or {name + '.get()' if name else '.get()'})."
                     + (f" {provider}, the crypto provider, holds no share." if provider else ""))
    lines.append(f"{'Before the reconstruction no lane held' if done else 'Until then no lane holds'} {secret}: "
                 + ", ".join(f"{p['worker']} {'held' if done else 'holds'} share {p['share']}/{n}" for p in parties)
                 + (f", {provider} none" if provider else "") + ", me only pointers to the shares.")
    if sent:
        lines.append("Sent: " + ", ".join(
            f"{p['worker']} sent share {p['share']}" + (f" ({_size(p['sent_bytes'])})" if p.get("sent_bytes") else "")
            + (f" in cell [{p['sent_cell']}]" if p.get("sent_cell") is not None else "") for p in sent)
            + ("" if len(sent) == n else f"; still on their workers: {and_list([p['worker'] for p in parties if not p['sent']])}"))
    return {"schema": "syft_lab.explain", "version": 1, "secret": secret, "ring": RING, "parties": parties,
            "crypto_provider": provider, "decode": decode, "held_by": LOCAL_OWNER if done else None, "reconstructed": done,
            "lines": lines}


def _numbers(ring_sum, decode) -> tuple[str, str] | None:
    """A reconstructed secret's numbers: the sum of its shares in the ring, and the value it
    decodes to (the same for a plain integer secret); None when it was not kept (too large)."""
    if ring_sum is None:
        return None
    value = ring_sum.double() / decode["scale"] if decode else ring_sum
    digits = len(str(decode["scale"])) - 1 if decode else 0
    return _short(ring_sum.tolist()), _short(value.tolist(), digits)


def _short(values, digits: int | None = None, most: int = 8) -> str:
    """Numbers as Python prints a list, rounded to the encoding's digits, at most ``most`` of a
    flattened tensor shown ("…, N numbers" beyond)."""
    flat = values if isinstance(values, list) else [values]
    while flat and isinstance(flat[0], list):
        flat = [v for row in flat for v in row]
    shown = [round(v, digits) if digits else v for v in flat[:most]]
    if not isinstance(values, list):
        return str(shown[0])
    return str(shown) if len(flat) <= most else str(shown)[:-1] + f", … ({len(flat)} numbers)]"


def _size(n: int) -> str:
    return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} B"


class Explanation(dict):
    """``sy.explain(sx)``: the dict (``to_dict()``), printed as its lines, drawn as HTML in a notebook."""

    def __repr__(self):
        return "\n".join(self["lines"])

    def to_dict(self) -> dict:
        return dict(self)

    def _repr_html_(self):
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self["lines"])
        parties = "".join(
            f'<span class="syft-explain-party" data-worker="{html.escape(p["worker"])}">'
            f'{html.escape(p["worker"])}: share {p["share"]}/{p["of"]}{" (sent)" if p["sent"] else ""}</span>'
            for p in self["parties"])
        return (f'<div class="syft-explain"><b>Reconstructing {html.escape(self["secret"])}</b>'
                f'<div>{parties}</div><ol>{items}</ol></div>')


def explain(value, name: str | None = None) -> Explanation:
    """What reconstructing a shared tensor takes, and what it took once done (see the module)."""
    if name is None:
        name = _name_in_notebook(value) or _name_in_caller(value, sys._getframe(1))
    return Explanation(explain_dict(value, name, ledgers=True))


def _name_in_caller(value, frame):
    for scope in (frame.f_locals, frame.f_globals):
        for k, v in scope.items():
            if v is value and not k.startswith("_"):
                return k
    return None


def _name_in_notebook(value):
    ns = notebook_namespace()
    for k, v in (ns or {}).items():
        if v is value and not k.startswith("_"):
            return k
    return None
