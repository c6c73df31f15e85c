"""MoE experts in 8 or 4 bits (issue 53; docs/design.md, "Quantized weights
and experts").

torchao quantizes ``nn.Linear`` weights; an experts module's weights are 3-d
parameters (``gate_up_proj`` [E, 2I, H], ``down_proj`` [E, H, I]) that its
configs never reach. :func:`quantize_experts` stores them as upstream's
Qwen 3.5 MoE export does: int4 in groups (two values a byte, K's first half
with its second, as the dense int4 weights) or int8 one scale a row, with
torchao's own rounding. The module keeps its class's behaviour: reading
``gate_up_proj`` gives the dequantized weight, so transformers' own experts
code (the eager reference) runs unchanged.

For export, :func:`quantized_experts_forward` reads the stored bytes:

- one token (a decode step): each chosen expert's bytes gathered into a
  reduction over K (:func:`reduced`), which Inductor compiles to one kernel
  that reads each chosen expert's bytes once and writes only the output;
- a prompt on the compiled backend: the token-choice pairs sorted by expert
  (as the float grouped forward sorts them), then the experts dequantized
  :data:`EXPERT_CHUNKS` slices at a time, each slice multiplied by
  ``_grouped_mm`` over the rows routed to it (:func:`chunked_grouped`): each
  expert read once for all its rows, and no float copy of the whole layer;
- elsewhere (the simulated backend, whose portable kernels have no
  ``_grouped_mm``): the chosen experts' bytes gathered, then dequantized and
  multiplied (:func:`gathered`), as ``batched_mm`` reads float experts.
"""

from __future__ import annotations

from typing import Any

import torch

from ..backends.aoti._quantized import nibbles, weight_parts

EXPERT_CHUNKS = 8  # a prompt's experts dequantized in at most this many slices a matmul: each is a kernel to compile
_STORED = "_stored"  # buffer suffixes: the int8 values, or int4 two to a byte (uint8)
_SCALE = "_scale"  # float32 [E * N * groups], flat: a vector of the weight's, not a matrix (as the dense scales)


def is_quantized_experts(module: Any) -> bool:
    """Whether ``module`` is an experts module :func:`quantize_experts` stored in 8 or 4 bits."""
    return bool(getattr(module, "_et_copy_quantized", None))


def experts_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """(FQN, module) of each transformers experts module of ``model`` (a class
    ``use_experts_implementation`` decorates: it has ``has_gate``) whose
    weights are 3-d tensors, quantized or not."""
    return [(name, module) for name, module in model.named_modules() if is_experts(module)]


def is_experts(module: Any) -> bool:
    """Whether ``module`` is one of :func:`experts_modules`."""
    if not hasattr(module, "has_gate") or not hasattr(module, "down_proj"):
        return False
    return is_quantized_experts(module) or getattr(module, "down_proj").dim() == 3


def _projections(module: Any) -> tuple[str, str]:
    return ("gate_up_proj" if module.has_gate else "up_proj"), "down_proj"


