"""A guard for running a tensor's own op from inside a ``__torch_dispatch__``.

Why it exists: an in-process worker's op (PointerTensor) and a layer's inner op (LoggingTensor)
run inside a wrapper's ``__torch_dispatch__``, where torch excludes every dispatch key above
Python; ``lazy_bits_included`` gives such an op the keys of a tensor's lazy bits back.
"""
import torch

# The worker's op runs inside PointerTensor's __torch_dispatch__ when the worker is in process
# (VirtualWorker): there torch excludes every dispatch key above Python, the Conjugate,
# Negative and ZeroTensor keys among them, whose fallbacks materialise a tensor's lazy bits
# (``x.conj()``, ``_neg_view``) before a kernel that does not read them. A worker's own tensor
# with such a bit (``aten._conj`` of a stored tensor) then reached such a kernel as its raw
# memory: ``torch.fft.hfftn`` (``_fft_c2r`` of a conjugate view) was wrong by up to 15.6. The
# worker's call runs with those keys included again, as it would in a worker process; the
# other keys (autograd, functionalization, vmap) stay as they are.
_LAZY_BIT_KEYS = (torch._C.DispatchKey.Conjugate, torch._C.DispatchKey.Negative, torch._C.DispatchKey.ZeroTensor)
_tls_excluded = torch._C._dispatch_tls_local_exclude_set
_tls_included = torch._C._dispatch_tls_local_include_set
_ForceKeys = torch._C._ForceDispatchKeyGuard
_LAZY_SHOWN: dict = {}  # an excluded key set's raw bits -> it without the lazy-bit keys (a handful of sets)


def _show_lazy_bits(excluded):
    shown = excluded
    for k in _LAZY_BIT_KEYS:
        shown = shown.remove(k)
    if len(_LAZY_SHOWN) < 64:
        _LAZY_SHOWN[excluded.raw_repr()] = shown
    return shown


def lazy_bits_included():
    """A guard for running a tensor's op from inside a ``__torch_dispatch__`` (an in-process
    worker's op, a layer's inner op): the Conjugate, Negative and ZeroTensor keys included again."""
    excluded = _tls_excluded()
    return _ForceKeys(_tls_included(), _LAZY_SHOWN.get(excluded.raw_repr()) or _show_lazy_bits(excluded))
