"""The reference device backend's ahead-of-time side (reference_backend.h is
its runtime side): a partitioner and a ``BackendDetails`` built from the
pieces every et-copy backend shares (:class:`DevicePartitioner`,
:class:`DevicePreprocess`, the delegate record's writer), lowering a graph of
float32 elementwise ``add``/``sub``/``mul``/``relu`` over one shape to the
``reference`` payload: one line per step, operands ``%k`` (a value) or
``@fqn`` (a weight, stored in the program's named data)."""

from __future__ import annotations

import torch
from et_copy.backends.partitioner import DevicePartitioner
from et_copy.backends.preprocess import DevicePreprocess
from et_copy.backends.record import delegate_record, device_of, record_header
from et_copy.backends.state import StateSlot
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.dialects._ops import ops as exir_ops

from . import BACKEND_ID

PAYLOAD_REFERENCE = "reference"  # reference_backend.h: kPayloadReference

_STEPS = {
    exir_ops.edge.aten.add.Tensor: "add",
    exir_ops.edge.aten.sub.Tensor: "sub",
    exir_ops.edge.aten.mul.Tensor: "mul",
    exir_ops.edge.aten.relu.default: "relu",
}


class ReferencePartitioner(DevicePartitioner):
    """The whole graph in one ReferenceDeviceBackend delegate."""

    backend_id = BACKEND_ID


def _lower(edge_program, compile_specs, layout: dict[str, StateSlot], arena_nbytes: int) -> PreprocessResult:
    op = f"et_copy.{BACKEND_ID}.preprocess"
    if layout:
        raise RuntimeError(f"{op}: the reference payload holds no state")
    sig = edge_program.graph_signature
    constants = {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **sig.inputs_to_lifted_tensor_constants}
    values = {**edge_program.state_dict, **edge_program.constants}
    names: dict[str, str] = {}  # graph node -> operand
    weights: dict[str, torch.Tensor] = {}
    inputs = 0
    lines = []
    for node in edge_program.graph_module.graph.nodes:
        if node.op == "placeholder" and node.name in constants:
            fqn = constants[node.name]
            weights[fqn] = values[fqn].contiguous()
            names[node.name] = f"@{fqn}"
        elif node.op == "placeholder":
            names[node.name] = f"%{inputs}"
            inputs += 1
        elif node.op == "call_function" and node.target in _STEPS:
            args = [names[a.name] for a in node.args]
            names[node.name] = f"%{inputs + len(lines)}"
            lines.append(" ".join([_STEPS[node.target], *args]))
        elif node.op == "output":
            outputs = [names[a.name] for a in node.args[0]]
        else:
            raise RuntimeError(f"{op}: {node.op} {node.target} is not one of the reference steps")
    payload = "\n".join([f"inputs {inputs}", *lines, "outputs " + " ".join(outputs)]) + "\n"
    store = NamedDataStore()
    header = record_header(store, device_of(compile_specs, BACKEND_ID), weights, {}, layout, None)
    record = delegate_record(header, PAYLOAD_REFERENCE, payload.encode())
    return PreprocessResult(processed_bytes=record, data_store_output=store.get_named_data_store_output())


class ReferenceDeviceBackend(DevicePreprocess, BackendDetails):
    """Preprocess for ReferenceDeviceBackend (executorch finds it by this class's name)."""

    backend_id = BACKEND_ID
    lower_partition = staticmethod(_lower)
