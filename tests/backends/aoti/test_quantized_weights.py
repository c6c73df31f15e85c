"""Quantized weights read in their stored form (issue 53; docs/design.md,
"Quantized weights and experts"): torchao's schemes through the compiled
backend's rewrite (et_copy.backends.aoti._quantized), checked on the graph handed
to Inductor, on the generated code and against torchao's eager output, and
through the simulated backend's portable ops."""

from __future__ import annotations

import re

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("torchao")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from compiled_programs import aoti_payloads  # noqa: E402
from et_copy.backends import aoti  # noqa: E402
from et_copy.backends.aoti import _compile_cache, _cpu_layouts, _quantized  # noqa: E402
from et_copy.backends.aoti._constant_reads import weight_copies_in_code  # noqa: E402
from et_copy.export import ExportError, export_device_program  # noqa: E402
from et_copy.export._methods import to_edge_program  # noqa: E402
from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig, quantize_  # noqa: E402
from torchao.quantization.granularity import PerAxis, PerGroup  # noqa: E402


class MLP(torch.nn.Module):
    def __init__(self, d: int = 64, h: int = 128, bias: bool = False) -> None:
        super().__init__()
        self.a = torch.nn.Linear(d, h, bias=bias)
        self.b = torch.nn.Linear(h, d, bias=bias)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _prototype_int4(group: int):
    from torchao.prototype.quantization.int4 import PrototypeInt4WeightOnlyConfig

    return PrototypeInt4WeightOnlyConfig(group_size=group)


SCHEMES = {
    "int8-weight-only": lambda: Int8WeightOnlyConfig(),
    "intx-int8-row": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)),
    "intx-int8-g64": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerGroup(64)),
    "intx-int4-g32": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
    "intx-int4-g64": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(64)),
    "intx-int4-g128": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(128)),
    "intx-int4-row": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerAxis(0)),
    "prototype-int4-g32": lambda: _prototype_int4(32),
}
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def quantized_mlp(scheme: str, dtype: torch.dtype, bias: bool = False, d: int = 128, h: int = 256):
    torch.manual_seed(0)
    model = MLP(d, h, bias).to(dtype).eval()
    quantize_(model, SCHEMES[scheme]())
    return model


def tolerance(dtype: torch.dtype, reference: torch.Tensor) -> float:
    """Our kernels sum in fp32 where torchao's eager path rounds its dequantized weight to the
    model's dtype first: a few of the output's ulps."""
    scale = float(reference.float().abs().max())
    return {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}[dtype] * max(scale, 1.0)


def rewritten(model: torch.nn.Module, x: torch.Tensor) -> torch.fx.GraphModule:
    """The module the compiled backend hands Inductor for ``model`` on ``x``."""
    ep = to_edge_program({"forward": torch.export.export(model, (x,))}, None).exported_program()
    return aoti._compile_inputs(ep, "cpu")[0]


def float_weight_reads(module: torch.fx.GraphModule) -> list[str]:
    """Nodes that turn a whole quantized constant into floats (a dequantization, or a cast of an
    int8/uint8 matrix): the copy the rewrite removes; and ATen's packed int4 kernel, whose lowering
    adds a constant the record cannot bind."""
    found = []
    for node in module.graph.nodes:
        if node.op != "call_function":
            continue
        if any(name in str(node.target) for name in ("dequantize_affine", "_weight_int4pack_mm")):
            found.append(node.name)
        elif _quantized._is(node, *_quantized._casts()):
            root = _quantized._root(node.args[0])[0]
            value = _quantized._constant(module, root) if isinstance(root, torch.fx.Node) else None
            if value is not None and value.dtype in (torch.int8, torch.uint8) and value.dim() >= 2:
                found.append(node.name)
    return found


def schemes_for(dtype: torch.dtype) -> list[str]:
    # torchao's CPU int4 kernel takes bf16 activations (its config packs for them).
    return [s for s in SCHEMES if not (s.startswith("prototype") and dtype != torch.bfloat16)]


