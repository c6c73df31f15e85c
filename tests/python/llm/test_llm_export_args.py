"""What export_llm asks of et_copy.export for each setting, with the export
itself (and the wrapper check, tested in test_llm_check.py) stubbed out:
seconds, not the minute an export takes. The methods, their inputs'
shapes and dynamic bounds, the constant methods, the defaults at their
edges, and the example prompt length."""

from __future__ import annotations

import sys

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

from et_copy import llm  # noqa: E402
from et_copy.llm import _export  # noqa: E402


@pytest.fixture
def exports(monkeypatch):
    """export_llm's calls to et_copy.export's export_methods, each as (module, methods, kwargs), the
    resolved backend choice in kwargs["choice"]."""
    calls = []

    def export(op, module, methods, choice, **kwargs):
        assert op == "et_copy.llm.export_llm"
        patched = [
            type(m).__module__
            for m in module.modules()
            if getattr(sys.modules[type(m).__module__], "torch_chunk_gated_delta_rule", None) is not None
            and getattr(sys.modules[type(m).__module__].torch_chunk_gated_delta_rule, "__name__", "") == "padded"
        ]
        calls.append((module, methods, dict(kwargs, choice=choice, padded=bool(patched))))
        return "exported"

    monkeypatch.setattr(_export, "check_wrapper", lambda wrapper, max_prompt_len: None)
    monkeypatch.setattr(_export, "export_methods", export)
    return calls


def _shapes(inputs):
    return [tuple(t.shape) for t in inputs.args]


def test_a_host_picking_program_has_prefill_decode_and_its_two_lengths(exports):
    model = llm.tiny_model("qwen3")
    assert llm.export_llm(model, max_seq_len=16, max_prompt_len=10) == "exported"
    (wrapper, methods, kwargs), *_ = exports
    assert isinstance(wrapper, llm.StatefulCausalLM) and wrapper.pick == "host" and wrapper.max_seq_len == 16
    assert set(methods) == {llm.PREFILL, llm.DECODE}
    assert kwargs["constant_methods"] == {llm.MAX_SEQ_LEN: 16, llm.MAX_PROMPT_LEN: 10}
    assert _shapes(methods[llm.DECODE]) == [(1, 1), (1,)]  # one token at one position
    prefill = methods[llm.PREFILL]
    example = _export._example_length(10)
    assert _shapes(prefill) == [(1, example), (example,)]
    dims = prefill.dynamic_shapes
    assert set(dims) == {"input_ids", "cache_position"} and set(dims["input_ids"]) == {1}
    assert set(dims["cache_position"]) == {0}
    n = dims["input_ids"][1]
    assert dims["cache_position"][0] is n  # one length for both
    assert (n.min, n.max) == (2, 10)  # a prefill takes 2..max_prompt_len tokens; one token is a decode


def test_a_device_picking_program_adds_decode_next_set_sampling_and_its_top_k_bound(exports):
    llm.export_llm(llm.tiny_model("qwen3"), max_seq_len=16, pick="device", max_top_k=12)
    (wrapper, methods, kwargs), *_ = exports
    assert wrapper.pick == "device"
    assert set(methods) == {llm.PREFILL, llm.DECODE, llm.DECODE_NEXT, llm.SET_SAMPLING}
    assert methods[llm.DECODE_NEXT].args == () and methods[llm.DECODE_NEXT].entry == "decode_next"
    settings = methods[llm.SET_SAMPLING]
    assert settings.entry == "set_sampling"
    assert [(tuple(t.shape), t.dtype) for t in settings.args] == [
        ((1,), torch.float32),
        ((1,), torch.int64),
        ((1,), torch.int64),
    ]
    assert kwargs["constant_methods"] == {llm.MAX_SEQ_LEN: 16, llm.MAX_PROMPT_LEN: 8, llm.MAX_TOP_K: 12}


def test_a_host_state_program_has_decode_only_with_the_state_as_inputs(exports):
    llm.export_llm(llm.tiny_model("qwen3"), max_seq_len=16, state_on_device=False)
    (step, methods, kwargs), *_ = exports
    assert isinstance(step, llm.HostStateStep)
    assert set(methods) == {llm.DECODE}
    state = step.initial_state()
    assert _shapes(methods[llm.DECODE]) == [(1, 1), (1,)] + [tuple(s.shape) for s in state]
    assert kwargs["constant_methods"] == {llm.MAX_SEQ_LEN: 16}


