"""Run et_copy's C++ kernels (or the registry's) on torch tensors."""

from __future__ import annotations

from typing import Union

import torch

from . import _C
from ._device import CPU, CUDA
from ._dtypes import SCALAR_TYPE_CODES, scalar_type_code
from ._tensors import DYNAMIC_BOUND, STATIC, DeviceTensor, dim_order_of, empty, torch_spec

H2D_COPY_OUT = "et_copy::_h2d_copy.out"
D2H_COPY_OUT = "et_copy::_d2h_copy.out"

AnyTensor = Union[torch.Tensor, DeviceTensor]


def _spec(t: object, *, op: str, arg: str, dynamic_out: bool = False) -> dict:
    if isinstance(t, DeviceTensor):
        return t._spec(op=op, arg=arg)
    if isinstance(t, torch.Tensor):
        return torch_spec(t, op=op, arg=arg, dynamic=dynamic_out)
    raise TypeError(f"{op}: {arg} must be a torch.Tensor or an et_copy.DeviceTensor, got {type(t).__name__}")


def _run(runner, op: str, self: AnyTensor, out: AnyTensor, *, dynamic_out: bool = False) -> AnyTensor:
    self_spec = _spec(self, op=op, arg="self")
    out_spec = _spec(out, op=op, arg="out", dynamic_out=dynamic_out)
    return _take_shape(out, runner(op, self_spec, out_spec))


# The fast path of h2d_copy/d2h_copy: the same specs as _spec, packed in
# tuples that _C.run_kernel_packed reads without dicts (it derives torch
# dim orders and DeviceTensor strides by the rules of _tensors). Measured
# with python -m et_copy bench: the dict specs cost ~10x a 4 KiB torch copy_.
def _packed(t: object, op: str, arg: str, dynamic_out: bool = False) -> tuple:
    if isinstance(t, DeviceTensor):
        buffer = t._buffer
        if buffer.freed:
            raise ValueError(f"{op}: {arg} is a DeviceTensor whose memory was freed")
        code = SCALAR_TYPE_CODES.get(t.dtype)
        if code is None:
            code = scalar_type_code(t.dtype, op=op, arg=arg)
        device_type, device_index = t.device
        return (
            buffer.ptr,
            code,
            t._shape,
            None,
            t.dim_order,
            DYNAMIC_BOUND if t.dynamic else STATIC,
            device_type,
            device_index,
            t._capacity,
        )
    if isinstance(t, torch.Tensor):
        if t.is_cpu:
            device_type, device_index = CPU, 0
        elif t.is_cuda:
            device_type, device_index = CUDA, t.get_device()
        else:
            raise ValueError(f"{op}: {arg} is on {t.device}; et_copy moves CPU and CUDA tensors")
        code = SCALAR_TYPE_CODES.get(t.dtype)
        if code is None:
            code = scalar_type_code(t.dtype, op=op, arg=arg)
        shape = t.shape
        return (
            t.data_ptr(),
            code,
            shape,
            t.stride(),
            None,
            DYNAMIC_BOUND if dynamic_out else STATIC,
            device_type,
            device_index,
            shape if dynamic_out else None,
        )
    raise TypeError(f"{op}: {arg} must be a torch.Tensor or an et_copy.DeviceTensor, got {type(t).__name__}")


_C.set_fast_path_types(DeviceTensor, _C.DeviceBuffer, torch.Tensor, SCALAR_TYPE_CODES)


def _copy(h2d: bool, op: str, self: AnyTensor, out: AnyTensor, dynamic_out: bool) -> AnyTensor:
    """_run(_C.run_kernel, ...) through the fast path: the bindings read
    plain torch tensors and DeviceTensors themselves, and leave anything
    unusual (and every Python-side error) to _packed."""
    changed = _C.run_kernel_objects(h2d, self, out, dynamic_out)
    if changed is NotImplemented:
        changed = _C.run_kernel_packed(h2d, _packed(self, op, "self"), _packed(out, op, "out", dynamic_out))
    if changed is None:  # out kept its shape
        return out
    return _take_shape(out, changed)


