"""The simulated device's backend, ahead of time: partitioner and preprocess
(:mod:`et_copy.backends.simulated` gives its names; this module imports executorch's exporter).

The stand-in for upstream's CUDA backend (``backends/aoti``'s
``AotiPartitioner``, specialised by ``CudaPartitioner``), shaped like it so
that moving to a GPU means swapping the partitioner:

- :class:`SimulatedDevicePartitioner` claims the whole graph as one
  partition, pulls the weights and the mutable state into it, and sets
  ``CompileSpec("target_device", b"cuda:N")``; executorch's
  ``PropagateDevicePass`` then puts ``_h2d_copy`` before the delegate and
  ``_d2h_copy`` after it.
- :class:`SimulatedDeviceBackend` turns each partition into a *nested*
  ExecuTorch program that the C++ backend of the same name
  (``et_copy::SimulatedDeviceBackend``) runs over device memory. Its
  constants are external, looked up by name; their bytes go to the outer
  program's named data under a content key, so prefill and decode store and
  upload them once. Its state lives in a *state arena*, one layout for every
  method of the program, which the runtime gives each session.

The processed bytes are a *delegate record* (``RECORD_VERSION``), read by
``runtime/src/delegate_record.cpp``; docs/design.md specifies it. Its header
(device, weights, state, arena) is the same for every et-copy device backend
(:func:`record_header`); the payload says whose it is (``payload\tprogram``
here, ``payload\taoti`` for :mod:`et_copy.backends.aoti`). :class:`DevicePartitioner`
is the partitioning both backends share.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.program._program import EdgeProgramManager
from executorch.exir.schema import Tensor as SchemaTensor
from executorch.exir.schema import TensorDataLocation

from ..partitioner import DevicePartitioner
from ..preprocess import DevicePreprocess
from ..record import delegate_record, device_of, record_header
from ..state import StateSlot, mutable_state
from . import BACKEND_ID, PAYLOAD_PROGRAM
from ._quantized_portable import dequantize_with_portable_ops, refuse_packed_kernels

__all__ = ["SimulatedDeviceBackend", "SimulatedDevicePartitioner"]


class SimulatedDevicePartitioner(DevicePartitioner):
    """Partitions a graph for the simulated device's backend: one delegate
    with the whole graph, its weights and its mutable buffers, on ``device``
    ("cuda" or "cuda:N")."""

    backend_id = BACKEND_ID

    def __init__(self, device: str = "cuda:0") -> None:
        super().__init__(device)


class _ArenaPlanningPass(MemoryPlanningPass):
    """Plans a nested program's buffers as MemoryPlanningPass does, except
    the state: every mutable buffer goes to its offset in ``layout`` in one
    extra buffer at the end (the arena), whose size is ``arena_nbytes``."""

    alloc_mutable_buffers: bool  # MemoryPlanningPass's option; run() switches it per graph

    def __init__(self, layout: dict[str, StateSlot], arena_nbytes: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.layout, self.arena_nbytes = layout, arena_nbytes
        self.arena_index: int | None = None  # MethodMeta's planned-buffer index of the arena

    def run(self, graph_module: torch.fx.GraphModule, graph_signature=None):
        state = {}
        if graph_signature is not None:
            mutated = set(graph_signature.buffers_to_mutate.values())
            state = {p: b for p, b in graph_signature.inputs_to_buffers.items() if b in mutated}
        kept, self.alloc_mutable_buffers = self.alloc_mutable_buffers, not state
        try:
            result = super().run(graph_module, graph_signature)
        finally:
            self.alloc_mutable_buffers = kept
        if state:
            sizes = graph_module.meta["non_const_buffer_sizes"]
            mem_id = len(sizes)
            sizes.append(self.arena_nbytes)
            for node in graph_module.graph.nodes:
                if node.op == "placeholder" and node.name in state:
                    spec = node.meta["spec"]
                    spec.mem_id, spec.mem_offset = mem_id, self.layout[state[node.name]].offset
            # ExecuTorch's memory id 0 is reserved: MethodMeta's buffer i is memory id i + 1.
            self.arena_index = mem_id - 1
        return result


def _external_constants(nested) -> list[str]:
    """The FQNs the nested program asks its NamedDataMap for, in value order."""
    names = []
    for value in nested._emitter_output.program.execution_plan[0].values:
        t = value.val
        info = getattr(t, "extra_tensor_info", None) if isinstance(t, SchemaTensor) else None
        if info is not None and info.location == TensorDataLocation.EXTERNAL and info.fully_qualified_name:
            if info.fully_qualified_name not in names:
                names.append(info.fully_qualified_name)
    return names


def _external_tag(node: torch.fx.Node) -> str | None:
    """Where a constant placeholder's bytes go: the named data (the device's
    weights), except a constant that is viewed. executorch 1.5.1 turns a
    view of a constant into a view that the emitter cannot place when the
    constant is external (an assertion on its constant_tag; seen: GPT-OSS's
    attention sinks); such a constant stays in the nested program, like the
    lifted scalars."""
    from executorch.exir import memory

    if any(u.target is memory.view for u in node.users):
        return None
    return "_default_external_constant"


def _preprocess(edge_program, compile_specs, layout: dict[str, StateSlot], arena_nbytes: int) -> PreprocessResult:
    op = f"et_copy.{BACKEND_ID}.preprocess"
    device_type, device_index = device_of(compile_specs, BACKEND_ID)
    state = mutable_state(edge_program)
    # Quantized weights: ExecuTorch's portable kernels dequantize them (the reference, not the fast path).
    refuse_packed_kernels(edge_program, op, "simulated")
    dequantize_with_portable_ops(edge_program)
    planner = _ArenaPlanningPass(layout, arena_nbytes, alloc_graph_input=False, alloc_graph_output=False)
    with warnings.catch_warnings():
        # The emitter's warning that mutable buffers start undefined: the backend writes their start.
        warnings.filterwarnings("ignore", "Mutation on a buffer in the model is detected", UserWarning)
        nested = EdgeProgramManager(
            edge_programs={"forward": edge_program}, compile_config=EdgeCompileConfig(_check_ir_validity=False)
        ).to_executorch(
            ExecutorchBackendConfig(
                external_constants=_external_tag,  # weights by name, served from device memory
                memory_planning_pass=planner,
                run_reinplace_pass=bool(state),  # cache writes into the state, not a copy of it
                emit_mutable_buffer_names=True,
            )
        )
    final = nested.exported_program()
    values = {**final.state_dict, **final.constants}
    weights = {}
    for fqn in _external_constants(nested):
        if fqn not in values:
            raise RuntimeError(f"{op}: the nested program reads constant '{fqn}', which the partition does not hold")
        weights[fqn] = values[fqn]
    store = NamedDataStore()
    arena = (str(planner.arena_index), arena_nbytes)
    header = record_header(store, (device_type, device_index), weights, state, layout, arena)
    record = delegate_record(header, PAYLOAD_PROGRAM, bytes(nested.buffer))
    return PreprocessResult(processed_bytes=record, data_store_output=store.get_named_data_store_output())


class SimulatedDeviceBackend(DevicePreprocess, BackendDetails):
    """Preprocess for ``et_copy::SimulatedDeviceBackend``: each partition
    becomes a delegate record holding a nested program (see the module
    docstring), over one state arena for every method (DevicePreprocess)."""

    backend_id = BACKEND_ID
    lower_partition = staticmethod(_preprocess)
