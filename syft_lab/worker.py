"""``python -m syft_lab.worker --id bob ...``: the same as ``syft-lab worker --id bob ...``."""
import sys

from .cli import run_worker

if __name__ == "__main__":
    sys.exit(run_worker(sys.argv[1:]))
