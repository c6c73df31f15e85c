"""Run et_copy's C++ kernels (or the registry's) on torch tensors."""

from __future__ import annotations

from typing import Union

import torch

from . import _C
from ._dtypes import scalar_type_code
from ._tensors import DeviceTensor, dim_order_of, empty, torch_spec

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
    sizes, strides = runner(op, self_spec, out_spec)
    if isinstance(out, DeviceTensor):
        out._set_shape(sizes)
    elif list(out.shape) != list(sizes):
        # A dynamic torch out keeps its memory and takes the new shape.
        out.as_strided_(sizes, strides)
    return out


def h2d_copy(self: AnyTensor, *, out: AnyTensor | None = None, device: str = "cuda:0",
             dynamic_out: bool = False) -> AnyTensor:
    """Copies host tensor ``self`` to the device with et_copy's kernel.

    ``out`` defaults to a new DeviceTensor on ``device`` with ``self``'s
    shape, dtype and dim order. A torch ``out`` is viewed in place (a CUDA
    tensor on a GPU machine); ``dynamic_out=True`` treats its shape as a
    capacity that the copy may shrink. Raises EtCopyError naming the
    problem; a rejected call leaves ``out`` untouched.
    """
    op = H2D_COPY_OUT
    if isinstance(self, DeviceTensor):
        order = self.dim_order  # the kernel rejects the direction, by name
    elif isinstance(self, torch.Tensor):
        scalar_type_code(self.dtype, op=op, arg="self")
        order = dim_order_of(self)
    else:
        raise TypeError(f"{op}: self must be a torch.Tensor, got {type(self).__name__}")
    if out is None:
        out = empty(self.shape, self.dtype, device, dim_order=order)
    return _run(_C.run_kernel, op, self, out, dynamic_out=dynamic_out)


def d2h_copy(self: AnyTensor, *, out: torch.Tensor | None = None, dynamic_out: bool = False) -> torch.Tensor:
    """Copies device tensor ``self`` to the host with et_copy's kernel.

    ``out`` defaults to a new CPU tensor with ``self``'s shape, dtype and
    dim order; ``dynamic_out=True`` lets the copy shrink a given ``out``.
    """
    op = D2H_COPY_OUT
    if out is None:
        if isinstance(self, DeviceTensor):
            out = torch.empty_permuted(tuple(self.shape), self.dim_order, dtype=self.dtype)
        elif isinstance(self, torch.Tensor):
            out = torch.empty_permuted(tuple(self.shape), dim_order_of(self), dtype=self.dtype)
        else:
            raise TypeError(f"{op}: self must be a torch.Tensor or an et_copy.DeviceTensor, got {type(self).__name__}")
    return _run(_C.run_kernel, op, self, out, dynamic_out=dynamic_out)


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
