"""The copy-only route: no delegate, the copies and what the module computes
between them planned on the device (:class:`DevicePlanningPass`)."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Sequence

import torch
from executorch.exir import ExecutorchBackendConfig, ExecutorchProgramManager

from ._boundary import DeviceBoundary, boundary_dynamic_shapes
from ._device_planning import DevicePlanningPass, state_placeholders
from ._errors import run_stage
from ._methods import MethodInputs, as_forward, export_method, to_edge_program
from ._named_data import keep_initial_state, write_program_record


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
    copies alone runs on a GPU (et_copy.runtime refuses the rest at load)."""
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
    keep_initial_state(edge)
    # No delegate holds state: what there is lies in DevicePlanningPass's arena, the last planned buffer.
    write_program_record(edge, state_in_delegates=False)
    with warnings.catch_warnings():
        # The emitter's warning that mutable buffers start undefined: et_copy.runtime's sessions set them.
        warnings.filterwarnings("ignore", "Mutation on a buffer in the model is detected", UserWarning)
        # ExecuTorch 1.5.1's reinplace pass computes wrong results when it turns an index_put on an
        # intermediate tensor in place (seen: an LLM step whose caches are method inputs); on the
        # state buffers it is right, and that is what it is for here.
        has_state = any(state_placeholders(edge.exported_program(n).graph_signature) for n in edge.methods)
        config = _backend_config(planner, reinplace=has_state)
        return run_stage(op, None, "to_executorch", strict, lambda: edge.to_executorch(config))


def _backend_config(planner: DevicePlanningPass, *, reinplace: bool) -> ExecutorchBackendConfig:
    return ExecutorchBackendConfig(
        memory_planning_pass=planner,
        enable_non_cpu_memory_planning=True,
        run_reinplace_pass=reinplace,  # cache writes (index_put) into the state, not a copy of it
        emit_mutable_buffer_names=True,  # the runtime finds each session's state by name
    )
