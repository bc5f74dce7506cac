"""Small source patches that let CrypTen 0.4.1 (2022) import and run on this project's torch
(2.13), for benchmarks/bench_smpc.py only: applied by benchmarks/setup_crypten to the copy in
.venv-crypten, never to anything syft_lab ships or depends on. Each patch is an exact text
replacement; the script is idempotent (an applied patch is recognised and skipped) and fails
loudly when the text it expects is not there (another CrypTen version).

    .venv-crypten/bin/python benchmarks/crypten/patch_crypten.py
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

MARK = "# syft_lab bench patch"

# (file inside the crypten package, text as shipped, text after the patch)
PATCHES = [
    # ONNX import/export (crypten.nn.from_onnx / from_pytorch) is not benchmarked: the onnx package is
    # not installed and torch 2.13 has no torch.onnx._internal.registration; import the converter lazily.
    ("nn/__init__.py",
     "from .onnx_converter import from_onnx, from_pytorch, from_tensorflow, TF_AND_TF2ONNX\n",
     "try:  " + MARK + ": no onnx here, and the converter is not benchmarked\n"
     "    from .onnx_converter import from_onnx, from_pytorch, from_tensorflow, TF_AND_TF2ONNX\n"
     "except ImportError:\n"
     "    from_onnx = from_pytorch = from_tensorflow = None\n"
     "    TF_AND_TF2ONNX = False\n"),
]


def crypten_dir() -> Path:
    spec = importlib.util.find_spec("crypten")
    if spec is None or spec.origin is None:
        sys.exit("patch_crypten: crypten is not installed in this interpreter")
    return Path(spec.origin).parent


def main() -> int:
    root = crypten_dir()
    for rel, old, new in PATCHES:
        path = root / rel
        text = path.read_text()
        if new in text:
            print(f"patch_crypten: {rel}: already patched")
            continue
        if text.count(old) != 1:
            sys.exit(f"patch_crypten: {rel}: the text to patch is not there once (not CrypTen 0.4.1?)")
        path.write_text(text.replace(old, new))
        print(f"patch_crypten: {rel}: patched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
