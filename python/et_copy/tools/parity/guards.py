"""Guarded buffers: every tensor the harness hands an implementation sits
inside a larger allocation with a known byte pattern on both sides.

After each call the pattern is checked, so a write past either end of a
buffer is reported (how many bytes changed, how far from the edge) instead
of corrupting the process. Device buffers are one allocation holding guard,
body and guard, so an overrun lands in the guard: the simulated allocator
refuses copies that leave a live allocation, and a real device would fault.
"""

from __future__ import annotations

import ctypes
import functools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from ... import _C, _tensors
from ..._device import CUDA, Device

# Guards and bodies start on the boundaries device allocations do (cudaMalloc's).
ALIGN = _C.DEVICE_ALIGNMENT


# Slack on top of the worst byte copy, for writes that start at the wrong
# place rather than run on too long.
_SLACK = 64 * 1024


def guard_size(self_nbytes: int, out_nbytes: int) -> int:
    """Guard bytes per side for a case copying between buffers of these
    sizes. A byte copy into out writes at most max(self, out) bytes, so it
    passes out's end by at most ``self - out``; the guard holds that plus
    slack (min(largest buffer, 64 KiB) + ALIGN), rounded up to ALIGN."""
    need = max(self_nbytes - out_nbytes, 0) + min(max(self_nbytes, out_nbytes), _SLACK) + ALIGN
    return (need + ALIGN - 1) // ALIGN * ALIGN


@functools.lru_cache(maxsize=None)
def _cycle(salt: int) -> torch.Tensor:
    i = torch.arange(_PERIOD, dtype=torch.int64)
    return ((i * 167 + salt * 59 + 0xA5) % _PERIOD).to(torch.uint8)


_PERIOD = 251  # prime: the pattern never lines up with element sizes


