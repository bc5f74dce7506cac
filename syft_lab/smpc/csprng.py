"""The cryptographic generator, under its earlier name (benchmarks/bench_smpc.py reads it here).

It lives in syft_lab/workers/randomness.py: the worker service draws the dealer's material
with it, and workers sit below smpc in the package order."""
from ..workers.randomness import BACKEND, random_below, random_words  # noqa: F401
