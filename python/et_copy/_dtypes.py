"""torch dtypes and their ExecuTorch ScalarType codes."""

from __future__ import annotations

import torch

# Every dtype et-copy moves, with ExecuTorch's ScalarType code for it.
SCALAR_TYPE_CODES: dict[torch.dtype, int] = {
    torch.uint8: 0,
    torch.int8: 1,
    torch.int16: 2,
    torch.int32: 3,
    torch.int64: 4,
    torch.float16: 5,
    torch.float32: 6,
    torch.float64: 7,
    torch.complex64: 9,
    torch.complex128: 10,
    torch.bool: 11,
    torch.bfloat16: 15,
}

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = tuple(SCALAR_TYPE_CODES)


def scalar_type_code(dtype: torch.dtype, *, op: str, arg: str) -> int:
    """ExecuTorch's code for ``dtype``; TypeError naming op and arg if none."""
    try:
        return SCALAR_TYPE_CODES[dtype]
    except KeyError:
        names = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES)
        raise TypeError(f"{op}: {arg} has dtype {dtype}, which et_copy does not move (supported: {names})") from None
