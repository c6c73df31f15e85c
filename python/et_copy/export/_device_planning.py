"""The copy-only route's memory planning: :class:`DevicePlanningPass` plans
the device side of et_copy boundaries on the device. State has no place
there: it needs a device backend (:func:`state_refusal`)."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.schema import DeviceType
from executorch.exir.tensor import TensorSpec

from .._device import parse_device


class DevicePlanningPass(MemoryPlanningPass):
    """A MemoryPlanningPass that plans the device side of et_copy boundaries on ``device``.

    Right before planning (earlier tags are lost: SpecPropPass recreates the
    specs) it tags the output of every ``_h2d_copy.out`` with the device, and
    every tensor computed from a device tensor, up to the ``_d2h_copy.out``
    that brings it back. Constants and graph inputs stay on the host. Takes
    MemoryPlanningPass's keyword arguments (``alloc_graph_input``, ...).

    A graph with mutable buffers (an LLM's caches) is refused with a
    ValueError naming them: state on the device is computed on by a device
    backend (``export_device_program``'s ``backend``), never by the host's
    kernels. Tensors computed between the copies run through CPU kernels on
    device memory: that works with et_copy's simulated device (host memory)
    only. On a real GPU keep the program copy-only, or use a delegate.
    """

    def __init__(
        self,
        device: str = "cuda:0",
        resident_inputs: Sequence[int] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.device = parse_device(device, op="et_copy.export.DevicePlanningPass")
        self.resident_inputs = tuple(resident_inputs)

    def run(self, graph_module: torch.fx.GraphModule, graph_signature=None):
        state = mutated_buffers(graph_signature)
        if state:
            raise ValueError(f"et_copy.export.DevicePlanningPass: {state_refusal(state)}")
        device_type = DeviceType(self.device.type)
        if self.resident_inputs:
            # Method inputs the caller hands over on the device (DeviceBoundary's resident_inputs).
            names = {graph_signature.user_inputs[i] for i in self.resident_inputs}
            for node in graph_module.graph.nodes:
                if node.op == "placeholder" and node.name in names:
                    node.meta["spec"].device, node.meta["spec"].device_index = device_type, self.device.index
        _tag_device_side(graph_module, device_type, self.device.index)
        return super().run(graph_module, graph_signature)


def mutated_buffers(graph_signature) -> list[str]:
    """The names of the buffers a method mutates (its state), sorted."""
    return sorted(set(graph_signature.buffers_to_mutate.values())) if graph_signature is not None else []


def state_refusal(buffers: Sequence[str]) -> str:
    """Why the copy-only route refuses a module with state ``buffers``."""
    names = ", ".join(f"'{b}'" for b in buffers)
    return (
        f"the copy-only route (no device backend) cannot keep state, and the module mutates buffer(s) {names}: "
        "state needs a device backend to compute on it; use backend='simulated' or 'aoti' with insert_copies=True"
    )


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
