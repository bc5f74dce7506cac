"""The plan tests reuse the real worker processes of the network tests (tests/network/conftest.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: where the `network` package is

from network.conftest import remote, token, token_file, worker_procs  # noqa: E402,F401
