"""Object ids: random 53-bit integers, unique across workers and safe as JSON numbers."""
import random

_rand = random.Random()
ID_BITS = 53


def new_id() -> int:
    return _rand.getrandbits(ID_BITS) or 1


def short(obj_id: int) -> str:
    """The short form views print; the full id is shown on hover."""
    return f"{obj_id:x}"[-6:]


def tensor_id(t) -> int:
    """A stable id for any tensor. Syft layers carry one; a plain tensor gets one on first ask.

    Kept in the tensor's own __dict__ rather than a weak map: weakrefs to a tensor
    would make torch.utils.swap_tensors (used by model.send) refuse it."""
    d = t.__dict__
    i = d.get("_syft_id")
    if i is None:
        i = d["_syft_id"] = new_id()
    return i
