"""Exporting a causal LM with its state on the device."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .. import _C
from ..export import MethodInputs
from ..export._lowering import BackendChoice, resolve_backend_choice
from ..export._routes import export_methods
from ._check import check_wrapper
from ._conv import DEPTHWISE_CONV1D_AS_SHIFTS
from ._experts import experts_for_export, experts_implementation_for
from ._quantize import quantize as quantize_model
from ._state import DEFAULT_MAX_TOP_K, HostStateStep, StatefulCausalLM, static_prefill_chunks

if TYPE_CHECKING:
    from executorch.exir.backend.partitioner import Partitioner
    from transformers import PreTrainedModel

# The method names, owned by the core (et_copy/llm_methods.h) so the C++ runners read the same.
PREFILL, DECODE = _C.LLM_METHODS["prefill"], _C.LLM_METHODS["decode"]
DECODE_NEXT = _C.LLM_METHODS["decode_next"]  # pick="device": decode the last pick, no input
SET_SAMPLING = _C.LLM_METHODS["set_sampling"]  # pick="device": temperature, top_k, seed for the picks that follow
MAX_SEQ_LEN = _C.LLM_METHODS["max_seq_len"]  # a constant method, named as executorch's LLM runner reads it
MAX_PROMPT_LEN = _C.LLM_METHODS["max_prompt_len"]  # the prefill's bound (a dynamic input's metadata: its example)
MAX_TOP_K = _C.LLM_METHODS["max_top_k"]  # pick="device": the largest top_k set_sampling keeps


def export_llm(
    model: PreTrainedModel,
    *,
    max_seq_len: int = 64,
    max_prompt_len: int | None = None,
    device: str = "cuda:0",
    pick: str = "host",
    max_top_k: int = DEFAULT_MAX_TOP_K,
    state_on_device: bool = True,
    strict: bool = True,
    backend: str | None = None,
    partitioner: Partitioner | None = None,
    depthwise_conv_as_shifts: bool = False,
    external_weights: bool = False,
    quantize: str | None = None,
):
    """Exports ``model`` (a transformers causal LM, :func:`et_copy.llm.tiny_model`)
    as a device program with two methods that share one state:

    - ``prefill(input_ids [1, T], cache_position [T])``, T from 2 to
      ``max_prompt_len`` (default ``max_seq_len // 2``), a prompt in one
      execution;
    - ``decode(input_ids [1, 1], cache_position [1])``, one token.

    Both return the last position's logits ``[1, vocab]`` float32, or with
    ``pick="device"`` the token picked from them on the device ``[1]``
    int64 (8 bytes leave the device instead of the logits). The KV caches
    and linear-attention states are mutable buffers planned on ``device``
    and updated in place; only ids and positions go in, and logits (or the
    token) come out.

    ``pick="device"`` adds two methods, and the sampler's state:

    - ``decode_next()``: decodes the token the last execution picked, at
      the position after it, both read on the device: nothing goes in, the
      8-byte token comes out;
    - ``set_sampling(temperature [1] float32, top_k [1] int64, seed [1]
      int64)``: how the following picks are made (:func:`~et_copy.llm.pick_token`,
      Gumbel-max; a fresh or reset state is greedy), top_k at most
      ``max_top_k`` (the constant method ``get_max_top_k``).

    ``state_on_device=False`` builds the baseline a runtime without device
    state is left with (:class:`HostStateStep`): ``decode(input_ids,
    cache_position, *state) -> (logits, *new_state)``, the state held by the
    caller on the host and copied to the device and back every call. It has
    ``decode`` only: a prompt goes in one token at a time.

    ``strict`` is torch.export's: transformers' caches export strict only
    (torch 2.13 fails non-strict). ``backend`` ("simulated" or "aoti") or
    ``partitioner`` choose the device backend, as for
    :func:`~et_copy.export.export_device_methods`, checked with ``device``
    before anything else is done (an ExportArgumentError naming
    ``et_copy.llm.export_llm`` and the argument).
    ``depthwise_conv_as_shifts=True`` rewrites the depthwise convolutions
    (Qwen 3.5 MoE's and Qwen3-Next's linear-attention conv) as shifted
    multiply-adds, which upstream's CudaPartitioner (Triton templates only)
    can lower; the arithmetic is the same, summed in another order.
    ``external_weights=True`` writes the weights to a .ptd beside the .pte
    instead of into it (:func:`et_copy.export.save` writes both; load with
    ``DeviceLLM(pte, data_path=ptd)``), as for
    :func:`~et_copy.export.export_device_program`. Returns the
    ExecutorchProgramManager.

    ``quantize="int8"`` or ``"int4"`` exports a quantized copy of ``model``
    (:func:`et_copy.llm.quantize`: the linears and the lm_head in int8 per
    row or int4 in groups of 32, the embeddings in int8 per row; the
    caller's model is left as it was). A model quantized with torchao first
    exports as it is. Both backends read the weights in their stored form;
    on a CPU, bf16 is the fast quantized path (docs/llm.md).

    MoE experts are exported as the backend runs them best, whatever the
    model's own ``config._experts_implementation``, which is set for the
    check and the export only and restored after (the caller's model is
    left as it was): the compiled backend's prefill runs grouped matmuls
    over the expert weights where they lie (each expert read once for all
    its tokens), its decode reads the chosen experts in place; the
    simulated backend runs transformers' ``batched_mm``
    (:mod:`et_copy.llm._experts`).

    Before exporting, the wrapper is checked against the model
    (:func:`et_copy.llm._check.check_wrapper`): a few prefill and decode
    steps, eagerly, through the wrapper and through the model's own forward
    with its own cache. Raises :class:`UnsupportedModelError` (a
    ValueError) naming the architecture and the first layer at fault when
    their logits differ, or when the model has a cache layer kind with no
    static form.
    """
    op = "et_copy.llm.export_llm"
    choice = resolve_backend_choice(op, backend=backend, partitioner=partitioner, device=device)
    if quantize is not None:
        model = quantize_model(model, quantize)
    if max_prompt_len is None:
        max_prompt_len = max(2, max_seq_len // 2)
    if not 2 <= max_prompt_len <= max_seq_len:
        raise ValueError(
            f"et_copy.llm.export_llm: max_prompt_len must be in 2..max_seq_len ({max_seq_len}), got {max_prompt_len}"
        )
    # The experts' implementation for the backend, for the check and the export only (et_copy.llm._experts).
    with experts_for_export(model, experts_implementation_for(choice.partitioner)):
        return _export(
            op,
            model,
            choice,
            max_seq_len=max_seq_len,
            max_prompt_len=max_prompt_len,
            pick=pick,
            max_top_k=max_top_k,
            state_on_device=state_on_device,
            strict=strict,
            depthwise_conv_as_shifts=depthwise_conv_as_shifts,
            external_weights=external_weights,
        )


def _export(
    op: str,
    model: PreTrainedModel,
    choice: BackendChoice,
    *,
    max_seq_len: int,
    max_prompt_len: int,
    pick: str,
    max_top_k: int,
    state_on_device: bool,
    strict: bool,
    depthwise_conv_as_shifts: bool,
    external_weights: bool,
):
    """export_llm's work, its arguments checked, under the experts implementation of its backend."""
    wrapper = StatefulCausalLM(model, max_seq_len, pick=pick, max_top_k=max_top_k).eval()
    check_wrapper(wrapper, max_prompt_len)
    methods = {DECODE: MethodInputs((torch.tensor([[0]]), torch.tensor([0])))}
    # A depthwise conv (the linear-attention layers') as shifted multiply-adds: upstream's
    # Triton-only CUDA backend has no template for a grouped convolution (et_copy.llm._conv).
    decompositions = DEPTHWISE_CONV1D_AS_SHIFTS if depthwise_conv_as_shifts else None
    if not state_on_device:
        step = HostStateStep(wrapper).eval()
        methods = {DECODE: MethodInputs((torch.tensor([[0]]), torch.tensor([0]), *step.initial_state()))}
        return export_methods(
            op,
            step,
            methods,
            choice,
            strict=strict,
            constant_methods={MAX_SEQ_LEN: max_seq_len},
            decompositions=decompositions,
            external_weights=external_weights,
        )
    example = _example_length(max_prompt_len)
    dims = None  # a bound of 2 is one length: torch.export's Dim refuses min == max
    if max_prompt_len > 2:
        n = torch.export.Dim("prompt_len", min=2, max=max_prompt_len)
        dims = {"input_ids": {1: n}, "cache_position": {0: n}}
    methods = {
        PREFILL: MethodInputs((torch.zeros(1, example, dtype=torch.long), torch.arange(example)), dynamic_shapes=dims),
        **methods,
    }
    constants = {MAX_SEQ_LEN: max_seq_len, MAX_PROMPT_LEN: max_prompt_len}
    if pick == "device":
        methods[DECODE_NEXT] = MethodInputs((), entry="decode_next")  # the wrapper's Python method
        settings = (torch.tensor([0.0]), torch.tensor([0]), torch.tensor([0]))
        methods[SET_SAMPLING] = MethodInputs(settings, entry="set_sampling")
        constants[MAX_TOP_K] = wrapper.max_top_k
    with static_prefill_chunks(model, max_prompt_len):
        return export_methods(
            op,
            wrapper,
            methods,
            choice,
            strict=strict,
            constant_methods=constants,
            decompositions=decompositions,
            external_weights=external_weights,
        )


def _example_length(bound: int) -> int:
    """An example prompt length that no model dimension equals: to_edge
    re-traces with duck-sized shapes, so a length equal to, say, the number
    of KV heads would be specialised to it. The largest prime in 3..bound."""
    for n in range(bound, 2, -1):
        if all(n % d for d in range(2, int(n**0.5) + 1)):
            return n
    return 2
