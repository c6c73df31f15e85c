"""Run et_copy's C++ kernels (or the registry's) on torch tensors and
DeviceTensors. The bindings read both themselves (python/bindings/
tensor_reader.cpp) and raise every argument error, naming the op and the
argument."""

from __future__ import annotations

from typing import Sequence, TypeVar, Union, overload

import torch

from . import _C
from ._dtypes import scalar_type_code
from ._errors import EtCopyError
from ._tensors import DeviceTensor, dim_order_of, empty, host_tensor_like

H2D_COPY_OUT = "et_copy::_h2d_copy.out"
D2H_COPY_OUT = "et_copy::_d2h_copy.out"

AnyTensor = Union[torch.Tensor, DeviceTensor]
_Out = TypeVar("_Out", torch.Tensor, DeviceTensor)


@overload
def h2d_copy(
    self: AnyTensor, *, out: None = None, device: str = "cuda:0", dynamic_out: bool = False
) -> DeviceTensor: ...
@overload
def h2d_copy(self: AnyTensor, *, out: _Out, device: str = "cuda:0", dynamic_out: bool = False) -> _Out: ...
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
    if out is None:
        out = _device_tensor_like(self, device)
    return _C.h2d_copy(self, out, dynamic_out)


def _device_tensor_like(self: object, device: str) -> DeviceTensor:
    op = H2D_COPY_OUT
    order: Sequence[int]
    if isinstance(self, DeviceTensor):
        order = self.dim_order  # the kernel then rejects the direction, by name
    elif isinstance(self, torch.Tensor):
        # Before any memory is allocated, so the error names this op, not et_copy.empty;
        # a tensor with no strides has no dim order to give the new one (the bindings' words).
        if self.is_nested:
            raise ValueError(f"{op}: self is a nested tensor; et_copy moves strided tensors (to_padded_tensor() first)")
        if self.layout != torch.strided:
            raise ValueError(f"{op}: self has layout {self.layout}; et_copy moves strided tensors (to_dense() first)")
        scalar_type_code(self.dtype, op=op, arg="self")
        if self.dim() > _C.MAX_TENSOR_DIMS:
            raise EtCopyError(
                f"{op}: self has {self.dim()} dims; ExecuTorch supports at most {_C.MAX_TENSOR_DIMS}",
                error="InvalidArgument",
            )
        order = dim_order_of(self)
    else:
        raise TypeError(f"{op}: self must be a torch.Tensor, got {type(self).__name__}")
    return empty(self.shape, self.dtype, device, dim_order=order)


def d2h_copy(self: AnyTensor, *, out: torch.Tensor | None = None, dynamic_out: bool = False) -> torch.Tensor:
    """Copies device tensor ``self`` to the host with et_copy's kernel.

    ``out`` defaults to a new CPU tensor with ``self``'s shape, dtype and
    dim order (a quantized ``self`` needs an ``out`` carrying its scale and
    zero point); ``dynamic_out=True`` lets the copy shrink a given ``out``.
    """
    if out is None:
        if not isinstance(self, (torch.Tensor, DeviceTensor)):
            raise TypeError(
                f"{D2H_COPY_OUT}: self must be a torch.Tensor or an et_copy.DeviceTensor, got {type(self).__name__}"
            )
        out = host_tensor_like(self)
    return _C.d2h_copy(self, out, dynamic_out)


def run_registered(op_name: str, self: AnyTensor, out: AnyTensor, *, dynamic_out: bool = False) -> AnyTensor:
    """Runs whatever kernel ExecuTorch's registry resolves for ``op_name``
    (e.g. "et_copy::_h2d_copy.out") on ``self`` and ``out``; returns ``out``.

    In a process that imported ``executorch.runtime`` this is the wheel's
    kernel, which checks less than et_copy's: use guard bytes (as the parity
    harness does) before handing it buffers you care about.
    """
    if not isinstance(op_name, str):
        raise TypeError(f"et_copy.run_registered: op_name must be a str, got {type(op_name).__name__}")
    return _C.run_registered(op_name, self, out, dynamic_out)
