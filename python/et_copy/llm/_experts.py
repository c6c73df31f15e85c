"""MoE experts as grouped matmuls, for export.

transformers 5.24 dispatches each experts module's forward on its config's
``_experts_implementation`` (``transformers.integrations.moe``'s
``ExpertsInterface``). Its ``batched_mm`` gathers ``gate_up_proj[expert_ids]``
per token and choice, then ``bmm``: compiled, that walks each chosen expert's
weights once per token and choice, so a prefill's traffic grows with prompt x
top_k. :func:`grouped_experts_forward` (registered as
:data:`GROUPED_EXPERTS`) sorts a prompt's token-choice pairs by expert and
runs ``torch._grouped_mm`` over the weights where they lie: each expert read
once for all its rows. The routing (top-k, normalisation, shared experts,
DeepSeek's grouped routing) stays the model's own code.

:func:`experts_for_export` sets the implementation for the duration of an
export and restores every config after: the caller's model is left as it was.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator

import torch

from ._quantized_experts import is_quantized_experts, quantized_experts_forward

if TYPE_CHECKING:
    from executorch.exir.backend.partitioner import Partitioner

#: The experts implementation the compiled backend's export uses (registered with transformers on first use).
GROUPED_EXPERTS = "et_copy_grouped_mm"
#: The one the simulated backend's export uses: ExecuTorch's portable kernels have no ``_grouped_mm``;
#: transformers' ``batched_mm`` for float experts (registered with transformers on first use).
BATCHED_EXPERTS = "et_copy_batched_mm"


def grouped_experts_forward(
    self: Any,  # an experts module: use_experts_implementation set its has_gate, is_transposed, ...
    hidden_states: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
) -> torch.Tensor:
    """An experts module's forward (``hidden_states [T, H]``, the chosen
    experts ``[T, k]`` and their routing weights ``[T, k]`` -> ``[T, H]``),
    for every class transformers decorates with ``use_experts_implementation``:
    concatenated or interleaved gate and up (the class's ``_apply_gate``),
    transposed weights, biases, no gate, a post-expert norm.

    One token (decode) goes through transformers' ``batched_mm``: its k
    experts read in place, once each. More (prefill): the T*k token-choice
    pairs sorted by expert (a stable sort: the pairs of one expert keep
    their (token, choice) order, as transformers visits them), the rows
    per expert counted by a one-hot sum (``bincount`` has no AOTInductor C
    shim), ``torch._grouped_mm`` over the whole weight tensors
    with those offsets, then each row weighted and put back in its pair's
    place, summed over the k choices in transformers' order."""
    from transformers.integrations.moe import batched_mm_experts_forward

    if is_quantized_experts(self):
        return quantized_experts_forward(self, hidden_states, top_k_index, top_k_weights, grouped=True)
    num_tokens, hidden_dim = hidden_states.shape
    up = self.gate_up_proj if self.has_gate else self.up_proj
    # A prefill's length is symbolic from 2 up: this test is decided at trace time, without a guard.
    # Expert-parallel sentinels need batched_mm's clamping; ATen's CPU _grouped_mm wants 16-byte strides.
    if num_tokens == 1 or self._is_expert_parallel or not _strides_fit(up, self.down_proj):
        return batched_mm_experts_forward(self, hidden_states, top_k_index, top_k_weights)
    num_top_k = top_k_index.size(-1)
    expert_ids = top_k_index.reshape(-1)
    expert_ids_sorted, order = torch.sort(expert_ids, stable=True)
    rows = hidden_states[order // num_top_k]
    experts = torch.arange(self.num_experts, device=expert_ids.device)
    counts = (expert_ids.unsqueeze(-1) == experts).sum(dim=0, dtype=torch.int32)
    offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)

    up_bias = (self.gate_up_proj_bias if self.has_gate else self.up_proj_bias) if self.has_bias else None
    out = _grouped_linear(rows, up, offsets, up_bias, expert_ids_sorted, self.is_transposed)
    out = self._apply_gate(out) if self.has_gate else self.act_fn(out)
    down_bias = self.down_proj_bias if self.has_bias else None
    out = _grouped_linear(out, self.down_proj, offsets, down_bias, expert_ids_sorted, self.is_transposed)
    if self.has_post_expert_norm:
        out = self.post_expert_norm(out)
    out = out * top_k_weights.reshape(-1)[order].unsqueeze(-1)
    # Back in (token, choice) order, then the choices summed as batched_mm and grouped_mm sum them.
    out = torch.zeros_like(out).index_copy(0, order, out)
    return out.view(num_tokens, num_top_k, hidden_dim).sum(dim=1).to(hidden_states.dtype)


def batched_experts_forward(
    self: Any, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """:data:`BATCHED_EXPERTS`: transformers' ``batched_mm`` (each chosen
    expert gathered, then ``bmm``), or for experts stored in 8 or 4 bits their
    chosen bytes gathered before they are dequantized."""
    from transformers.integrations.moe import batched_mm_experts_forward

    if is_quantized_experts(self):
        return quantized_experts_forward(self, hidden_states, top_k_index, top_k_weights, grouped=False)
    return batched_mm_experts_forward(self, hidden_states, top_k_index, top_k_weights)


def _strides_fit(*weights: torch.Tensor) -> bool:
    """Whether every row of the grouped matmuls' operands (each weight's
    inner dims, so the rows in and out too) is a multiple of 16 bytes, as
    ATen's ``_grouped_mm`` requires."""
    return all(n * w.element_size() % 16 == 0 for w in weights for n in w.shape[1:])


def _grouped_linear(
    rows: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor,
    bias: torch.Tensor | None,
    expert_ids_sorted: torch.Tensor,
    is_transposed: bool,
) -> torch.Tensor:
    # _grouped_mm takes [E, in, out]; the usual layout is [E, out, in]: a transposed view, no copy.
    out = torch._grouped_mm(rows.to(weight.dtype), weight if is_transposed else weight.transpose(-2, -1), offs=offsets)
    return out if bias is None else out + bias[expert_ids_sorted]


def _grouped_mm_shape(fake_mode, func, mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    """``_grouped_mm``'s output on fake tensors for a float32 or float16 ``[S, K] x [E, K, N]`` on the CPU."""
    cpu_float = mat_a.device.type == "cpu" and mat_a.dtype in (torch.float32, torch.float16)
    if bias is not None or offs is None or not cpu_float or mat_a.dim() != 2 or mat_b.dim() != 3:
        return NotImplemented  # torch's own meta kernel
    with fake_mode:
        return torch.empty((mat_a.size(0), mat_b.size(-1)), dtype=out_dtype or mat_a.dtype, device=mat_a.device)


def _trace_grouped_mm_in_any_float() -> None:
    """Lets torch.export and AOTInductor trace ``_grouped_mm`` in float32
    and float16 on the CPU. ATen's CPU kernel (and AOTInductor's C shim,
    which calls it) takes every float dtype, but its meta kernel (torch
    2.13) checks CUDA's rule, bfloat16 only, so tracing raises where eager
    runs. Adds a fake-tensor rule for those cases alone (idempotent); every
    other call still goes to torch's meta kernel."""
    from torch._subclasses import fake_impls

    if any(impl is _grouped_mm_shape for _, impl in fake_impls.op_implementations_checks):
        return
    op = torch.ops.aten._grouped_mm.default
    fake_impls.op_implementations_checks.append((lambda func: func is op, _grouped_mm_shape))


def experts_implementation_for(partitioner: Partitioner) -> str:
    """The experts implementation an export with ``partitioner`` (the one
    the backend choice resolved to, :func:`et_copy.export._lowering.resolve_backend_choice`)
    uses: :data:`GROUPED_EXPERTS` for the compiled backend's, whose code
    calls ``_grouped_mm`` through its C shim; :data:`BATCHED_EXPERTS` for
    the others (the simulated backend's portable kernels have no
    ``_grouped_mm``)."""
    from ..backends.aoti import AotiDevicePartitioner

    if isinstance(partitioner, AotiDevicePartitioner):
        return GROUPED_EXPERTS
    return BATCHED_EXPERTS


@contextlib.contextmanager
def experts_for_export(model: torch.nn.Module, implementation: str) -> Iterator[None]:
    """While exporting, every experts module of ``model`` runs
    ``implementation`` (a key of transformers' ``ExpertsInterface``); each
    config's own value is restored after, whatever happens inside."""
    if implementation in _OURS:
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

        ALL_EXPERTS_FUNCTIONS.register(implementation, _OURS[implementation])  # idempotent
        _trace_grouped_mm_in_any_float()
    configs = {id(c): c for c in _configs_of(model)}.values()
    saved = [(c, c._experts_implementation_internal) for c in configs]
    try:
        for config, _ in saved:
            config._experts_implementation_internal = implementation
        yield
    finally:
        for config, value in saved:
            config._experts_implementation_internal = value


_OURS = {GROUPED_EXPERTS: grouped_experts_forward, BATCHED_EXPERTS: batched_experts_forward}


def _configs_of(model: torch.nn.Module) -> Iterator:
    """The transformers configs ``model`` and its modules hold that name an
    experts implementation (none for what is not a module)."""
    for module in model.modules() if isinstance(model, torch.nn.Module) else ():
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "_experts_implementation_internal"):
            yield config
        for name in getattr(config, "sub_configs", None) or ():
            sub = getattr(config, name, None)
            if sub is not None and hasattr(sub, "_experts_implementation_internal"):
                yield sub
