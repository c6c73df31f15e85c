"""Quantized weights read in their stored form by the compiled code (issue 53).

docs/design.md, "Quantized weights and experts". A torchao-quantized
Linear reaches the compiled backend's partition as a matmul whose weight
operand is a *dequantized constant*: an int8 constant turned into floats
(``_to_copy`` of its transpose, then the output scaled; or
``torchao.dequantize_affine``), which Inductor compiles to a kernel that
writes a float copy of the whole weight on every call before the matmul
reads it. torchao's CPU int4 (``_weight_int4pack_mm_for_cpu``) reads a
packed weight, but Inductor's lowering of it adds a constant of its own,
which the record cannot bind. :func:`read_quantized_packed` rewrites each
such matmul, on the graph handed to Inductor, into one that reads the
stored bytes (int8, or int4 two to a byte) and their scales:

- a few rows of activations (a decode step, :data:`REDUCTION_ROWS`): the
  product written as a reduction over K (:func:`reduction_mm`), which
  Inductor compiles to one kernel that reads each stored byte once and
  writes only the output;
- more rows, or a dynamic count (a prefill): the weight dequantized
  :func:`tile_rows` output features at a time into a tile that stays in
  cache, each tile multiplied by the dense matmul at once (:func:`tiled_mm`).

A quantized embedding (``embedding(dequantize(q), ids)``) gathers the
stored rows and their scales first, then dequantizes only those rows.

The same graphs serve both targets (Inductor's C++ on the CPU, Triton on
CUDA). The new constants (a packed int4 weight, its scales) are registered
on the module as buffers, named after the quantized constant, so the
backend's record carries them like any other weight.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

aten = torch.ops.aten

REDUCTION_ROWS = 8  # at most this many rows of activations: one fused reduction kernel
REDUCTION_CHUNK = 4096  # Inductor's CPU sums more than this through a slower cascade
TILE_BYTES = 1 << 20  # a prefill's dequantized tile: about one core's L2
MAX_TILES = 16  # a matmul's tiles at most (an lm_head of 32000 rows: 16 tiles, not 48): each is a kernel to compile


class QuantizedWeightError(ValueError):
    """A dequantized constant that no kernel here multiplies in its stored form."""


@dataclass
class QuantizedWeight:
    """A weight ``w[n, k] = q[n, k] * scale[n, g] + offset[n, g]`` (``g = k //
    group``), read from the module's constants: ``q`` int8 [N, K] holding
    values in ``qmin..qmax``, ``offset`` None for a symmetric scheme. torchao's
    ``(q - zero_point) * scale`` is ``offset = -zero_point * scale``; GGUF's
    Q4_1 (``d * q + m``) and tinygemm's ``(q - 8) * s + z`` are of this form
    as they are."""

    name: str  # the FQN of q, for messages and new constants' names
    node: torch.fx.Node | None  # the get_attr of q, where q is a constant of the graph as it is
    q: torch.Tensor
    scale: torch.Tensor  # [N, G]
    offset: torch.Tensor | None  # [N, G]
    qmin: int
    qmax: int

    @property
    def bits(self) -> int:
        return 4 if self.qmin >= -8 and self.qmax <= 7 else 8


def _op(target: Any) -> Any:
    """The ATen (or torchao) op behind an edge op."""
    from executorch.exir.dialects.edge._ops import EdgeOpOverload

    return target._op if isinstance(target, EdgeOpOverload) else target


def _is(node: Any, *ops: Any) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and _op(node.target) in ops


_TRANSPOSES = (aten.permute_copy.default, aten.permute.default, aten.t_copy.default, aten.t.default)
_VIEWS = (aten.view_copy.default, aten.view.default, aten.reshape.default, aten.squeeze_copy.dims)


def _casts() -> tuple[Any, ...]:
    casts = [aten._to_copy.default, aten.to.dtype, aten.alias_copy.default, aten.alias.default]
    dim_order = getattr(torch.ops, "dim_order_ops", None)  # executorch's _to_dim_order_copy, once exir is loaded
    if dim_order is not None and hasattr(dim_order, "_to_dim_order_copy"):
        casts.append(dim_order._to_dim_order_copy.default)
    return tuple(casts)


def _dequantize_affine() -> Any:
    torchao = getattr(torch.ops, "torchao", None)
    return getattr(getattr(torchao, "dequantize_affine", None), "default", None)


def _attr(node: Any) -> Any:
    """The get_attr a constant's casts and views start from (or where the walk stops)."""
    while _is(node, *_casts(), *_VIEWS):
        node = node.args[0]
    return node