def _take_shape(out: AnyTensor, changed: tuple) -> AnyTensor:
    sizes, strides = changed
    if isinstance(out, DeviceTensor):
        out._set_shape(sizes)
    elif list(out.shape) != list(sizes):
        # A dynamic torch out keeps its memory and takes the new shape.
        out.as_strided_(sizes, strides)
    return out


def h2d_copy(
    self: AnyTensor, *, out: AnyTensor | None = None, device: str = "cuda:0", dynamic_out: bool = False
) -> AnyTensor:
    """Copies host tensor ``self`` to the device with et_copy's kernel.

    ``out`` defaults to a new DeviceTensor on ``device`` with ``self``'s
    shape, dtype and dim order. A torch ``out`` is viewed in place (a CUDA
    tensor on a GPU machine); ``dynamic_out=True`` treats its shape as a
    capacity that the copy may shrink. Raises EtCopyError naming the
    problem; a rejected call leaves ``out`` untouched.
    """
    if out is not None:
        # The common case straight to the bindings; NotImplemented means
        # "not a plain tensor pair": the checks below then run as usual.
        changed = _C.run_kernel_objects(True, self, out, dynamic_out)
        if changed is None:
            return out
        if changed is not NotImplemented:
            return _take_shape(out, changed)
    op = H2D_COPY_OUT
    if not isinstance(self, (torch.Tensor, DeviceTensor)):
        raise TypeError(f"{op}: self must be a torch.Tensor, got {type(self).__name__}")
    if out is None:
        if isinstance(self, DeviceTensor):
            order = self.dim_order  # the kernel rejects the direction, by name
        else:
            scalar_type_code(self.dtype, op=op, arg="self")
            order = dim_order_of(self)
        out = empty(self.shape, self.dtype, device, dim_order=order)
    elif isinstance(self, torch.Tensor) and self.dtype not in SCALAR_TYPE_CODES:
        scalar_type_code(self.dtype, op=op, arg="self")  # the dtype error comes first, as above
    return _copy(True, op, self, out, dynamic_out)


def d2h_copy(self: AnyTensor, *, out: torch.Tensor | None = None, dynamic_out: bool = False) -> torch.Tensor:
    """Copies device tensor ``self`` to the host with et_copy's kernel.

    ``out`` defaults to a new CPU tensor with ``self``'s shape, dtype and
    dim order; ``dynamic_out=True`` lets the copy shrink a given ``out``.
    """
    if out is not None:
        changed = _C.run_kernel_objects(False, self, out, dynamic_out)  # as in h2d_copy
        if changed is None:
            return out
        if changed is not NotImplemented:
            return _take_shape(out, changed)
    op = D2H_COPY_OUT
    if out is None:
        if isinstance(self, DeviceTensor):
            out = torch.empty_permuted(tuple(self.shape), self.dim_order, dtype=self.dtype)
        elif isinstance(self, torch.Tensor):
            out = torch.empty_permuted(tuple(self.shape), dim_order_of(self), dtype=self.dtype)
        else:
            raise TypeError(f"{op}: self must be a torch.Tensor or an et_copy.DeviceTensor, got {type(self).__name__}")
    return _copy(False, op, self, out, dynamic_out)


def run_registered(op_name: str, self: AnyTensor, out: AnyTensor, *, dynamic_out: bool = False) -> AnyTensor:
    """Runs whatever kernel ExecuTorch's registry resolves for ``op_name``
    (e.g. "et_copy::_h2d_copy.out") on ``self`` and ``out``; returns ``out``.

    In a process that imported ``executorch.runtime`` this is the wheel's
    kernel, which checks less than et_copy's: use guard bytes (as the parity
    harness does) before handing it buffers you care about.
    """
    if not isinstance(op_name, str):
        raise TypeError(f"et_copy.run_registered: op_name must be a str, got {type(op_name).__name__}")
    return _run(_C.run_registered, op_name, self, out, dynamic_out=dynamic_out)
