"""Building ExecuTorch programs that cross a device boundary with et_copy's ops.

Two routes (docs/export.md says when to use which):

- :func:`export_device_program`, no delegate: the module's inputs go through
  ``et_copy::_h2d_copy``, its outputs through ``et_copy::_d2h_copy``, and the
  tensors in between are memory-planned on the device by
  :class:`DevicePlanningPass`. Runs on any ExecuTorch runtime with a
  ``DeviceAllocator`` for the device and the two et_copy kernels.
- :func:`with_target_device`, for a delegate: wraps any partitioner so its
  partitions carry ``CompileSpec("target_device", b"cuda:N")``; executorch's
  ``PropagateDevicePass`` then inserts the copies around them.

Both need executorch's AOT stack (``executorch.exir``), imported here, which
takes seconds: ``import et_copy`` does not import this module.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, cast

import torch
from executorch.exir import (
    EdgeCompileConfig,
    ExecutorchBackendConfig,
    ExecutorchProgramManager,
    to_edge,
    to_edge_transform_and_lower,
)
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig
from executorch.exir.schema import DeviceType
from executorch.exir.tensor import TensorSpec

from . import aot
from ._device import parse_device
from ._exir_fixes import lifted_constants_in_signature_order
from .backends import DEFAULT_BACKEND, check_backend, partitioner_for

TARGET_DEVICE_KEY = "target_device"  # executorch's PropagateDevicePass reads this CompileSpec key

__all__ = [
    "BoundaryPlanningPass",
    "ExportError",
    "DeviceBoundary",
    "DevicePlanningPass",
    "TargetDevicePartitioner",
    "MethodInputs",
    "export_device_methods",
    "export_device_program",
    "lower_to_device",
    "with_target_device",
]


class DeviceBoundary(torch.nn.Module):
    """Runs ``module`` on the device side of a boundary: every tensor input
    (positional or keyword) passes through ``_h2d_copy`` first, every tensor
    output through ``_d2h_copy`` after (inputs and outputs may be nested
    tuples/lists/dicts).

    ``resident_inputs`` / ``resident_outputs`` name positional arguments and
    top-level outputs (by index) that stay on the device: no copy, so the
    caller passes and receives device tensors.

    The two ops are resolved here, not in ``forward``: resolving them takes
    a lock on first use, and strict export (Dynamo) cannot trace a context
    manager."""

    def __init__(
        self, module: torch.nn.Module, resident_inputs: Sequence[int] = (), resident_outputs: Sequence[int] = ()
    ) -> None:
        super().__init__()
        self.module = module
        self.resident_inputs = frozenset(resident_inputs)
        self.resident_outputs = frozenset(resident_outputs)
        self._h2d, self._d2h = aot.h2d_copy_op(), aot.d2h_copy_op()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        h2d, d2h = self._h2d, self._d2h
        args = tuple(
            a if i in self.resident_inputs else torch.utils._pytree.tree_map_only(torch.Tensor, h2d, a)
            for i, a in enumerate(args)
        )
        kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, h2d, kwargs)
        out = self.module(*args, **kwargs)
        if not self.resident_outputs:
            return torch.utils._pytree.tree_map_only(torch.Tensor, d2h, out)
        return tuple(
            o if i in self.resident_outputs else torch.utils._pytree.tree_map_only(torch.Tensor, d2h, o)
            for i, o in enumerate(out)
        )


class DevicePlanningPass(MemoryPlanningPass):
    """A MemoryPlanningPass that plans the device side of et_copy boundaries on ``device``.

    Right before planning (earlier tags are lost: SpecPropPass recreates the
    specs) it tags the output of every ``_h2d_copy.out`` with the device, and
    every tensor computed from a device tensor, up to the ``_d2h_copy.out``
    that brings it back. Constants and graph inputs stay on the host. Takes
    MemoryPlanningPass's keyword arguments (``alloc_graph_input``, ...).

    **State.** The module's mutable buffers (an LLM's KV caches and recurrent
    states, which ``torch.export`` lifts into ``buffers_to_mutate``) live on
    the device too, in a planned buffer of their own: the *state arena*,
    appended after every other buffer of each method and laid out once for
    the whole program (by buffer name), so every method of the program reads
    and writes the same state, and a runtime can give each session an arena
    of its own while the scratch buffers stay shared (et_copy.runtime's
    sessions). ``state_layout`` maps each state buffer's name to its
    ``(offset, nbytes)`` in the arena once planning is done.

    Tensors computed between the copies run through CPU kernels on device
    memory: that works with et_copy's simulated device (host memory) only. On
    a real GPU keep the program copy-only, or use a delegate.
    """

    alloc_mutable_buffers: bool  # MemoryPlanningPass's option; run() switches it per graph

    def __init__(
        self,
        device: str = "cuda:0",
        resident_inputs: Sequence[int] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.device = parse_device(device, op="et_copy.export.DevicePlanningPass")
        self.resident_inputs = tuple(resident_inputs)
        self.state_layout: dict[str, tuple[int, int]] = {}
        self._state_specs: dict[str, list[tuple[torch.fx.GraphModule, TensorSpec]]] = {}

    def run(self, graph_module: torch.fx.GraphModule, graph_signature=None):
        device_type = DeviceType(self.device.type)
        names = set()
        if self.resident_inputs:
            # Method inputs the caller hands over on the device (DeviceBoundary's resident_inputs).
            names = {graph_signature.user_inputs[i] for i in self.resident_inputs}
        state = _state_placeholders(graph_signature) if self.alloc_mutable_buffers else {}
        for node in graph_module.graph.nodes:
            if node.op == "placeholder" and (node.name in names or node.name in state):
                node.meta["spec"].device, node.meta["spec"].device_index = device_type, self.device.index
        _tag_device_side(graph_module, device_type, self.device.index)
        # The state is laid out in run_multimethod, once every method is planned.
        kept, self.alloc_mutable_buffers = self.alloc_mutable_buffers, self.alloc_mutable_buffers and not state
        try:
            result = super().run(graph_module, graph_signature)
        finally:
            self.alloc_mutable_buffers = kept
        if state:
            for node in graph_module.graph.nodes:
                if node.op == "placeholder" and node.name in state:
                    self._state_specs.setdefault(state[node.name], []).append((graph_module, node.meta["spec"]))
        return result

    def run_multimethod(self) -> None:
        """Lays out the state arena (called by ``to_executorch`` after every method is planned)."""
        from executorch.exir.schema import NonConstBufferDevice

        modules = {id(gm): gm for specs in self._state_specs.values() for gm, _ in specs}
        arena = {key: len(gm.meta["non_const_buffer_sizes"]) for key, gm in modules.items()}
        offset = 0
        for name in sorted(self._state_specs):
            specs = self._state_specs[name]
            nbytes = specs[0][1].allocated_memory
            offset = -(-offset // self.alignment) * self.alignment
            self.state_layout[name] = (offset, nbytes)
            for gm, spec in specs:
                spec.mem_id, spec.mem_offset = arena[id(gm)], offset
            offset += nbytes
        size = -(-offset // self.alignment) * self.alignment
        for key, gm in modules.items():
            gm.meta["non_const_buffer_sizes"].append(size)
            devices = gm.meta.get("non_const_buffer_device") or []
            devices.append(NonConstBufferDevice(arena[key], DeviceType(self.device.type), self.device.index))
            gm.meta["non_const_buffer_device"] = devices


def _state_placeholders(graph_signature) -> dict[str, str]:
    """Placeholder name -> buffer name, for the buffers the program mutates."""
    if graph_signature is None:
        return {}
    mutated = set(graph_signature.buffers_to_mutate.values())
    return {p: b for p, b in graph_signature.inputs_to_buffers.items() if b in mutated}


def _tag_device_side(graph_module: torch.fx.GraphModule, device_type: DeviceType, index: int) -> None:
    h2d_out = torch.ops.et_copy._h2d_copy.out
    d2h_out = torch.ops.et_copy._d2h_copy.out
    on_device: set[torch.fx.Node] = {
        n
        for n in graph_module.graph.nodes
        if n.op == "placeholder" and getattr(n.meta.get("spec"), "device", DeviceType.CPU) == device_type
    }
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or node.target is d2h_out:
            continue
        inputs = [a for a in node.all_input_nodes if a in on_device]
        if node.target is not h2d_out and not inputs:
            continue
        specs = node.meta.get("spec")
        for spec in specs if isinstance(specs, (tuple, list)) else [specs]:
            if isinstance(spec, TensorSpec) and not spec.const:
                spec.device, spec.device_index = device_type, index
        on_device.add(node)
        # Out-variant ops write into the alloc nodes of their `out`, and readers of
        # a multi-output op (split, chunk, unbind) take its results through
        # getitem on that alloc, not on the op: those allocs are on the device too.
        out = node.kwargs.get("out")
        on_device.update(a for a in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(a, torch.fx.Node))


class BoundaryPlanningPass(MemoryPlanningPass):
    """The MemoryPlanningPass of the delegate route (:func:`lower_to_device`).

    Before planning, on the graph executorch's PropagateDevicePass left:

    - **Copy dedupe.** PropagateDevicePass copies a tensor to the device once
      per partition that reads it. Copies of the same tensor to the same
      device (and back from it) are merged into one, so an execution makes
      one h2d per (tensor, device) and one d2h per device tensor.
      ``copies_merged`` counts what the last run merged.
    - **Scalar-constant workaround** (executorch 1.5.1). A partition that
      reads a lifted 0-d constant (an attention scale, ``x * 0.5``) gets an
      ``_h2d_copy`` whose output spec is copied from the constant's, still
      marked constant but with no storage, and the emitter then fails with
      ``'NoneType' object has no attribute 'nbytes'``. Such a spec is the
      copy's output, not a constant: it is unmarked so it gets planned.
      ``constants_unmarked`` counts them. (tests/python/test_export.py tells
      when upstream no longer needs this.)
    - **Resident inputs and outputs.** ``resident_inputs`` / ``resident_outputs``
      (user input and output indices) stay on the device: the copy
      PropagateDevicePass put between such an input and the delegate, or
      between the delegate and such an output, is removed, and the tensor
      keeps the delegate's device, unplanned (the caller owns it). Upstream's
      own skip flags cover all method inputs or outputs, or none.
    """

    def __init__(
        self, *, resident_inputs: Sequence[int] = (), resident_outputs: Sequence[int] = (), **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.resident_inputs, self.resident_outputs = tuple(resident_inputs), tuple(resident_outputs)
        self.copies_merged = 0
        self.constants_unmarked = 0

    def run(self, graph_module: torch.fx.GraphModule, graph_signature=None):
        self.constants_unmarked = _unmark_copied_constants(graph_module)
        self.copies_merged = _merge_duplicate_copies(graph_module)
        if self.resident_inputs or self.resident_outputs:
            _keep_resident(graph_module, graph_signature, self.resident_inputs, self.resident_outputs)
        return super().run(graph_module, graph_signature)


def _keep_resident(
    graph_module: torch.fx.GraphModule, signature, inputs: Sequence[int], outputs: Sequence[int]
) -> None:
    """Removes the copies of resident method inputs and outputs (see BoundaryPlanningPass)."""
    from torch.export.graph_signature import OutputKind

    op = "et_copy.export"
    h2d, d2h = torch.ops.et_copy._h2d_copy.out, torch.ops.et_copy._d2h_copy.out
    placeholders = {n.name: n for n in graph_module.graph.nodes if n.op == "placeholder"}
    for i in inputs:
        node = placeholders[signature.user_inputs[i]]
        copies = [u for u in node.users if u.op == "call_function" and u.target is h2d]
        if len(copies) != 1 or len(node.users) != 1:
            raise ValueError(
                f"{op}: resident input {i} must be read by the device backend alone (it is read by "
                f"{sorted(str(u.target) for u in node.users)})"
            )
        (copy,) = copies
        spec = copy.meta["spec"]
        node.meta["spec"].device, node.meta["spec"].device_index = spec.device, spec.device_index
        _drop_copy(graph_module, copy, node)
    out_node = graph_module.graph.output_node()
    results = list(cast(Sequence[torch.fx.Node], out_node.args[0]))  # the output node's one argument
    user = [k for k, s in enumerate(signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    for j in outputs:
        copy = results[user[j]]
        if not (isinstance(copy, torch.fx.Node) and copy.target is d2h):
            raise ValueError(
                f"{op}: resident output {j} is not a device backend's output, so it has no device to stay on"
            )
        source = copy.args[0]
        assert isinstance(source, torch.fx.Node)  # a d2h copy's self
        results[user[j]] = source
        out_node.args = (tuple(results),)
        if not copy.users:
            _drop_copy(graph_module, copy, source)
    # The planner reads the graph's outputs from this spec, which PropagateDevicePass leaves
    # naming the delegate's outputs: each is then skipped as a graph output under
    # alloc_graph_output=False, and a delegate output only a d2h copy reads goes unplanned.
    out_node.meta["spec"] = tuple(a.meta.get("spec") if isinstance(a, torch.fx.Node) else None for a in results)
    graph_module.recompile()


def _refuse_input_mutation(exported: dict, op: str) -> None:
    """A method input updated in place would need its new value copied back
    to the caller's host tensor after every call; ExecuTorch would instead
    return it as an extra output, and the caller's tensor would keep its old
    value. Refused: keep such state in a buffer, or return the new value."""
    from torch.export.graph_signature import OutputKind

    for name, ep in exported.items():
        mutated = [s.target for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_INPUT_MUTATION]
        if mutated:
            raise ValueError(
                f"{op}: method '{name}' updates its input(s) {mutated} in place, which a device program cannot "
                "write back to the caller; register that state as a buffer (it then lives on the device) or "
                "return the new value"
            )


def _write_program_record(edge, *, state_in_delegates: bool) -> None:
    """The program's record (C++'s et_copy/program_record.h, which owns the
    format): what et_copy.runtime's sessions may rely on, written, not guessed."""
    from . import _C

    lines = [f"{_C.PROGRAM_RECORD_KEY} {_C.PROGRAM_RECORD_VERSION}"]
    if state_in_delegates:
        lines.append("state\tdelegates")
    edge._named_data_store.add_named_data(_C.PROGRAM_RECORD_KEY, ("\n".join(lines) + "\n").encode())


