"""Device-resident method inputs and outputs, pinned on a tiny decoder whose
KV cache the caller holds (tiny_decoder.py; et_copy.llm keeps real LLMs'
state as mutable buffers instead): greedy tokens equal eager's, each step moves only the
token, the position and the logits, the caches never cross, and device
memory returns to where it was once the program is dropped; the baseline
moves the caches both ways every step."""

from __future__ import annotations

import gc

import pytest
import torch

pytest.importorskip("executorch.exir")

import et_copy  # noqa: E402
import et_copy.runtime  # noqa: E402
import tiny_decoder as decoding  # noqa: E402

PROMPT = [5, 17, 3]
TOKENS = 32


@pytest.fixture(scope="module")
def model():
    return decoding.TinyDecoder().eval()


@pytest.fixture(scope="module")
def programs(model):
    return decoding.export_resident(model), decoding.export_baseline(model)


@pytest.fixture(scope="module")
def eager(model):
    return decoding.decode_eager(model, PROMPT, TOKENS)


def cache_bytes(model) -> int:
    return model.empty_cache().nbytes


def test_resident_decoding_equals_eager_and_moves_only_token_position_and_logits(model, programs, eager):
    et_copy.use_simulated_device()
    start = et_copy.allocator_stats()["bytes_outstanding"]
    method = et_copy.runtime.load(programs[0].buffer).load_method()
    meta = method.metadata
    assert [meta.input_tensor_meta(i).device() for i in range(4)] == ["cpu", "cpu", "cuda:0", "cuda:0"]
    assert [meta.output_tensor_meta(i).device() for i in range(3)] == ["cpu", "cuda:0", "cuda:0"]
    run = decoding.decode_resident(method, model, PROMPT, TOKENS)
    assert run.tokens == eager and len(run.tokens) == TOKENS
    logits = model.config.vocab * 4
    for step in run.steps:  # prefill and decode steps alike
        assert (step.h2d_bytes, step.d2h_bytes) == (16, logits), step  # int64 token + position in, logits out
    # Two cache pairs, written in turn: nothing grows from step to step.
    assert len({s.device_bytes_outstanding for s in run.steps}) == 1
    del method, run
    gc.collect()
    assert et_copy.allocator_stats()["bytes_outstanding"] == start


def test_baseline_moves_both_caches_both_ways_every_step(model, programs, eager):
    et_copy.use_simulated_device()
    method = et_copy.runtime.load(programs[1].buffer).load_method()
    run = decoding.decode_baseline(method, model, PROMPT, TOKENS)
    assert run.tokens == eager
    caches = 2 * cache_bytes(model)
    for step in run.steps:
        assert (step.h2d_bytes, step.d2h_bytes) == (16 + caches, model.config.vocab * 4 + caches), step


def test_a_host_cache_where_the_program_keeps_it_on_the_device_is_rejected(model, programs):
    et_copy.use_simulated_device()
    method = et_copy.runtime.load(programs[0].buffer).load_method()
    with pytest.raises(ValueError, match="input 2 .*is planned on cuda:0, got a tensor on cpu"):
        method.execute([torch.tensor([1]), torch.tensor([0]), model.empty_cache(), model.empty_cache()])


def test_resident_outputs_need_alloc_graph_output_false(model):
    from et_copy.export import export_device_program

    with pytest.raises(ValueError, match="resident_outputs need alloc_graph_output=False"):
        export_device_program(model, decoding._example(model), resident_outputs=(1,), alloc_graph_output=True)
