"""The export functions (docs/export.md says when to use which): each checks
its arguments, then lowers through the one path (:func:`~._lowering.lower`)
or, with nothing to delegate, exports the copies alone."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from executorch.exir import ExecutorchProgramManager
from executorch.exir.backend.partitioner import Partitioner

from .. import aot
from ._copy_only import export_copy_only
from ._errors import ExportArgumentError
from ._lowering import BackendChoice, lower, resolve_backend_choice
from ._methods import MethodInputs


def export_device_program(
    module: torch.nn.Module,
    example_inputs: Sequence[Any] = (),
    *,
    kwargs: dict | None = None,
    device: str = "cuda:0",
    backend: str | None = None,
    partitioner: Partitioner | None = None,
    dynamic_shapes: Any = None,
    insert_copies: bool = True,
    alloc_graph_input: bool = False,
    alloc_graph_output: bool | None = None,
    strict: bool = False,
    resident_inputs: Sequence[int] = (),
    resident_outputs: Sequence[int] = (),
    external_weights: bool = False,
) -> ExecutorchProgramManager:
    """Exports ``module`` to an ExecuTorch program that computes on ``device``.

    The compute runs in a device backend, as upstream's CUDA backend does
    (docs/design.md, "Device programs compute in a device backend"):
    ``backend`` names et-copy's device backend (:mod:`et_copy.backends`):
    ``"simulated"`` (:class:`~et_copy.backends.simulated.SimulatedDevicePartitioner`; None: this default) or
    ``"aoti"`` (:class:`~et_copy.backends.aoti.AotiDevicePartitioner`, AOTInductor
    code); ``partitioner`` takes another instead (upstream's
    ``CudaPartitioner``, or one of ours with other settings). It puts the whole
    graph, its weights and its mutable buffers in one delegate with a
    ``target_device`` compile spec, and executorch's PropagateDevicePass
    inserts ``_h2d_copy`` before it and ``_d2h_copy`` after it. The weights
    reach the device when the program loads; the state (caches and recurrent
    states updated in place) lives on the device, one per session, shared
    by every method.

    ``insert_copies=False`` is for a module that calls ``torch.ops.et_copy``
    itself: no delegate, the copies and what the module computes between
    them planned on the device (:class:`DevicePlanningPass`); et_copy.runtime
    loads such a program only when its device side is the copies alone, and
    a module with mutable buffers is refused (state needs a device backend
    to compute on it). A module with nothing to compute (it returns its
    inputs) exports that way too. ``device`` is "cuda" or "cuda:N". ``kwargs`` are keyword example
    inputs. ``dynamic_shapes`` is torch.export's (give every dynamic dim a
    max: the program is planned for the upper bound).
    ``alloc_graph_input=False`` (default) keeps graph inputs out of the
    planned buffers, so an input and an output never share memory;
    ``alloc_graph_output`` likewise for outputs (default: True, False when
    there are resident outputs).

    ``resident_inputs`` / ``resident_outputs`` (indices) stay on the
    device: the caller passes and receives ``DeviceTensor``s there, with no
    copy (:class:`BoundaryPlanningPass`). Resident outputs are not
    memory-planned, so the caller owns them.

    ``external_weights=True`` keeps the device backend's weights out of the
    .pte, in a data file (a .ptd, ExecuTorch's external named data) that
    the runtime maps at load (``et_copy.runtime.load(pte, data_path=ptd)``):
    :func:`~et_copy.export.save` writes both, or
    ``.write_tensor_data_to_file(dir)`` writes ``dir/weights.ptd``.

    ``strict`` is torch.export's. Returns the ExecutorchProgramManager:
    ``.buffer`` is the .pte bytes, ``.write_to_file(f)`` saves it; the
    program carries its record (docs/design.md, "The program record").
    Raises :class:`ExportArgumentError` (an :class:`ExportError` and a
    ValueError) naming the argument for a bad device or option or for
    state on the copy-only route, and
    :class:`ExportError` naming the method, the stage and the way out when
    torch or executorch fails.
    """
    op = "et_copy.export.export_device_program"
    return export_methods(
        op,
        module,
        {"forward": MethodInputs(tuple(example_inputs), dict(kwargs or {}), dynamic_shapes)},
        resolve_backend_choice(op, backend=backend, partitioner=partitioner, device=device),
        insert_copies=insert_copies,
        alloc_graph_input=alloc_graph_input,
        alloc_graph_output=alloc_graph_output,
        strict=strict,
        resident_inputs=resident_inputs,
        resident_outputs=resident_outputs,
        external_weights=external_weights,
    )


def export_device_methods(
    module: torch.nn.Module,
    methods: dict[str, MethodInputs],
    *,
    device: str = "cuda:0",
    backend: str | None = None,
    partitioner: Partitioner | None = None,
    insert_copies: bool = True,
    alloc_graph_input: bool = False,
    alloc_graph_output: bool | None = None,
    strict: bool = False,
    resident_inputs: Sequence[int] = (),
    resident_outputs: Sequence[int] = (),
    constant_methods: dict[str, Any] | None = None,
    decompositions: dict[Any, Callable[..., Any]] | None = None,
    external_weights: bool = False,
) -> ExecutorchProgramManager:
    """:func:`export_device_program` with several methods, each the
    module's ``forward`` traced on its own example inputs (an LLM's
    ``prefill`` with a dynamic prompt length and ``decode`` with one token).
    Every method reads and writes the same state buffers.
    ``constant_methods`` are to_edge's: methods that return a constant
    (``{"get_max_seq_len": 64}``). ``decompositions`` (an ATen op to a
    function, ``ExportedProgram.run_decompositions``' table) rewrite each
    method's graph before lowering; a function returning NotImplemented
    keeps that call (et_copy.llm's depthwise convolution as shifts). Raises
    as :func:`export_device_program` does."""
    op = "et_copy.export.export_device_methods"
    return export_methods(
        op,
        module,
        methods,
        resolve_backend_choice(op, backend=backend, partitioner=partitioner, device=device),
        insert_copies=insert_copies,
        alloc_graph_input=alloc_graph_input,
        alloc_graph_output=alloc_graph_output,
        strict=strict,
        resident_inputs=resident_inputs,
        resident_outputs=resident_outputs,
        constant_methods=constant_methods,
        decompositions=decompositions,
        external_weights=external_weights,
    )


def export_methods(
    op: str,
    module: torch.nn.Module,
    methods: dict[str, MethodInputs],
    choice: BackendChoice,
    *,
    insert_copies: bool = True,
    alloc_graph_input: bool = False,
    alloc_graph_output: bool | None = None,
    strict: bool = False,
    resident_inputs: Sequence[int] = (),
    resident_outputs: Sequence[int] = (),
    constant_methods: dict[str, Any] | None = None,
    decompositions: dict[Any, Callable[..., Any]] | None = None,
    external_weights: bool = False,
) -> ExecutorchProgramManager:
    """export_device_program and export_device_methods (and et_copy.llm.export_llm), as ``op``, with the
    backend ``choice`` :func:`~._lowering.resolve_backend_choice` resolved from their arguments; the
    defaults are export_device_methods'."""
    if alloc_graph_output is None:
        alloc_graph_output = not resident_outputs
    if resident_outputs and alloc_graph_output:
        raise ExportArgumentError(
            op,
            "alloc_graph_output",
            "resident_outputs need alloc_graph_output=False, so that the caller's device tensors receive them",
        )
    if (resident_inputs or resident_outputs) and not insert_copies:
        raise ExportArgumentError(op, "insert_copies", "resident_inputs/outputs go with insert_copies=True")
    if not methods:
        raise ExportArgumentError(op, "methods", "no methods to export")
    for name, inputs in methods.items():
        if not callable(getattr(module, inputs.entry, None)):
            raise ExportArgumentError(
                op,
                "methods",
                f"method '{name}': MethodInputs.entry {inputs.entry!r} is not a method of {type(module).__name__}",
                method=name,
            )
    check_external_weights(op, external_weights)
    if (choice.given or decompositions) and not insert_copies:
        raise ExportArgumentError(
            op, "insert_copies", "a backend or decompositions go with insert_copies=True (the backend's copies)"
        )
    if external_weights and not insert_copies:
        raise ExportArgumentError(
            op,
            "external_weights",
            "external_weights=True goes with insert_copies=True: the copy-only route has no weights",
        )
    aot.ensure_registered()
    if insert_copies:
        program = lower(
            module,
            methods,
            choice,
            op=op,
            strict=strict,
            alloc_graph_input=alloc_graph_input,
            alloc_graph_output=alloc_graph_output,
            resident_inputs=resident_inputs,
            resident_outputs=resident_outputs,
            constant_methods=constant_methods,
            decompositions=decompositions,
            external_weights=external_weights,
        )
        if program is not None:
            return program
        # Nothing to compute (the module returns its inputs): the copies alone.
    return export_copy_only(
        module,
        methods,
        device=choice.device,
        insert_copies=insert_copies,
        alloc_graph_input=alloc_graph_input,
        alloc_graph_output=alloc_graph_output,
        strict=strict,
        resident_inputs=resident_inputs,
        resident_outputs=resident_outputs,
        constant_methods=constant_methods,
        op=op,
    )


def lower_to_device(
    module: torch.nn.Module,
    example_inputs: Sequence[Any],
    partitioner: Partitioner | None = None,
    *,
    device: str = "cuda:0",
    backend: str | None = None,
    dynamic_shapes: Any = None,
    alloc_graph_input: bool = False,
    alloc_graph_output: bool = True,
    skip_h2d_for_method_inputs: bool = False,
    skip_d2h_for_method_outputs: bool = False,
    strict: bool = False,
    external_weights: bool = False,
) -> ExecutorchProgramManager:
    """Exports ``module`` and lowers it to a device backend with upstream's
    recipe (``to_edge_transform_and_lower``) and skip flags: ``partitioner``
    is the device's (default: the partitioner of et-copy's ``backend``,
    "simulated" or "aoti", :mod:`et_copy.backends`; upstream's
    ``CudaPartitioner`` on a GPU). Another partitioner is annotated as the
    device with :func:`with_target_device`, which is only right for a
    backend that runs on the device (et_copy.runtime refuses at load a CPU
    backend, XNNPACK, handed device memory).

    PropagateDevicePass inserts ``_h2d_copy`` before and ``_d2h_copy`` after
    each partition, and the delegate's inputs and outputs are planned on
    ``device``. ``skip_h2d_for_method_inputs`` leaves out the copy of a method
    input that feeds a partition directly (the caller passes a device tensor)
    and needs ``alloc_graph_input=False``; ``skip_d2h_for_method_outputs``
    leaves partition outputs that are method outputs on the device and needs
    ``alloc_graph_output=False`` (a CPU build of torch cannot take such an
    output back). Copies of one tensor are merged (one h2d per tensor and
    device, one d2h per device tensor; :class:`BoundaryPlanningPass`). The
    runtime needs a backend registered under the partitioner's backend id
    and a DeviceAllocator for the device. ``external_weights`` is
    :func:`export_device_program`'s. Returns the
    ExecutorchProgramManager, with its program record. Raises
    :class:`ExportArgumentError` (a ValueError too) for a bad device or
    backend, a skip flag that is not a bool or lacks its memory-planning setting, or a
    partitioner that delegated nothing (the program would have no device
    boundary), and :class:`ExportError` naming the stage when torch or
    executorch fails.
    """
    op = "et_copy.export.lower_to_device"
    for name, flag in (
        ("skip_h2d_for_method_inputs", skip_h2d_for_method_inputs),
        ("skip_d2h_for_method_outputs", skip_d2h_for_method_outputs),
    ):
        if not isinstance(flag, bool):
            # executorch 1.5.1's PropagateDevicePass tests each flag with a plain `if`.
            raise ExportArgumentError(
                op,
                name,
                f"{name} must be a bool, got {type(flag).__name__}: PropagateDevicePass applies a flag to every "
                "method, so a per-method dict would turn it on for all of them (export each method with its own "
                "setting instead)",
            )
    if skip_h2d_for_method_inputs and alloc_graph_input:
        raise ExportArgumentError(
            op,
            "skip_h2d_for_method_inputs",
            "skip_h2d_for_method_inputs=True needs alloc_graph_input=False, or the runtime "
            "reserves a buffer for the input and fills it from the caller's device memory with memcpy",
        )
    if skip_d2h_for_method_outputs and alloc_graph_output:
        raise ExportArgumentError(
            op,
            "skip_d2h_for_method_outputs",
            "skip_d2h_for_method_outputs=True needs alloc_graph_output=False, or the runtime "
            "reserves a buffer for the device output and copies it with memcpy",
        )
    check_external_weights(op, external_weights)
    aot.ensure_registered()
    chosen = resolve_backend_choice(op, backend=backend, partitioner=partitioner, device=device)
    program = lower(
        module,
        {"forward": MethodInputs(tuple(example_inputs), {}, dynamic_shapes)},
        chosen,
        op=op,
        strict=strict,
        alloc_graph_input=alloc_graph_input,
        alloc_graph_output=alloc_graph_output,
        skip_h2d_for_method_inputs=skip_h2d_for_method_inputs,
        skip_d2h_for_method_outputs=skip_d2h_for_method_outputs,
        transform_and_lower=True,
        external_weights=external_weights,
    )
    if program is None:
        raise ExportArgumentError(
            op,
            "partitioner",
            f"{chosen.name} delegated nothing of {type(module).__name__}, so the program would have no "
            "device boundary; use export_device_program for a model without delegate work",
            stage="lowering",
        )
    return program


def check_external_weights(op: str, external_weights: object) -> None:
    """``external_weights`` is a bool; else ExportArgumentError naming ``op``."""
    if not isinstance(external_weights, bool):
        raise ExportArgumentError(
            op, "external_weights", f"external_weights must be True or False, got {external_weights!r}"
        )
