"""The CPU's own layouts of a quantized weight (et_copy.backends.aoti._cpu_layouts;
docs/design.md, "Quantized weights and experts"): each layout's bytes, its
kernels against a float reference, and which weights get which layout."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("executorch.exir")

from et_copy.backends.aoti import _cpu_layouts, _quantized  # noqa: E402

AVX512 = torch.backends.cpu.get_cpu_capability() == "AVX512"


def _int4(n: int, k: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(-8, 8, (n, k), generator=torch.Generator().manual_seed(seed), dtype=torch.int8)


def test_int8_blocks_hold_each_block_of_rows_a_value_of_each_a_column():
    q = torch.arange(64 * 3, dtype=torch.int32).reshape(64, 3).to(torch.int8)
    blocks = _cpu_layouts.blocked_int8(q)
    assert blocks.shape == (2, 3, 32) and blocks.is_contiguous()
    for b, k, c in ((0, 0, 0), (0, 2, 31), (1, 1, 0), (1, 2, 17)):
        assert int(blocks[b, k, c]) == int(q[32 * b + c, k])


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("k", [96, 2 * _quantized.REDUCTION_CHUNK + 64])  # the second sums in chunks
def test_the_blocked_reduction_equals_the_float_product(rows, k):
    q = torch.randint(-128, 128, (64, k), generator=torch.Generator().manual_seed(1), dtype=torch.int8)
    scale = torch.rand(64) / 64
    x = torch.randn(rows, k)
    want = x @ (q.float() * scale[:, None]).t()
    got = _cpu_layouts.blocked_reduction_mm(x, _cpu_layouts.blocked_int8(q), scale)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("rows", [32, 64, 96])  # a tile of one block, two, and one that leaves a shorter last tile
def test_the_blocked_tiles_equal_the_float_product(rows):
    q = torch.randint(-128, 128, (128, 48), generator=torch.Generator().manual_seed(2), dtype=torch.int8)
    scale = torch.rand(128) / 64
    x = torch.randn(20, 48)
    got = _cpu_layouts.blocked_tiled_mm(x, _cpu_layouts.blocked_int8(q), scale, rows)
    torch.testing.assert_close(got, x @ (q.float() * scale[:, None]).t(), rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(not AVX512, reason="ATen's int4 layout here is its AVX-512 one")
def test_int4_bytes_are_atens_own_packing_on_this_machine():
    q = _int4(192, 256, seed=3)
    theirs = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32) + 8, 1)
    assert torch.equal(_cpu_layouts.aten_int4_bytes(q), theirs)
    assert _cpu_layouts.aten_reads_int4_layout()


def test_int4_bytes_pair_row_c_with_row_c_plus_32_of_each_block_of_64():
    q = _int4(128, 4, seed=4)
    flat = _cpu_layouts.aten_int4_bytes(q).reshape(2, 4, 32)  # [N/64, K, 32]
    for b, k, c in ((0, 0, 0), (0, 3, 31), (1, 2, 5)):
        byte = int(flat[b, k, c])
        assert byte & 15 == int(q[64 * b + c, k]) + 8 and byte >> 4 == int(q[64 * b + 32 + c, k]) + 8


@pytest.mark.skipif(not AVX512, reason="ATen's int4 layout here is its AVX-512 one")
@pytest.mark.parametrize("n,k,group", [(128, 256, 32), (128, 256, 128), (4096, 32, 32)])  # the last: more blocks than K
@pytest.mark.parametrize("offset", [False, True], ids=["symmetric", "zeros"])
def test_atens_int4_kernel_and_our_tiles_equal_the_dequantized_product(n, k, group, offset):
    q = _int4(n, k, seed=5)
    scale = (torch.rand(n, k // group) / 8).to(torch.bfloat16).float()
    zero = (torch.randn(n, k // group) / 8).to(torch.bfloat16).float() if offset else None
    sz = _cpu_layouts.scale_and_zeros(scale, zero, torch.bfloat16)
    assert sz.shape == (k // group, n, 2)
    w = (q.float().reshape(n, -1, group) * scale[..., None] + (0 if zero is None else zero[..., None])).reshape(n, k)
    stored = _cpu_layouts.aten_int4_bytes(q)
    x = torch.randn(5, k).to(torch.bfloat16)
    want = x.float() @ w.t()
    atol = 2e-2 * float(want.abs().max())
    size = torch.tensor(group)
    torch.testing.assert_close(_cpu_layouts.aten_int4_mm(x, stored, size, sz).float(), want, atol=atol, rtol=0)
    torch.testing.assert_close(_cpu_layouts.aten_int4_tiled_mm(x, stored, sz, 64).float(), want, atol=atol, rtol=0)


@pytest.mark.parametrize(
    "n,k,groups,want",
    [
        (128, 256, 8, 32),
        (128, 256, 1, 256),  # one scale a row of 256: a group ATen takes
        (128, 768, 1, None),  # a row of 768: not a group size of ATen's
        (96, 256, 8, None),  # not whole blocks of 64 rows
        (64, 256, 8, None),  # one block: a prefill's tile would be all of the weight
        (128, 256, 16, None),  # groups of 16
        (128, 96, 5, None),  # groups that do not divide the row
    ],
)
def test_only_weights_in_atens_groups_and_whole_blocks_take_its_int4_layout(n, k, groups, want):
    found = _cpu_layouts.aten_int4_group(n, k, groups)
    assert found == (want if _cpu_layouts.aten_reads_int4_layout() else None)


def _linear_graph(q: torch.Tensor, scale: torch.Tensor, rows: int, dtype: torch.dtype) -> torch.fx.GraphModule:
    """A graph as the edge dialect gives a Linear quantized with torchao's IntxWeightOnlyConfig."""
    from et_copy.export._methods import to_edge_program
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup

    n, k = q.shape
    model = torch.nn.Sequential(torch.nn.Linear(k, n, bias=False)).to(dtype).eval()
    weight_dtype = torch.int8 if int(q.min()) < -8 else getattr(torch, "int4")
    granularity = PerAxis(0) if scale.shape[1] == 1 else PerGroup(k // scale.shape[1])
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=weight_dtype, granularity=granularity))
    x = torch.randn(rows, k, dtype=dtype)
    return to_edge_program({"forward": torch.export.export(model, (x,))}, None).exported_program().module()


