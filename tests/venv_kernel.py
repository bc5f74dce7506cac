"""The kernelspec every test kernel uses: this interpreter (the project's .venv), named
"python3" so that notebooks asking for python3 get it, whatever the user's Jupyter paths hold."""
from __future__ import annotations

import json
import sys
from pathlib import Path

NAME = "python3"


def install_kernelspec(data_dir: Path) -> Path:
    """Write ``data_dir/kernels/python3/kernel.json`` pointing at sys.executable."""
    spec = Path(data_dir) / "kernels" / NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (syft_lab tests)", "language": "python"}))
    return spec