def test_the_defaults_are_64_positions_and_half_of_them_per_prompt_but_never_under_2(exports):
    model = llm.tiny_model("qwen3")
    llm.export_llm(model)
    for max_seq_len in (2, 3, 4, 5, 6, 17):
        llm.export_llm(model, max_seq_len=max_seq_len)
    lengths = [kwargs["constant_methods"] for _, _, kwargs in exports]
    assert [(c[llm.MAX_SEQ_LEN], c[llm.MAX_PROMPT_LEN]) for c in lengths] == [
        (64, 32),
        (2, 2),
        (3, 2),
        (4, 2),
        (5, 2),
        (6, 3),
        (17, 8),
    ]


def test_a_prompt_bound_is_taken_at_both_ends_of_2_to_max_seq_len(exports):
    model = llm.tiny_model("qwen3")
    for bound in (2, 3, 16):
        llm.export_llm(model, max_seq_len=16, max_prompt_len=bound)
    assert [kwargs["constant_methods"][llm.MAX_PROMPT_LEN] for _, _, kwargs in exports] == [2, 3, 16]
    # A bound of 2 is one length: a static prefill of 2 tokens (torch.export's Dim refuses min == max).
    prefills = [methods[llm.PREFILL] for _, methods, _ in exports]
    assert _shapes(prefills[0]) == [(1, 2), (2,)] and prefills[0].dynamic_shapes is None
    n = prefills[1].dynamic_shapes["input_ids"][1]
    assert _shapes(prefills[1]) == [(1, 3), (3,)] and (n.min, n.max) == (2, 3)
    for bad in (0, 1, 17):
        with pytest.raises(ValueError, match=rf"max_prompt_len must be in 2..max_seq_len \(16\), got {bad}"):
            llm.export_llm(model, max_seq_len=16, max_prompt_len=bad)
    assert len(exports) == 3


def test_a_linear_attention_model_is_exported_with_its_prefill_padded_and_restored_after(exports):
    model = llm.tiny_model("qwen3_5_moe")
    module = sys.modules[type(model.model.layers[0].linear_attn).__module__]
    rule = module.torch_chunk_gated_delta_rule
    llm.export_llm(model, max_seq_len=16)
    llm.export_llm(model, max_seq_len=16, state_on_device=False)  # decode only: no prefill to pad
    assert [kwargs["padded"] for _, _, kwargs in exports] == [True, False]
    assert module.torch_chunk_gated_delta_rule is rule


def test_the_options_reach_the_export_as_given(exports):
    model = llm.tiny_model("qwen3")
    llm.export_llm(model, max_seq_len=16, device="cuda:1", strict=False, backend="aoti")
    llm.export_llm(model, max_seq_len=16, depthwise_conv_as_shifts=True)
    first, second = (kwargs for _, _, kwargs in exports)
    choice = first["choice"]
    given = (choice.device, first["strict"], choice.backend.word, choice.given, first["decompositions"])
    assert given == ("cuda:1", False, "aoti", True, None)
    assert choice.partitioner.device == "cuda:1"
    assert second["decompositions"] is llm._conv.DEPTHWISE_CONV1D_AS_SHIFTS
    assert (second["choice"].backend.word, second["choice"].given) == ("simulated", False)


@pytest.mark.parametrize(
    "kwargs, argument, problem",
    [
        ({"backend": "xla"}, "backend", "backend must be one of ['aoti', 'simulated'], got 'xla'"),
        ({"device": "cpu"}, "device", "device must be 'cuda' or 'cuda:N', got 'cpu'"),
        ({"backend": "aoti", "partitioner": object()}, "partitioner", "pass backend='aoti' or a partitioner, not both"),
    ],
)
def test_the_backend_choice_is_checked_before_the_model_is_touched(monkeypatch, kwargs, argument, problem):
    """export_llm resolves backend, partitioner and device once, first: a bad choice is named before the
    model is quantized or its wrapper checked, as export_llm's own argument."""
    from et_copy.export import ExportArgumentError

    monkeypatch.setattr(_export, "quantize_model", lambda *a: pytest.fail("quantized before the choice was checked"))
    with pytest.raises(ExportArgumentError) as info:
        llm.export_llm(llm.tiny_model("qwen3"), quantize="int8", **kwargs)
    e = info.value
    assert (e.op, e.argument) == ("et_copy.llm.export_llm", argument)
    assert str(e).startswith("et_copy.llm.export_llm: ") and problem in str(e)


@pytest.mark.parametrize(
    "bound, example",
    [(2, 2), (3, 3), (4, 3), (5, 5), (6, 5), (8, 7), (9, 7), (10, 7), (12, 11), (25, 23), (49, 47), (121, 113)],
)
def test_the_example_prompt_length_is_the_largest_prime_up_to_the_bound(bound, example):
    # A prime shares no factor with a model's dimensions (heads, head size), so
    # to_edge's re-trace cannot specialise the dynamic length to one of them.
    assert _export._example_length(bound) == example
