"""A quantized weight's CPU layouts (issue 53; docs/design.md, "Quantized
weights and experts"), chosen where they beat the portable ones of
:mod:`._quantized` on a decode step (one thread, weights read cold):

- **int8, one scale a row:** the rows interleaved in blocks of
  :data:`BLOCK` (``[N/B, K, B]``), so that a decode step's sum over K runs
  along a block's B contiguous outputs, vectorised with no horizontal sum
  per output (:func:`blocked_reduction_mm`: 0.27-0.43x a bf16 ``linear``,
  where the row-major reduction takes 0.36-0.55x). A prefill dequantizes
  the same blocks a tile at a time (:func:`blocked_tiled_mm`).
- **int4 in groups, bf16 activations:** ATen's own CPU layout
  (:func:`aten_int4_bytes`), read by ATen's kernel through Inductor's
  ``WeightInt4PackMatmul`` (0.21-0.28x a bf16 ``linear``; the portable
  nibbles' reduction takes 0.52-0.72x). The layout is ATen's AVX-512 one,
  written here and checked against ATen's own packing in this process
  (:func:`aten_reads_int4_layout`); where ATen packs otherwise (another
  ISA) the portable nibbles are used. A prefill dequantizes it a tile at a
  time (:func:`aten_int4_tiled_mm`), ATen's kernel being 2.3x a bf16
  ``linear`` at 128 rows.

The kernels are plain functions of ATen ops, traced again by Inductor, as
:mod:`._quantized`'s are; their source is part of the compile cache key.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ._quantized import reduction_parts

BLOCK = 32  # int8: output rows a block interleaves (16 and 64 measured slower)
ATEN_INT4_BLOCK = 64  # ATen's AVX-512 int4 layout: 64 output rows a block, row c and c+32 sharing a byte
ATEN_INT4_GROUPS = (32, 64, 128, 256)  # the group sizes ATen's CPU int4 kernel takes


def whole_blocks(n: int, block: int) -> bool:
    """Whether ``n`` rows are two blocks of ``block`` or more, and whole ones: a
    prefill's tile, a whole count of blocks, is then at most half the weight,
    never a float copy of all of it."""
    return n % block == 0 and n >= 2 * block


def blocked_int8(q: torch.Tensor) -> torch.Tensor:
    """int8 ``q [N, K]`` as ``[N/B, K, B]``: block b holds rows ``b*B .. b*B+B-1``, a value of each per k."""
    n, k = q.shape
    return q.reshape(n // BLOCK, BLOCK, k).transpose(1, 2).contiguous()


def blocked_reduction_mm(x: torch.Tensor, stored: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x @ w.T`` for a few rows of x, ``w`` int8 :func:`blocked_int8` times a
    float32 scale a row ``[N]``: a sum over K for each block and row of x,
    vectorised along the block's outputs; the sums in chunks
    (:func:`._quantized.reduction_parts`), then added."""
    m, k = x.shape
    blocks, _, width = stored.shape
    parts = reduction_parts(k)
    w = stored.to(torch.float32).reshape(blocks, 1, parts, k // parts, width)
    xs = x.to(torch.float32).reshape(1, m, parts, k // parts, 1)
    out = (xs * w).sum(3).sum(2)  # [blocks, m, width]: a block's slab is read once for every row of x
    return (out.permute(1, 0, 2).reshape(m, blocks * width) * scale).to(x.dtype)


def blocked_tiled_mm(x: torch.Tensor, stored: torch.Tensor, scale: torch.Tensor, rows: int) -> torch.Tensor:
    """``x @ w.T`` for many rows of x: ``rows`` output features (a multiple of
    :data:`BLOCK`) dequantized at a time from the blocks into a tile, each
    tile multiplied by the dense matmul."""
    blocks, k, width = stored.shape
    step = max(1, rows // width)
    outs = []
    for start in range(0, blocks, step):
        tile = stored[start : start + step]
        count = tile.shape[0] * width
        first = start * width
        w = tile.to(torch.float32) * scale[first : first + count].reshape(-1, 1, width)
        outs.append(torch.mm(x, w.permute(0, 2, 1).reshape(count, k).to(x.dtype).t()))
    return torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]


def aten_int4_bytes(q: torch.Tensor) -> torch.Tensor:
    """int4 values ``q [N, K]`` (-8..7, N a multiple of 64) in ATen's AVX-512
    CPU layout, as ``_convert_weight_to_int4pack_for_cpu`` packs ``q + 8``:
    uint8 ``[N, K/2]`` whose bytes are ``[N/64, K, 32]``, byte ``[b, k, c]``
    holding row ``64b + c``'s value at k in its low nibble and row
    ``64b + 32 + c``'s in its high one."""
    n, k = q.shape
    u = (q.to(torch.int16) + 8).to(torch.uint8).reshape(n // ATEN_INT4_BLOCK, 2, ATEN_INT4_BLOCK // 2, k)
    pairs = u[:, 0] | (u[:, 1] << 4)  # [N/64, 32, K]
    return pairs.transpose(1, 2).contiguous().reshape(n, k // 2)


@functools.cache
def aten_reads_int4_layout() -> bool:
    """Whether ATen's CPU int4 kernel, in this process, reads :func:`aten_int4_bytes`'
    layout: its own packing of a probe equals ours (it depends on the ISA ATen dispatches to)."""
    q = torch.randint(-8, 8, (2 * ATEN_INT4_BLOCK, 64), generator=torch.Generator().manual_seed(0), dtype=torch.int8)
    try:
        theirs = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32) + 8, 1)
    except (RuntimeError, AttributeError):
        return False
    ours = aten_int4_bytes(q)
    return theirs.dtype == ours.dtype and theirs.shape == ours.shape and torch.equal(theirs, ours)


def aten_int4_group(n: int, k: int, groups: int) -> int | None:
    """The group size ATen's kernel would take for an int4 weight ``[N, K]`` in
    ``groups`` groups a row, or None where it takes none (or its layout is not ours)."""
    group = k // groups
    if not whole_blocks(n, ATEN_INT4_BLOCK) or k % groups or group not in ATEN_INT4_GROUPS:
        return None
    return group if aten_reads_int4_layout() else None


def scale_and_zeros(scale: torch.Tensor, offset: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """ATen's ``[G, N, 2]`` of a weight's ``[N, G]`` scales and offsets: its
    kernel computes ``(u - 8) * scale + zero`` = ``q * scale + offset``."""
    zero = torch.zeros_like(scale) if offset is None else offset
    return torch.stack([scale.t(), zero.t()], dim=-1).to(dtype).contiguous()


def aten_int4_tiled_mm(x: torch.Tensor, stored: torch.Tensor, sz: torch.Tensor, rows: int) -> torch.Tensor:
    """``x @ w.T`` for many rows of x, ``w`` in :func:`aten_int4_bytes`' layout
    with ATen's scales and zeros ``sz [G, N, 2]``: ``rows`` output features (a
    multiple of 64) dequantized at a time into a tile, each tile multiplied by
    the dense matmul."""
    groups, n, _ = sz.shape
    k = x.shape[1]
    blocks = stored.reshape(n // ATEN_INT4_BLOCK, k, ATEN_INT4_BLOCK // 2)
    step = max(1, rows // ATEN_INT4_BLOCK)
    outs = []
    for start in range(0, blocks.shape[0], step):
        tile = blocks[start : start + step]
        count = tile.shape[0] * ATEN_INT4_BLOCK
        first = start * ATEN_INT4_BLOCK
        values = torch.cat([tile & 15, tile >> 4], dim=2).permute(0, 2, 1).reshape(count, groups, k // groups)
        part = sz[:, first : first + count].permute(1, 0, 2).to(torch.float32)  # [count, G, 2]
        w = (values.to(torch.float32) - 8.0) * part[..., :1] + part[..., 1:]
        outs.append(torch.mm(x, w.reshape(count, k).to(x.dtype).t()))
    return torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]


def aten_int4_mm(x: torch.Tensor, stored: torch.Tensor, group: torch.Tensor, sz: torch.Tensor) -> torch.Tensor:
    """``x @ w.T`` for a few rows of bf16 x by ATen's CPU int4 kernel, reading
    the weight's bytes where they lie. ``group`` is the group size as a 0-d
    constant of the module: Inductor's own lowering of
    ``_weight_int4pack_mm_for_cpu`` makes it a constant of its own, which the
    record could not bind (:func:`register_int4_lowering` lowers this op)."""
    return torch.ops.quantized.int4mm_packed_weight_cpu(x, stored, group, sz)


@functools.cache
def register_int4_lowering() -> None:
    """Lowers ``quantized.int4mm_packed_weight_cpu`` (which Inductor has no
    lowering for: it calls it only from its own) to ATen's kernel through
    the C shim, as Inductor's lowering of ``_weight_int4pack_mm_for_cpu``
    does, with every operand a tensor the graph gives. Once a process."""
    from torch._inductor import ir, lowering
    from torch._inductor.mkldnn_ir import WeightInt4PackMatmul

    op = torch.ops.quantized.int4mm_packed_weight_cpu.default
    if op in lowering.lowerings:  # another library's lowering: leave it
        return

    def lower(x: Any, stored: Any, group: Any, sz: Any) -> Any:
        inputs: list[Any] = [
            ir.ExternKernel.require_contiguous(ir.ExternKernel.realize_input(t)) for t in (x, stored, group, sz)
        ]
        return ir.TensorBox.create(WeightInt4PackMatmul.create(*inputs))

    lowering.register_lowering(op, type_promotion_kind=None)(lower)
