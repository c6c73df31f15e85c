"""The one-word quantization of a causal LM, as upstream's Qwen 3.5 MoE
export quantizes its model (docs/llm.md, "Quantizing a model"): the dense
linears and the lm_head in int8 per row or int4 in groups, and the
embeddings in 8 bits per row, with torchao's ``IntxWeightOnlyConfig``, and
the MoE experts in the same bits (:mod:`._quantized_experts`: torchao's
configs reach only ``nn.Linear``), whose weights both device backends read
in their stored form (docs/design.md, "Quantized weights and experts")."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, cast

import torch

from ._quantized_experts import experts_modules, is_quantized_experts, quantize_experts

if TYPE_CHECKING:
    from transformers import PreTrainedModel

SCHEMES = ("int8", "int4")
DEFAULT_GROUP_SIZE = 32  # upstream's int4 groups, and GGUF's blocks


def quantize(model: PreTrainedModel, scheme: str, *, group_size: int = DEFAULT_GROUP_SIZE) -> PreTrainedModel:
    """A quantized copy of ``model`` (the caller's model is left as it was):

    - ``"int8"``: every ``nn.Linear`` (the lm_head included) in int8, one
      scale per output row;
    - ``"int4"``: every ``nn.Linear`` whose input width is a multiple of
      ``group_size`` in int4 (-8..7), one scale per group of
      ``group_size`` inputs; the others in int8 per row;
    - either way, every ``nn.Embedding`` in int8, one scale per row (a step
      reads the rows of its tokens);
    - the experts of an MoE (transformers' 3-d expert weights) in the same
      scheme as the linears, each expert's rows as a Linear's.

    Symmetric, no zero point, torchao's rounding. A weight quantized already
    (a GGUF checkpoint's, or torchao's) keeps its own bits. Raises ValueError naming
    the argument for an unknown scheme or a group size that is not a
    positive even number."""
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup

    op = "et_copy.llm.quantize"
    if scheme not in SCHEMES:
        raise ValueError(f"{op}: scheme must be one of {SCHEMES}, got {scheme!r}")
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 2 or group_size % 2:
        raise ValueError(f"{op}: group_size must be a positive even int, got {group_size!r}")
    quantized = copy.deepcopy(model)
    per_row = IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))

    # A weight quantized already (a GGUF checkpoint's, torchao's) keeps its own bits.
    def grouped(module: torch.nn.Module, _fqn: str) -> bool:
        return linear(module, _fqn) and cast(torch.nn.Linear, module).in_features % group_size == 0

    def linear(module: torch.nn.Module, _fqn: str) -> bool:
        return isinstance(module, torch.nn.Linear) and not _is_quantized(module.weight)

    def embedding(module: torch.nn.Module, _fqn: str) -> bool:
        return isinstance(module, torch.nn.Embedding) and not _is_quantized(module.weight)

    if scheme == "int4":
        quantize_(
            quantized,
            IntxWeightOnlyConfig(weight_dtype=getattr(torch, "int4"), granularity=PerGroup(group_size)),
            grouped,
        )
    quantize_(quantized, per_row, linear)
    quantize_(quantized, per_row, embedding)
    for _, experts in experts_modules(quantized):
        if not is_quantized_experts(experts):
            quantize_experts(experts, 4 if scheme == "int4" else 8, group_size)
    return quantized


def _is_quantized(weight: torch.Tensor) -> bool:
    return type(weight) is not torch.nn.Parameter and type(weight) is not torch.Tensor


def quantized_weights(model: torch.nn.Module) -> dict[str, str]:
    """FQN -> how it is stored, for each quantized weight of ``model``: the
    torchao tensor class of a Linear's or an Embedding's, and
    ``"int8"``/``"int4"`` for an expert weight."""
    found = {
        f"{name}.weight": type(module.weight).__name__
        for name, module in model.named_modules()
        if isinstance(getattr(module, "weight", None), torch.Tensor) and _is_quantized(module.weight)
    }
    for name, experts in experts_modules(model):
        for weight in getattr(experts, "_et_copy_quantized", None) or ():
            stored = getattr(experts, weight + "_stored")
            found[f"{name}.{weight}"] = "int8" if stored.dtype == torch.int8 else "int4"
    return found
