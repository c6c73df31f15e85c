"""StatefulCausalLM's state, run eagerly (seconds, no export): the layout a
program's state takes (names, order, shapes, dtypes), the sampler's
settings at both ends of their domains and kept across steps, the host-state
baseline (HostStateStep) against the wrapper itself, the static prefill
padding of linear-attention layers, and a layer's kind past the config's
list."""

from __future__ import annotations

import sys

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

from et_copy import llm  # noqa: E402
from et_copy.llm import _state  # noqa: E402

PROMPT = [5, 17, 3, 9]


def test_the_state_is_each_layers_cache_in_order_then_the_samplers_one_item_slots():
    model = llm.tiny_model("qwen3_5_moe")  # layer 0 linear attention (conv and recurrent state), layer 1 full
    text = model.config.get_text_config()
    kv = (1, text.num_key_value_heads, 16, text.head_dim)  # one sequence, every position up to max_seq_len
    expected = [
        ("conv_state_0_0", None, torch.float32),
        ("recurrent_state_0_0", None, torch.float32),
        ("key_cache_1", kv, torch.float32),
        ("value_cache_1", kv, torch.float32),
        ("cache_length_1", (), torch.int64),
    ]
    sampler = [
        ("next_token", (1, 1), torch.int64),
        ("next_position", (1,), torch.int64),
        ("sampling_temperature", (1,), torch.float32),
        ("sampling_top_k", (1,), torch.int64),
        ("sampling_seed", (1,), torch.int64),
    ]

    def layout(wrapper):
        return [(n, tuple(t.shape), t.dtype) for n, t in wrapper.initial_state().items()]

    host = llm.StatefulCausalLM(model, 16)
    got = layout(host)
    assert [(n, d) for n, _, d in got] == [(n, d) for n, _, d in expected]
    assert [s for _, s, _ in got][2:] == [s for _, s, _ in expected][2:]
    assert all(s[0] == 1 for _, s, _ in got[:2])  # one sequence: batch 1
    assert layout(llm.StatefulCausalLM(model, 16, pick="device")) == got + sampler
    assert list(host.initial_state()) == list(host.state_names)
    assert all(not bool(t.any()) for t in host.initial_state().values())


def test_reset_zeroes_every_state_buffer_a_step_wrote():
    wrapper = llm.StatefulCausalLM(llm.tiny_model("qwen3_5_moe"), 16, pick="device")
    wrapper.set_sampling(torch.tensor([0.5]), torch.tensor([3]), torch.tensor([7]))
    with torch.no_grad():
        wrapper(torch.tensor([PROMPT]), torch.arange(len(PROMPT)))
    written = [n for n in wrapper.state_names if bool(getattr(wrapper, n).any())]
    assert {"conv_state_0_0", "recurrent_state_0_0", "key_cache_1", "next_position", "sampling_seed"} <= set(written)
    wrapper.reset()
    assert [n for n in wrapper.state_names if bool(getattr(wrapper, n).any())] == []


def test_set_sampling_keeps_each_setting_within_its_domain_at_both_ends():
    wrapper = llm.StatefulCausalLM(llm.tiny_model("qwen3"), 16, pick="device", max_top_k=8)

    def kept(temperature, top_k, seed):
        returned = wrapper.set_sampling(torch.tensor([temperature]), torch.tensor([top_k]), torch.tensor([seed]))
        assert torch.equal(returned, wrapper.sampling_top_k)
        return float(wrapper.sampling_temperature), int(wrapper.sampling_top_k), int(wrapper.sampling_seed)

    assert kept(0.0, 0, 0) == (0.0, 0, 0)  # greedy, the whole vocabulary, seed 0: all kept as given
    assert kept(-1.0, -3, -7) == (0.0, 0, 0)  # below the domain: its lower end
    assert kept(0.5, 1, 1) == (0.5, 1, 1)
    assert kept(2.0, 8, 2**62) == (2.0, 8, 2**62)  # top_k at the program's bound
    assert kept(2.0, 9, 5) == (2.0, 8, 5)  # one past it: the bound


def test_a_step_keeps_the_sampling_settings_it_reads():
    wrapper = llm.StatefulCausalLM(llm.tiny_model("qwen3"), 16, pick="device")
    wrapper.set_sampling(torch.tensor([0.75]), torch.tensor([5]), torch.tensor([11]))
    with torch.no_grad():
        wrapper(torch.tensor([PROMPT]), torch.arange(len(PROMPT)))
        wrapper.decode_next()
    assert (float(wrapper.sampling_temperature), int(wrapper.sampling_top_k), int(wrapper.sampling_seed)) == (
        0.75,
        5,
        11,
    )
    assert int(wrapper.next_position[0]) == len(PROMPT) + 1


