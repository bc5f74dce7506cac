"""``python -m syft_lab.worker --id bob ...``: the same as ``syft-lab worker --id bob ...``."""
import sys

from .cli import run_worker
from .workers.heap import ensure_zeroing_heap

if __name__ == "__main__":
    ensure_zeroing_heap(["-m", "syft_lab.worker", *sys.argv[1:]])  # (one re-execution, at most)
    sys.exit(run_worker(sys.argv[1:]))
