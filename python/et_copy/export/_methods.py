"""A program's methods, from the module to the edge: :class:`MethodInputs`
(one method's example inputs and entry), torch.export of each method, and
et-copy's to_edge."""

from __future__ import annotations

import contextlib
import ctypes
import gc
from dataclasses import dataclass, field
from typing import Any

import torch
from executorch.exir import EdgeCompileConfig, to_edge

from .. import aot
from .._exir_fixes import lifted_constants_in_signature_order


@dataclass(frozen=True)
class MethodInputs:
    """Example inputs of one method: positional ``args``, keyword
    ``kwargs``, and torch.export's ``dynamic_shapes`` for them (a tuple in
    argument order, or a dict by the module's parameter names)."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    dynamic_shapes: Any = None
    #: The module's method that the program's method runs (``forward`` by
    #: default). Every entry of one module shares its buffers by name, so an
    #: LLM's ``decode_next()`` reads the state ``prefill`` wrote.
    entry: str = "forward"


def to_edge_program(exported: dict, constant_methods: dict[str, Any] | None):
    """et-copy's to_edge of every method: the et_copy ops kept (preserve_ops), lifted constants in order."""
    with lifted_constants_in_signature_order():
        return to_edge(exported, constant_methods=constant_methods, compile_config=_edge_config(exported))


def _edge_config(exported: dict) -> EdgeCompileConfig:
    # The edge dialect's argument validator re-runs every op on fake tensors,
    # and an op whose traced arguments hold a size as a plain int (transformers'
    # batched_mm experts: tokens x top-k) then pins a dynamic prompt length to
    # its example. Dynamic programs skip it; the runtime checks every kernel's arguments.
    dynamic = any(ep.range_constraints for ep in exported.values())
    # Non-core ATen ops AOTInductor calls through its C shims: ATen's weight-only kernels (torchao's CPU int4
    # calls one; the compiled backend reads those weights back as its own) and _grouped_mm (et_copy.llm's MoE
    # experts for the compiled backend). The simulated backend's portable kernels lack them: it never gets
    # _grouped_mm, and it refuses the weight-only kernels by name.
    allowed = [
        torch.ops.aten._weight_int4pack_mm_for_cpu.default,
        torch.ops.aten._weight_int8pack_mm.default,
        torch.ops.aten._grouped_mm.default,
    ]
    return EdgeCompileConfig(
        preserve_ops=aot.preserve_ops(), _check_ir_validity=not dynamic, _core_aten_ops_exception_list=allowed
    )


def export_method(
    module: torch.nn.Module, inputs: MethodInputs, dynamic_shapes: Any, strict: bool, entry: str | None = None
):
    """torch.export of one method: ``module``'s ``entry`` (default: the method's own) on its example inputs."""
    with as_forward(module, inputs.entry if entry is None else entry):
        return torch.export.export(
            module, tuple(inputs.args), dict(inputs.kwargs), dynamic_shapes=dynamic_shapes, strict=strict
        )


def give_back_freed_memory() -> None:
    """Returns the memory Python and the C heap have freed to the system
    (glibc's ``malloc_trim``; elsewhere, the garbage collection alone). A
    strict torch.export of a large model allocates and frees about twice
    its weights, from several threads' heaps; glibc keeps what they free,
    and the next method's export then grows the RSS instead of reusing it
    (measured on a 322 MiB model: export_llm's peak 2.8x the weights without
    this, 2.4x with it)."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


@contextlib.contextmanager
def as_forward(module: torch.nn.Module, entry: str):
    """While exporting, ``module``'s ``forward`` is its method ``entry``
    (torch.export traces ``forward``; the buffers keep their names)."""
    if entry == "forward":
        yield
        return
    module.forward = getattr(module, entry)  # export_device_methods checked it is a method
    try:
        yield
    finally:
        del module.forward
