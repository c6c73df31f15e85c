"""A transformers causal LM as one module whose decoding state is buffers.

ExecuTorch keeps an LLM's KV caches, and a hybrid model's linear-attention
conv and recurrent states, as *mutable buffers*: ``torch.export`` lifts them
(``graph_signature.buffers_to_mutate``), the program updates them in place,
and they keep their values between executions of a loaded method.
:class:`StatefulCausalLM` builds that module from a transformers model:
every layer of a ``StaticCache`` is created ahead of time and its tensors
registered as buffers, which transformers' own ``TorchExportableModule*``
wrappers do for plain attention only (hybrid layers have no ``keys``).
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import torch
import transformers
from transformers.cache_utils import (
    LinearAttentionCacheLayerMixin,
    StaticCache,
    StaticLayer,
    StaticSlidingWindowLayer,
    get_layer_types_and_kwargs,
)

from ._sampling import pick_token

if TYPE_CHECKING:
    from transformers import PreTrainedModel

DEFAULT_MAX_TOP_K = 64  # the largest top_k a program honours by default (its topk takes a constant k)


# The transformers et_copy.llm is built and tested against (the llm extra's pin).
SUPPORTED_TRANSFORMERS = "5.24.0"


class UnsupportedModelError(ValueError):
    """The model cannot be exported as it computes: a cache layer kind
    :class:`StatefulCausalLM` has no static form for, or (from
    :func:`et_copy.llm.export_llm`'s check) logits that differ from the
    model's own forward with its own cache. ``architecture`` is the model's
    class and ``config.model_type``; ``layer`` the first decoder layer at
    fault (None when unknown); ``cache_type`` that layer's kind, as
    transformers' ``layer_types`` names it (``'sliding_attention'``)."""

    def __init__(self, message: str, *, architecture: str, layer: int | None = None, cache_type: str | None = None):
        super().__init__(message)
        self.architecture = architecture
        self.layer = layer
        self.cache_type = cache_type


def architecture_of(model: torch.nn.Module) -> str:
    """``'MistralForCausalLM (model_type mistral)'``: how errors name a model."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return f"{type(model).__name__} (model_type {model_type})" if model_type else type(model).__name__


def layer_kind(model: PreTrainedModel, index: int) -> str:
    """Layer ``index``'s kind in transformers' words: its ``layer_types``
    entry, as transformers infers it when the config has none
    (``'sliding_attention'`` for a config with a ``sliding_window``)."""
    layer_types, _ = get_layer_types_and_kwargs(model.config.get_text_config(decoder=True))
    return layer_types[index] if index < len(layer_types) else "unknown"


class _IndexPutLayer(StaticLayer):
    """A StaticLayer whose update writes the new keys and values with
    ``index_put_``, which ExecuTorch re-inplaces into the buffer, instead of
    ``index_copy_``, which it has no kernel for and which export turns into a
    functional copy of the whole cache plus a write-back every step."""

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        positions = torch.arange(key_states.shape[-2]) + self.cumulative_length
        self.cumulative_length.add_(key_states.shape[-2])
        # index_put_ itself: `keys[:, :, positions] = k` traces to values with
        # the leading 1 squeezed off, which ExecuTorch's in-place kernel rejects.
        torch.ops.aten.index_put_.default(self.keys, [None, None, positions], key_states)
        torch.ops.aten.index_put_.default(self.values, [None, None, positions], value_states)
        return self.keys, self.values


class _SlidingIndexPutLayer(_IndexPutLayer):
    """A sliding-window (or chunked) attention layer kept at every position,
    like a full layer: transformers' masks then limit each query to its
    window (``get_mask_sizes`` gives the whole cache from position 0, so
    the mask's kv index is the absolute position). transformers' own
    ``StaticSlidingWindowLayer`` instead rolls a window-sized cache and
    branches on a Python int it counts per call: a count the exported
    program cannot keep (wrong tokens eagerly once reset, and a guard on the
    prompt length that torch.export cannot satisfy). The price is memory:
    the layer holds ``max_seq_len`` positions, not ``sliding_window``."""

    is_sliding = True

    def __init__(self, max_cache_len: int, sliding_window: int) -> None:
        super().__init__(max_cache_len)
        self.sliding_window = sliding_window


def _static_layer(layer, max_seq_len: int, kwargs: dict):
    """Our exportable form of a StaticCache layer (built with ``kwargs``),
    or None if it has none."""
    if isinstance(layer, LinearAttentionCacheLayerMixin):
        # A linear-attention layer with attention beside it (layer_types "hybrid",
        # "hybrid_sliding") would also need its keys and values as buffers.
        return layer if not isinstance(layer, StaticLayer) else None
    if type(layer) is StaticLayer:
        return _IndexPutLayer(max_seq_len)
    if type(layer) is StaticSlidingWindowLayer:
        return _SlidingIndexPutLayer(max_seq_len, kwargs["sliding_window"])
    return None


class StatefulCausalLM(torch.nn.Module):
    """``forward(input_ids [1, T] int64, cache_position [T] int64)`` runs T
    tokens at positions ``cache_position`` through ``model``, updating the
    state buffers in place, and returns the last position's logits
    ``[1, vocab]`` (``pick="host"``) or its argmax ``[1]`` int64
    (``pick="device"``: 8 bytes leave the device instead of the logits).

    With ``pick="device"`` the token is picked by :func:`~et_copy.llm.pick_token`
    (greedy until :meth:`set_sampling` says otherwise), and
    :meth:`decode_next` decodes the last pick with no input at all.

    The state starts at zero (:meth:`initial_state`), which is what a fresh
    transformers cache holds. Positions must run on from the last call:
    a prompt at 0..T-1, then one token at a time.
    """

    PICKS = ("host", "device")
    #: The sampler's state (pick="device"): the last pick and the position
    #: after it (what decode_next feeds back), and the settings of
    #: set_sampling. Zeros: greedy, from position 0.
    SAMPLER_STATE = (
        ("next_token", (1, 1), torch.int64),
        ("next_position", (1,), torch.int64),
        ("sampling_temperature", (1,), torch.float32),
        ("sampling_top_k", (1,), torch.int64),
        ("sampling_seed", (1,), torch.int64),
    )
    # Registered as buffers when pick="device".
    next_token: torch.Tensor
    next_position: torch.Tensor
    sampling_temperature: torch.Tensor
    sampling_top_k: torch.Tensor
    sampling_seed: torch.Tensor

    def __init__(
        self, model: PreTrainedModel, max_seq_len: int, *, pick: str = "host", max_top_k: int = DEFAULT_MAX_TOP_K
    ) -> None:
        super().__init__()
        if pick not in self.PICKS:
            raise ValueError(f"et_copy.llm: pick must be one of {self.PICKS}, got {pick!r}")
        if max_seq_len < 2:
            raise ValueError(f"et_copy.llm: max_seq_len must be at least 2, got {max_seq_len}")
        if max_top_k < 1:
            raise ValueError(f"et_copy.llm: max_top_k must be at least 1, got {max_top_k}")
        self.model = model
        self.max_seq_len = max_seq_len
        self.pick = pick
        # pick="device": whether each pick is kept as state for decode_next
        # (HostStateStep's programs keep no state of their own, and pick greedily).
        self.feeds_back = True
        self.max_top_k = min(max_top_k, model.config.get_text_config(decoder=True).vocab_size)
        cache = StaticCache(max_cache_len=max_seq_len, config=model.config)
        _, per_layer_kwargs = get_layer_types_and_kwargs(model.config.get_text_config(decoder=True))
        layers = []
        for i, (layer, kwargs) in enumerate(zip(cache.layers, per_layer_kwargs)):
            ours = _static_layer(layer, max_seq_len, kwargs)
            if ours is None:
                raise UnsupportedModelError(
                    f"et_copy.llm: {architecture_of(model)}: cache layer {i} is {layer_kind(model, i)!r} "
                    f"(transformers' {type(layer).__name__}), which et_copy.llm has no static form to export (it "
                    "supports full, sliding-window and chunked attention and linear attention; docs/llm.md)",
                    architecture=architecture_of(model),
                    layer=i,
                    cache_type=layer_kind(model, i),
                )
            layers.append(ours)
        cache.layers = layers
        # One eager step creates every layer's tensors with the model's own shapes and dtypes.
        with torch.no_grad():
            model(input_ids=torch.zeros(1, 2, dtype=torch.long), cache=cache, use_cache=True)
        for layer in cache.layers:
            if isinstance(layer, LinearAttentionCacheLayerMixin):
                # Marked as started, so every call reads the stored state: zero state
                # is what a fresh sequence starts from, so prefill at position 0 is
                # exact, and a prompt may also continue a sequence.
                layer.has_previous_state.update(dict.fromkeys(range(layer.number_of_states), True))
        self.cache = cache
        unset = [name for name, owner, key in self._state_slots() if _get(owner, key) is None]
        if unset:
            # Another transformers than the one et_copy.llm is pinned to can
            # leave the given cache untouched (seen with 5.17 on a GPU machine).
            raise UnsupportedModelError(
                f"et_copy.llm: {architecture_of(model)}: one eager step left {len(unset)} cache tensors unset "
                f"({', '.join(unset[:3])}{', ...' if len(unset) > 3 else ''}) with transformers "
                f"{transformers.__version__}; et_copy.llm needs transformers {SUPPORTED_TRANSFORMERS} "
                "(pip install 'et-copy[llm]'), whose models fill the cache they are given",
                architecture=architecture_of(model),
            )
        for name, owner, key in self._state_slots():
            self.register_buffer(name, _get(owner, key), persistent=False)
        names = [name for name, _, _ in self._state_slots()]
        if pick == "device":
            for name, shape, dtype in self.SAMPLER_STATE:
                self.register_buffer(name, torch.zeros(shape, dtype=dtype), persistent=False)
                names.append(name)
        # The model's own buffers (rotary frequencies) are not state.
        self.state_names: tuple[str, ...] = tuple(names)
        self.reset()

    def reset(self) -> None:
        """Zeroes every state buffer: a fresh sequence (eager use)."""
        for name in self.state_names:
            getattr(self, name).zero_()

    def initial_state(self) -> dict[str, torch.Tensor]:
        """The state a sequence starts from, by buffer name (all zeros)."""
        return {name: torch.zeros_like(getattr(self, name)) for name in self.state_names}

    def _state_slots(self):
        """(buffer name, cache object, attribute, key) for every state tensor the cache reads."""
        for i, layer in enumerate(self.cache.layers):
            if isinstance(layer, LinearAttentionCacheLayerMixin):
                for s in range(layer.number_of_states):
                    yield f"conv_state_{i}_{s}", layer.conv_states, s
                    if layer.recurrent_states[s] is not None:
                        yield f"recurrent_state_{i}_{s}", layer.recurrent_states, s
            else:
                yield f"key_cache_{i}", layer, "keys"
                yield f"value_cache_{i}", layer, "values"
                yield f"cache_length_{i}", layer, "cumulative_length"

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        return self._step(input_ids, cache_position)

    def _step(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        # Apart from forward: export traces decode_next as the module's forward.
        for layer in self.cache.layers:
            if isinstance(layer, StaticLayer):
                layer.cumulative_length.copy_(cache_position[0])
        out = self.model(
            input_ids=input_ids,
            position_ids=cache_position.unsqueeze(0),
            cache=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        logits = out.logits[:, -1, :]
        if self.pick == "host":
            return logits
        position = cache_position[-1:]
        token = pick_token(
            logits, self.sampling_temperature, self.sampling_top_k, self.sampling_seed, position, self.max_top_k
        )
        if self.feeds_back:
            self.next_token.copy_(token.unsqueeze(0))
            self.next_position.copy_(position + 1)
            self._keep_sampling()
        return token

    def decode_next(self) -> torch.Tensor:
        """``forward`` on the token the last call picked, at the position
        after it, both read from the state (pick="device"): a decode step
        with no input, so nothing crosses to the device per token."""
        return self._step(self.next_token.clone(), self.next_position.clone())

    def set_sampling(self, temperature: torch.Tensor, top_k: torch.Tensor, seed: torch.Tensor) -> torch.Tensor:
        """Sets how the following picks are made (pick="device"):
        ``temperature`` float32 [1] (0: greedy), ``top_k`` int64 [1] (0: the
        whole vocabulary, else at most max_top_k) and ``seed`` int64 [1]
        (>= 0), as :func:`et_copy.llm.pick_token` takes them. Returns the
        top_k it keeps (executorch 1.5.1's memory planner refuses a method
        with no output)."""
        # Clamped into the sampler's domain (callers check first; a program
        # must not index past its top-k): also what puts these writes in the
        # device backend, which takes computations, not bare input copies.
        self.sampling_temperature.copy_(torch.clamp(temperature, min=0.0))
        self.sampling_top_k.copy_(torch.clamp(top_k, 0, self.max_top_k))
        self.sampling_seed.copy_(torch.clamp(seed, min=0))
        return self.sampling_top_k.clone()

    def _keep_sampling(self) -> None:
        # Rewritten as they are by every method that reads them: torch.export
        # freezes a buffer that a method reads and never writes into a
        # constant, so without this the settings would be export's zeros.
        for name in ("sampling_temperature", "sampling_top_k", "sampling_seed"):
            buffer = getattr(self, name)
            buffer.copy_(buffer + 0)


class HostStateStep(torch.nn.Module):
    """The baseline a runtime without device state is left with: one step of
    ``lm`` whose state the caller holds on the host and passes in and takes
    back every call. ``forward(input_ids, cache_position, *state) ->
    (logits or token, *new_state)``, the state in :meth:`initial_state`'s order;
    exported behind a DeviceBoundary, every state tensor crosses both ways
    every step."""

    def __init__(self, lm: StatefulCausalLM) -> None:
        super().__init__()
        self.lm = lm
        lm.feeds_back = False

    def initial_state(self) -> list[torch.Tensor]:
        """The start state, in the order ``forward`` takes it (the caches; a
        device-picking lm's sampler state stays in the program)."""
        return [torch.zeros_like(getattr(self.lm, name)) for name, _, _ in self.lm._state_slots()]

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor, *state: torch.Tensor):
        slots = list(self.lm._state_slots())
        for (_, owner, key), value in zip(slots, state):
            _set(owner, key, value.clone())  # the model updates a copy in place: inputs stay inputs
        try:
            out = self.lm(input_ids, cache_position)
            new_state = tuple(_get(owner, key) for _, owner, key in slots)
        finally:
            for name, owner, key in slots:
                _set(owner, key, getattr(self.lm, name))
        return (out, *new_state)


def _get(owner, key):
    return owner[key] if isinstance(owner, dict) else getattr(owner, key)


def _set(owner, key, value) -> None:
    if isinstance(owner, dict):
        owner[key] = value
    else:
        setattr(owner, key, value)


@contextlib.contextmanager
def static_prefill_chunks(model: torch.nn.Module, max_tokens: int):
    """While exporting a prefill of up to ``max_tokens`` tokens, the
    reference chunked gated-delta rule of transformers' linear attention
    (Qwen 3.5, Qwen3-Next) sees its sequence padded with zeros to one static
    length, a multiple of its chunk size: it pads to a multiple itself, which
    under a symbolic length makes guards torch.export cannot solve. Zero
    padding leaves the outputs and the final state unchanged (a zero key and
    beta write nothing, a zero decay keeps the state)."""
    patched = []
    for module in {sys.modules[type(m).__module__] for m in model.modules()}:
        rule = getattr(module, "torch_chunk_gated_delta_rule", None)
        if rule is not None:
            patched.append((module, rule))
            setattr(module, "torch_chunk_gated_delta_rule", _padded_rule(rule, max_tokens))
    try:
        yield
    finally:
        for module, rule in patched:
            setattr(module, "torch_chunk_gated_delta_rule", rule)


def _padded_rule(rule, max_tokens: int):
    def padded(query, key, value, g, beta, chunk_size: int = 64, **kwargs):
        length = -(-max_tokens // chunk_size) * chunk_size
        n = query.shape[1]

        def pad(x):  # along the sequence dim (1)
            return torch.nn.functional.pad(x, (0, 0) * (x.dim() - 2) + (0, length - n))

        out, state = rule(pad(query), pad(key), pad(value), pad(g), pad(beta), chunk_size=chunk_size, **kwargs)
        return out[:, :n], state

    return padded
