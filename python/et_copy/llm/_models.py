"""Causal LMs to run on the device: transformers' models built from tiny
seeded configs (random weights, no download), or from a user's config or
local checkpoint."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel

ARCHITECTURES = (
    "qwen3", "qwen3_moe", "qwen3_5_moe", "llama", "mistral", "gemma2", "gemma3", "gpt_oss", "qwen2", "phi3",
    "olmo2", "smollm3", "mixtral", "qwen2_moe", "olmoe", "deepseek_v3", "qwen3_next", "lfm2",
)  # fmt: skip

# Tiny configs of architectures export_llm refuses (a cache layer kind with no
# static form here), kept so that the refusal stays tested. tiny_model builds
# them too; the command does not offer them.
REFUSED_ARCHITECTURES = ("falcon_h1", "deepseek_v32")

# Small enough to export in seconds, with every structural feature of the
# real model: grouped KV heads, q/k norms, routed and shared experts, and
# Qwen 3.5's linear-attention layers beside full attention.
_COMMON: dict[str, Any] = dict(
    vocab_size=256, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
    max_position_embeddings=256,
)  # fmt: skip


def _qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    return Qwen3ForCausalLM(Qwen3Config(**_COMMON, intermediate_size=128, num_hidden_layers=2))


def _qwen3_moe():
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        **_COMMON, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2, num_experts=8,
        num_experts_per_tok=2,
    )  # fmt: skip
    return Qwen3MoeForCausalLM(config)


def _qwen3_5_moe():
    from transformers.models.qwen3_5_moe import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig

    config = Qwen3_5MoeTextConfig(
        **_COMMON, moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=8,
        num_experts_per_tok=2, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
        linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
    )  # fmt: skip
    return Qwen3_5MoeForCausalLM(config)


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(**_COMMON, intermediate_size=128, num_hidden_layers=2))


# The sliding-window models get a window of 8, so that a tiny sequence runs
# both within it and past it (their real windows are 128 to 4096).
SLIDING_WINDOW = 8


def _mistral():
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(**_COMMON, intermediate_size=128, num_hidden_layers=2, sliding_window=SLIDING_WINDOW)
    return MistralForCausalLM(config)


def _gemma2():
    from transformers import Gemma2Config, Gemma2ForCausalLM

    # Alternating sliding and full layers, logit soft-capping, eager attention.
    config = Gemma2Config(**_COMMON, intermediate_size=128, num_hidden_layers=2, sliding_window=SLIDING_WINDOW)
    return Gemma2ForCausalLM(config)


def _gemma3():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    # Gemma 3 text: sliding layers around a full one, each kind with its own rotary base.
    config = Gemma3TextConfig(
        **_COMMON, intermediate_size=128, num_hidden_layers=3, sliding_window=SLIDING_WINDOW,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
    )  # fmt: skip
    return Gemma3ForCausalLM(config)


def _gpt_oss():
    from transformers import GptOssConfig, GptOssForCausalLM

    # Sliding and full layers, attention sinks, routed experts. The YaRN rotary
    # factor (32) is the ratio of these two lengths, as in the real model.
    common: dict[str, Any] = {**_COMMON, "max_position_embeddings": 32 * 4096}
    config = GptOssConfig(
        **common, intermediate_size=32, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=SLIDING_WINDOW,
    )  # fmt: skip
    return GptOssForCausalLM(config)


# Special tokens inside the tiny vocabulary: several configs default to ids
# of the real one (Phi-3's pad 32000, OLMo's eos 50279), which an embedding
# of 256 rows cannot hold.
_TOKENS: dict[str, Any] = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)

# Where the default initialisation (0.02) leaves a tiny model repeating one
# token, which could not tell a wrong cache from a right one: a wider spread.
_VARIED: dict[str, Any] = dict(initializer_range=0.04)


def _qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    # q/k/v biases; the layers from max_window_layers on slide, as in Qwen2's config.
    config = Qwen2Config(
        **_COMMON, **_VARIED, intermediate_size=128, num_hidden_layers=2, use_sliding_window=True,
        sliding_window=SLIDING_WINDOW, max_window_layers=1,
    )  # fmt: skip
    return Qwen2ForCausalLM(config)


def _phi3():
    from transformers import Phi3Config, Phi3ForCausalLM

    # Fused qkv and gate/up projections, partial rotary, and a sliding window (Phi-3 mini's is 2047).
    # transformers 5.24's typed signature omits partial_rotary_factor, which it takes at run time
    # (folding it into rope_parameters and keeping the attribute).
    config = Phi3Config(  # type: ignore[call-arg]
        **_COMMON, **_TOKENS, intermediate_size=128, num_hidden_layers=2, sliding_window=SLIDING_WINDOW,
        partial_rotary_factor=0.5,
    )  # fmt: skip
    return Phi3ForCausalLM(config)


def _olmo2():
    from transformers import Olmo2Config, Olmo2ForCausalLM

    # Norms after attention and MLP, q/k norms over all heads.
    return Olmo2ForCausalLM(Olmo2Config(**_COMMON, **_TOKENS, **_VARIED, intermediate_size=128, num_hidden_layers=2))


def _smollm3():
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    # Every second layer without rotary embeddings (NoPE; the real model skips every fourth).
    # Untied: with a tied lm_head the tiny model echoes its last input token.
    config = SmolLM3Config(
        **_COMMON, **_TOKENS, intermediate_size=128, num_hidden_layers=2, no_rope_layer_interval=2,
        tie_word_embeddings=False,
    )  # fmt: skip
    return SmolLM3ForCausalLM(config)


def _mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM

    # Routed experts and a sliding window (Mistral's).
    config = MixtralConfig(
        **_COMMON, intermediate_size=32, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=SLIDING_WINDOW,
    )  # fmt: skip
    return MixtralForCausalLM(config)


def _qwen2_moe():
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    # Routed experts beside a gated shared expert.
    config = Qwen2MoeConfig(
        **_COMMON, **_VARIED, intermediate_size=128, moe_intermediate_size=32, shared_expert_intermediate_size=32,
        num_hidden_layers=2, num_experts=8, num_experts_per_tok=2,
    )  # fmt: skip
    return Qwen2MoeForCausalLM(config)


def _olmoe():
    from transformers import OlmoeConfig, OlmoeForCausalLM

    config = OlmoeConfig(
        **_COMMON, **_TOKENS, intermediate_size=32, num_hidden_layers=2, num_experts=8, num_experts_per_tok=2,
    )  # fmt: skip
    return OlmoeForCausalLM(config)


def _deepseek_v3():
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    # Multi-head latent attention (the cache holds the compressed latents), a
    # dense first layer, then grouped routing over experts beside a shared one.
    # As many KV heads as heads, as in the real model: the latents expand to
    # keys for every head, which grouped heads would mismatch.
    common: dict[str, Any] = {**{k: v for k, v in _COMMON.items() if k != "head_dim"}, "num_key_value_heads": 4}
    config = DeepseekV3Config(
        **common, **_TOKENS, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
        n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1,
        first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16,
        v_head_dim=16,
    )  # fmt: skip
    return DeepseekV3ForCausalLM(config)


def _qwen3_next():
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    # Qwen 3.5's predecessor: gated delta-rule linear attention beside full attention, routed and shared experts.
    config = Qwen3NextConfig(
        **_COMMON, intermediate_size=128, moe_intermediate_size=32, shared_expert_intermediate_size=32,
        num_experts=8, num_experts_per_tok=2, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
        linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
    )  # fmt: skip
    return Qwen3NextForCausalLM(config)


def _lfm2():
    from transformers import Lfm2Config, Lfm2ForCausalLM

    # Short gated convolutions (a conv state per layer) beside full attention.
    # Untied: with a tied lm_head the tiny model echoes its last input token.
    config = Lfm2Config(
        **_COMMON, **_TOKENS, intermediate_size=128, num_hidden_layers=2, layer_types=["conv", "full_attention"],
        block_auto_adjust_ff_dim=False, tie_word_embeddings=False,
    )  # fmt: skip
    return Lfm2ForCausalLM(config)


def _falcon_h1():
    from transformers import FalconH1Config, FalconH1ForCausalLM

    # Every layer runs a Mamba-2 mixer beside attention: transformers' "hybrid" cache layer.
    config = FalconH1Config(
        **_COMMON, **_TOKENS, intermediate_size=128, num_hidden_layers=2, mamba_d_ssm=64, mamba_n_heads=4,
        mamba_d_state=16, mamba_d_conv=4, mamba_chunk_size=16,
    )  # fmt: skip
    return FalconH1ForCausalLM(config)


def _deepseek_v32():
    from transformers import DeepseekV32Config, DeepseekV32ForCausalLM

    # DeepSeek-V3's latent attention with a lightning indexer picking the keys
    # each query attends to: transformers' "indexed_attention" cache layer.
    common: dict[str, Any] = {**{k: v for k, v in _COMMON.items() if k != "head_dim"}, "num_key_value_heads": 4}
    config = DeepseekV32Config(
        **common, **_TOKENS, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
        n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1,
        first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16,
        v_head_dim=16, index_topk=8, index_head_dim=16, index_n_heads=2,
    )  # fmt: skip
    return DeepseekV32ForCausalLM(config)


_BUILDERS: dict[str, Callable[[], PreTrainedModel]] = {
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "qwen3_5_moe": _qwen3_5_moe,
    "llama": _llama,
    "mistral": _mistral,
    "gemma2": _gemma2,
    "gemma3": _gemma3,
    "gpt_oss": _gpt_oss,
    "qwen2": _qwen2,
    "phi3": _phi3,
    "olmo2": _olmo2,
    "smollm3": _smollm3,
    "mixtral": _mixtral,
    "qwen2_moe": _qwen2_moe,
    "olmoe": _olmoe,
    "deepseek_v3": _deepseek_v3,
    "qwen3_next": _qwen3_next,
    "lfm2": _lfm2,
    "falcon_h1": _falcon_h1,
    "deepseek_v32": _deepseek_v32,
}


def tiny_model(architecture: str, seed: int = 0) -> PreTrainedModel:
    """A transformers causal LM of ``architecture`` (one of
    :data:`ARCHITECTURES`, or of :data:`REFUSED_ARCHITECTURES`, which
    export_llm refuses) with random weights drawn from ``seed``, in eval
    mode, ready to export. Its experts (MoE) run transformers' ``batched_mm``
    eagerly: each chosen expert read in place per token, as the simulated
    backend's programs read them, the reference the tests compare with
    (export_llm picks the export's own implementation, whatever the model's)."""
    if architecture not in _BUILDERS:
        raise ValueError(
            f"et_copy.llm.tiny_model: architecture must be one of {ARCHITECTURES + REFUSED_ARCHITECTURES}, "
            f"got {architecture!r}"
        )
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = _BUILDERS[architecture]()
        _randomize_zero_routers(model, seed)
    finally:
        torch.random.set_rng_state(generator_state)  # a library leaves the caller's RNG alone
    if hasattr(model.config, "_experts_implementation"):
        model.config._experts_implementation = "batched_mm"  # its own fresh model
    return prepare(model)


def load_model(path: str | os.PathLike) -> PreTrainedModel:
    """A causal LM from a local checkpoint directory (``config.json`` and
    safetensors weights) or, for a ``.json`` file, a config alone (random
    weights, seed 0). Nothing is downloaded."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = os.fspath(path)
    if path.endswith(".json"):
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        generator_state = torch.random.get_rng_state()
        try:
            torch.manual_seed(0)
            model = AutoModelForCausalLM.from_config(config)
        finally:
            torch.random.set_rng_state(generator_state)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    return prepare(model)


def prepare(model: PreTrainedModel) -> PreTrainedModel:
    """Puts ``model`` in eval mode; returns it. Nothing else of the model
    changes: its MoE experts keep their implementation (transformers'
    default, ``grouped_mm``, unless the caller chose another), and
    :func:`~et_copy.llm.export_llm` sets the one each backend exports for
    the duration of its check and export only (et_copy.llm._experts)."""
    return model.eval()


def _randomize_zero_routers(model: PreTrainedModel, seed: int) -> None:
    # Some MoE classes initialise their router to zero: every expert ties and
    # the choice then depends on the order of a sort, not on the input.
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("mlp.gate.weight", "router.weight")) and not bool(p.ne(0).any()):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)


def tokenizer_for(path: str | os.PathLike):
    """The ``tokenizers.Tokenizer`` of a checkpoint directory (its
    ``tokenizer.json``) or of a GGUF file (its own vocabulary, as
    transformers converts it), or None when it has none."""
    if os.path.isfile(path):
        from ._gguf import gguf_tokenizer

        return gguf_tokenizer(path)
    file = os.path.join(os.fspath(path), "tokenizer.json")
    if not os.path.isfile(file):
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(file)
