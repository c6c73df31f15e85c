"""DeviceTensor, device memory from the registered allocator, and the
metadata the bindings need to view torch tensors without copying them."""

from __future__ import annotations

import math
from typing import Sequence

import torch

from . import _C, cuda
from ._device import parse_device
from ._dtypes import QUANTIZED_DTYPES

# cudaMalloc's alignment, asked of the simulated device too, so code that
# tests well here behaves the same on a GPU (the core's kDeviceAlignment).
_ALIGNMENT = _C.DEVICE_ALIGNMENT


def contiguous_strides(shape: Sequence[int], dim_order: Sequence[int]) -> list[int]:
    """Element strides of a dense tensor laid out in ``dim_order`` (size-0
    dims count as 1, as torch's do). The rule is the bindings'."""
    return _C.dense_strides(list(shape), list(dim_order))


def dim_order_of(t: torch.Tensor) -> list[int]:
    """The dim order a torch tensor is laid out in (outermost first); ties
    between equal strides keep the natural order. The rule is the bindings'."""
    return _C.dim_order_of(t.stride())


class DeviceTensor(_C.DeviceTensor):
    """A tensor in device memory that et_copy's allocator owns.

    Made by :func:`empty` or :func:`h2d_copy`. The memory is freed exactly
    once: by :meth:`free`, or when the object is collected. ``dynamic``
    tensors keep their capacity and take the shape of whatever is copied in.

    The constructor, ``DeviceTensor(buffer, dtype, device, shape, dim_order,
    dynamic)``, takes the memory as an ``et_copy._C.DeviceBuffer`` (what
    :func:`empty` allocates) or a slice of one (``buffer.slice(offset,
    nbytes)``, freed with its parent: how the parity harness surrounds a
    tensor with guard bytes), with ``shape`` (also the capacity, whose bytes
    must fit the buffer), ``dim_order`` a permutation of the dims, and
    ``device`` the metadata the kernels see (a CUDA :class:`Device`). The
    bindings define the data and check every argument once, here
    (python/bindings/device_tensor.cpp); its fields are read-only after.
    This class adds what needs Python.
    """

    __slots__ = ()

    def cpu(self) -> torch.Tensor:
        """A new host tensor with this tensor's bytes (et_copy's d2h kernel)."""
        return _C.d2h_copy(self, host_tensor_like(self), False)

    # Zero-copy exports of real CUDA memory (see et_copy.cuda); memory of
    # the simulated device raises EtCopyError("NotSupported").
    @property
    def __cuda_array_interface__(self) -> dict:
        return cuda.cuda_array_interface(self)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return cuda.dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return cuda.dlpack_device(self)


def host_tensor_like(t: DeviceTensor | torch.Tensor) -> torch.Tensor:
    """An uninitialised CPU tensor with ``t``'s shape, dtype and dim order,
    to copy ``t`` into. For a quantized dtype it is the bytes viewed as that
    dtype, with no scale or zero point (ExecuTorch's tensors carry none):
    pass a quantized ``out`` to keep them."""
    order = tuple(t.dim_order if isinstance(t, DeviceTensor) else dim_order_of(t))
    if t.dtype not in QUANTIZED_DTYPES:
        return torch.empty_permuted(tuple(t.shape), order, dtype=t.dtype)
    # torch allocates no quantized tensor without a quantizer, but views bytes as one.
    shape = tuple(t.shape)
    physical = [shape[d] for d in order]
    raw = torch.empty(math.prod(shape) * t.dtype.itemsize, dtype=torch.uint8)
    return raw.view(t.dtype).view(physical).permute([order.index(d) for d in range(len(order))])


def empty(
    shape: Sequence[int],
    dtype: torch.dtype,
    device: str = "cuda:0",
    *,
    dynamic: bool = False,
    dim_order: Sequence[int] | None = None,
) -> DeviceTensor:
    """Uninitialised device memory for a tensor of ``shape`` and ``dtype``.

    ``dynamic=True`` makes ``shape`` an upper bound: copies of smaller
    tensors resize it. ``dim_order`` (outermost first) defaults to
    contiguous. Raises ValueError for a negative size, one beyond
    ExecuTorch's int32 sizes, a dim order that is no permutation or a byte
    count beyond 64 bits, TypeError for a dtype et_copy does not move,
    EtCopyError("InvalidArgument") for more than ``_C.MAX_TENSOR_DIMS`` dims,
    EtCopyError("NotFound") when no allocator is registered for CUDA, and
    the allocator's error for a bad device index.
    """
    # The rules for shape, dtype and dim order are the bindings', checked
    # once there, before any memory is allocated.
    dev = parse_device(device, op="et_copy.empty")
    return DeviceTensor._allocate(shape, dtype, dev, dim_order, dynamic, _ALIGNMENT)
