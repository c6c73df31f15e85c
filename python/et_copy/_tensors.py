"""DeviceTensor, device memory from the registered allocator, and the
metadata the bindings need to view torch tensors without copying them."""

from __future__ import annotations

import math
from typing import Sequence

import torch

from . import _C, cuda
from ._device import Device, parse_device
from ._dtypes import QUANTIZED_DTYPES, scalar_type_code

# cudaMalloc aligns to 256 bytes; the simulated device matches it so code
# that tests well here behaves the same on a GPU.
_ALIGNMENT = 256
_MAX_DIM = 2**31 - 1  # ExecuTorch's SizesType is int32


def contiguous_strides(shape: Sequence[int], dim_order: Sequence[int]) -> list[int]:
    """Element strides of a dense tensor laid out in ``dim_order`` (size-0
    dims count as 1, as torch's do). The rule is the bindings'."""
    return _C.dense_strides(list(shape), list(dim_order))


def dim_order_of(t: torch.Tensor) -> list[int]:
    """The dim order a torch tensor is laid out in (outermost first); ties
    between equal strides keep the natural order. The rule is the bindings'."""
    return _C.dim_order_of(t.stride())


class DeviceTensor:
    """A tensor in device memory that et_copy's allocator owns.

    Made by :func:`empty` or :func:`h2d_copy`. The memory is freed exactly
    once: by :meth:`free`, or when the object is collected. ``dynamic``
    tensors keep their capacity and take the shape of whatever is copied in.

    The constructor takes the memory as an ``et_copy._C.DeviceBuffer``
    (what :func:`empty` allocates) or a slice of one
    (``buffer.slice(offset, nbytes)``, freed with its parent: how the parity
    harness surrounds a tensor with guard bytes), with ``shape`` (also the
    capacity), ``dim_order`` a permutation of the dims, and ``device`` the
    metadata the kernels see. The bindings read no other kind of buffer.
    """

    __slots__ = ("_buffer", "dtype", "device", "dim_order", "dynamic", "_capacity", "_shape", "__weakref__")

    def __init__(
        self,
        buffer: _C.DeviceBuffer,
        dtype: torch.dtype,
        device: Device,
        shape: tuple[int, ...],
        dim_order: tuple[int, ...],
        dynamic: bool,
    ) -> None:
        self._buffer = buffer
        self.dtype = dtype
        self.device = device
        self.dim_order = dim_order
        self.dynamic = dynamic
        self._capacity = shape
        self._shape = shape

    @property
    def shape(self) -> torch.Size:
        return torch.Size(self._shape)

    @property
    def capacity(self) -> torch.Size:
        """The shape this tensor's memory was sized for."""
        return torch.Size(self._capacity)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return math.prod(self._shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the current shape (at most ``capacity_nbytes``)."""
        return self.numel() * self.itemsize

    @property
    def capacity_nbytes(self) -> int:
        return self._buffer.nbytes

    def data_ptr(self) -> int:
        return self._buffer.ptr

    @property
    def freed(self) -> bool:
        return self._buffer.freed

    def free(self) -> None:
        """Returns the memory to the allocator now (idempotent)."""
        self._buffer.free()

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

    def __repr__(self) -> str:
        dyn = f", capacity={tuple(self._capacity)}" if self.dynamic else ""
        state = ", freed" if self.freed else ""
        return f"DeviceTensor(shape={tuple(self._shape)}, dtype={self.dtype}, device='{self.device}'{dyn}{state})"


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


# The bindings read DeviceTensors from these slots (python/bindings/tensor_reader.cpp).
_C.set_device_tensor_type(DeviceTensor)


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
    contiguous. Raises EtCopyError("NotFound") when no allocator is
    registered for CUDA, and the allocator's error for a bad device index.
    """
    op = "et_copy.empty"
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"{op}: shape {shape} has a negative size")
    if any(s > _MAX_DIM for s in shape):
        # ExecuTorch's tensor metadata holds int32 sizes: memory for a larger
        # dim could be allocated but never copied.
        raise ValueError(
            f"{op}: shape {shape} does not fit ExecuTorch's tensor metadata (a dim of at most {_MAX_DIM} elements)"
        )
    scalar_type_code(dtype, op=op, arg="the tensor")
    dev = parse_device(device, op=op)
    order = tuple(range(len(shape))) if dim_order is None else tuple(int(d) for d in dim_order)
    if sorted(order) != list(range(len(shape))):
        raise ValueError(f"{op}: dim_order {order} is not a permutation of the {len(shape)} dims of shape {shape}")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes >= 2**64:
        raise ValueError(f"{op}: shape {shape} of {dtype} needs {nbytes} bytes, beyond a 64-bit size")
    buffer = _C.DeviceBuffer(nbytes, dev.type, dev.index, _ALIGNMENT)
    return DeviceTensor(buffer, dtype, dev, shape, order, dynamic)
