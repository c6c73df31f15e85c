"""The copies around a module, inserted by wrapping it: :class:`DeviceBoundary`
(the copy-only route's ``insert_copies=True``)."""

from __future__ import annotations

import inspect
from typing import Any, Sequence

import torch

from .. import aot


class DeviceBoundary(torch.nn.Module):
    """Runs ``module`` on the device side of a boundary: every tensor input
    (positional or keyword) passes through ``_h2d_copy`` first, every tensor
    output through ``_d2h_copy`` after (inputs and outputs may be nested
    tuples/lists/dicts).

    ``resident_inputs`` / ``resident_outputs`` name positional arguments and
    top-level outputs (by index) that stay on the device: no copy, so the
    caller passes and receives device tensors.

    The two ops are resolved here, not in ``forward``: resolving them takes
    a lock on first use, and strict export (Dynamo) cannot trace a context
    manager."""

    def __init__(
        self, module: torch.nn.Module, resident_inputs: Sequence[int] = (), resident_outputs: Sequence[int] = ()
    ) -> None:
        super().__init__()
        self.module = module
        self.resident_inputs = frozenset(resident_inputs)
        self.resident_outputs = frozenset(resident_outputs)
        self._h2d, self._d2h = aot.h2d_copy_op(), aot.d2h_copy_op()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        h2d, d2h = self._h2d, self._d2h
        args = tuple(
            a if i in self.resident_inputs else torch.utils._pytree.tree_map_only(torch.Tensor, h2d, a)
            for i, a in enumerate(args)
        )
        kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, h2d, kwargs)
        out = self.module(*args, **kwargs)
        if not self.resident_outputs:
            return torch.utils._pytree.tree_map_only(torch.Tensor, d2h, out)
        return tuple(
            o if i in self.resident_outputs else torch.utils._pytree.tree_map_only(torch.Tensor, d2h, o)
            for i, o in enumerate(out)
        )


def boundary_dynamic_shapes(module: torch.nn.Module, dynamic_shapes: Any, n_args: int, kwarg_names: list) -> Any:
    # DeviceBoundary.forward takes *args, **kwargs: give it the module's
    # per-argument specs in that form.
    if dynamic_shapes is None:
        return None
    if isinstance(dynamic_shapes, dict):
        names = list(inspect.signature(module.forward).parameters)
        args = tuple(dynamic_shapes.get(name) for name in names[:n_args])
        kwargs = {name: dynamic_shapes.get(name) for name in kwarg_names}
    else:
        args, kwargs = tuple(dynamic_shapes)[:n_args], {}
    return {"args": args, "kwargs": kwargs} if kwargs else {"args": args}