def _constant(module: torch.fx.GraphModule, node: Any) -> torch.Tensor | None:
    """The value of a constant read through casts and views, or None."""
    node = _attr(node)
    if not (isinstance(node, torch.fx.Node) and node.op == "get_attr"):
        return None
    value: Any = module
    for part in str(node.target).split("."):
        value = getattr(value, part)
    return value if isinstance(value, torch.Tensor) else None


def _is_transpose(node: torch.fx.Node) -> bool:
    if _op(node.target) in (aten.t_copy.default, aten.t.default):
        return True
    dims: Any = node.args[1]
    return [int(d) % 2 for d in dims] == [1, 0]


def _root(node: Any) -> tuple[Any, bool]:
    """Walks back from a matmul's weight operand through casts and 2-d
    transposes: (what it starts from, whether it is transposed)."""
    transposed = False
    while isinstance(node, torch.fx.Node):
        if _is(node, *_casts()):
            node = node.args[0]
        elif _is(node, *_TRANSPOSES) and _is_transpose(node):
            transposed = not transposed
            node = node.args[0]
        else:
            break
    return node, transposed


def dequantized_weight(module: torch.fx.GraphModule, node: Any) -> tuple[QuantizedWeight | None, bool]:
    """The quantized weight ``node`` (a matmul's weight operand, an
    embedding's table) dequantizes, and whether it is transposed; (None,
    False) for any other operand. Raises QuantizedWeightError for a
    dequantization of a layout no kernel here takes."""
    root, transposed = _root(node)
    if not isinstance(root, torch.fx.Node):
        return None, False
    if root.op == "get_attr":
        q = _constant(module, root)
        if q is None or q.dtype != torch.int8 or q.dim() != 2:
            return None, False
        # Int8WeightOnlyConfig: the per-row scale multiplies the matmul's output (_output_scale).
        ones = torch.ones(q.shape[0], 1, dtype=torch.float32)
        return QuantizedWeight(str(root.target), root, q, ones, None, -128, 127), transposed
    if _dequantize_affine() is None or not _is(root, _dequantize_affine()):
        return None, False
    args: list[Any] = list(root.args) + [None] * (8 - len(root.args))
    name = str(_attr(args[0]).target) if isinstance(_attr(args[0]), torch.fx.Node) else "?"
    q, scale = _constant(module, args[0]), _constant(module, args[2])
    zero = None if args[3] is None else _constant(module, args[3])
    block = [int(b) for b in args[1]]
    if q is None or scale is None or (args[3] is not None and zero is None):
        raise QuantizedWeightError(f"the quantized weight {name} is dequantized from values that are not constants")
    if q.dtype != torch.int8 or q.dim() != 2 or block[0] != 1 or q.shape[1] % block[1]:
        raise QuantizedWeightError(
            f"the quantized weight {name} is {q.dtype} {list(q.shape)} in blocks of {block}; supported: int8 "
            "[N, K] in blocks [1, G] (torchao's Int8WeightOnlyConfig, IntxWeightOnlyConfig with PerAxis(0) or "
            "PerGroup(G), PrototypeInt4WeightOnlyConfig)"
        )
    n, groups = q.shape[0], q.shape[1] // block[1]
    scale = scale.reshape(n, groups)
    offset = None
    if zero is not None and bool(zero.ne(0).any()):
        offset = -zero.reshape(n, groups).to(scale.dtype) * scale
    attr = _attr(args[0])
    return QuantizedWeight(name, attr, q, scale, offset, int(args[5]), int(args[6])), transposed


