"""The copy-only route: no delegate, the copies and what the module computes
between them planned on the device (:class:`DevicePlanningPass`); a module
with state is refused (state needs a device backend)."""

from __future__ import annotations

import functools
from typing import Any, Sequence

import torch
from executorch.exir import ExecutorchBackendConfig, ExecutorchProgramManager

from ._boundary import DeviceBoundary, boundary_dynamic_shapes
from ._device_planning import DevicePlanningPass, mutated_buffers, state_refusal
from ._errors import ExportArgumentError, run_stage
from ._methods import MethodInputs, as_forward, export_method, to_edge_program
from ._named_data import write_program_record


def export_copy_only(
    module: torch.nn.Module,
    methods: dict[str, MethodInputs],
    *,
    device: str,
    insert_copies: bool,
    alloc_graph_input: bool,
    alloc_graph_output: bool,
    strict: bool,
    resident_inputs: Sequence[int],
    resident_outputs: Sequence[int],
    constant_methods: dict[str, Any] | None,
    op: str,
) -> ExecutorchProgramManager:
    """No delegate: the copies (DeviceBoundary's, or the module's own calls
    of the et_copy ops) and whatever the module computes between them, on
    memory planned on the device. Only a program whose device side is the
    copies alone runs on a GPU (et_copy.runtime refuses the rest at load).
    A module that mutates buffers is refused here (ExportArgumentError naming
    them): its state would be read and written by the host's kernels."""
    planner = DevicePlanningPass(
        device,
        resident_inputs=resident_inputs,
        alloc_graph_input=alloc_graph_input,
        alloc_graph_output=alloc_graph_output,
    )
    wrapped = DeviceBoundary(module, resident_inputs, resident_outputs) if insert_copies else module
    exported = {}
    for name, inputs in methods.items():
        with as_forward(module, inputs.entry):
            shapes = inputs.dynamic_shapes
            if insert_copies:
                shapes = boundary_dynamic_shapes(module, shapes, len(inputs.args), list(inputs.kwargs))
            exported[name] = run_stage(
                op,
                name,
                "export",
                strict,
                functools.partial(export_method, wrapped, inputs, shapes, strict, entry="forward"),
            )
    edge = run_stage(op, None, "to_edge", strict, lambda: to_edge_program(exported, constant_methods))
    for name in edge.methods:
        # torch.export keeps a buffer's in-place update as an op; to_edge lifts it into buffers_to_mutate.
        state = mutated_buffers(edge.exported_program(name).graph_signature)
        if state:
            argument = "insert_copies" if not insert_copies else "module"
            raise ExportArgumentError(op, argument, state_refusal(state), method=name, stage="to_edge")
    write_program_record(edge, state_in_delegates=False)  # no delegate, no state: every buffer is the session's
    config = ExecutorchBackendConfig(memory_planning_pass=planner, enable_non_cpu_memory_planning=True)
    return run_stage(op, None, "to_executorch", strict, lambda: edge.to_executorch(config))
