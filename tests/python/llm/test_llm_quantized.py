"""Quantized LLMs (issue 53): ``export_llm(quantize=...)`` and
``et_copy.llm.quantize`` give the quantized model's own greedy tokens on
both backends, the compiled code reads no float copy of a quantized weight,
and the caller's model is left as it was."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")
pytest.importorskip("torchao")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
from compiled_programs import aoti_payloads  # noqa: E402
from et_copy import llm  # noqa: E402
from et_copy.backends.aoti import _compile_cache, _cpu_layouts  # noqa: E402
from et_copy.backends.aoti._constant_reads import weight_copies_in_code  # noqa: E402

PROMPT = [5, 17, 3, 9, 42]
TOKENS = 8
MAX_SEQ = 24


def test_quantize_leaves_the_callers_model_as_it_was_and_covers_linears_and_embeddings():
    model = llm.tiny_model("qwen3")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for scheme in llm.SCHEMES:
        quantized = llm.quantize(model, scheme)
        names = llm.quantized_weights(quantized)
        linears = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
        assert {f"{n}.weight" for n in linears} <= set(names)  # the lm_head too
        assert "model.embed_tokens.weight" in names
        assert llm.quantized_weights(model) == {}
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize(
    "bad", [{"scheme": "int3"}, {"scheme": "int4", "group_size": 0}, {"scheme": "int4", "group_size": 3}]
)
def test_quantize_refuses_a_scheme_or_group_it_does_not_know_naming_the_argument(bad):
    arg = "group_size" if "group_size" in bad else "scheme"
    with pytest.raises(ValueError, match=f"et_copy.llm.quantize: {arg} must be"):
        llm.quantize(llm.tiny_model("qwen3"), **bad)


# int4 in bf16 is where ATen's int4 kernel reads its own layout on the CPU (the MLP's gate and up, the lm_head).
@pytest.fixture(scope="module", params=["int8", "int4", "int4-bf16"])
def quantized_program(request):
    scheme, _, dtype = request.param.partition("-")
    model = llm.tiny_model("qwen3")
    if dtype:
        torch.nn.Module.to(model, getattr(torch, {"bf16": "bfloat16"}[dtype]))
    program = llm.export_llm(model, max_seq_len=MAX_SEQ, pick="device", backend="aoti", quantize=scheme)
    return scheme, model, bytes(program.buffer)


@pytest.mark.slow
def test_a_quantized_llm_on_the_compiled_backend_gives_the_quantized_models_tokens(quantized_program):
    scheme, model, buffer = quantized_program
    want = llm.eager_generate(llm.quantize(model, scheme), PROMPT, TOKENS)
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()
    with et_copy.counting() as c:
        got = llm.DeviceLLM(buffer).new_session().generate(PROMPT, TOKENS).tokens
    assert got == want
    assert c.d2h_bytes == 8 * TOKENS  # one int64 token a step leaves the device


@pytest.mark.slow
def test_the_compiled_quantized_llm_reads_no_float_copy_of_a_weight(quantized_program):
    scheme, model, buffer = quantized_program
    payloads = aoti_payloads(buffer)
    assert len(payloads) >= 2  # prefill and decode
    for payload, state in payloads:
        source = _compile_cache.source_of(payload)
        assert source is not None  # compiled on this machine
        assert weight_copies_in_code(source, state) == []
        assert "_int4" in source or "int8_t" in source  # it reads stored bytes, not float weights
    if scheme == "int4" and model.dtype == torch.bfloat16 and _cpu_layouts.aten_reads_int4_layout():
        assert any("aoti_torch_cpu__weight_int4pack_mm_cpu_tensor" in _compile_cache.source_of(p) for p, _ in payloads)


def test_a_quantized_llm_on_the_simulated_backend_gives_the_quantized_models_tokens():
    model = llm.tiny_model("qwen3")
    buffer = bytes(llm.export_llm(model, max_seq_len=MAX_SEQ, pick="device", quantize="int4").buffer)
    et_copy.use_simulated_device()
    et_copy.backends.BACKENDS["simulated"].register()
    got = llm.DeviceLLM(buffer).new_session().generate(PROMPT, TOKENS).tokens
    assert got == llm.eager_generate(llm.quantize(model, "int4"), PROMPT, TOKENS)