def int4pack_weight(module: torch.fx.GraphModule, node: torch.fx.Node) -> QuantizedWeight:
    """The weight of a ``_weight_int4pack_mm_for_cpu(x, packed, group, scale_and_zero)``
    (torchao's PrototypeInt4WeightOnlyConfig). ATen's packed layout depends on
    the ISA, so the values are read back through the kernel itself: an
    identity times the weight, with unit scales and no zeros, in bf16 (exact
    for -8..7)."""
    group_arg: Any = node.args[2]
    packed, group, pairs = _constant(module, node.args[1]), int(group_arg), _constant(module, node.args[3])
    name = str(_attr(node.args[1]).target)
    if packed is None or pairs is None:
        raise QuantizedWeightError(f"the int4 weight {name} is not a constant")
    groups, n = pairs.shape[0], pairs.shape[1]
    k = groups * group
    unit = torch.stack([torch.ones(groups, n), torch.zeros(groups, n)], dim=-1).to(torch.bfloat16)
    eye = torch.eye(k, dtype=torch.bfloat16)
    q = aten._weight_int4pack_mm_for_cpu.default(eye, packed, group, unit).t().to(torch.int8).contiguous()
    scale = pairs[..., 0].t().contiguous()
    offset = pairs[..., 1].t().contiguous()  # tinygemm: (u - 8) * s + z, and q = u - 8
    return QuantizedWeight(name, None, q, scale, offset, -8, 7)


def _output_scale(mm: torch.fx.Node, module: torch.fx.GraphModule, n: int) -> tuple[torch.fx.Node, torch.Tensor] | None:
    """Int8WeightOnlyConfig multiplies the matmul's output by a per-row
    scale [N]: (that mul, the scale's value) when mm's one user is it."""
    users = list(mm.users)
    if len(users) != 1 or not _is(users[0], aten.mul.Tensor):
        return None
    mul = users[0]
    other = mul.args[1] if mul.args[0] is mm else mul.args[0]
    value = _constant(module, other)
    if value is None or value.numel() != n:
        return None
    return mul, value


# The kernels the rewritten graph calls. Plain functions: Inductor traces
# them again (aot_compile exports the module it is given), so each becomes
# the ATen ops it calls, and the module's code names them for the cache key.


