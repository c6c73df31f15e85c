"""Quantized weights on the simulated backend (issue 53; docs/design.md,
"Quantized weights and experts"): its nested program runs ExecuTorch's
portable kernels, which have no out variant of ``torchao.dequantize_affine``
and no kernel for ATen's packed int4. The first becomes portable ops; the
second is refused by name, pointing at the compiled backend."""

from __future__ import annotations

from typing import Any

import torch

from ..aoti._quantized import _dequantize_affine, _is, _op

aten = torch.ops.aten


def _fake_value(op: Any, args: tuple, kwargs: dict) -> Any:
    """What ``op`` gives on the fake values of its arguments (for a new node's meta)."""
    from torch._guards import detect_fake_mode

    vals = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args]
    mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
    assert mode is not None  # every edge graph's tensors carry fake values
    with mode:
        return op(*vals, **kwargs)


def dequantize_with_portable_ops(edge_program: Any) -> int:
    """Rewrites each ``torchao.dequantize_affine`` of ``edge_program`` (an edge
    ExportedProgram) into edge ops ExecuTorch's portable kernels run (a cast,
    views, ``sub``, ``mul``), as torchao computes it: ``(q - zero) * scale`` in
    the output dtype. For the simulated backend's nested program, where
    ``dequantize_affine`` has no out variant. Returns how many it rewrote."""
    from executorch.exir.dialects._ops import ops as exir_ops

    edge = exir_ops.edge
    graph = edge_program.graph_module.graph
    count = 0
    for node in list(graph.nodes):
        if _dequantize_affine() is None or not _is(node, _dequantize_affine()):
            continue
        args: list[Any] = list(node.args) + [None] * (8 - len(node.args))
        q, block, scale, zero = args[0], [int(b) for b in args[1]], args[2], args[3]
        dtype = args[7] if args[7] is not None else node.kwargs.get("output_dtype", torch.float32)
        n, k = q.meta["val"].shape
        groups = k // block[1]

        def add(op: Any, *op_args: Any, **kwargs: Any) -> torch.fx.Node:
            new = graph.call_function(op, tuple(op_args), kwargs)
            new.meta["val"] = _fake_value(op, tuple(op_args), kwargs)
            return new

        def cast(value: torch.fx.Node) -> torch.fx.Node:
            return add(edge.dim_order_ops._to_dim_order_copy.default, value, dtype=dtype)

        with graph.inserting_before(node):
            values = add(edge.aten.view_copy.default, cast(q), [n, groups, block[1]])
            if zero is not None:
                values = add(edge.aten.sub.Tensor, values, add(edge.aten.view_copy.default, cast(zero), [n, groups, 1]))
            values = add(edge.aten.mul.Tensor, values, add(edge.aten.view_copy.default, scale, [n, groups, 1]))
            result = add(edge.aten.view_copy.default, values, [n, k])
            if result.meta["val"].dtype != dtype:
                result = cast(result)
        node.replace_all_uses_with(result)
        graph.erase_node(node)
        count += 1
    if count:
        graph.lint()
        edge_program.graph_module.recompile()
    return count


PACKED_ONLY = (aten._weight_int4pack_mm_for_cpu.default, aten._weight_int8pack_mm.default)


def refuse_packed_kernels(edge_program: Any, op: str, backend: str) -> None:
    """Raises RuntimeError naming the first ATen weight-only kernel of
    ``edge_program`` (``_weight_int4pack_mm_for_cpu``: torchao's
    PrototypeInt4WeightOnlyConfig), which ExecuTorch's portable kernels lack."""
    for node in edge_program.graph_module.graph.nodes:
        if node.op == "call_function" and _op(node.target) in PACKED_ONLY:
            raise RuntimeError(
                f"{op}: {_op(node.target)} (a weight packed for ATen's CPU kernel, torchao's "
                f"PrototypeInt4WeightOnlyConfig) has no ExecuTorch portable kernel, so the {backend} backend "
                "cannot run it; export with backend='aoti', which multiplies the packed weight, or quantize "
                "with IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)), which both run"
            )
