"""MoE experts as grouped matmuls (issue 53, et_copy.llm._experts): the
compiled backend's prefill reads each expert's weights once, through
``_grouped_mm``, and gives transformers' tokens; the simulated backend keeps
``batched_mm``; the caller's model is left with the experts implementation
it had."""

from __future__ import annotations

from unittest import mock

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

import et_copy  # noqa: E402
from et_copy import llm  # noqa: E402
from et_copy.llm import _experts  # noqa: E402

PROMPT = [5, 17, 3, 9, 42]
TOKENS = 12
MAX_SEQ = 32
MOE = ("qwen3_moe", "qwen3_5_moe", "mixtral", "qwen2_moe", "olmoe", "deepseek_v3", "gpt_oss", "qwen3_next")


def _logits(model: torch.nn.Module, implementation: str, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad(), _experts.experts_for_export(model, implementation):
        return model(ids).logits


@pytest.mark.parametrize("arch", MOE)
def test_the_grouped_forward_equals_transformers_experts_for_every_moe_class(arch):
    # Gated and not, concatenated and interleaved (GPT-OSS), transposed with biases (GPT-OSS),
    # shared experts and DeepSeek's grouped routing around them: a prompt (grouped) and one token (in place).
    model = llm.tiny_model(arch)
    # A prompt runs transformers' grouped_mm kernel, in the same order (bit-equal); one token runs batched_mm.
    for ids, same, other in ((torch.tensor([[5, 17, 3, 9, 42, 7, 7, 1]]), "grouped_mm", "batched_mm"),
                             (torch.tensor([[5]]), "batched_mm", "grouped_mm")):  # fmt: skip
        ours = _logits(model, _experts.GROUPED_EXPERTS, ids)
        torch.testing.assert_close(ours, _logits(model, same, ids), rtol=0, atol=0)
        torch.testing.assert_close(ours, _logits(model, other, ids), rtol=1e-5, atol=1e-5)
    assert model.config._experts_implementation == "batched_mm"  # tiny_model's, restored


def test_experts_whose_rows_are_not_16_byte_multiples_run_batched_mm():
    # ATen's CPU _grouped_mm refuses strides that are not multiples of 16 bytes (6 float32 = 24).
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, moe_intermediate_size=6, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, head_dim=8, num_experts=4, num_experts_per_tok=2,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Qwen3MoeForCausalLM(config).eval()
    ids = torch.tensor([[5, 17, 3, 9]])
    torch.testing.assert_close(
        _logits(model, _experts.GROUPED_EXPERTS, ids), _logits(model, "batched_mm", ids), rtol=0, atol=0
    )


def test_each_backend_exports_its_own_experts_implementation():
    from et_copy.backends import partitioner_for
    from et_copy.backends.aoti import AotiDevicePartitioner

    assert _experts.experts_implementation_for(partitioner_for("aoti")) == _experts.GROUPED_EXPERTS
    assert _experts.experts_implementation_for(AotiDevicePartitioner()) == _experts.GROUPED_EXPERTS
    # ExecuTorch's portable kernels (the simulated backend's nested program) have no _grouped_mm.
    assert _experts.experts_implementation_for(partitioner_for("simulated")) == _experts.BATCHED_EXPERTS
    assert _experts.experts_implementation_for(partitioner_for(None)) == _experts.BATCHED_EXPERTS


def test_the_configs_are_restored_after_an_export_that_fails():
    model = llm.tiny_model("deepseek_v32")  # an MoE export_llm refuses before tracing
    model.config._experts_implementation = "grouped_mm"  # the caller's choice
    with pytest.raises(llm.UnsupportedModelError):
        llm.export_llm(model, max_seq_len=16, backend="aoti")
    assert {m.config._experts_implementation for m in model.modules() if hasattr(m, "has_gate")} == {"grouped_mm"}
    assert model.config._experts_implementation == "grouped_mm"


def test_grouped_mm_traces_in_float32_and_float16_on_the_cpu():
    # torch 2.13's meta kernel accepts bfloat16 only; ATen's CPU kernel takes every float dtype.
    class Grouped(torch.nn.Module):
        def forward(self, rows, weight, offsets):
            return torch._grouped_mm(rows, weight, offs=offsets)

    with _experts.experts_for_export(torch.nn.Module(), _experts.GROUPED_EXPERTS):  # installs the rule
        pass
    offsets = torch.tensor([3, 3, 7], dtype=torch.int32)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        args = (torch.randn(7, 16, dtype=dtype), torch.randn(3, 16, 8, dtype=dtype), offsets)  # 16-byte strides
        program = torch.export.export(Grouped(), args)
        torch.testing.assert_close(program.module()(*args), Grouped()(*args))


def test_a_static_program_with_a_grouped_mm_passes_to_edge():
    # A prompt bound of 2 exports a static prefill, which to_edge validates: _grouped_mm is no core ATen op.
    from et_copy.export._methods import to_edge_program

    class Experts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(3, 5, 8))

        def forward(self, rows, offsets):
            return torch._grouped_mm(rows, self.weight.transpose(-2, -1), offs=offsets)

    with _experts.experts_for_export(torch.nn.Module(), _experts.GROUPED_EXPERTS):  # installs the float32 rule
        pass
    exported = torch.export.export(Experts(), (torch.randn(7, 8), torch.tensor([3, 3, 7], dtype=torch.int32)))
    edge = to_edge_program({"forward": exported}, None)
    targets = [str(n.target) for n in edge.exported_program().graph.nodes if n.op == "call_function"]
    assert any("_grouped_mm" in t for t in targets), targets