def _scaled(values: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None) -> torch.Tensor:
    """``values * scale + offset`` [..., N, L] float32, one scale (and offset)
    per group of L (``scale`` [..., N, groups])."""
    groups, length = scale.shape[-1], values.shape[-1]
    out = values.reshape(*values.shape[:-1], groups, length // groups) * scale.unsqueeze(-1)
    if offset is not None:
        out = out + offset.unsqueeze(-1)
    return out.reshape(values.shape)


def weight_parts(
    stored: torch.Tensor, scale: torch.Tensor | None, offset: torch.Tensor | None, *, portable: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weight as float32, from its stored bytes: int8 [..., N, K] whole
    (second part None), or int4 (two nibbles a byte, biased by 8,
    :func:`nibbles`) as its first and second halves of K [..., N, K/2], each
    read from the bytes with a fixed mask or shift, so Inductor fuses and
    vectorizes the unpacking in the kernel that reads them (the halves of
    x they meet are contiguous). The groups split with K: one scale a row,
    or an even count of groups. No ``scale`` (nor offset): the values alone,
    for a caller that scales a row's sum instead. ``portable``: the nibbles
    split by remainder and division, which ExecuTorch's portable kernels
    have (they have no shift), for a graph the simulated backend runs."""
    if stored.dtype == torch.int8:
        values = stored.to(torch.float32)
        return (values if scale is None else _scaled(values, scale, offset)), None
    if portable:
        low = torch.remainder(stored, 16).to(torch.float32) - 8.0
        high = torch.div(stored, 16, rounding_mode="floor").to(torch.float32) - 8.0
    else:
        low = (stored & 15).to(torch.float32) - 8.0
        high = (stored >> 4).to(torch.float32) - 8.0
    if scale is None:
        return low, high
    half = (scale.shape[-1] + 1) // 2  # a row's one scale serves both halves

    def part(values: torch.Tensor, first: int) -> torch.Tensor:
        end = first + half if scale.shape[-1] > 1 else 1
        return _scaled(values, scale[..., first:end], None if offset is None else offset[..., first:end])

    return part(low, 0), part(high, half if scale.shape[-1] > 1 else 0)


def _halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x's first and second halves of K, matching :func:`weight_parts`' int4 halves."""
    half = x.shape[1] // 2
    return x[:, :half], x[:, half:]


def reduction_parts(k: int) -> int:
    """How many chunks a sum over ``k`` elements goes in: halves of ``k`` until
    each is at most :data:`REDUCTION_CHUNK` (or ``k`` splits no further)."""
    parts = 1
    while k // parts > REDUCTION_CHUNK and k % (2 * parts) == 0:
        parts *= 2
    return parts


def _chunked_dot(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``sum_k x[m, k] * w[n, k]`` [M, N] float32, each sum over at most
    :data:`REDUCTION_CHUNK` elements, then the chunks' sums added: Inductor's
    CPU code sums a longer reduction through a cascade helper that took 2x
    the time (K=8192)."""
    k = x.shape[1]
    parts = reduction_parts(k)
    prod = x.reshape(x.shape[0], 1, parts, k // parts) * w.reshape(1, w.shape[0], parts, k // parts)
    return prod.sum(-1).sum(-1)


def reduction_mm(
    x: torch.Tensor, stored: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None
) -> torch.Tensor:
    """``x @ w.T`` for a few rows of ``x`` (a decode step), written as a
    reduction over K, which Inductor compiles to one kernel that reads the
    stored bytes once and writes only [M, N]. One scale a row (no offset)
    multiplies the row's sum, not each of its K products."""
    xf = x.to(torch.float32)
    per_row = scale.shape[1] == 1 and offset is None
    first, second = weight_parts(stored, None if per_row else scale, offset)
    if second is None:
        out = _chunked_dot(xf, first)
    else:
        even, odd = _halves(xf)
        out = _chunked_dot(even, first) + _chunked_dot(odd, second)
    return (out * scale.reshape(1, -1) if per_row else out).to(x.dtype)


def tiled_mm(
    x: torch.Tensor, stored: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None, rows: int
) -> torch.Tensor:
    """``x @ w.T`` for many rows of ``x`` (a prefill): ``w`` dequantized
    ``rows`` output features at a time into a tile that stays in cache,
    each tile multiplied by the dense matmul at once, so the matmul kernel
    does the work and no float copy of the whole weight is written."""
    n = scale.shape[0]
    int4 = stored.dtype != torch.int8
    even, odd = _halves(x) if int4 else (x, x)
    outs = []
    for start in range(0, n, rows):
        end = start + rows
        first, second = weight_parts(stored[start:end], scale[start:end], None if offset is None else offset[start:end])
        out = torch.mm(even, first.to(x.dtype).t())
        if second is not None:
            out = out + torch.mm(odd, second.to(x.dtype).t())
        outs.append(out)
    return torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]


def gathered_rows(
    ids: torch.Tensor, stored: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None, dtype: torch.dtype
) -> torch.Tensor:
    """``embedding(w, ids)`` for a quantized table: the stored rows and their
    scales gathered first, then only those rows dequantized."""
    flat = ids.reshape(-1)
    rows = torch.nn.functional.embedding(flat, stored)
    s = torch.nn.functional.embedding(flat, scale)
    o = None if offset is None else torch.nn.functional.embedding(flat, offset)
    first, second = weight_parts(rows, s, o)
    if second is not None:
        first = torch.cat([first, second], dim=1)
    return first.to(dtype).reshape(*ids.shape, first.shape[1])


def nibbles(q: torch.Tensor) -> torch.Tensor:
    """int4 values (-8..7) [..., K] two to a byte, biased by 8, each byte a
    value of K's first half and its partner of the second:
    ``q[..., j] | q[..., j + K/2] << 4``."""
    u = (q.to(torch.int16) + 8).to(torch.uint8)
    half = q.shape[-1] // 2
    return (u[..., :half] | (u[..., half:] << 4)).contiguous()


def packs_as_nibbles(w: QuantizedWeight) -> bool:
    """Whether ``w`` is stored two values a byte: int4 whose K and groups split in halves."""
    groups = w.scale.shape[1]
    return w.bits == 4 and w.q.shape[1] % 2 == 0 and (groups == 1 or groups % 2 == 0)


class _Rewriter:
    """Adds the stored-form constants to ``module`` and calls on them."""

    def __init__(self, module: torch.fx.GraphModule, target: str | None = None, host_bound: bool = False) -> None:
        self.module = module
        self.graph = module.graph
        self.rewritten: list[str] = []
        self.target = target
        self.host_bound = host_bound

    def constant(self, w: QuantizedWeight, suffix: str, value: torch.Tensor) -> torch.fx.Node:
        name = f"{w.name.replace('.', '_')}_{suffix}"
        while hasattr(self.module, name):
            name += "_"
        self.module.register_buffer(name, value.contiguous(), persistent=False)
        return self.graph.get_attr(name)

    def operands(self, w: QuantizedWeight) -> tuple[torch.fx.Node, torch.fx.Node, torch.fx.Node | None]:
        """(stored bytes, scale, offset): q itself for int8, two values a
        byte for int4; the scale and offset [N, G] as the weight has them."""
        if packs_as_nibbles(w):
            stored = self.constant(w, "int4", nibbles(w.q))
        else:
            stored = w.node if w.node is not None else self.constant(w, "int8", w.q)
        return (
            stored,
            self.groups(w, "scale", w.scale),
            None if w.offset is None else self.groups(w, "offset", w.offset),
        )

    def groups(self, w: QuantizedWeight, suffix: str, value: torch.Tensor) -> torch.fx.Node:
        """A per-group parameter ([N, G], or ATen's int4 scales and zeros [G, N, 2]), stored flat: a vector of
        the weight's, read a group at a time,
        not a matrix of its own (the weight-copy check, _constant_reads, tells matrices by their shape)."""
        flat = self.constant(w, suffix, value.reshape(-1))
        return self.graph.call_function(aten.reshape.default, (flat, list(value.shape)))

    def matmul(self, x: torch.fx.Node, w: QuantizedWeight, rows: Any, dtype: torch.dtype) -> torch.fx.Node:
        """The call computing ``x @ w.T`` for ``rows`` rows of x (an int, or
        a symbol for a dynamic dim)."""
        decode = isinstance(rows, int) and rows <= REDUCTION_ROWS
        if self.target == "cpu":
            call = self.cpu_matmul(x, w, decode, dtype)
            if call is not None:
                return call
        stored, scale, offset = self.operands(w)
        if decode:
            return self.graph.call_function(reduction_mm, (x, stored, scale, offset))
        return self.graph.call_function(
            tiled_mm, (x, stored, scale, offset, tile_rows(w.q.shape[0], w.q.shape[1], dtype))
        )

    def cpu_matmul(
        self, x: torch.fx.Node, w: QuantizedWeight, decode: bool, dtype: torch.dtype
    ) -> torch.fx.Node | None:
        """The call in one of the CPU's own layouts (:mod:`._cpu_layouts`), or
        None where the weight has none: int8 with one scale a row in blocks of
        rows; int4 in groups, for bf16 activations, in ATen's layout (only for
        code bound to this machine: the layout is the ISA's ATen dispatches to)."""
        from . import _cpu_layouts  # which imports this module

        n, k = w.q.shape
        if (
            w.bits == 8
            and w.scale.shape[1] == 1
            and w.offset is None
            and _cpu_layouts.whole_blocks(n, _cpu_layouts.BLOCK)
        ):
            stored = self.constant(w, "int8_blocks", _cpu_layouts.blocked_int8(w.q))
            scale = self.constant(w, "row_scale", w.scale.reshape(-1))
            if decode:
                return self.graph.call_function(_cpu_layouts.blocked_reduction_mm, (x, stored, scale))
            rows = _whole(tile_rows(n, k, dtype), _cpu_layouts.BLOCK)
            return self.graph.call_function(_cpu_layouts.blocked_tiled_mm, (x, stored, scale, rows))
        usable = w.bits == 4 and dtype == torch.bfloat16 and self.host_bound
        group = _cpu_layouts.aten_int4_group(n, k, w.scale.shape[1]) if usable else None
        if group is None:
            return None
        stored = self.constant(w, "int4_aten", _cpu_layouts.aten_int4_bytes(w.q))
        sz = self.groups(w, "scale_zeros", _cpu_layouts.scale_and_zeros(w.scale, w.offset, dtype))
        if decode:
            _cpu_layouts.register_int4_lowering()
            size = self.constant(w, "group", torch.tensor(group, dtype=torch.int64))
            return self.graph.call_function(_cpu_layouts.aten_int4_mm, (x, stored, size, sz))
        rows = _whole(tile_rows(n, k, dtype), _cpu_layouts.ATEN_INT4_BLOCK)
        return self.graph.call_function(_cpu_layouts.aten_int4_tiled_mm, (x, stored, sz, rows))


def _whole(rows: int, block: int) -> int:
    """A tile of ``rows`` rows as whole blocks: at least one, never more rows."""
    return max(block, rows // block * block)


def tile_rows(n: int, k: int, dtype: torch.dtype) -> int:
    """Output features a prefill's tile dequantizes at a time: about
    :data:`TILE_BYTES` of ``dtype`` over K, a multiple of 16, at most half the
    weight, and few enough that the weight takes at most :data:`MAX_TILES`."""
    rows = max(16, TILE_BYTES // (k * dtype.itemsize) // 16 * 16)
    rows = max(rows, -(-n // MAX_TILES))
    return min(rows, -(-n // 2))


def _matmul_operands(node: torch.fx.Node) -> tuple[Any, Any, Any] | None:
    """(bias or None, x, weight operand) of an mm/addmm node (linear is mm by to_edge)."""
    op = _op(node.target)
    if op is aten.mm.default:
        return None, node.args[0], node.args[1]
    if op is aten.addmm.default and not node.kwargs:
        return node.args[0], node.args[1], node.args[2]
    return None


def _rows(node: Any) -> Any:
    """The first dim of a node's value (an int, or a symbol when dynamic)."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if val is None:
        return None
    size = val.shape[0]
    return int(size) if isinstance(size, int) or (hasattr(size, "node") and size.node.is_constant()) else size


def _dtype(node: Any) -> torch.dtype:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val.dtype if isinstance(val, torch.Tensor) else torch.float32


def read_quantized_packed(
    module: torch.fx.GraphModule, target: str | None = None, *, host_bound: bool = False
) -> list[str]:
    """Rewrites every matmul and embedding of ``module`` over a dequantized
    constant (and every ``_weight_int4pack_mm_for_cpu``) to read the stored
    bytes; returns the quantized weights' names, in graph order. ``target``
    "cpu": the CPU's own layouts where they apply (:mod:`._cpu_layouts`);
    ATen's int4 one only where ``host_bound`` (code compiled for this
    machine alone). Other targets, or None: the portable layouts, for
    Inductor's C++ and Triton alike. Raises QuantizedWeightError for a
    quantized weight in a layout no kernel here takes."""
    rewriter = _Rewriter(module, target, host_bound)
    graph = module.graph
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        operands = _matmul_operands(node)
        replaced: torch.fx.Node = node
        if operands is not None:
            bias, x, operand = operands
            w, transposed = dequantized_weight(module, operand)
            if w is None:
                continue
            if not transposed:
                raise QuantizedWeightError(f"the quantized weight {w.name} is multiplied untransposed")
            scaled = _output_scale(node, module, w.q.shape[0]) if bias is None else None
            if scaled is not None:
                replaced, row_scale = scaled
                w = dataclasses.replace(w, scale=w.scale * row_scale.reshape(-1, 1).to(torch.float32))
            with graph.inserting_before(replaced):
                call = rewriter.matmul(x, w, _rows(x), _dtype(x))
                if bias is not None:
                    call = graph.call_function(aten.add.Tensor, (call, bias))
        elif _op(node.target) is aten._weight_int4pack_mm_for_cpu.default:
            w, x = int4pack_weight(module, node), node.args[0]
            with graph.inserting_before(node):
                call = rewriter.matmul(x, w, _rows(x), _dtype(x))
        elif _op(node.target) is aten.embedding.default:
            w, _ = dequantized_weight(module, node.args[0])
            if w is None:
                continue
            dtype = node.meta["val"].dtype if "val" in node.meta else torch.float32
            with graph.inserting_before(node):
                stored, scale, offset = rewriter.operands(w)
                call = graph.call_function(gathered_rows, (node.args[1], stored, scale, offset, dtype))
        else:
            continue
        replaced.replace_all_uses_with(call)
        rewriter.rewritten.append(w.name)
    if rewriter.rewritten:  # a graph with no quantized weight is handed on exactly as it came
        graph.eliminate_dead_code()
        graph.lint()
        module.recompile()
    return rewriter.rewritten