@functools.lru_cache(maxsize=16)
def pattern(n: int, salt: int) -> torch.Tensor:
    """``n`` bytes that no copy of tensor data produces by chance: a
    non-constant sequence, different per ``salt``, so a shifted or partial
    write still shows. Cached: read it, copy it, never write to it."""
    return _cycle(salt).repeat(n // _PERIOD + 1)[:n]


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """A dense tensor's bytes in memory order, as a flat uint8 tensor."""
    order = _tensors.dim_order_of(t)
    flat = t.permute(order).contiguous().reshape(-1) if t.dim() else t.reshape(1)
    return flat.view(torch.uint8)


@dataclass
class Violation:
    """Bytes that changed where nothing may write."""

    buffer: str  # "out" or "self"
    where: str  # "before", "after" (guards) or "inside" (a body that must not change)
    changed: int  # bytes that differ
    reach: int  # guards: distance of the farthest changed byte from the body's edge

    def describe(self) -> str:
        if self.where == "after":
            return f"wrote {self.reach} byte(s) past the end of {self.buffer} ({self.changed} guard bytes changed)"
        if self.where == "before":
            return f"wrote {self.reach} byte(s) before the start of {self.buffer} ({self.changed} guard bytes changed)"
        return f"changed {self.changed} byte(s) of {self.buffer}"

    def to_json(self) -> dict:
        return {"buffer": self.buffer, "where": self.where, "changed": self.changed, "reach": self.reach}


def _diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Offsets where a and b differ."""
    if torch.equal(a, b):
        return a.new_empty(0, dtype=torch.int64)
    return torch.nonzero(a != b).reshape(-1)


class Guarded:
    """Shared logic: ``_read()`` returns guard + body + guard as uint8."""

    name: str
    guard: int
    body_nbytes: int
    initial: torch.Tensor  # what the whole region held before the call
    tensor: torch.Tensor | _tensors.DeviceTensor  # the body, as the op under test sees it

    def _read(self) -> torch.Tensor:
        raise NotImplementedError

    def free(self) -> None:
        raise NotImplementedError

    def body(self) -> torch.Tensor:
        """The body's bytes now (a copy for device buffers)."""
        return self._read()[self.guard : self.guard + self.body_nbytes]

    def initial_body(self) -> torch.Tensor:
        return self.initial[self.guard : self.guard + self.body_nbytes]

    def check(self, *, body_must_not_change: bool = False) -> list[Violation]:
        """Violations of the guards (and of the body, when asked)."""
        now = self._read()
        g, n = self.guard, self.body_nbytes
        found = []
        before = _diff(now[:g], self.initial[:g])
        if before.numel():
            found.append(Violation(self.name, "before", before.numel(), g - int(before.min())))
        after = _diff(now[g + n :], self.initial[g + n :])
        if after.numel():
            found.append(Violation(self.name, "after", after.numel(), int(after.max()) + 1))
        if body_must_not_change:
            inside = _diff(now[g : g + n], self.initial[g : g + n])
            if inside.numel():
                found.append(Violation(self.name, "inside", inside.numel(), 0))
        return found


def _layout(
    shape: Sequence[int], dim_order: Sequence[int] | None
) -> tuple[tuple[int, ...], tuple[int, ...], list[int]]:
    shape = tuple(int(s) for s in shape)
    order = tuple(range(len(shape))) if dim_order is None else tuple(dim_order)
    # torch's strides for this layout (they differ from ExecuTorch's where a
    # size is 0): host tensors look like the ones users make.
    strides = list(torch.empty_permuted(shape, order, device="meta").stride())
    return shape, order, strides


class GuardedHost(Guarded):
    """A host tensor of ``shape`` (laid out in ``dim_order``) inside a guarded
    torch buffer. ``fill`` is the body's initial bytes; ``view`` optionally
    derives the tensor handed out from the dense one (e.g. a strided slice)."""

    tensor: torch.Tensor

    def __init__(
        self,
        name: str,
        dtype: torch.dtype,
        shape: Sequence[int],
        guard: int,
        fill: torch.Tensor,
        *,
        dim_order: Sequence[int] | None = None,
        view: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        shape, order, strides = _layout(shape, dim_order)
        self.name = name
        self.guard = guard
        self.body_nbytes = math.prod(shape) * dtype.itemsize
        assert fill.numel() == self.body_nbytes, (fill.numel(), self.body_nbytes)
        self.initial = torch.cat([pattern(guard, 1), fill, pattern(guard, 2)])
        self.raw = self.initial.clone()
        body = self.raw[guard : guard + self.body_nbytes].view(dtype)
        self.dense = body.as_strided(shape, strides)
        self.tensor = view(self.dense) if view is not None else self.dense

    def _read(self) -> torch.Tensor:
        return self.raw

    def free(self) -> None:
        pass


def device_view(
    parent: _tensors.DeviceTensor,
    offset: int,
    shape: Sequence[int],
    dtype: torch.dtype,
    *,
    dim_order: Sequence[int] | None = None,
    dynamic: bool = False,
    device: Device | None = None,
) -> _tensors.DeviceTensor:
    """A DeviceTensor over ``parent``'s bytes from ``offset``, sized for
    ``shape`` (its capacity). ``device`` overrides the metadata only (the
    memory stays where ``parent`` lives), to build deliberately wrong tensors."""
    shape = tuple(int(s) for s in shape)
    order = tuple(range(len(shape))) if dim_order is None else tuple(int(d) for d in dim_order)
    nbytes = math.prod(shape) * dtype.itemsize
    return _tensors.DeviceTensor(
        parent._buffer.slice(offset, nbytes), dtype, device or parent.device, shape, order, dynamic
    )


def _write_device(dst: _tensors.DeviceTensor, src: torch.Tensor) -> None:
    """Writes ``src`` (contiguous uint8) over the start of ``dst``'s memory."""
    n = src.numel()
    if n:
        # A buffer over src's memory: torch tensors export none themselves.
        data = (ctypes.c_char * n).from_address(src.data_ptr())
        _C.simulated_device_write(dst.data_ptr(), data, dst.device.index)


def _read_device(src: _tensors.DeviceTensor) -> torch.Tensor:
    """A host copy of ``src``'s whole capacity, as uint8."""
    n = src.capacity_nbytes
    if n == 0:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(_C.simulated_device_read(src.data_ptr(), n, src.device.index), dtype=torch.uint8)


class GuardedDevice(Guarded):
    """A DeviceTensor of ``shape`` inside one device allocation holding
    guard, body and guard. Written and read whole through the simulated
    device's inspection hook (``et_copy._C.simulated_device_read/write``,
    the host alias, as a debugger reads a GPU): not with the kernels under
    test, counted by no allocator counter, and valid on host-unreadable
    device memory. ``device_index`` sets the tensor's metadata only: the
    memory is on device 0, to build tensors that claim a missing device."""

    def __init__(
        self,
        name: str,
        dtype: torch.dtype,
        shape: Sequence[int],
        guard: int,
        fill: torch.Tensor,
        *,
        dim_order: Sequence[int] | None = None,
        dynamic: bool = False,
        device_index: int = 0,
    ) -> None:
        shape, order, _ = _layout(shape, dim_order)
        self.name = name
        self.guard = guard
        self.body_nbytes = math.prod(shape) * dtype.itemsize
        assert fill.numel() == self.body_nbytes, (fill.numel(), self.body_nbytes)
        self.initial = torch.cat([pattern(guard, 1), fill, pattern(guard, 2)])
        self.whole = _tensors.empty((self.initial.numel(),), torch.uint8, "cuda:0")
        _write_device(self.whole, self.initial)
        self.tensor = device_view(
            self.whole, guard, shape, dtype, dim_order=order, dynamic=dynamic, device=Device(CUDA, device_index)
        )

    def _read(self) -> torch.Tensor:
        return _read_device(self.whole)

    def free(self) -> None:
        self.whole.free()
