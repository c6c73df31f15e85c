"""Depthwise 1-d convolutions as shifted multiply-adds.

The linear-attention layers of Qwen 3.5 MoE (and Qwen3-Next) run a causal
depthwise ``conv1d`` (groups == channels) over a short window. Inductor
lowers a convolution to a template or to ATen's kernel; under the options
of upstream's CUDA backend (Triton templates only, no ATen fallback) there
is no template for a grouped convolution, and the export fails with
``NoValidChoicesError``. Written as K shifted multiply-adds, the same
arithmetic is plain pointwise work every backend compiles.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

aten = torch.ops.aten


def _ints(v: Any) -> list[int]:
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)]


def _shifted(
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Any:
    """``conv1d(x, w, b, ...)`` for a depthwise kernel with stride and
    dilation 1, as a sum of K shifted products; NotImplemented (keep the
    convolution) for any other."""
    depthwise = x.dim() == 3 and w.dim() == 3 and w.shape[1] == 1 and groups == x.shape[1] == w.shape[0]
    if not depthwise or _ints(stride) != [1] or _ints(dilation) != [1] or len(_ints(padding)) != 1:
        return NotImplemented
    k = w.shape[-1]
    p = _ints(padding)[0]
    if p:
        x = torch.nn.functional.pad(x, (p, p))
    length = x.shape[-1] - k + 1
    taps = w.reshape(1, w.shape[0], k)  # [C, 1, K] -> [1, C, K]: tap i broadcasts over batch and time
    out = x[:, :, 0:length] * taps[:, :, 0:1]
    for i in range(1, k):
        out = out + x[:, :, i : i + length] * taps[:, :, i : i + 1]
    if b is not None:
        out = out + b[None, :, None]
    return out


def _conv1d(x, w, b=None, stride=(1,), padding=(0,), dilation=(1,), groups=1):
    return _shifted(x, w, b, stride, padding, dilation, groups)


def _convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    if transposed:
        return NotImplemented
    return _shifted(x, w, b, stride, padding, dilation, groups)


# run_decompositions' table: every depthwise 1-d convolution of stride and dilation 1 (aten.conv1d
# or aten.convolution) as shifted multiply-adds; every other convolution is kept as it is.
DEPTHWISE_CONV1D_AS_SHIFTS: dict[Any, Callable[..., Any]] = {
    aten.conv1d.default: _conv1d,
    aten.convolution.default: _convolution,
}


def depthwise_conv1d_as_shifts(exported: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``exported`` with :data:`DEPTHWISE_CONV1D_AS_SHIFTS` applied."""
    return exported.run_decompositions(DEPTHWISE_CONV1D_AS_SHIFTS)
