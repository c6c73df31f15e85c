"""export_llm's check of its wrapper (et_copy.llm._check), rule by rule and
edge by edge, with no export (seconds): the tolerance at its bound on both
sides and in both scales, which decoder layer is named as the first to
differ, what is captured of a layer's output, and the tokens each step of a
chunked prompt is fed."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

from et_copy import llm  # noqa: E402
from et_copy.llm import _check  # noqa: E402

F32_EPS = torch.finfo(torch.float32).eps


def test_the_tolerance_is_256_epsilons_of_the_logits_dtype_scaled_by_their_largest_magnitude_above_1():
    assert _check.tolerance(torch.tensor([0.5, -0.25])) == 256 * F32_EPS
    assert _check.tolerance(torch.tensor([1.0, -1.0])) == 256 * F32_EPS  # 1 itself scales nothing
    assert _check.tolerance(torch.tensor([0.5, -4.0])) == 4 * 256 * F32_EPS  # the magnitude, not the value
    bf16 = torch.tensor([3.0], dtype=torch.bfloat16)
    assert _check.tolerance(bf16) == 3 * 256 * torch.finfo(torch.bfloat16).eps


def test_a_layer_differs_past_the_tolerance_and_not_at_it():
    same = torch.zeros(2, 3)
    at = same.clone()
    at[1, 2] = 256 * F32_EPS  # exactly the tolerance of zeros
    past = same.clone()
    past[1, 2] = float(torch.nextafter(torch.tensor(256 * F32_EPS), torch.tensor(1.0)))
    assert _check._first_difference([at], [same]) is None
    assert _check._first_difference([past], [same]) == 0
    nan = same.clone()
    nan[0, 0] = float("nan")
    assert _check._first_difference([nan], [same]) == 0  # a NaN is a difference


def test_the_first_differing_layer_is_named_from_the_first_to_the_last():
    a, b = torch.zeros(1, 4), torch.ones(1, 4)
    for n in (1, 2, 3):
        for bad in range(n):
            ours = [a] * n
            theirs = [a] * n
            theirs[bad] = b
            assert _check._first_difference(ours, theirs) == bad, (n, bad)
    assert _check._first_difference([b, b], [a, a]) == 0  # several differ: the first
    assert _check._first_difference([a, a], [a, a]) is None
    # Equal values in another shape differ (a layer that returned a broadcastable output).
    assert _check._first_difference([a, a.reshape(4)], [a, a]) == 1


def test_no_layer_is_named_when_the_captures_cannot_be_paired():
    a, b = torch.zeros(3), torch.ones(3)
    assert _check._first_difference([], []) is None  # no decoder layers found
    assert _check._first_difference([a, b], [b]) is None  # a layer ran on one side only
    assert _check._first_difference([b], [a, b]) is None


class _Returns(torch.nn.Module):
    def __init__(self, make) -> None:
        super().__init__()
        self.make = make

    def forward(self, x):
        return self.make(x)


def test_the_capture_keeps_each_layers_hidden_states_and_only_while_the_block_runs():
    x = torch.arange(4.0)
    layers = [
        _Returns(lambda x: x + 1),  # a tensor
        _Returns(lambda x: (x + 2, x * 0)),  # a tuple: the hidden states come first
        _Returns(lambda x: [x + 3, x * 0]),  # a list, likewise
        _Returns(lambda x: None),  # nothing to compare
    ]
    with _check._capture(layers) as got:
        outs = [layer(x) for layer in layers]
    assert [t.tolist() for t in got] == [(x + 1).tolist(), (x + 2).tolist(), (x + 3).tolist()]
    outs[0].add_(100)  # a copy: what runs afterwards cannot change what was captured
    assert got[0].tolist() == (x + 1).tolist()
    for layer in layers:
        layer(x)
    assert len(got) == 3  # the hooks are gone


def test_a_chunked_prompt_draws_every_chunk_of_two_tokens_or_more_and_feeds_a_last_token_the_pick():
    # A window of 6 with a prompt bound of 2: the window's prompt (5 tokens)
    # runs as chunks 2, 2, 1. Each chunk of several tokens is drawn, also
    # after a first chunk; a chunk of one token after another step is the
    # previous greedy pick, as are the decodes.
    model = llm.tiny_model("mistral")
    model.config.sliding_window = 6
    wrapper = llm.StatefulCausalLM(model, 10)
    assert _check.check_plan(wrapper, 2) == [[2, 1, 1, 1], [2, 2, 1, 1, 1, 1]]
    steps = []
    wrapper.register_forward_hook(lambda _, args, logits: steps.append((args[0].clone(), args[1].tolist(), logits)))
    _check.check_wrapper(wrapper, 2)
    assert [(tuple(ids.shape), positions) for ids, positions, _ in steps] == [
        ((1, 2), [0, 1]), ((1, 1), [2]), ((1, 1), [3]), ((1, 1), [4]),
        ((1, 2), [0, 1]), ((1, 2), [2, 3]), ((1, 1), [4]), ((1, 1), [5]), ((1, 1), [6]), ((1, 1), [7]),
    ]  # fmt: skip
    vocab = model.config.vocab_size
    for first, n_steps in ((0, 4), (4, 6)):
        generator = torch.Generator().manual_seed(n_steps)  # each sequence's own draws, from its first step
        chunks = [ids for ids, _, _ in steps[first : first + n_steps] if ids.shape[1] > 1]
        assert all(torch.equal(ids, torch.randint(vocab, ids.shape, generator=generator)) for ids in chunks)
    for (_, _, before), (ids, positions, _) in zip(steps, steps[1:]):
        if positions[0] > 0 and ids.shape[1] == 1:
            assert ids.item() == int(before.argmax())
    # The check leaves the wrapper at its start state.
    assert all(not bool(getattr(wrapper, name).any()) for name in wrapper.state_names)


@pytest.mark.parametrize("past", [False, True], ids=["at", "past"])
def test_the_wrappers_logits_pass_at_the_tolerance_and_are_refused_just_past_it(monkeypatch, past):
    # The tolerance is made each step's own difference (or the float just below it),
    # so the rule's edge is met exactly whatever the model's rounding.
    model = llm.tiny_model("qwen3")
    wrapper = llm.StatefulCausalLM(model, 16)
    got: list[torch.Tensor] = []

    def shifted(_, args, logits):  # a difference every step, never zero
        got.append(logits + 1e-6)
        return got[-1]

    wrapper.register_forward_hook(shifted)

    real_tolerance = _check.tolerance

    def tolerance(expected):
        if expected.shape != got[-1].shape:  # a decoder layer's output, compared when naming the layer
            return real_tolerance(expected)
        diff = torch.tensor(float((got[-1].float() - expected.float()).abs().max()))
        return float(torch.nextafter(diff, torch.tensor(0.0))) if past else float(diff)

    monkeypatch.setattr(_check, "tolerance", tolerance)
    if not past:
        _check.check_wrapper(wrapper, 4)
        assert len(got) == sum(map(len, _check.check_plan(wrapper, 4)))  # every step ran and passed
        return
    with pytest.raises(llm.UnsupportedModelError, match=r"at the prefill at positions 0\.\.3, the logits differ"):
        _check.check_wrapper(wrapper, 4)
