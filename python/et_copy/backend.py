"""The simulated device's backend, ahead of time: partitioner and preprocess.

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
here, ``payload\taoti`` for :mod:`et_copy.aoti`). :class:`DevicePartitioner`
is the partitioning both backends share.
"""

from __future__ import annotations

import copy
import hashlib
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import torch
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig
from executorch.exir._serialize._cord import FileBackedData
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data, tag_mutated_buffer
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.program._program import EdgeProgramManager
from executorch.exir.schema import Tensor as SchemaTensor
from executorch.exir.schema import TensorDataLocation
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from . import _C
from ._device import parse_device

BACKEND_ID = "SimulatedDeviceBackend"  # the C++ backend registers under this name (et_copy::kSimulatedDeviceBackend)
TARGET_DEVICE_KEY = "target_device"  # executorch's PropagateDevicePass reads this CompileSpec key
# The record's magic, version and payload kinds: C++ owns them (delegate_record.h).
RECORD_MAGIC, RECORD_VERSION = _C.DELEGATE_RECORD_MAGIC, _C.DELEGATE_RECORD_VERSION
PAYLOAD_PROGRAM = _C.PAYLOAD_PROGRAM  # the payload is a nested .pte (this backend)
WEIGHT_KEY = "et_copy.weight:"  # + content hash: a weight's bytes in the outer program's named data
STATE_KEY = "et_copy.state:"  # + content hash: a state tensor's non-zero initial value
STATE_ALIGNMENT = _C.TENSOR_ALIGNMENT  # each state tensor's offset in the arena (the core checks it)

__all__ = [
    "BACKEND_ID",
    "DevicePartitioner",
    "SimulatedDeviceBackend",
    "SimulatedDevicePartitioner",
    "StateSlot",
    "state_arena_layout",
]


class _OnDevice(OperatorSupportBase):
    """Every call that is not a device copy or an earlier delegate: as
    upstream's AotiPartitioner, the whole graph runs on the device."""

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return False
        never = (
            torch.ops.et_copy._h2d_copy.default,
            torch.ops.et_copy._d2h_copy.default,
            torch.ops.higher_order.executorch_call_delegate,
        )
        if node.target in never:
            return False
        # getitem of an earlier delegate's result stays with that delegate.
        source = node.args[0] if node.args else None
        return not (isinstance(source, torch.fx.Node) and source.target in never)


class DevicePartitioner(Partitioner):
    """What every et-copy device backend's partitioner does: one delegate
    with the whole graph (as upstream's AotiPartitioner), its weights and its
    mutable buffers (also those a method writes without reading), on
    ``device`` ("cuda" or "cuda:N"), with ``CompileSpec("target_device",
    ...)`` so that PropagateDevicePass copies around it. A subclass names its
    backend (``backend_id``) and may add compile specs."""

    backend_id: ClassVar[str]

    def __init__(self, device: str = "cuda:0", extra_specs: Sequence[CompileSpec] = ()) -> None:
        parsed = parse_device(device, op=f"et_copy.{type(self).__name__}")
        self.device = str(parsed)
        specs = [CompileSpec(TARGET_DEVICE_KEY, self.device.encode()), *extra_specs]
        self.delegation_spec = DelegationSpec(self.backend_id, specs)
        super().__init__()

    def partition(self, exported_program) -> PartitionResult:
        partitions = CapabilityBasedPartitioner(
            exported_program.graph_module, _OnDevice(), allows_single_node_partition=True
        ).propose_partitions()
        tags = {}
        for i, partition in enumerate(partitions):
            tag = f"et_copy_device_{i}"
            for node in partition.nodes:
                node.meta["delegation_tag"] = tag
            tags[tag] = self.delegation_spec
        tag_constant_data(exported_program)
        tag_mutated_buffer(exported_program)
        _tag_overwritten_buffers(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)


class SimulatedDevicePartitioner(DevicePartitioner):
    """Partitions a graph for the simulated device's backend: one delegate
    with the whole graph, its weights and its mutable buffers, on ``device``
    ("cuda" or "cuda:N")."""

    backend_id = BACKEND_ID

    def __init__(self, device: str = "cuda:0") -> None:
        super().__init__(device)


