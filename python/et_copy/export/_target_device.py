"""Another partitioner as the device: :func:`with_target_device` wraps any
partitioner so that its partitions carry ``CompileSpec("target_device",
b"cuda:N")``, and executorch's PropagateDevicePass copies around them."""

from __future__ import annotations

from typing import Callable

import torch
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult

from .._device import parse_device

TARGET_DEVICE_KEY = "target_device"  # executorch's PropagateDevicePass reads this CompileSpec key


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