CASES = [(s, d) for d in DTYPES for s in schemes_for(d)]

# (layout, a decode's rows or a prefill's) -> the kernel the rewrite calls
KERNELS = {
    ("portable", True): "reduction_mm",
    ("portable", False): "tiled_mm",
    ("int8 blocks", True): "blocked_reduction_mm",
    ("int8 blocks", False): "blocked_tiled_mm",
    ("aten int4", True): "aten_int4_mm",
    ("aten int4", False): "aten_int4_tiled_mm",
}


def expected_kernel(scheme: str, dtype: torch.dtype, rows: int) -> str:
    """On the CPU: int8 with a scale a row in blocks of rows, int4 in groups of 32-256 with bf16
    activations in ATen's layout (its groups: the MLP's rows of 128 and 256 are one), the rest portable."""
    if scheme in ("int8-weight-only", "intx-int8-row"):
        layout = "int8 blocks"
    elif "int4" in scheme and dtype == torch.bfloat16 and _cpu_layouts.aten_reads_int4_layout():
        layout = "aten int4"
    else:
        layout = "portable"
    return KERNELS[(layout, rows <= _quantized.REDUCTION_ROWS)]


@pytest.mark.parametrize("scheme,dtype", CASES, ids=[f"{s}-{str(d)[6:]}" for s, d in CASES])
@pytest.mark.parametrize("rows", [1, 12], ids=["decode-rows", "prefill-rows"])
def test_each_scheme_multiplies_its_stored_bytes_and_equals_torchao(scheme, dtype, rows):
    model = quantized_mlp(scheme, dtype)
    x = torch.randn(rows, 128, dtype=dtype)
    module = rewritten(model, x)
    assert float_weight_reads(module) == []
    calls = {getattr(n.target, "__name__", str(n.target)) for n in module.graph.nodes if n.op == "call_function"}
    kernels = calls & set(KERNELS.values())
    assert kernels == {expected_kernel(scheme, dtype, rows)}, calls  # both Linears, one kernel for this row count
    # The weights are held as their stored bytes: int8, or int4 two to a byte; no float constant of a
    # weight's size (the original float weight, or a dequantized copy of it).
    constants = dict(module.named_buffers()) | dict(module.named_parameters())
    used = {str(n.target) for n in module.graph.nodes if n.op == "get_attr"}
    big = {k: v for k, v in constants.items() if k in used and v.numel() >= 128 * 256 // 2}
    four = "int4" in scheme
    assert {str(v.dtype) for v in big.values()} == {"torch.uint8" if four else "torch.int8"}, big
    assert all(v.numel() == (128 * 256 // 2 if four else 128 * 256) for v in big.values())
    with torch.no_grad():
        got, want = module(x), model(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.float(), want.float(), atol=tolerance(dtype, want), rtol=0)


def test_a_biased_linear_keeps_its_bias():
    model = quantized_mlp("intx-int4-g32", torch.float32, bias=True)
    x = torch.randn(3, 128)
    with torch.no_grad():
        torch.testing.assert_close(rewritten(model, x)(x), model(x), atol=1e-5, rtol=0)


def test_int4_is_stored_two_values_a_byte_with_k_split_in_halves():
    q = torch.arange(-8, 8, dtype=torch.int8).repeat(3, 2)  # [3, 32]
    stored = _quantized.nibbles(q)
    assert stored.dtype == torch.uint8 and stored.shape == (3, 16)
    assert int(stored[0, 0]) == (0 | (0 << 4))  # q[0, 0] = -8 and q[0, 16] = -8, each biased by 8
    assert int(stored[0, 15]) == (15 | (15 << 4))
    scale = torch.full((3, 2), 0.5)  # groups of 16: one in each half
    offset = torch.tensor([[1.0, -1.0]]).repeat(3, 1)
    first, second = _quantized.weight_parts(stored, scale, offset)
    assert second is not None
    whole = torch.cat([first, second], dim=1)
    torch.testing.assert_close(whole, q.float() * 0.5 + torch.tensor([1.0] * 16 + [-1.0] * 16))


def test_an_odd_count_of_int4_groups_or_an_odd_k_is_stored_a_byte_each():
    def weight(k: int, groups: int, qmax: int = 7):
        return _quantized.QuantizedWeight(
            "w", None, torch.zeros(2, k, dtype=torch.int8), torch.ones(2, groups), None, -8, qmax
        )

    assert not _quantized.packs_as_nibbles(weight(96, 3))  # three groups cannot split in halves
    assert _quantized.packs_as_nibbles(weight(96, 1)) and _quantized.packs_as_nibbles(weight(96, 2))
    assert not _quantized.packs_as_nibbles(weight(33, 1))  # an odd K: a value would have no partner
    assert not _quantized.packs_as_nibbles(weight(96, 1, qmax=8))  # beyond int4: int8


def test_a_float_model_is_handed_to_inductor_as_it_came():
    torch.manual_seed(0)
    model = MLP(128, 256).eval()
    x = torch.randn(12, 128)
    ep = to_edge_program({"forward": torch.export.export(model, (x,))}, None).exported_program()
    module = ep.module()
    code = module.code
    assert _quantized.read_quantized_packed(module) == []
    assert module.code == code  # no float weight taken for a quantized one


def test_a_prefill_tile_is_about_a_mib_at_most_half_the_weight_and_one_of_at_most_16():
    assert _quantized.tile_rows(2048, 2048, torch.bfloat16) == 256  # 1 MiB of bf16 over K=2048
    assert _quantized.tile_rows(2048, 2048, torch.float32) == 128
    assert _quantized.tile_rows(8192, 2048, torch.bfloat16) == 512  # 16 tiles, not 32
    assert _quantized.tile_rows(256, 64, torch.float32) == 128  # a small weight: two tiles still
    assert _quantized.tile_rows(257, 64, torch.float32) == 129
    assert _quantized.tile_rows(32000, 768, torch.bfloat16) == 2000  # an lm_head: 16 tiles
    assert _quantized.tile_rows(32001, 768, torch.bfloat16) == 2001
    assert _quantized.tile_rows(64, 1 << 20, torch.float32) == 16  # a very long row: 16 rows at least


def test_a_long_reduction_is_summed_in_chunks_that_add_to_the_same():
    x = torch.randn(2, 3 * _quantized.REDUCTION_CHUNK)
    w = torch.randn(5, x.shape[1])
    torch.testing.assert_close(_quantized._chunked_dot(x, w), x @ w.t(), rtol=1e-4, atol=1e-3)


def test_a_weight_quantized_along_the_wrong_axis_is_refused_naming_it():
    class Columns(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = torch.nn.Buffer(torch.randint(-8, 8, (64, 32), dtype=torch.int8))
            self.s = torch.nn.Buffer(torch.rand(1, 32))
            self.z = torch.nn.Buffer(torch.zeros(1, 32, dtype=torch.int8))

        def forward(self, x):
            w = torch.ops.torchao.dequantize_affine(self.q, [64, 1], self.s, self.z, torch.int8, -8, 7)
            return x @ w.t()

    with pytest.raises(RuntimeError, match=r"quantized weight q is torch.int8 \[64, 32\] in blocks of \[64, 1\]"):
        rewritten(Columns().eval(), torch.randn(1, 32))


def test_a_quantized_embedding_dequantizes_only_the_rows_it_gathers():
    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.e = torch.nn.Embedding(512, 64)

        def forward(self, ids):
            return self.e(ids) * 2.0

    torch.manual_seed(0)
    for weight_dtype, granularity in ((torch.int8, PerAxis(0)), (torch.int4, PerGroup(32))):
        model = Embed().eval()
        quantize_(
            model,
            IntxWeightOnlyConfig(weight_dtype=weight_dtype, granularity=granularity),
            lambda m, _: isinstance(m, torch.nn.Embedding),
        )
        ids = torch.tensor([[3, 500, 7]])
        module = rewritten(model, ids)
        assert any("gathered_rows" in str(n.target) for n in module.graph.nodes)
        assert float_weight_reads(module) == []
        with torch.no_grad():
            torch.testing.assert_close(module(ids), model(ids), atol=1e-5, rtol=0)


def _payload_source(program) -> str:
    ((payload, _),) = aoti_payloads(program.buffer)
    source = _compile_cache.source_of(payload)
    assert source is not None  # compiled on this machine: the cache holds its C++
    return source


# Compiled programs: a decode-sized static input (the fused reduction, int8's blocks), dynamic batches (the
# tiled matmuls: int8's blocks, int4's nibbles, ATen's int4 layout) and torchao's packed CPU int4 (read back,
# stored in ATen's layout, multiplied by ATen's kernel).
COMPILED = [
    ("int8-weight-only", torch.bfloat16, None),
    ("intx-int8-row", torch.float32, torch.export.Dim("batch", min=1, max=16)),
    ("intx-int4-g32", torch.float32, torch.export.Dim("batch", min=1, max=16)),
    ("intx-int4-g32", torch.bfloat16, torch.export.Dim("batch", min=1, max=16)),
    ("prototype-int4-g32", torch.bfloat16, None),
]


@pytest.mark.slow
@pytest.mark.parametrize("scheme,dtype,batch", COMPILED, ids=[f"{c[0]}-{str(c[1])[6:]}" for c in COMPILED])
def test_the_compiled_code_reads_quantized_weights_where_they_lie(scheme, dtype, batch):
    model = quantized_mlp(scheme, dtype)
    x = torch.randn(1 if batch is None else 5, 128, dtype=dtype)
    dims = None if batch is None else ({0: batch},)
    program = export_device_program(model, (x,), backend="aoti", dynamic_shapes=dims)
    source = _payload_source(program)
    # No kernel reads a quantized constant and writes a buffer as large as it (a float copy per call).
    assert weight_copies_in_code(source) == []
    stored = re.findall(r'constants_info_\[\d+\]\.name = "(\w+)";', source)
    # The weight is held in its layout's bytes alone: torchao's q (int8, rows in order) is not compiled in.
    kernel = expected_kernel(scheme, dtype, 1 if batch is None else 12)
    suffix = "_int8_blocks" if kernel.startswith("blocked") else "_int4_aten" if kernel.startswith("aten") else "_int4"
    if "int4" in scheme or suffix != "_int4":
        assert [n for n in stored if n.endswith(suffix)] and not [n for n in stored if n.endswith("original0")], stored
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()
    method = et_copy.runtime.load(program.buffer).load_method("forward")
    for rows in (1,) if batch is None else (1, 5, 16):
        xs = torch.randn(rows, 128, dtype=dtype)
        with torch.no_grad():
            want = model(xs)
        got = method.execute([xs])[0]
        torch.testing.assert_close(got.float(), want.float(), atol=tolerance(dtype, want), rtol=0)


@pytest.mark.parametrize("scheme", ["intx-int4-g32", "intx-int8-g64", "int8-weight-only"])
def test_the_simulated_backend_runs_quantized_weights_with_portable_kernels(scheme):
    model = quantized_mlp(scheme, torch.float32)
    x = torch.randn(2, 128)
    program = export_device_program(model, (x,))
    et_copy.use_simulated_device()
    et_copy.backends.BACKENDS["simulated"].register()
    got = et_copy.runtime.load(program.buffer).load_method("forward").execute([x])[0]
    with torch.no_grad():
        torch.testing.assert_close(got, model(x), atol=1e-5, rtol=0)


def test_the_simulated_backend_refuses_atens_packed_int4_naming_the_op_and_the_backend_that_runs_it():
    model = quantized_mlp("prototype-int4-g32", torch.bfloat16)
    with pytest.raises(ExportError, match=r"_weight_int4pack_mm_for_cpu.*export with backend='aoti'"):
        export_device_program(model, (torch.randn(1, 128, dtype=torch.bfloat16),))