def _tag_overwritten_buffers(ep) -> None:
    """Tags a mutable buffer that the method writes without reading (an LLM's
    prefill writes the token that decode_next reads) with its new value's
    delegate. tag_mutated_buffer tags a buffer by its readers only, so such
    a buffer would stay outside the delegate: written on the host, never in
    the state arena that the other methods read."""
    sig = ep.graph_signature
    placeholders = {fqn: name for name, fqn in sig.inputs_to_buffers.items()}
    nodes = {n.name: n for n in ep.graph_module.graph.nodes}
    for value, fqn in sig.buffers_to_mutate.items():
        buffer = nodes.get(placeholders.get(fqn, ""))
        tag = nodes[value].meta.get("delegation_tag") if value in nodes else None
        if buffer is not None and tag is not None and "delegation_tag" not in buffer.meta:
            buffer.meta["delegation_tag"] = tag


@dataclass(frozen=True)
class StateSlot:
    """A state tensor's place in the state arena."""

    offset: int
    nbytes: int


def state_arena_layout(nbytes: dict[str, int], alignment: int = STATE_ALIGNMENT) -> tuple[dict[str, StateSlot], int]:
    """The state arena's layout: each state tensor (by name) at the next
    ``alignment`` boundary, in name order, so that every method of a program
    (and every exporter) derives the same offsets from the same state.
    Returns (slots by name, arena size rounded up to ``alignment``)."""
    slots, offset = {}, 0
    for name in sorted(nbytes):
        offset = -(-offset // alignment) * alignment
        slots[name] = StateSlot(offset, nbytes[name])
        offset += nbytes[name]
    return slots, -(-offset // alignment) * alignment


class TensorBytes(FileBackedData):
    """A tensor's bytes (contiguous, in memory order) as named data, read
    from the tensor's own memory: storing, hashing and writing the .pte or
    .ptd copy nothing, where ``bytes`` would copy every weight once per
    method (issue 44: a 322 MiB model's export grew by 6.4x its weights).
    executorch 1.5.1's NamedDataStore and Cord take a FileBackedData
    through ``len``, ``prefix``, ``sha256``, ``to_bytes`` and
    ``write_to_file``, which this answers from memory instead of a file.
    The tensor must not change while a program holds it: an exported
    program's weights are the module's parameters, read when the program is
    written (docs/export.md)."""

    def __init__(self, t: torch.Tensor) -> None:
        t = t.detach().contiguous()  # a copy only for a tensor that is not contiguous already
        self._tensor = t  # keeps the memory alive
        self._view = t.reshape(-1).view(torch.uint8).numpy().data if t.numel() else memoryview(b"")
        self._size = self._view.nbytes
        self._sha256 = hashlib.sha256(self._view).digest()
        self._path, self._finalizer = "", None  # FileBackedData's fields; no file to remove

    def prefix(self, size: int) -> bytes:
        return self._view[:size].tobytes()

    def sha256(self) -> bytes:
        return self._sha256

    def to_bytes(self) -> bytes:
        return self._view.tobytes()

    def __bytes__(self) -> bytes:  # bytes(entry), as for the bytes a store held before
        return self.to_bytes()

    def write_to_file(self, outfile) -> None:
        outfile.write(self._view)

    def is_zero(self) -> bool:
        """Every byte is zero."""
        return not bool(self._tensor.reshape(-1).view(torch.uint8).any()) if self._size else True


def mutable_state(ep) -> dict[str, torch.Tensor]:
    """Buffer name -> value, for the buffers the program mutates."""
    values = {**ep.state_dict, **ep.constants}
    return {fqn: values[fqn] for fqn in set(ep.graph_signature.buffers_to_mutate.values())}


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


def device_of(compile_specs: Sequence[CompileSpec], backend_id: str = BACKEND_ID) -> tuple[str, int]:
    """("cuda", index) from the target_device compile spec (the record names the type as text)."""
    for spec in compile_specs:
        if spec.key == TARGET_DEVICE_KEY:
            d = parse_device(bytes(spec.value).decode(), op=f"et_copy.{backend_id}")
            return str(d).split(":")[0], d.index
    raise ValueError(f"et_copy.{backend_id}: the partition has no '{TARGET_DEVICE_KEY}' compile spec")


def copy_for_preprocess(edge_program):
    """The isolated program a device backend's preprocess gets
    (``BackendDetails.copy_exported_program_for_preprocess``): the graph
    deep-copied, as executorch does, but the constants' and buffers' tensors
    shared with the partition instead of copied (executorch's copy held
    every weight of every method once more). Preprocess reads them and
    writes the graph only."""
    shared = [*edge_program.state_dict.values(), *edge_program.constants.values()]
    return copy.deepcopy(edge_program, {id(t): t for t in shared})


def store_tensor(store: NamedDataStore, prefix: str, t: torch.Tensor | TensorBytes) -> tuple[str, int]:
    """Adds ``t``'s bytes (contiguous) to the outer program's named data under a
    content key (``prefix`` + sha256): identical tensors of several methods
    or backends are stored, and uploaded, once. The store reads them from
    ``t``'s memory (:class:`TensorBytes`), without a copy. Returns (key, nbytes)."""
    data = t if isinstance(t, TensorBytes) else TensorBytes(t)
    key = prefix + data.sha256().hex()[:32]
    store.add_named_data(key, data, alignment=_C.TENSOR_ALIGNMENT)
    return key, len(data)


def record_header(
    store: NamedDataStore,
    device: tuple[str, int],
    weights: dict[str, torch.Tensor],
    state: dict[str, torch.Tensor],
    layout: dict[str, StateSlot],
    arena: tuple[str, int] | None,
) -> list[str]:
    """The lines every delegate record starts with (docs/design.md, "The
    delegate record, version 2"): magic and version, the device, a ``weight``
    line per entry of ``weights`` (fqn -> value, in that order, the bytes
    stored in ``store``), a ``state`` line per mutable buffer (name order,
    its slot in ``layout``; a non-zero initial value stored too) and, with
    state, the ``arena`` line (nested buffer index or "-", nbytes)."""
    lines = [f"{RECORD_MAGIC} {RECORD_VERSION}", f"device\t{device[0]}\t{device[1]}"]
    for fqn, value in weights.items():
        key, nbytes = store_tensor(store, WEIGHT_KEY, value)
        lines.append(f"weight\t{fqn}\t{key}\t{nbytes}")
    for name in sorted(state):
        initial = "-"
        if not TensorBytes(state[name]).is_zero():  # all-zero state is not stored: the runtime zero-fills the arena
            # A copy (state is small): the module's buffer changes whenever the module runs.
            initial, _ = store_tensor(store, STATE_KEY, state[name].clone())
        lines.append(f"state\t{name}\t{layout[name].offset}\t{layout[name].nbytes}\t{initial}")
    if state and arena is not None:
        lines.append(f"arena\t{arena[0]}\t{arena[1]}")
    return lines


def delegate_record(header: Sequence[str], kind: str, payload: bytes) -> bytes:
    """The processed bytes: ``header`` lines, the payload line, then the payload."""
    return ("\n".join([*header, f"payload\t{kind}\t{len(payload)}"]) + "\n").encode() + payload


def _preprocess(edge_program, compile_specs, layout: dict[str, StateSlot], arena_nbytes: int) -> PreprocessResult:
    op = f"et_copy.backend.{BACKEND_ID}.preprocess"
    device_type, device_index = device_of(compile_specs)
    state = mutable_state(edge_program)
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


class SimulatedDeviceBackend(BackendDetails):
    """Preprocess for ``et_copy::SimulatedDeviceBackend``: each partition
    becomes a delegate record holding a nested program (see the module
    docstring). All methods' partitions are preprocessed together, so they
    agree on one state arena."""

    @classmethod
    def copy_exported_program_for_preprocess(cls, edge_program, compile_specs):
        return copy_for_preprocess(edge_program)

    @staticmethod
    def preprocess(edge_program, compile_specs: list[CompileSpec]) -> PreprocessResult:
        layout, size = layout_of([edge_program])
        return _preprocess(edge_program, compile_specs, layout, size)

    @classmethod
    def preprocess_multimethod(cls, edge_programs, compile_specs):
        layout, size = layout_of([p for programs in edge_programs.values() for p in programs])
        return {
            name: [_preprocess(p, specs, layout, size) for p, specs in zip(programs, compile_specs[name])]
            for name, programs in edge_programs.items()
        }


def layout_of(programs, backend_id: str = BACKEND_ID) -> tuple[dict[str, StateSlot], int]:
    """The state arena's layout over every method's partitions (:func:`state_arena_layout`);
    ValueError when two of them disagree on a state tensor's shape or dtype."""
    nbytes: dict[str, int] = {}
    shapes: dict[str, tuple] = {}
    for ep in programs:
        for name, value in mutable_state(ep).items():
            shape = (tuple(value.shape), value.dtype)
            if shapes.setdefault(name, shape) != shape:
                raise ValueError(
                    f"et_copy.{backend_id}: methods disagree on state '{name}': {shapes[name]} and {shape}"
                )
            nbytes[name] = value.nbytes
    return state_arena_layout(nbytes)
