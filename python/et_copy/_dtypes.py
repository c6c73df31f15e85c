"""torch dtypes and their ExecuTorch ScalarType codes."""

from __future__ import annotations

import torch

from . import _C

# Every dtype et-copy moves, with ExecuTorch's ScalarType code for it, in
# code order. The table is the bindings' (python/bindings/torch_tensor.cpp),
# which read torch tensors' dtypes in C++: all 30 of ExecuTorch 1.5.1's
# ScalarTypes but QUInt4x2 and QUInt2x4, which torch packs two or four to a
# byte while ExecuTorch counts one byte per element (a copy would overrun).
# The quantized ones move as bytes: their scale and zero point stay with the
# torch tensor, as ExecuTorch's tensors do not carry them.
SCALAR_TYPE_CODES: dict[torch.dtype, int] = _C.dtype_codes()

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = tuple(SCALAR_TYPE_CODES)
# Moved as bytes; a new tensor of them needs a scale and zero point only the caller knows.
QUANTIZED_DTYPES = frozenset({torch.qint8, torch.quint8, torch.qint32})


def scalar_type_code(dtype: torch.dtype, *, op: str, arg: str) -> int:
    """ExecuTorch's code for ``dtype``; TypeError naming op and arg if none,
    worded by the bindings (the text they raise for a tensor's dtype)."""
    try:
        return SCALAR_TYPE_CODES[dtype]
    except KeyError:
        raise TypeError(_C.unsupported_dtype_message(dtype, op, arg)) from None
