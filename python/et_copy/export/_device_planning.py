"""The copy-only route's memory planning: :class:`DevicePlanningPass` plans
the device side of et_copy boundaries, and the program's state arena, on
the device."""

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
        state = state_placeholders(graph_signature) if self.alloc_mutable_buffers else {}
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


def state_placeholders(graph_signature) -> dict[str, str]:
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
