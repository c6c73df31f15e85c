"""The embedded case matrix.

A case is one copy, described in plain data: direction, self's dtype, shape
and layout, out's dtype, capacity, layout and dynamism, where each tensor
lives, and whether the copy must succeed (``expect="copy"``) or be rejected
(``expect="reject"``). Names read like paths, so ``--cases`` can select with
globs: ``h2d/float32/*``, ``*.channels_last*``, ``invalid/*``.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Iterable, Protocol, TypeVar

import torch

from ..._dtypes import SUPPORTED_DTYPES

CHANNELS_LAST = (0, 2, 3, 1)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def shape_name(shape: tuple[int, ...]) -> str:
    return "x".join(str(s) for s in shape) if shape else "scalar"


@dataclass(frozen=True)
class Case:
    name: str
    direction: str  # "h2d" or "d2h"
    dtype: torch.dtype
    shape: tuple[int, ...]
    expect: str  # "copy" or "reject"
    dim_order: tuple[int, ...] | None = None
    out_dtype: torch.dtype | None = None  # default: dtype
    out_shape: tuple[int, ...] | None = None  # out's capacity; default: shape
    out_dim_order: tuple[int, ...] | None = None  # default: dim_order
    out_dynamic: bool = False
    self_on: str = ""  # "host" or "device"; default from direction
    out_on: str = ""
    device_index: int = 0  # metadata of the device-side tensor(s)
    self_strided: bool = False  # self is every other column of a dense buffer
    out_strided: bool = False
    reason: str = ""  # invalid cases: what is wrong, in words
    tags: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        defaults = {
            "out_dtype": self.dtype,
            "out_shape": self.shape,
            "dim_order": tuple(range(len(self.shape))),
        }
        for key, value in defaults.items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, value)
        if self.out_dim_order is None:
            out_shape = self.out_shape
            assert out_shape is not None  # set just above
            object.__setattr__(
                self,
                "out_dim_order",
                tuple(range(len(out_shape))) if len(out_shape) != len(self.shape) else self.dim_order,
            )
        h2d = self.direction == "h2d"
        if not self.self_on:
            object.__setattr__(self, "self_on", "host" if h2d else "device")
        if not self.out_on:
            object.__setattr__(self, "out_on", "device" if h2d else "host")

    @property
    def valid(self) -> bool:
        return self.expect == "copy"

    @property
    def op(self) -> str:
        return f"et_copy::_{self.direction}_copy.out"

    def self_base_shape(self) -> tuple[int, ...]:
        """Shape of the dense buffer self lives in (wider when strided)."""
        if self.self_strided:
            return (*self.shape[:-1], self.shape[-1] * 2)
        return self.shape

    def out_base_shape(self) -> tuple[int, ...]:
        shape = self.out_shape
        assert shape is not None  # __post_init__ set it
        if self.out_strided:
            return (*shape[:-1], shape[-1] * 2)
        return shape

    def self_nbytes(self) -> int:
        return math.prod(self.self_base_shape()) * self.dtype.itemsize

    def out_nbytes(self) -> int:
        assert self.out_dtype is not None  # __post_init__ set it
        return math.prod(self.out_base_shape()) * self.out_dtype.itemsize

    def describe(self) -> str:
        """One line: what is copied where."""

        def side(on, dtype, shape, order, dynamic, strided):
            text = f"{dtype_name(dtype)}{list(shape)}"
            if order != tuple(range(len(shape))):
                text += f" dim_order={list(order)}"
            if dynamic:
                text += " dynamic-bound"
            if strided:
                text += " strided"
            where = f"cuda:{self.device_index}" if on == "device" else "host"
            return f"{text} on {where}"

        s = side(self.self_on, self.dtype, self.shape, self.dim_order, False, self.self_strided)
        o = side(self.out_on, self.out_dtype, self.out_shape, self.out_dim_order, self.out_dynamic, self.out_strided)
        return f"{self.direction}: self {s} -> out {o}" + (f" ({self.reason})" if self.reason else "")

    def to_json(self) -> dict:
        # __post_init__ set them.
        assert self.dim_order is not None and self.out_dtype is not None
        assert self.out_shape is not None and self.out_dim_order is not None
        return {
            "name": self.name,
            "direction": self.direction,
            "expect": self.expect,
            "reason": self.reason,
            "description": self.describe(),
            "self": {
                "dtype": dtype_name(self.dtype),
                "shape": list(self.shape),
                "dim_order": list(self.dim_order),
                "on": self.self_on,
                "strided": self.self_strided,
            },
            "out": {
                "dtype": dtype_name(self.out_dtype),
                "shape": list(self.out_shape),
                "dim_order": list(self.out_dim_order),
                "dynamic": self.out_dynamic,
                "on": self.out_on,
                "strided": self.out_strided,
            },
            "device_index": self.device_index,
        }


# (shape, dim order, label suffix). Odd byte counts come from 1-byte dtypes
# and odd element counts; ranks 0 to 6.
_STATIC_SHAPES = [
    ((), None, ""),
    ((0,), None, ""),
    ((2, 0, 3), None, ""),
    ((1,), None, ""),
    ((7,), None, ""),
    ((3, 5), None, ""),
    ((2, 3, 5), None, ""),
    ((2, 3, 4, 5), None, ""),
    ((2, 3, 4, 5), CHANNELS_LAST, ".channels_last"),
    ((2, 1, 3, 1, 5, 1), None, ""),
]

# (self shape, out capacity, dim order, suffix): dynamic-bound outs.
_DYNAMIC_SHAPES = [
    ((3, 5), (3, 5), None, ""),
    ((3, 5), (4, 6), None, ""),
    ((0, 5), (4, 6), None, ""),
    ((3, 7), (4, 6), None, ""),  # ExecuTorch bounds the element count (24), not each dim
    ((2, 3, 4, 5), (3, 3, 4, 5), CHANNELS_LAST, ".channels_last"),
]

# A few MiB each: what a real activation moves.
_LARGE = [
    (torch.uint8, (3, 1000, 1001), None, ""),  # 3003000 bytes: odd, not a multiple of 16
    (torch.float32, (1024, 512), None, ""),  # 2 MiB
    (torch.bfloat16, (8, 64, 64, 32), CHANNELS_LAST, ".channels_last"),  # 2 MiB
    (torch.complex128, (128, 1024), None, ""),  # 2 MiB
]


def _valid_cases() -> Iterable[Case]:
    for direction in ("h2d", "d2h"):
        for dtype in SUPPORTED_DTYPES:
            d = dtype_name(dtype)
            for shape, order, suffix in _STATIC_SHAPES:
                yield Case(
                    f"{direction}/{d}/{shape_name(shape)}{suffix}", direction, dtype, shape, "copy", dim_order=order
                )
            for shape, cap, order, suffix in _DYNAMIC_SHAPES:
                label = "dynamic" if cap == shape else f"dynamic_in_{shape_name(cap)}"
                yield Case(
                    f"{direction}/{d}/{shape_name(shape)}{suffix}/{label}",
                    direction,
                    dtype,
                    shape,
                    "copy",
                    dim_order=order,
                    out_shape=cap,
                    out_dynamic=True,
                )
        for dtype, shape, order, suffix in _LARGE:
            yield Case(
                f"{direction}/{dtype_name(dtype)}/{shape_name(shape)}{suffix}/large",
                direction,
                dtype,
                shape,
                "copy",
                dim_order=order,
                tags=("large",),
            )
        yield Case(
            f"{direction}/float32/700x700/dynamic_in_1024x512/large",
            direction,
            torch.float32,
            (700, 700),
            "copy",
            out_shape=(1024, 512),
            out_dynamic=True,
            tags=("large",),
        )


def _invalid_cases() -> Iterable[Case]:
    f32, f64 = torch.float32, torch.float64
    for direction in ("h2d", "d2h"):

        def bad(label: str, reason: str, dtype: torch.dtype, shape: tuple[int, ...], **kw) -> Case:
            return Case(f"invalid/{direction}/{label}", direction, dtype, shape, "reject", reason=reason, **kw)

        host_side = "self" if direction == "h2d" else "out"
        device_side = "out" if direction == "h2d" else "self"
        yield bad(
            "dtype_mismatch/float64_into_float32", "dtype mismatch, self wider than out", f64, (4,), out_dtype=f32
        )
        yield bad(
            "dtype_mismatch/int32_into_float32", "dtype mismatch, same element size", torch.int32, (4,), out_dtype=f32
        )
        yield bad(
            "dtype_mismatch/int8_into_int64",
            "dtype mismatch, self narrower than out",
            torch.int8,
            (4,),
            out_dtype=torch.int64,
        )
        yield bad(
            "dtype_mismatch/bool_into_uint8",
            "dtype mismatch, same element size",
            torch.bool,
            (5,),
            out_dtype=torch.uint8,
        )
        yield bad(
            "dim_order_mismatch/channels_last_into_contiguous",
            "dim order mismatch",
            f32,
            (2, 3, 4, 5),
            dim_order=CHANNELS_LAST,
            out_dim_order=(0, 1, 2, 3),
        )
        yield bad(
            "dim_order_mismatch/contiguous_into_channels_last",
            "dim order mismatch",
            f32,
            (2, 3, 4, 5),
            out_dim_order=CHANNELS_LAST,
        )
        yield bad("rank_mismatch/2x6_into_12", "rank mismatch", f32, (2, 6), out_shape=(12,))
        yield bad("shape_mismatch/static_1_into_4", "static out of another shape", f32, (1,), out_shape=(4,))
        yield bad(
            "shape_mismatch/static_3x4_into_4x3",
            "static out of another shape, same size",
            f32,
            (3, 4),
            out_shape=(4, 3),
        )
        yield bad("capacity_overflow/static_6_into_4", "self larger than a static out", f32, (6,), out_shape=(4,))
        yield bad(
            "capacity_overflow/dynamic_6_into_4",
            "self larger than out's capacity",
            f32,
            (6,),
            out_shape=(4,),
            out_dynamic=True,
        )
        yield bad(
            "capacity_overflow/dynamic_5x6_into_4x6",
            "self larger than out's capacity",
            f32,
            (5, 6),
            out_shape=(4, 6),
            out_dynamic=True,
        )
        yield bad(
            f"wrong_direction/{host_side}_on_device",
            f"{host_side} on the device",
            f32,
            (4,),
            **({"self_on": "device"} if direction == "h2d" else {"out_on": "device"}),
        )
        yield bad(
            f"wrong_direction/{device_side}_on_host",
            f"{device_side} on the host",
            f32,
            (4,),
            **({"out_on": "host"} if direction == "h2d" else {"self_on": "host"}),
        )
        yield bad("bad_device_index/cuda1", f"{device_side} on cuda:1 with one device", f32, (4,), device_index=1)
        yield bad("bad_device_index/cuda5", f"{device_side} on cuda:5 with one device", f32, (4,), device_index=5)
        yield bad(
            f"not_dense/strided_{host_side}",
            f"{host_side} is a strided view (gaps between elements)",
            f32,
            (3, 2),
            **({"self_strided": True} if direction == "h2d" else {"out_strided": True}),
        )


def all_cases() -> list[Case]:
    return [*_valid_cases(), *_invalid_cases()]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_Selectable = TypeVar("_Selectable", bound=_Named)


def select(cases: list[_Selectable], spec: str | None) -> list[_Selectable]:
    """The cases ``spec`` selects: comma-separated globs on case names, any
    of which may match; a pattern without ``*?[`` matches as a substring; a
    pattern starting with ``!`` excludes. Only exclusions: start from all."""
    if not spec:
        return list(cases)
    include: list[str] = []
    exclude: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        target = exclude if part.startswith("!") else include
        part = part.removeprefix("!")
        target.append(part if any(c in part for c in "*?[") else f"*{part}*")
    chosen = []
    for case in cases:
        if include and not any(fnmatch.fnmatchcase(case.name, p) for p in include):
            continue
        if any(fnmatch.fnmatchcase(case.name, p) for p in exclude):
            continue
        chosen.append(case)
    return chosen
