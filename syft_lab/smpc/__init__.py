"""Secure multi-party computation: additive secret sharing over Z_2^64 with a crypto provider.

    x.fix_precision().share(alice, bob, crypto_provider=carol)

``ring`` (shares and reconstruction), ``runtime`` (one message per party per round),
``provider`` (the dealer's correlated randomness), ``protocols`` (Beaver products,
truncation, the sign bit, relu, max), ``engine`` (which protocol an aten op becomes) and
``methods`` (``.fix_precision()``, ``.share()``, ... on tensors and modules); ``approximations``,
``activations``, ``products``, ``trigonometry``, ``convolution``, ``pooling`` and ``layers`` add
ops. The layers are in syft_lab/tensors/fixed_precision.py (with fixed_precision_compare.py and fixed_precision_views.py)
and additive_sharing.py; docs/secure-computation.md
explains the protocols, their rounds and the trust model.
"""
from ..tensors.additive_sharing import AdditiveSharingTensor
from ..tensors.fixed_precision import FixedPrecisionTensor
from ..tensors import fixed_precision_compare, fixed_precision_indexing  # noqa: F401  (comparisons, extrema, %;
#   a public index or condition: each registers its handlers with the layer)
from . import approximations, convolution, engine, init, layers, methods, pooling, protocols, ring, runtime  # noqa: F401  (engine registers itself with the layer,
#                                                       methods with sy.hook())
from . import activations, products, trigonometry  # noqa: F401,E402  (logsumexp/softplus/elu, prod/cumprod, cos/sin:
#   each registers its handlers with the layer)
from . import costs  # noqa: F401,E402  (last: it measures every handler registered above)

__all__ = ["AdditiveSharingTensor", "FixedPrecisionTensor", "approximations", "engine", "layers", "methods", "protocols",
           "ring", "runtime"]