def _kernels(module: torch.fx.GraphModule) -> set[str]:
    return {
        n.target.__name__
        for n in module.graph.nodes
        if n.op == "call_function" and getattr(n.target, "__module__", "").startswith("et_copy.")
    }


@pytest.mark.parametrize(
    "target,host_bound,want",
    [
        (None, False, {"reduction_mm"}),  # portable: any target
        ("cuda", False, {"reduction_mm"}),
        ("cpu", False, {"blocked_reduction_mm", "reduction_mm"}),  # int8 blocks; int4 portable off this machine
        ("cpu", True, {"blocked_reduction_mm", "aten_int4_mm"}),
    ],
)
def test_the_cpu_layouts_are_chosen_for_the_cpu_and_atens_only_for_code_bound_to_this_machine(target, host_bound, want):
    pytest.importorskip("torchao")
    if "aten_int4_mm" in want and not _cpu_layouts.aten_reads_int4_layout():
        want = {"blocked_reduction_mm", "reduction_mm"}
    found: set[str] = set()
    for q, scale in (
        (torch.randint(-128, 128, (128, 128), dtype=torch.int8), torch.ones(128, 1)),
        (_int4(128, 128), torch.ones(128, 4)),
    ):
        module = _linear_graph(q, scale, 1, torch.bfloat16)
        _quantized.read_quantized_packed(module, target, host_bound=host_bound)
        found |= _kernels(module)
    assert found == want


@pytest.mark.parametrize("n", [48, 32, 96])  # not whole blocks of 32; one block; three
def test_int8_rows_in_two_whole_blocks_or_more_take_the_blocks(n):
    pytest.importorskip("torchao")
    module = _linear_graph(torch.randint(-128, 128, (n, 64), dtype=torch.int8), torch.ones(n, 1), 1, torch.float32)
    _quantized.read_quantized_packed(module, "cpu", host_bound=True)
    assert _kernels(module) == {"blocked_reduction_mm" if n == 96 else "reduction_mm"}


def test_fp32_activations_keep_int4_portable_where_atens_kernel_is_slow():
    pytest.importorskip("torchao")
    module = _linear_graph(_int4(128, 128), torch.ones(128, 4), 1, torch.float32)
    _quantized.read_quantized_packed(module, "cpu", host_bound=True)
    assert _kernels(module) == {"reduction_mm"}