def _check_resident_outputs(edge, outputs: Sequence[int], op: str) -> None:
    """Each resident output must be a delegate's result: nothing else has a device to stay on."""
    from executorch.exir.delegate import executorch_call_delegate
    from torch.export.graph_signature import OutputKind

    for name in edge.methods:
        ep = edge.exported_program(name)
        results = ep.graph_module.graph.output_node().args[0]
        user = [k for k, s in enumerate(ep.graph_signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
        for j in outputs:
            node = results[user[j]] if j < len(user) else None
            source = node.args[0] if isinstance(node, torch.fx.Node) and node.args else None
            if not (isinstance(source, torch.fx.Node) and source.target is executorch_call_delegate):
                raise ValueError(
                    f"{op}: method '{name}': resident output {j} is not a device backend's output, "
                    "so it has no device to stay on"
                )


def _drop_copy(graph_module: torch.fx.GraphModule, copy: torch.fx.Node, source: torch.fx.Node) -> None:
    """Replaces a copy with its source and erases it and its out buffer."""
    out = copy.kwargs.get("out")
    copy.replace_all_uses_with(source)
    graph_module.graph.erase_node(copy)
    if isinstance(out, torch.fx.Node) and not out.users:
        graph_module.graph.erase_node(out)


def _copy_nodes(graph_module: torch.fx.GraphModule):
    copies = (torch.ops.et_copy._h2d_copy.out, torch.ops.et_copy._d2h_copy.out)
    return [n for n in graph_module.graph.nodes if n.op == "call_function" and n.target in copies]


def _unmark_copied_constants(graph_module: torch.fx.GraphModule) -> int:
    h2d = torch.ops.et_copy._h2d_copy.out
    count = 0
    for node in _copy_nodes(graph_module):
        spec = node.meta.get("spec")
        if node.target is h2d and isinstance(spec, TensorSpec) and spec.const and spec.storage is None:
            spec.const = False
            count += 1
    return count


def _merge_duplicate_copies(graph_module: torch.fx.GraphModule) -> int:
    """Merges copies with the same op, source and destination device into the
    first; its output (and its out buffer) then serves every reader."""
    first: dict[tuple, torch.fx.Node] = {}
    merged = 0
    for node in _copy_nodes(graph_module):
        spec = node.meta.get("spec")
        source = node.args[0] if node.args else None
        if not isinstance(spec, TensorSpec) or not isinstance(source, torch.fx.Node):
            continue
        key = (node.target, source, spec.device, spec.device_index)
        kept = first.setdefault(key, node)
        if kept is node:
            continue
        out, kept_out = node.kwargs.get("out"), kept.kwargs.get("out")
        node.replace_all_uses_with(kept)
        graph_module.graph.erase_node(node)
        if isinstance(out, torch.fx.Node) and isinstance(kept_out, torch.fx.Node):
            out.replace_all_uses_with(kept_out)
            if not out.users:
                graph_module.graph.erase_node(out)
        merged += 1
    if merged:
        graph_module.recompile()
    return merged


INITIAL_STATE_KEY = "et_copy.initial_state:"  # + buffer name: a named blob holding a state buffer's start


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


def export_device_program(
    module: torch.nn.Module,
    example_inputs: Sequence[Any] = (),
    *,
    kwargs: dict | None = None,
    device: str = "cuda:0",
    backend: str = "simulated",
    partitioner: Partitioner | None = None,
    dynamic_shapes: Any = None,
    insert_copies: bool = True,
    alloc_graph_input: bool = False,
    alloc_graph_output: bool | None = None,
    strict: bool = False,
    resident_inputs: Sequence[int] = (),
    resident_outputs: Sequence[int] = (),
) -> ExecutorchProgramManager:
    """Exports ``module`` to an ExecuTorch program that computes on ``device``.

    The compute runs in a device backend, as upstream's CUDA backend does
    (docs/design.md, "Device programs compute in a device backend"):
    ``backend`` names et-copy's device backend (:mod:`et_copy.backends`):
    ``"simulated"`` (:class:`~et_copy.backend.SimulatedDevicePartitioner`) or
    ``"aoti"`` (:class:`~et_copy.aoti.AotiDevicePartitioner`, AOTInductor
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
    loads such a program only when its device side is the copies alone. A
    module with nothing to compute (it returns its inputs) exports that way
    too. ``device`` is "cuda" or "cuda:N". ``kwargs`` are keyword example
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

    ``strict`` is torch.export's. Returns the ExecutorchProgramManager:
    ``.buffer`` is the .pte bytes, ``.write_to_file(f)`` saves it. Raises
    ValueError for a bad device or option, and :class:`ExportError` naming
    the method, the stage and the way out when torch or executorch fails.
    """
    return export_device_methods(
        module,
        {"forward": MethodInputs(tuple(example_inputs), dict(kwargs or {}), dynamic_shapes)},
        device=device,
        backend=backend,
        partitioner=partitioner,
        insert_copies=insert_copies,
        alloc_graph_input=alloc_graph_input,
        alloc_graph_output=alloc_graph_output,
        strict=strict,
        resident_inputs=resident_inputs,
        resident_outputs=resident_outputs,
    )


def export_device_methods(
    module: torch.nn.Module,
    methods: dict[str, MethodInputs],
    *,
    device: str = "cuda:0",
    backend: str = "simulated",
    partitioner: Partitioner | None = None,
    insert_copies: bool = True,
    alloc_graph_input: bool = False,
    alloc_graph_output: bool | None = None,
    strict: bool = False,
    resident_inputs: Sequence[int] = (),
    resident_outputs: Sequence[int] = (),
    constant_methods: dict[str, Any] | None = None,
    decompositions: dict[Any, Callable[..., Any]] | None = None,
) -> ExecutorchProgramManager:
    """:func:`export_device_program` with several methods, each the
    module's ``forward`` traced on its own example inputs (an LLM's
    ``prefill`` with a dynamic prompt length and ``decode`` with one token).
    Every method reads and writes the same state buffers.
    ``constant_methods`` are to_edge's: methods that return a constant
    (``{"get_max_seq_len": 64}``). ``decompositions`` (an ATen op to a
    function, ``ExportedProgram.run_decompositions``' table) rewrite each
    method's graph before lowering; a function returning NotImplemented
    keeps that call (et_copy.llm's depthwise convolution as shifts)."""
    op = "et_copy.export.export_device_program"
    if alloc_graph_output is None:
        alloc_graph_output = not resident_outputs
    if resident_outputs and alloc_graph_output:
        raise ValueError(
            f"{op}: resident_outputs need alloc_graph_output=False, so that the caller's device tensors receive them"
        )
    if (resident_inputs or resident_outputs) and not insert_copies:
        raise ValueError(f"{op}: resident_inputs/outputs go with insert_copies=True")
    if not methods:
        raise ValueError(f"{op}: no methods to export")
    for name, inputs in methods.items():
        if not callable(getattr(module, inputs.entry, None)):
            raise ValueError(
                f"{op}: method '{name}': MethodInputs.entry {inputs.entry!r} is not a method of {type(module).__name__}"
            )
    check_backend(backend, op=op)
    if partitioner is not None and backend != DEFAULT_BACKEND:
        raise ValueError(f"{op}: pass backend={backend!r} or a partitioner, not both")
    if (partitioner is not None or backend != DEFAULT_BACKEND or decompositions) and not insert_copies:
        raise ValueError(f"{op}: a backend or decompositions go with insert_copies=True (the backend's copies)")
    aot.ensure_registered()
    if insert_copies:
        if partitioner is None:
            partitioner = partitioner_for(backend, device, op=op)
        program = _export_through_backend(
            module,
            methods,
            partitioner,
            decompositions=decompositions,
            strict=strict,
            alloc_graph_input=alloc_graph_input,
            alloc_graph_output=alloc_graph_output,
            resident_inputs=resident_inputs,
            resident_outputs=resident_outputs,
            constant_methods=constant_methods,
            op=op,
        )
        if program is not None:
            return program
        # Nothing to compute (the module returns its inputs): the copies alone.
    return _export_copy_only(
        module,
        methods,
        device=device,
        insert_copies=insert_copies,
        alloc_graph_input=alloc_graph_input,
        alloc_graph_output=alloc_graph_output,
        strict=strict,
        resident_inputs=resident_inputs,
        resident_outputs=resident_outputs,
        constant_methods=constant_methods,
        op=op,
    )


def _export_through_backend(
    module: torch.nn.Module,
    methods: dict[str, MethodInputs],
    partitioner: Partitioner,
    *,
    decompositions: dict[Any, Callable[..., Any]] | None,
    strict: bool,
    alloc_graph_input: bool,
    alloc_graph_output: bool,
    resident_inputs: Sequence[int],
    resident_outputs: Sequence[int],
    constant_methods: dict[str, Any] | None,
    op: str,
) -> ExecutorchProgramManager | None:
    """The device backend's route (docs/design.md): the partitioner's
    delegate holds the whole graph with its weights and state, and
    executorch's PropagateDevicePass copies around it. None when the
    partitioner delegated nothing (a module with nothing to compute)."""
    exported = {
        name: _stage(
            op, name, "export", strict, functools.partial(_export, module, inputs, inputs.dynamic_shapes, strict)
        )
        for name, inputs in methods.items()
    }
    if decompositions:
        exported = {
            name: _stage(op, name, "decompositions", strict, functools.partial(ep.run_decompositions, decompositions))
            for name, ep in exported.items()
        }
    edge = _stage(
        op,
        None,
        "to_edge",
        strict,
        lambda: _to_edge(exported, constant_methods),
    )
    # torch.export keeps an input's in-place update as an op; to_edge turns it into an output.
    _refuse_input_mutation({name: edge.exported_program(name) for name in edge.methods}, op)
    edge = _stage(op, None, "lowering", strict, lambda: edge.to_backend(partitioner))
    if not _has_delegate(edge):
        return None
    _check_resident_outputs(edge, resident_outputs, op)
    # The state is in the delegates when the partitioner took every mutable buffer (ours always does).
    outer_state = any(edge.exported_program(n).graph_signature.buffers_to_mutate for n in edge.methods)
    _write_program_record(edge, state_in_delegates=not outer_state)
    config = ExecutorchBackendConfig(
        memory_planning_pass=BoundaryPlanningPass(
            alloc_graph_input=alloc_graph_input,
            alloc_graph_output=alloc_graph_output,
            resident_inputs=resident_inputs,
            resident_outputs=resident_outputs,
        ),
        enable_non_cpu_memory_planning=True,
    )
    # Inference programs: exir's passes replay a mutated input's in-place copy,
    # which autograd refuses on a leaf that requires grad.
    with torch.no_grad():
        return _stage(op, None, "to_executorch", strict, lambda: edge.to_executorch(config))


def _export_copy_only(
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
        with _entry(module, inputs.entry):
            shapes = inputs.dynamic_shapes
            if insert_copies:
                shapes = _boundary_dynamic_shapes(module, shapes, len(inputs.args), list(inputs.kwargs))
            exported[name] = _stage(
                op, name, "export", strict, functools.partial(_export, wrapped, inputs, shapes, strict, entry="forward")
            )
    edge = _stage(
        op,
        None,
        "to_edge",
        strict,
        lambda: _to_edge(exported, constant_methods),
    )
    _keep_initial_state(edge)
    with warnings.catch_warnings():
        # The emitter's warning that mutable buffers start undefined: et_copy.runtime's sessions set them.
        warnings.filterwarnings("ignore", "Mutation on a buffer in the model is detected", UserWarning)
        # ExecuTorch 1.5.1's reinplace pass computes wrong results when it turns an index_put on an
        # intermediate tensor in place (seen: an LLM step whose caches are method inputs); on the
        # state buffers it is right, and that is what it is for here.
        has_state = any(_state_placeholders(edge.exported_program(n).graph_signature) for n in edge.methods)
        config = _backend_config(planner, reinplace=has_state)
        return _stage(op, None, "to_executorch", strict, lambda: edge.to_executorch(config))


def _backend_config(planner: DevicePlanningPass, *, reinplace: bool) -> ExecutorchBackendConfig:
    return ExecutorchBackendConfig(
        memory_planning_pass=planner,
        enable_non_cpu_memory_planning=True,
        run_reinplace_pass=reinplace,  # cache writes (index_put) into the state, not a copy of it
        emit_mutable_buffer_names=True,  # the runtime finds each session's state by name
    )


def _to_edge(exported: dict, constant_methods: dict[str, Any] | None):
    with lifted_constants_in_signature_order():
        return to_edge(exported, constant_methods=constant_methods, compile_config=_edge_config(exported))


def _edge_config(exported: dict) -> EdgeCompileConfig:
    # The edge dialect's argument validator re-runs every op on fake tensors,
    # and an op whose traced arguments hold a size as a plain int (transformers'
    # batched_mm experts: tokens x top-k) then pins a dynamic prompt length to
    # its example. Dynamic programs skip it; the runtime checks every kernel's arguments.
    dynamic = any(ep.range_constraints for ep in exported.values())
    return EdgeCompileConfig(preserve_ops=aot.preserve_ops(), _check_ir_validity=not dynamic)


def _export(module: torch.nn.Module, inputs: MethodInputs, dynamic_shapes: Any, strict: bool, entry: str | None = None):
    with _entry(module, inputs.entry if entry is None else entry):
        return torch.export.export(
            module, tuple(inputs.args), dict(inputs.kwargs), dynamic_shapes=dynamic_shapes, strict=strict
        )


@contextlib.contextmanager
def _entry(module: torch.nn.Module, entry: str):
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


class ExportError(RuntimeError):
    """A failure of torch or executorch while exporting, named: ``op`` (the
    et_copy function), ``method`` (None when the stage covers every method),
    ``stage`` ("export", "to_edge", "lowering" or "to_executorch") and
    ``hint`` (the way out, when one is known). The original exception is the
    ``__cause__``."""

    def __init__(self, op: str, method: str | None, stage: str, cause: BaseException, hint: str = "") -> None:
        where = f"method '{method}': " if method is not None else ""
        text = f"{op}: {where}{stage} failed: {type(cause).__name__}: {cause}"
        super().__init__(text + (f"; {hint}" if hint else ""))
        self.op, self.method, self.stage, self.hint = op, method, stage, hint


def _stage(op: str, method: str | None, stage: str, strict: bool, run: Callable[[], Any]) -> Any:
    """Runs one stage of an export; what torch or executorch raises comes out as an ExportError."""
    try:
        return run()
    except ExportError:
        raise
    except Exception as e:
        hint = ""
        if not strict and "compiled_fn" in str(e):
            # torch 2.13's non-strict export fails this way on transformers' static caches,
            # in torch.export or later in to_edge's decompositions; strict export traces them.
            hint = "torch cannot export this module non-strict; pass strict=True"
        raise ExportError(op, method, stage, e, hint) from e


def _keep_initial_state(edge) -> None:
    """Stores each state buffer's export-time value in the program, as named
    data, where it is not all zeros (the runtime zero-fills the others)."""
    from . import _C

    seen: set[str] = set()
    for ep in (edge.exported_program(name) for name in edge.methods):
        values = {**ep.state_dict, **ep.constants}
        for fqn in set(ep.graph_signature.buffers_to_mutate.values()) - seen:
            seen.add(fqn)
            value = values.get(fqn)
            if isinstance(value, torch.Tensor) and bool(value.ne(0).any()):
                edge._named_data_store.add_named_data(
                    INITIAL_STATE_KEY + fqn, value.contiguous(), alignment=_C.TENSOR_ALIGNMENT
                )


def _boundary_dynamic_shapes(module: torch.nn.Module, dynamic_shapes: Any, n_args: int, kwarg_names: list) -> Any:
    # DeviceBoundary.forward takes *args, **kwargs: give it the module's
    # per-argument specs in that form.
    if dynamic_shapes is None:
        return None
    if isinstance(dynamic_shapes, dict):
        names = list(inspect.signature(module.forward).parameters)
        args = tuple(dynamic_shapes.get(name) for name in names[:n_args])
        kwargs = {name: dynamic_shapes.get(name) for name in kwarg_names}
    else:
        args, kwargs = tuple(dynamic_shapes)[:n_args], {}
    return {"args": args, "kwargs": kwargs} if kwargs else {"args": args}


class TargetDevicePartitioner(Partitioner):
    """A partitioner that delegates to ``inner`` and adds
    ``CompileSpec("target_device", b"cuda:N")`` to every partition's
    delegation spec, so PropagateDevicePass copies around those partitions."""

    def __init__(self, inner: Partitioner, device: str = "cuda:0") -> None:
        parsed = parse_device(device, op="et_copy.export.with_target_device")
        self.inner = inner
        self.device = str(parsed)
        super().__init__()

    def partition(self, exported_program) -> PartitionResult:
        result = self.inner.partition(exported_program)
        value = self.device.encode()
        for tag, spec in result.partition_tags.items():
            # A new spec per partition: partitioners share one DelegationSpec
            # object across partitions and calls, and it must stay untouched.
            kept = [s for s in spec.compile_specs if s.key != TARGET_DEVICE_KEY]
            result.partition_tags[tag] = DelegationSpec(spec.backend_id, kept + [CompileSpec(TARGET_DEVICE_KEY, value)])
        return result

    def ops_to_not_decompose(self, ep) -> tuple[list[torch._ops.OpOverload], Callable | None]:
        return self.inner.ops_to_not_decompose(ep)


def with_target_device(partitioner: Partitioner, device: str = "cuda:0") -> TargetDevicePartitioner:
    """Wraps ``partitioner`` so its partitions run on ``device`` ("cuda" or
    "cuda:N"): see :class:`TargetDevicePartitioner`."""
    return TargetDevicePartitioner(partitioner, device)


def _has_delegate(edge) -> bool:
    from executorch.exir.delegate import executorch_call_delegate

    return any(
        n.op == "call_function" and n.target is executorch_call_delegate
        for method in edge.methods
        for n in edge.exported_program(method).graph.nodes
    )


def lower_to_device(
    module: torch.nn.Module,
    example_inputs: Sequence[Any],
    partitioner: Partitioner | None = None,
    *,
    device: str = "cuda:0",
    backend: str = "simulated",
    dynamic_shapes: Any = None,
    alloc_graph_input: bool = False,
    alloc_graph_output: bool = True,
    skip_h2d_for_method_inputs: bool = False,
    skip_d2h_for_method_outputs: bool = False,
    strict: bool = False,
) -> ExecutorchProgramManager:
    """Exports ``module`` and lowers it to a device backend with upstream's
    skip flags: ``partitioner`` is the device's (default: the partitioner of
    et-copy's ``backend``, "simulated" or "aoti", :mod:`et_copy.backends`;
    upstream's ``CudaPartitioner`` on a GPU); another partitioner is annotated as the
    device with :func:`with_target_device`, which is only right for a backend
    that runs on the device (et_copy.runtime refuses at load a CPU backend,
    XNNPACK, handed device memory).

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
    and a DeviceAllocator for the device. Returns the
    ExecutorchProgramManager. Raises ValueError for a bad device, a skip flag
    without its memory-planning setting, or a partitioner that delegated
    nothing (the program would have no device boundary).
    """
    op = "et_copy.export.lower_to_device"
    if skip_h2d_for_method_inputs and alloc_graph_input:
        raise ValueError(
            f"{op}: skip_h2d_for_method_inputs=True needs alloc_graph_input=False, or the runtime "
            "reserves a buffer for the input and fills it from the caller's device memory with memcpy"
        )
    if skip_d2h_for_method_outputs and alloc_graph_output:
        raise ValueError(
            f"{op}: skip_d2h_for_method_outputs=True needs alloc_graph_output=False, or the runtime "
            "reserves a buffer for the device output and copies it with memcpy"
        )
    check_backend(backend, op=op)
    if partitioner is not None and backend != DEFAULT_BACKEND:
        raise ValueError(f"{op}: pass backend={backend!r} or a partitioner, not both")
    aot.ensure_registered()
    if partitioner is None:
        partitioner = partitioner_for(backend, device, op=op)
        target: Partitioner = partitioner
    else:
        target = with_target_device(partitioner, device)
    exported = torch.export.export(module, tuple(example_inputs), dynamic_shapes=dynamic_shapes, strict=strict)
    edge = to_edge_transform_and_lower(exported, partitioner=[target])
    if not _has_delegate(edge):
        raise ValueError(
            f"{op}: {type(partitioner).__name__} delegated nothing of {type(module).__name__}, so the "
            "program would have no device boundary; use export_device_program for a model without "
            "delegate work"
        )
    planner = BoundaryPlanningPass(alloc_graph_input=alloc_graph_input, alloc_graph_output=alloc_graph_output)
    config = ExecutorchBackendConfig(
        memory_planning_pass=planner,
        enable_non_cpu_memory_planning=True,
        propagate_device_config=PropagateDeviceConfig(
            skip_h2d_for_method_inputs=skip_h2d_for_method_inputs,
            skip_d2h_for_method_outputs=skip_d2h_for_method_outputs,
        ),
    )
    with torch.no_grad():
        return edge.to_executorch(config)
