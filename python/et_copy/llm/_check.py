"""The wrapper checked against the model it wraps: correct or refused.

:class:`StatefulCausalLM` re-implements how a transformers model keeps its
cache. Each architecture can do that differently (a sliding window, a
cache length counted in Python, a mask built from the cache's sizes), and a
difference gives wrong tokens, not an error. :func:`check_wrapper` runs a few
prefill and decode steps eagerly through the wrapper and through the model's
own forward with its own ``DynamicCache`` (what ``generate()`` uses), and
raises :class:`UnsupportedModelError` naming the first decoder layer whose
output differs when the logits do.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

import torch
from transformers import DynamicCache

from ._state import StatefulCausalLM, UnsupportedModelError, _SlidingIndexPutLayer, architecture_of, layer_kind

if TYPE_CHECKING:
    from transformers import PreTrainedModel

DECODE_STEPS = 3  # decodes after each prompt: the first reads what the prefill wrote, the rest what decode wrote


def check_wrapper(wrapper: StatefulCausalLM, max_prompt_len: int) -> None:
    """Runs the plan of :func:`check_plan` through ``wrapper`` and through
    ``wrapper.model`` with a fresh ``DynamicCache`` per sequence, feeding
    both the reference's greedy tokens, and compares the last position's
    logits at every step. Leaves the wrapper's state zeroed (its start).

    Raises UnsupportedModelError (architecture, first differing layer and
    its cache kind) when they differ beyond :func:`tolerance`, or when the
    wrapper fails to run what the model runs."""
    model = wrapper.model
    layers = _decoder_layers(model)
    pick = wrapper.pick
    wrapper.pick = "host"  # the logits, whatever the program returns
    try:
        for sequence in check_plan(wrapper, max_prompt_len):
            _check_sequence(wrapper, model, layers, sequence)
    finally:
        wrapper.pick = pick
        wrapper.reset()


def check_plan(wrapper: StatefulCausalLM, max_prompt_len: int) -> list[list[int]]:
    """The sequences the check runs, each as the lengths of its steps (a
    length of 1 is a decode): chunked as :meth:`Session.feed` chunks a prompt.

    - A prompt as long as the program's prefill takes, then decodes: a
      prompt longer than a sliding window crosses it within one prefill.
    - For each sliding window shorter than the cache, a prompt that ends
      just before it, then decodes that cross it one token at a time.
    """
    limit = wrapper.max_seq_len
    prompts = [min(max_prompt_len, limit - DECODE_STEPS)]
    windows = {layer.sliding_window for layer in wrapper.cache.layers if isinstance(layer, _SlidingIndexPutLayer)}
    prompts += [w - 1 for w in sorted(windows) if 2 <= w and w - 1 + DECODE_STEPS <= limit]
    plan = []
    for n in dict.fromkeys(prompts):  # once each, in order
        steps = []
        while n:
            chunk = min(n, max_prompt_len) if n >= 2 else 1
            steps.append(chunk)
            n -= chunk
        plan.append(steps + [1] * DECODE_STEPS)
    return plan


def tolerance(reference: torch.Tensor) -> float:
    """How far the wrapper's logits may be from the model's own.

    The two compute the same thing in different shapes: the wrapper attends
    over the whole static cache with the unwritten positions masked, the
    model's DynamicCache over the written ones only, so sums run in a
    different order. Measured on the tiny float32 models (Llama, Qwen3,
    Qwen3-MoE, Qwen 3.5 MoE, Mistral, Qwen2, Gemma 2, Gemma 3, GPT-OSS):
    at most 1.8e-7. Faults measured on the same models differ by 0.04 to
    0.38: transformers' own sliding-window layer kept (Mistral's default
    config), or a sliding window one position too wide. 256 machine
    epsilons of the logits' dtype (3e-5 in float32), relative to their
    largest magnitude when it is above 1, sits far from both and scales to
    bfloat16.
    """
    eps = torch.finfo(reference.dtype).eps
    return 256 * eps * max(1.0, float(reference.abs().max()))


def _check_sequence(wrapper: StatefulCausalLM, model: PreTrainedModel, layers, steps: list[int]) -> None:
    wrapper.reset()
    cache = DynamicCache(config=model.config)
    generator = torch.Generator().manual_seed(len(steps))  # the model's vocabulary, not the caller's RNG
    vocab = model.config.get_text_config().vocab_size
    position, token = 0, None
    for n in steps:
        ids = torch.randint(vocab, (1, n), generator=generator) if n > 1 or token is None else torch.tensor([[token]])
        positions = torch.arange(position, position + n)
        with torch.no_grad():
            try:
                with _capture(layers) as ours:
                    got = wrapper(ids, positions)
            except Exception as e:
                raise UnsupportedModelError(
                    f"et_copy.llm.export_llm: {architecture_of(model)} fails in et_copy's StatefulCausalLM at "
                    f"positions {position}..{position + n - 1} ({type(e).__name__}: {e}), though the model runs "
                    "with its own cache; this architecture's cache is not supported",
                    architecture=architecture_of(model),
                ) from e
            with _capture(layers) as theirs:
                expected = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]
        diff = float((got.float() - expected.float()).abs().max())
        if not diff <= tolerance(expected):  # also catches NaN
            _refuse(wrapper, cache, ours, theirs, position, n, diff, tolerance(expected))
        token = int(expected.argmax())
        position += n


def _refuse(wrapper, cache, ours, theirs, position, n, diff, tol) -> None:
    model = wrapper.model
    architecture = architecture_of(model)
    step = f"{'prefill' if n > 1 else 'decode'} at positions {position}..{position + n - 1}"
    layer = _first_difference(ours, theirs)
    if layer is None:
        where, kind = "no single decoder layer could be singled out", None
    else:
        ours_layer = wrapper.cache.layers[layer]
        theirs_layer = cache.layers[layer] if layer < len(cache.layers) else None
        kind = layer_kind(model, layer)
        window = getattr(ours_layer, "sliding_window", None)
        where = (
            f"the first decoder layer whose output differs is layer {layer} ({kind!r}"
            + (f", sliding_window {window}" if window is not None else "")
            + f"; et_copy holds its cache as {type(ours_layer).__name__}"
            + (f", the model's own cache as {type(theirs_layer).__name__}" if theirs_layer is not None else "")
            + ")"
        )
    raise UnsupportedModelError(
        f"et_copy.llm.export_llm: {architecture} computes differently through et_copy's StatefulCausalLM than "
        f"through its own forward with a DynamicCache (what generate() uses): at the {step}, the logits differ by "
        f"{diff:.3g} (tolerance {tol:.3g}); {where}. Exporting it would give wrong tokens, so it is refused. "
        "docs/llm.md lists the cache layer kinds et_copy.llm supports.",
        architecture=architecture,
        layer=layer,
        cache_type=kind,
    )


def _first_difference(ours: list[torch.Tensor], theirs: list[torch.Tensor]) -> int | None:
    if not ours or len(ours) != len(theirs):
        return None
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape or not float((a.float() - b.float()).abs().max()) <= tolerance(b):
            return i
    return None


def _decoder_layers(model: PreTrainedModel) -> list[torch.nn.Module]:
    """The model's decoder layers, in order, to tell which one differs first
    (an empty list when they cannot be found: the error then names no layer)."""
    n = getattr(model.config.get_text_config(decoder=True), "num_hidden_layers", None)
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    layers = getattr(decoder, "layers", None)
    if isinstance(layers, torch.nn.ModuleList) and len(layers) == n:
        return list(layers)
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n:
            return list(module)
    return []


@contextlib.contextmanager
def _capture(layers: list[torch.nn.Module]) -> Iterator[list[torch.Tensor]]:
    """Each decoder layer's output hidden states while the block runs."""
    outputs: list[torch.Tensor] = []

    def hook(module, args, output):
        tensor = output[0] if isinstance(output, (tuple, list)) else output
        if isinstance(tensor, torch.Tensor):
            outputs.append(tensor.detach().clone())

    handles = [layer.register_forward_hook(hook) for layer in layers]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()
