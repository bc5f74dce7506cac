"""The dtypes syft_lab moves and names, by their short names ("float32")."""
import torch

from .errors import SyftError

DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in ("float64", "float32", "float16", "bfloat16", "complex64", "complex128",
                 "int64", "int32", "int16", "int8", "uint8", "bool")
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_dtype(name) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise SyftError(f"unsupported dtype {name!r}; supported: {', '.join(DTYPES)}") from None
