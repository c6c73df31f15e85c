"""The partitioning every et-copy device backend shares: the whole graph in
one delegate, with its weights and mutable buffers, tagged with the
``target_device`` compile spec so that executorch's PropagateDevicePass
copies around it."""

from __future__ import annotations

from typing import ClassVar, Sequence

import torch
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data, tag_mutated_buffer
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .._device import parse_device
from .record import TARGET_DEVICE_KEY


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
