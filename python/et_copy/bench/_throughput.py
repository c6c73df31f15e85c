"""Bytes per second from 4 KiB to 256 MiB on the simulated device, against
torch ``copy_`` (every core) and a single-threaded ``memcpy`` loop."""

from __future__ import annotations

import torch

import et_copy
from et_copy import _C

from ._timing import Config, Stats, measure, python_sampler

KIB = 1024
MIB = 1024 * KIB
DEFAULT_SIZES = tuple(4 * KIB * 4**k for k in range(9))  # 4 KiB .. 256 MiB

PY_H2D = "et_copy.h2d_copy (Python)"
PY_D2H = "et_copy.d2h_copy (Python)"
KERNEL_H2D = "et_copy h2d kernel (C++ loop)"
TORCH_COPY = "torch copy_ (CPU to CPU)"
MEMCPY = "memcpy (C++ loop, 1 thread)"
BASELINE = MEMCPY


def size_label(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", MIB), ("KiB", KIB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def gb_per_s(nbytes: int, ns: float) -> float:
    return nbytes / ns  # bytes per nanosecond is GB/s (1e9 bytes)


def one_size(nbytes: int, config: Config) -> dict[str, Stats]:
    """Every implementation moving the same ``nbytes`` between the same
    buffers (the C++ kernel loop uses its own pair of the same size)."""
    src = torch.full((nbytes,), 0x5A, dtype=torch.uint8)
    dst = torch.zeros(nbytes, dtype=torch.uint8)  # zeros() touches every page
    device = et_copy.empty((nbytes,), torch.uint8)
    cases = {
        PY_H2D: python_sampler(lambda: et_copy.h2d_copy(src, out=device)),
        PY_D2H: python_sampler(lambda: et_copy.d2h_copy(device, out=dst)),
        KERNEL_H2D: lambda iters: _C.bench_kernel("et_copy_h2d", nbytes, iters, 1)[0],
        TORCH_COPY: python_sampler(lambda: dst.copy_(src)),
        MEMCPY: lambda iters: _C.bench_memcpy(dst.data_ptr(), src.data_ptr(), nbytes, iters, 1)[0],
    }
    try:
        return measure(cases, config)
    finally:
        device.free()


def throughput(sizes: tuple[int, ...], config: Config, progress=None) -> dict:
    rows = []
    for nbytes in sizes:
        if progress is not None:
            progress(f"throughput {size_label(nbytes)}")
        results = one_size(nbytes, config)
        gbs = {name: gb_per_s(nbytes, st.median_ns) for name, st in results.items()}
        rows.append({"nbytes": nbytes, "results": results, "gb_per_s": gbs})
    return {"baseline": BASELINE, "rows": rows}