# One tiny Qwen3-MoE whose second layer's router ties every expert (all logits 0: the
# choice is top-k's order, then the sort's), its experts left on transformers' default,
# exported once on the compiled backend.
@pytest.fixture(scope="module")
def tied():
    model = llm.tiny_model("qwen3_moe")
    with torch.no_grad():
        model.model.layers[1].mlp.gate.weight.zero_()
    model.config._experts_implementation = "grouped_mm"
    seen = []

    def spy(*args, **kwargs):
        seen.append(model.config._experts_implementation)
        return export(*args, **kwargs)

    export = torch.export.export
    with mock.patch("torch.export.export", side_effect=spy):
        buffer = bytes(llm.export_llm(model, max_seq_len=MAX_SEQ, pick="device", backend="aoti").buffer)
    et_copy.use_aoti_backend()
    return model, buffer, seen


def test_export_llm_leaves_the_callers_experts_implementation_as_it_was(tied):
    model, _, seen = tied
    assert seen and set(seen) == {_experts.GROUPED_EXPERTS}  # every method traced grouped
    assert model.config._experts_implementation == "grouped_mm"
    assert {m.config._experts_implementation for m in model.modules() if hasattr(m, "has_gate")} == {"grouped_mm"}


def test_tied_routing_gives_transformers_tokens_on_the_compiled_backend(tied):
    model, buffer, _ = tied
    et_copy.use_simulated_device()
    device = llm.DeviceLLM(buffer)
    for prompt in (PROMPT, [7, 7, 1, 7, 7, 1, 7, 7]):
        assert device.new_session().generate(prompt, TOKENS).tokens == llm.eager_generate(model, prompt, TOKENS)


def _sources_by_method(buffer: bytes) -> dict[str, list[str]]:
    """The generated C++ of each method's compiled delegates, from the compile cache."""
    from et_copy.backends.aoti import _compile_cache
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(buffer).program
    marker = b"\npayload\taoti\t"
    sources: dict[str, list[str]] = {}
    for plan in program.execution_plan:
        for delegate in plan.delegates:
            blob = bytes(program.backend_delegate_data[delegate.processed.index].data)
            head = blob.index(marker)
            size_end = blob.index(b"\n", head + len(marker))
            payload = blob[size_end + 1 : size_end + 1 + int(blob[head + len(marker) : size_end])]
            source = _compile_cache.source_of(payload)
            assert source is not None, "compiled on this machine, so its source is in the cache"
            sources.setdefault(plan.name, []).append(source)
    return sources


def _calls_reading(source: str, weight: str) -> list[str]:
    """The calls of a generated wrapper that take the constant named ``weight``."""
    lines = (line.strip() for line in source.splitlines())
    # A call statement (a kernel, or AOTI_TORCH_ERROR_CODE_CHECK(shim(...))), not a binding `auto& w = ...;`.
    return [line for line in lines if weight in line and line.endswith(");") and "=" not in line.split("(")[0]]


def test_the_compiled_prefill_reads_each_expert_once_through_grouped_mm(tied):
    _, buffer, _ = tied
    sources = _sources_by_method(buffer)
    prefill = "\n".join(sources[llm.PREFILL])
    weights = [f"model_model_layers_{i}_mlp_experts_{w}" for i in range(2) for w in ("gate_up_proj", "down_proj")]
    for weight in weights:
        calls = _calls_reading(prefill, weight)
        # One grouped matmul reads the weight; no generated kernel does (batched_mm's gathered bmm
        # was a kernel that walked a chosen expert's weights once per token and choice).
        assert len(calls) == 1 and "aoti_torch_cpu__grouped_mm(" in calls[0], calls
    assert "bincount" not in prefill  # no C shim: counted by a one-hot sum
    # Decode (one token) reads its chosen experts in place, not through a grouped matmul.
    decode = "\n".join(sources[llm.DECODE])
    assert "aoti_torch_cpu__grouped_mm(" not in decode
    assert all(_calls_reading(decode, weight) for weight in weights)


# test_llm.py runs Qwen3-MoE and Qwen 3.5 MoE on the compiled backend; these are the other MoE
# classes: GPT-OSS (biases, transposed and interleaved weights, its own gate) and DeepSeek-V3
# (grouped routing, shared experts) in the slow tier, the variants in the costly one.
COMPILED_MOE = {
    "gpt_oss": "slow",
    "deepseek_v3": "slow",
    **dict.fromkeys(("mixtral", "qwen2_moe", "olmoe", "qwen3_next"), "costly"),
}


@pytest.mark.parametrize("arch", [pytest.param(a, marks=getattr(pytest.mark, m)) for a, m in COMPILED_MOE.items()])
def test_every_moe_class_gives_transformers_tokens_on_the_compiled_backend(arch):
    model = llm.tiny_model(arch)
    buffer = bytes(llm.export_llm(model, max_seq_len=MAX_SEQ, pick="device", backend="aoti").buffer)
    et_copy.use_aoti_backend()
    et_copy.use_simulated_device()
    device = llm.DeviceLLM(buffer)
    for prompt in (PROMPT, [7, 7, 1]):
        assert device.new_session().generate(prompt, TOKENS).tokens == llm.eager_generate(model, prompt, TOKENS)
    assert model.config._experts_implementation == "batched_mm"  # tiny_model's, as it was