@pytest.mark.parametrize("pick", ["host", "device"])
def test_the_host_state_step_gives_the_wrappers_tokens_and_leaves_its_inputs_and_the_wrapper_alone(pick):
    model = llm.tiny_model("qwen3_5_moe")  # states held in dicts (linear attention) and as layer attributes
    expected = llm.eager_generate(model, PROMPT, 4)
    lm = llm.StatefulCausalLM(model, 16, pick=pick)
    step = llm.HostStateStep(lm)
    state = step.initial_state()
    assert [tuple(s.shape) for s in state] == [tuple(getattr(lm, n).shape) for n, _, _ in lm._state_slots()]
    tokens, ids, position = [], PROMPT, 0
    with torch.no_grad():
        for _ in range(4):
            before = [s.clone() for s in state]
            out, *new_state = step(torch.tensor([ids]), torch.arange(position, position + len(ids)), *state)
            assert all(torch.equal(a, b) for a, b in zip(state, before))  # inputs stay inputs
            assert len(new_state) == len(state)
            tokens.append(int(out.argmax()) if pick == "host" else int(out[0]))
            position += len(ids)
            ids, state = [tokens[-1]], new_state
    assert tokens == expected
    # The wrapper's own buffers are back in its cache, and untouched (zeros).
    for name, owner, key in lm._state_slots():
        held = owner[key] if isinstance(owner, dict) else getattr(owner, key)
        assert held is getattr(lm, name) and not bool(held.any()), name
    if pick == "device":  # no pick is fed back: the program keeps no sampler state of its own
        assert int(lm.next_position[0]) == 0


def test_a_prefill_under_static_chunks_pads_to_one_length_and_computes_what_it_did_unpadded(monkeypatch):
    model = llm.tiny_model("qwen3_5_moe")
    module = sys.modules[type(model.model.layers[0].linear_attn).__module__]
    seen = []
    reference = module.torch_chunk_gated_delta_rule

    def spy(query, *args, chunk_size=64, **kwargs):
        seen.append((query.shape[1], chunk_size))
        return reference(query, *args, chunk_size=chunk_size, **kwargs)

    monkeypatch.setattr(module, "torch_chunk_gated_delta_rule", spy)
    wrapper = llm.StatefulCausalLM(model, 80)

    def prefill(n):
        wrapper.reset()
        with torch.no_grad():
            logits = wrapper(torch.arange(3, 3 + n).reshape(1, n), torch.arange(n))
        return logits, {n: getattr(wrapper, n).clone() for n in ("conv_state_0_0", "recurrent_state_0_0")}

    for max_tokens in (6, 64, 65):
        for n in (2, 5):
            seen.clear()
            plain = prefill(n)
            assert seen == [(n, 64)]  # unpatched: the prompt's own length
            seen.clear()
            with _state.static_prefill_chunks(model, max_tokens):
                padded = prefill(n)
            (length, chunk), *rest = seen
            assert rest == [] and length % chunk == 0 and max_tokens <= length < max_tokens + chunk, seen
            torch.testing.assert_close(padded[0], plain[0], rtol=1e-5, atol=1e-5)
            for name in plain[1]:
                torch.testing.assert_close(padded[1][name], plain[1][name], rtol=1e-5, atol=1e-5)
    assert module.torch_chunk_gated_delta_rule is spy  # restored when the block ends


def test_a_layer_past_the_configs_layer_types_has_kind_unknown():
    model = llm.tiny_model("mistral")  # sliding windows: inferred layer types
    n = model.config.num_hidden_layers
    assert [_state.layer_kind(model, i) for i in range(n)] == ["sliding_attention"] * n
    assert _state.layer_kind(model, n) == "unknown"
    assert _state.layer_kind(model, n + 5) == "unknown"


def test_a_prefill_computes_the_output_head_for_its_last_position_only():
    # The program's logits (and its pick) are the last position's: the head
    # runs on one position, so a prefill's logits buffer is [1, 1, vocab], not [1, T, vocab].
    model = llm.tiny_model("qwen3")
    wrapper = llm.StatefulCausalLM(model, 16)
    rows = []
    model.lm_head.register_forward_hook(lambda _, args, out: rows.append(out.shape[-2]))
    with torch.no_grad():
        logits = wrapper(torch.tensor([PROMPT]), torch.arange(len(PROMPT)))
        expected = model(input_ids=torch.tensor([PROMPT])).logits[:, -1, :]
    assert rows == [1, len(PROMPT)]  # the wrapper's prefill, then the plain forward's every position
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
