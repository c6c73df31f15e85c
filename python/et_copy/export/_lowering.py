"""The one lowering path: every route that computes in a device backend
lowers its methods here (docs/design.md, "Device programs compute in a
device backend"), given the :class:`BackendChoice` that
:func:`resolve_backend_choice` resolved once from the route's arguments.

The backend's partitioner puts the ``target_device`` compile spec on its
partitions, so executorch's PropagateDevicePass inserts ``_h2d_copy``
before them and ``_d2h_copy`` after; :class:`BoundaryPlanningPass` then
tidies those copies and plans the rest. Every program gets the program
record (:func:`~._named_data.write_program_record`), and every failure is
an :class:`ExportError`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from executorch.exir import ExecutorchBackendConfig, ExecutorchProgramManager, to_edge_transform_and_lower
from executorch.exir.backend.partitioner import Partitioner
from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig

from .._device import parse_device
from .._exir_fixes import lifted_constants_in_signature_order
from ..backends import Backend, resolve_backend
from ..backends.partitioner import DevicePartitioner
from ._boundary_planning import BoundaryPlanningPass
from ._errors import ExportArgumentError, check_argument, run_stage
from ._graph_checks import check_resident_outputs, has_delegate, refuse_input_mutation, refuse_own_copies
from ._methods import MethodInputs, export_method, give_back_freed_memory, to_edge_program
from ._named_data import move_weights_to_data_file, write_program_record
from ._target_device import TargetDevicePartitioner, with_target_device


@dataclass(frozen=True)
class BackendChoice:
    """The device backend a route lowers with, resolved once from the
    route's ``backend=``, ``partitioner=`` and ``device=`` by
    :func:`resolve_backend_choice`. (Not a device backend: that is the C++
    runtime's seam, ``DeviceBackend``.)"""

    partitioner: Partitioner  #: tags every partition with ``device`` (``target_device``)
    name: str  #: the class of the partitioner the caller chose, by word or by object, for messages
    device: str  #: the device the program computes on, parsed ("cuda:N")
    backend: Backend | None  #: the table's entry the word named (None: a partitioner object was given)
    given: bool  #: the caller named a backend or a partitioner (False: the default backend)


def resolve_backend_choice(
    op: str, *, backend: object, partitioner: Partitioner | None, device: object
) -> BackendChoice:
    """The one resolution of a route's backend choice: the word, the
    partitioner and the device, checked together, in this order:

    - ``backend`` beside ``partitioner``: refused (argument ``partitioner``);
    - ``backend``, a word of :data:`et_copy.backends.BACKENDS` (None: the
      default, :data:`~et_copy.backends.DEFAULT_BACKEND`; argument ``backend``);
    - ``device``, "cuda" or "cuda:N" (argument ``device``);
    - the partitioner: the word's for ``device``; or ``partitioner`` as it
      is when it is one of et-copy's (an
      :class:`et_copy.backends.partitioner.DevicePartitioner`, or
      :func:`with_target_device`'s wrapper), which must target ``device``
      (argument ``partitioner``); or any other (upstream's
      ``CudaPartitioner``, XNNPACK) annotated as ``device`` with
      :func:`with_target_device`, which is only right for a backend that
      runs on the device (et_copy.runtime refuses at load a CPU backend
      handed device memory).

    Every refusal is an ExportArgumentError naming ``op`` and the argument."""
    if partitioner is not None and backend is not None:
        raise ExportArgumentError(op, "partitioner", f"pass backend={backend!r} or a partitioner, not both")
    entry = None if partitioner is not None else check_argument(op, "backend", lambda: resolve_backend(backend, op=op))
    target = str(check_argument(op, "device", lambda: parse_device(device, op=op)))
    given = backend is not None or partitioner is not None
    if partitioner is None:
        assert entry is not None  # resolve_backend gives one, or raises
        chosen = entry.partitioner(target)
        return BackendChoice(chosen, type(chosen).__name__, target, entry, given)
    name = type(partitioner).__name__
    if isinstance(partitioner, (DevicePartitioner, TargetDevicePartitioner)):
        if partitioner.device != target:
            raise ExportArgumentError(
                op,
                "partitioner",
                f"the partitioner ({name}) targets {partitioner.device}, but device is {target!r}; "
                "pass the same device to both",
            )
        return BackendChoice(partitioner, name, target, None, given)
    return BackendChoice(with_target_device(partitioner, target), name, target, None, given)


def lower(
    module: torch.nn.Module,
    methods: dict[str, MethodInputs],
    chosen: BackendChoice,
    *,
    op: str,
    strict: bool,
    alloc_graph_input: bool,
    alloc_graph_output: bool,
    resident_inputs: Sequence[int] = (),
    resident_outputs: Sequence[int] = (),
    skip_h2d_for_method_inputs: bool = False,
    skip_d2h_for_method_outputs: bool = False,
    constant_methods: dict[str, Any] | None = None,
    decompositions: dict[Any, Callable[..., Any]] | None = None,
    transform_and_lower: bool = False,
    external_weights: bool = False,
) -> ExecutorchProgramManager | None:
    """Exports each method of ``module``, lowers it with ``chosen`` and plans
    it (:class:`BoundaryPlanningPass`; ``skip_*`` are PropagateDevicePass's
    flags). None when the partitioner delegated nothing (a module with
    nothing to compute): the caller decides what that means.

    How the graph reaches the edge is the route's: et-copy's
    ``to_edge`` (et_copy ops kept, :func:`~._methods.to_edge_program`) then
    ``to_backend``, or with ``transform_and_lower`` upstream's
    ``to_edge_transform_and_lower``, which keeps whole the ops the
    partitioner asks for (``ops_to_not_decompose``: XNNPACK's) and is what
    ``lower_to_device`` has always used. ``external_weights``: the device
    backends' weights go to the program's .ptd
    (:func:`~._named_data.move_weights_to_data_file`)."""
    exported = {}
    for name, inputs in methods.items():
        exported[name] = run_stage(
            op, name, "export", strict, functools.partial(export_method, module, inputs, inputs.dynamic_shapes, strict)
        )
        give_back_freed_memory()
    refuse_own_copies(exported, op)
    if decompositions:
        exported = {
            name: run_stage(
                op, name, "decompositions", strict, functools.partial(ep.run_decompositions, decompositions)
            )
            for name, ep in exported.items()
        }
    if transform_and_lower:
        edge = run_stage(
            op, None, "lowering", strict, lambda: _transform_and_lower(exported, chosen.partitioner, constant_methods)
        )
        refuse_input_mutation({name: edge.exported_program(name) for name in edge.methods}, op, "lowering")
    else:
        edge = run_stage(op, None, "to_edge", strict, lambda: to_edge_program(exported, constant_methods))
        # torch.export keeps an input's in-place update as an op; to_edge turns it into an output.
        refuse_input_mutation({name: edge.exported_program(name) for name in edge.methods}, op, "to_edge")
        edge = run_stage(op, None, "lowering", strict, lambda: edge.to_backend(chosen.partitioner))
    if not has_delegate(edge):
        return None
    check_resident_outputs(edge, resident_outputs, op)
    # The state is in the delegates when the partitioner took every mutable buffer (ours always do).
    outer_state = any(edge.exported_program(n).graph_signature.buffers_to_mutate for n in edge.methods)
    write_program_record(edge, state_in_delegates=not outer_state)
    if external_weights:
        move_weights_to_data_file(edge)
    config = ExecutorchBackendConfig(
        memory_planning_pass=BoundaryPlanningPass(
            alloc_graph_input=alloc_graph_input,
            alloc_graph_output=alloc_graph_output,
            resident_inputs=resident_inputs,
            resident_outputs=resident_outputs,
        ),
        enable_non_cpu_memory_planning=True,
        propagate_device_config=PropagateDeviceConfig(
            skip_h2d_for_method_inputs=skip_h2d_for_method_inputs,
            skip_d2h_for_method_outputs=skip_d2h_for_method_outputs,
        ),
    )
    # Inference programs: exir's passes replay a mutated input's in-place copy,
    # which autograd refuses on a leaf that requires grad.
    with torch.no_grad():
        return run_stage(op, None, "to_executorch", strict, lambda: edge.to_executorch(config))


def _transform_and_lower(exported: dict, partitioner: Partitioner, constant_methods: dict[str, Any] | None):
    with lifted_constants_in_signature_order():
        return to_edge_transform_and_lower(exported, partitioner=[partitioner], constant_methods=constant_methods)
