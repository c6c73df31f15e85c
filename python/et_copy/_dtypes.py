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
    torch.complex32: 8,
    torch.bool: 11,
    torch.bfloat16: 15,
    torch.bits1x8: 18,
    torch.bits2x4: 19,
    torch.bits4x2: 20,
    torch.bits8: 21,
    torch.bits16: 22,
    torch.float8_e5m2: 23,
    torch.float8_e4m3fn: 24,
    torch.float8_e5m2fnuz: 25,
    torch.float8_e4m3fnuz: 26,
    torch.uint16: 27,
    torch.uint32: 28,
    torch.uint64: 29,
}
# ExecuTorch's other five (QInt8, QUInt8, QInt32, QUInt4x2, QUInt2x4) do not
# move: a torch tensor of them needs quantization parameters ExecuTorch's
# tensors do not carry, torch cannot build one from bytes (empty_strided and
# clone refuse quantized dtypes), and torch 2.13 deprecates creating them.

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = tuple(SCALAR_TYPE_CODES)


def scalar_type_code(dtype: torch.dtype, *, op: str, arg: str) -> int:
    """ExecuTorch's code for ``dtype``; TypeError naming op and arg if none."""
    try:
        return SCALAR_TYPE_CODES[dtype]
    except KeyError:
        names = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES)
        raise TypeError(f"{op}: {arg} has dtype {dtype}, which et_copy does not move (supported: {names})") from None
