"""MoE experts in 8 or 4 bits (issue 53, et_copy.llm._quantized_experts):
``quantize`` stores the experts' 3-d weights as it stores the linears'; the
export's forwards read the stored bytes and equal transformers' own experts
code on the dequantized weights; both backends give the quantized model's
tokens, and the compiled code writes no float copy of an expert."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")
pytest.importorskip("torchao")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from compiled_programs import aoti_payloads  # noqa: E402
from et_copy import llm  # noqa: E402
from et_copy.backends.aoti import _compile_cache  # noqa: E402
from et_copy.backends.aoti._constant_reads import weight_copies_in_code  # noqa: E402
from et_copy.llm import _experts, _quantized_experts  # noqa: E402

PROMPT = [5, 17, 3, 9, 42]
TOKENS = 8
MAX_SEQ = 32
MOE = ("qwen3_moe", "qwen3_5_moe", "mixtral", "qwen2_moe", "olmoe", "deepseek_v3", "gpt_oss", "qwen3_next")


def _experts_of(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [module for _, module in _quantized_experts.experts_modules(model)]


def test_quantize_stores_every_experts_weight_and_leaves_the_callers_model_as_it_was():
    model = llm.tiny_model("qwen3_moe")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    int4 = llm.quantize(model, "int4")
    names = llm.quantized_weights(int4)
    for i in range(model.config.num_hidden_layers):
        # gate_up's input (hidden 64) holds two groups of 32 a half: int4; down's (32) does not: int8 a row.
        assert names[f"model.layers.{i}.mlp.experts.gate_up_proj"] == "int4"
        assert names[f"model.layers.{i}.mlp.experts.down_proj"] == "int8"
    assert {v for k, v in llm.quantized_weights(llm.quantize(model, "int8")).items() if "experts" in k} == {"int8"}
    experts = _experts_of(int4)[0]
    assert "gate_up_proj" not in dict(experts.named_parameters())  # no float copy kept beside the bytes
    stored = experts.gate_up_proj_stored
    assert stored.dtype == torch.uint8 and stored.shape == (8, 64, 32)  # two values a byte
    assert experts.gate_up_proj_scale.shape == (8 * 64 * 2,)  # one float32 a group of 32, flat
    assert experts.gate_up_proj.shape == _experts_of(model)[0].gate_up_proj.shape  # read back dequantized
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert not any(_quantized_experts.is_quantized_experts(m) for m in _experts_of(model))


def test_the_stored_experts_hold_torchaos_values_within_a_step_of_the_float_weights():
    model = llm.tiny_model("qwen3_moe")
    float_w = _experts_of(model)[0].gate_up_proj.detach()
    for scheme, levels in (("int8", 127.5), ("int4", 7.5)):
        w = _experts_of(llm.quantize(model, scheme))[0].gate_up_proj
        group = 64 if scheme == "int8" else 32  # int8: one scale a row (hidden 64)
        amax = float_w.reshape(8, 64, -1, group).abs().amax(-1, keepdim=True)
        err = (w - float_w).reshape(8, 64, -1, group).abs()
        assert bool((err <= amax / levels / 2 + 1e-6).all())  # rounded to the nearest level
        assert float(err.max()) > 0  # and quantized: not the float weights


def test_a_quantized_model_deep_copies_and_requantizing_keeps_its_bits():
    int4 = llm.quantize(llm.tiny_model("qwen3_moe"), "int4")
    twice = llm.quantize(int4, "int8")  # experts quantized already keep their own bits
    assert llm.quantized_weights(twice) == llm.quantized_weights(int4)
    copied = copy.deepcopy(int4)
    a, b = _experts_of(int4)[0], _experts_of(copied)[0]
    assert type(a) is type(b) and torch.equal(a.gate_up_proj, b.gate_up_proj)


def _logits(model: torch.nn.Module, implementation: str | None, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        if implementation is None:
            return model(ids).logits
        with _experts.experts_for_export(model, implementation):
            return model(ids).logits


@pytest.mark.parametrize("arch", MOE)
@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_the_export_forwards_read_the_stored_experts_as_transformers_reads_them_dequantized(arch, scheme):
    # Gated and not, interleaved, transposed with biases (GPT-OSS), shared experts, grouped routing:
    # a prompt (grouped by expert, the experts dequantized a slice at a time) and one token (a reduction).
    model = llm.quantize(llm.tiny_model(arch), scheme)
    for ids in (torch.tensor([[5, 17, 3, 9, 42, 7, 7, 1]]), torch.tensor([[5]])):
        want = _logits(model, None, ids)  # transformers' batched_mm on the dequantized weights
        for implementation in (_experts.GROUPED_EXPERTS, _experts.BATCHED_EXPERTS):
            torch.testing.assert_close(_logits(model, implementation, ids), want, rtol=1e-5, atol=1e-5)


def test_a_prompts_experts_are_multiplied_a_slice_at_a_time_each_row_once():
    # More experts than slices, some with no rows, rows in every other slice.
    torch.manual_seed(0)
    experts, n, k = 20, 16, 64
    q = torch.randint(-8, 8, (experts, n, k), dtype=torch.int8)
    stored = _quantized_experts.nibbles(q)
    scale = torch.rand(experts, n, 2) + 0.5
    w = _quantized_experts.dequantized(stored, scale)
    counts = torch.tensor([3, 0, 0, 5, 1] + [0] * 10 + [2, 0, 0, 0, 4], dtype=torch.int32)
    rows = torch.randn(int(counts.sum()), k)
    offsets = torch.cumsum(counts, 0, dtype=torch.int32)
    got = _quantized_experts.chunked_grouped(rows, stored, scale, offsets)
    ids = torch.repeat_interleave(torch.arange(experts), counts.long())
    torch.testing.assert_close(got, torch.bmm(w[ids], rows.unsqueeze(-1)).squeeze(-1), rtol=1e-5, atol=1e-5)


def test_the_portable_nibbles_equal_the_masked_ones():
    stored = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(1, 2, 128)
    scale = torch.rand(1, 2, 8)
    torch.testing.assert_close(
        _quantized_experts.dequantized(stored, scale, portable=True), _quantized_experts.dequantized(stored, scale)
    )


@pytest.fixture(scope="module")
def compiled_int4_moe():
    model = llm.tiny_model("qwen3_moe")
    program = llm.export_llm(model, max_seq_len=MAX_SEQ, pick="device", backend="aoti", quantize="int4")
    return model, bytes(program.buffer)


@pytest.mark.slow
def test_an_int4_moe_on_the_compiled_backend_gives_the_quantized_models_tokens(compiled_int4_moe):
    model, buffer = compiled_int4_moe
    quantized = llm.quantize(model, "int4")
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()
    device = llm.DeviceLLM(buffer)
    for prompt in (PROMPT, [7, 7, 1]):
        with et_copy.counting() as c:
            got = device.new_session().generate(prompt, TOKENS).tokens
        assert got == llm.eager_generate(quantized, prompt, TOKENS)
        assert c.d2h_bytes == 8 * TOKENS


@pytest.mark.slow
def test_the_compiled_int4_moe_reads_its_experts_stored_bytes_and_writes_no_float_copy(compiled_int4_moe):
    _, buffer = compiled_int4_moe
    stored = [f"model_model_layers_{i}_mlp_experts_{w}_stored" for i in range(2) for w in ("gate_up_proj", "down_proj")]
    sources = []
    for payload, state in aoti_payloads(buffer):
        source = _compile_cache.source_of(payload)
        assert source is not None  # compiled on this machine
        assert weight_copies_in_code(source, state) == []
        if "mlp_experts" in source:  # a step of the model (not the sampling setter)
            assert all(name in source for name in stored)  # the bytes as stored, not float experts
            assert "mlp_experts_gate_up_proj," not in source and "mlp_experts_gate_up_proj." not in source
            sources.append(source)
    grouped = ["aoti_torch_cpu__grouped_mm(" in s for s in sources]
    assert any(grouped) and not all(grouped)  # a prompt's experts through grouped matmuls; a decode step's in place


@pytest.mark.slow
def test_an_int4_moe_on_the_simulated_backend_gives_the_quantized_models_tokens():
    model = llm.tiny_model("qwen3_moe")
    buffer = bytes(llm.export_llm(model, max_seq_len=MAX_SEQ, pick="device", quantize="int4").buffer)
    et_copy.use_simulated_device()
    et_copy.backends.BACKENDS["simulated"].register()
    got = llm.DeviceLLM(buffer).new_session().generate(PROMPT, TOKENS).tokens
    assert got == llm.eager_generate(llm.quantize(model, "int4"), PROMPT, TOKENS)


@pytest.mark.parametrize("low, high", [(-128, 128), (-8, 8)])
def test_experts_stored_in_groups_of_32_as_gguf_blocks_read_as_transformers_reads_them(low, high):
    # GGUF's Q8_0 (int8 in groups: a byte a value) and Q4_0 (two a byte) as load_gguf stores them.
    model = llm.tiny_model("qwen3_moe")
    torch.manual_seed(3)
    for experts in _experts_of(model):
        for name in ("gate_up_proj", "down_proj"):
            e, n, k = getattr(experts, name).shape
            values = torch.randint(low, high, (e, n, k), dtype=torch.int8)
            _quantized_experts.store_experts(experts, name, values, torch.rand(e, n, k // 32) / 50, torch.float32)
    stored = _experts_of(model)[0].gate_up_proj_stored
    assert stored.dtype == (torch.int8 if low < -8 else torch.uint8)
    for ids in (torch.tensor([[5, 17, 3, 9, 42, 7, 7, 1]]), torch.tensor([[5]])):
        want = _logits(model, None, ids)
        for implementation in (_experts.GROUPED_EXPERTS, _experts.BATCHED_EXPERTS):
            torch.testing.assert_close(_logits(model, implementation, ids), want, rtol=1e-5, atol=1e-5)
