"""The constructor arguments of a DeviceTensor, for tests that rebuild one
over the same memory with a field changed (test_device_tensor_fields.py,
test_device_tensor_views.py)."""

from __future__ import annotations

import et_copy


def fields_of(dev: et_copy.DeviceTensor, **changes) -> dict:
    """The constructor's arguments that rebuild `dev` over its memory, with `changes`."""
    fields = dict(
        buffer=dev._buffer,
        dtype=dev.dtype,
        device=dev.device,
        shape=tuple(dev.shape),
        dim_order=dev.dim_order,
        dynamic=dev.dynamic,
    )
    return {**fields, **changes}