def quantize_experts(module: torch.nn.Module, bits: int, group_size: int) -> list[str]:
    """Stores ``module``'s expert weights in ``bits`` (8: int8, one scale a
    row; 4: int4 in groups of ``group_size``, where the input width is a
    multiple of twice it, else int8 a row), symmetric, with torchao's
    rounding; returns the parameters' names. The module's forward reads
    them dequantized (transformers' own code), an export reads them stored."""
    from torchao.quantization.quantize_.workflows.intx.intx_unpacked_to_int8_tensor import (
        IntxUnpackedToInt8Tensor,
    )

    m: Any = module
    names = []
    for name in _projections(m):
        weight = getattr(m, name).detach()
        w = weight.transpose(1, 2) if m.is_transposed else weight  # stored [E, N out, K in]
        experts, n, k = w.shape
        group = group_size if bits == 4 and k % (2 * group_size) == 0 else k
        target = getattr(torch, "int4") if group < k else torch.int8
        q = IntxUnpackedToInt8Tensor.from_hp(w.reshape(experts * n, k).float(), [1, group], target_dtype=target)
        store_experts(m, name, q.qdata.reshape(experts, n, k), q.scale.reshape(experts, n, k // group), weight.dtype)
        names.append(name)
    return names


def store_experts(
    module: torch.nn.Module, name: str, values: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype
) -> None:
    """Replaces ``module``'s expert weight ``name`` (a float parameter, or
    nothing yet) by ``values`` (int8 [E, N out, K in], -8..7 for int4) and
    ``scale`` ([E, N, groups of K]): two values a byte where they fit in 4
    bits and K's halves split at a group, else a byte each. The module then
    reads the weight back dequantized in ``dtype`` (in its own orientation)."""
    m: Any = module
    groups = scale.shape[-1]
    int4 = int(values.min()) >= -8 and int(values.max()) <= 7 and values.shape[-1] % 2 == 0 and groups % 2 == 0
    if name in m._parameters:
        delattr(m, name)
    m.register_buffer(name + _STORED, nibbles(values) if int4 else values.to(torch.int8).contiguous())
    m.register_buffer(name + _SCALE, scale.reshape(-1).float().contiguous())
    if not is_quantized_experts(m):
        m._et_copy_quantized = {}
    m._et_copy_quantized[name] = dtype
    m.__class__ = _dequantizing_class(type(m))


_CLASSES: dict[type, type] = {}


def _dequantizing_class(cls: type) -> type:
    """``cls`` with its expert weights read back dequantized (one subclass a
    class, so deepcopy and isinstance see the same class every time)."""
    if cls in _CLASSES.values():
        return cls
    if cls not in _CLASSES:

        def weight(name: str) -> property:
            def get(self: Any) -> torch.Tensor:
                w = dequantized(*_stored(self, name))
                w = w.to(self._et_copy_quantized[name])
                return w.transpose(1, 2) if self.is_transposed else w

            return property(get, doc=f"the {name} weight, dequantized from its stored bytes")

        attrs = {name: weight(name) for name in ("gate_up_proj", "up_proj", "down_proj")}
        _CLASSES[cls] = type(f"Quantized{cls.__name__}", (cls,), attrs)
    return _CLASSES[cls]


def _stored(module: Any, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(stored bytes [E, N, K or K/2], scale [E, N, groups]) of one of ``module``'s weights."""
    stored, scale = getattr(module, name + _STORED), getattr(module, name + _SCALE)
    return stored, scale.reshape(stored.shape[0], stored.shape[1], -1)


def dequantized(stored: torch.Tensor, scale: torch.Tensor, *, portable: bool = False) -> torch.Tensor:
    """The float32 weight ``[..., N, K]`` the stored bytes and scales hold
    (``portable``: in ExecuTorch's portable ops, as :func:`weight_parts`)."""
    first, second = weight_parts(stored, scale, None, portable=portable)
    return first if second is None else torch.cat([first, second], dim=-1)


def reduced(rows: torch.Tensor, stored: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``rows[p] @ w[p].T`` [P, N] for each pair's gathered expert (``stored``
    [P, N, K or K/2], ``scale`` [P, N, groups]), written as a reduction over
    K that Inductor fuses with the gather: each chosen expert's bytes read
    once, no float copy. One scale a row multiplies the row's sum."""
    x = rows.to(torch.float32).unsqueeze(1)
    per_row = scale.shape[-1] == 1
    first, second = weight_parts(stored, None if per_row else scale, None)
    if second is None:
        out = (x * first).sum(-1)
    else:  # int4: K's halves meet their nibbles
        width = first.shape[-1]
        out = (x[..., :width] * first).sum(-1) + (x[..., width:] * second).sum(-1)
    return (out * scale[..., 0] if per_row else out).to(rows.dtype)


def gathered(rows: torch.Tensor, stored: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``rows[p] @ w[p].T`` with each pair's expert gathered, dequantized and
    multiplied by ``bmm``: portable ops only, for the simulated backend."""
    w = dequantized(stored, scale, portable=True).to(rows.dtype)
    return torch.bmm(w, rows.unsqueeze(-1)).squeeze(-1)


def chunked_grouped(
    rows: torch.Tensor, stored: torch.Tensor, scale: torch.Tensor, offsets: torch.Tensor
) -> torch.Tensor:
    """``rows @ w[e].T`` for rows sorted by expert (``offsets``: the
    cumulative rows per expert), the experts dequantized a slice at a time.
    A slice's rows are rotated to the top (an index, the rows' own size),
    multiplied by ``_grouped_mm`` over the slice's experts alone, and rotated
    back into place; each slice's float weight is freed before the next."""
    experts = stored.shape[0]
    total = rows.shape[0]
    position = torch.arange(total, device=rows.device)
    starts = torch.cat([offsets.new_zeros(1), offsets])
    per_chunk = -(-experts // EXPERT_CHUNKS)
    out = None
    for first in range(0, experts, per_chunk):
        last = min(first + per_chunk, experts)
        start, end = starts[first], starts[last]
        w = dequantized(stored[first:last], scale[first:last]).to(rows.dtype)
        top = rows.index_select(0, (position + start) % total)
        part = torch._grouped_mm(top, w.transpose(-2, -1), offs=offsets[first:last] - start)
        back = part.index_select(0, (position - start) % total)
        mine = ((position >= start) & (position < end)).unsqueeze(-1)
        piece = torch.where(mine, back, torch.zeros_like(back))
        out = piece if out is None else out + piece
    assert out is not None
    return out


def quantized_experts_forward(
    self: Any,
    hidden_states: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
    *,
    grouped: bool,
) -> torch.Tensor:
    """A quantized experts module's forward for export (the module docstring
    says which path a call takes): ``grouped`` for the compiled backend.
    Same routing, biases, gate and sum over the choices as transformers'
    ``batched_mm`` and ``grouped_mm``."""
    num_tokens, hidden_dim = hidden_states.shape
    num_top_k = top_k_index.size(-1)
    expert_ids = top_k_index.reshape(-1)
    up_name, down_name = _projections(self)
    up_bias = (self.gate_up_proj_bias if self.has_gate else self.up_proj_bias) if self.has_bias else None
    down_bias = self.down_proj_bias if self.has_bias else None

    if grouped and num_tokens > 1:
        ids, order = torch.sort(expert_ids, stable=True)
        rows = hidden_states[order // num_top_k]
        experts = torch.arange(self.num_experts, device=expert_ids.device)
        counts = (expert_ids.unsqueeze(-1) == experts).sum(dim=0, dtype=torch.int32)
        offsets = torch.cumsum(counts, 0, dtype=torch.int32)

        def linear(x: torch.Tensor, name: str) -> torch.Tensor:
            return chunked_grouped(x, *_stored(self, name), offsets)

    else:
        ids, order = expert_ids, None
        rows = hidden_states.unsqueeze(1).expand(num_tokens, num_top_k, hidden_dim).reshape(-1, hidden_dim)
        multiply = reduced if grouped else gathered

        def linear(x: torch.Tensor, name: str) -> torch.Tensor:
            q, s = _stored(self, name)
            return multiply(x, q[ids], s[ids])

    out = linear(rows, up_name)
    if up_bias is not None:
        out = out + up_bias[ids]
    out = self._apply_gate(out) if self.has_gate else self.act_fn(out)
    out = linear(out, down_name)
    if down_bias is not None:
        out = out + down_bias[ids]
    if self.has_post_expert_norm:
        out = self.post_expert_norm(out)
    weights = top_k_weights.reshape(-1)
    out = out * (weights if order is None else weights[order]).unsqueeze(-1)
    if order is not None:  # back in (token, choice) order
        out = torch.zeros_like(out).index_copy(0, order, out)
    return out.view(num_tokens, num_top_k, hidden_dim).sum(dim=1).to(hidden_states.dtype)
