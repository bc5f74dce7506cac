"""A real IPython kernel for the sidebar's comm tests (helpers in sidebar_kernel.py)."""
from __future__ import annotations

import pytest
from jupyter_client.manager import start_new_kernel

from sidebar_kernel import Kernel


@pytest.fixture(scope="module")
def kernel():
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        yield Kernel(kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
