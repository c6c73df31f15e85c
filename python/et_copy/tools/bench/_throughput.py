"""Bytes per second from 4 KiB to 256 MiB on the simulated device, against
torch ``copy_`` (every core) and a single-threaded ``memcpy`` loop."""

from __future__ import annotations

import torch

import et_copy

from ... import _C
from ..._C import loops as _loops
from ._timing import Config, Sampler, Stats, measure, python_sampler

KIB = 1024
MIB = 1024 * KIB
DEFAULT_SIZES = tuple(4 * KIB * 4**k for k in range(9))  # 4 KiB .. 256 MiB

PY_H2D = "et_copy.h2d_copy (Python)"
PY_D2H = "et_copy.d2h_copy (Python)"
KERNEL_H2D = "et_copy h2d kernel (C++ loop)"
TORCH_COPY = "torch copy_ (CPU to CPU)"
TORCH_COPY_1T = "torch copy_ (CPU to CPU, 1 thread)"
MEMCPY = "memcpy (C++ loop, 1 thread)"
BASELINE = MEMCPY


def size_label(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", MIB), ("KiB", KIB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def gb_per_s(nbytes: int, ns: float) -> float:
    return nbytes / ns  # bytes per nanosecond is GB/s (1e9 bytes)


def _one_thread(sampler: Sampler) -> Sampler:
    """Runs a sample with torch limited to one thread (restored after)."""

    def sample(iters: int) -> float:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return sampler(iters)
        finally:
            torch.set_num_threads(threads)

    return sample


def host_address(device: et_copy.DeviceTensor) -> int:
    """Where a host memcpy reaches ``device``'s bytes: the simulated device's
    host alias (the address itself when host-readable; a host-unreadable
    address would fault), as the allocator's own copies reach them."""
    return _C.simulated_device_host_alias(device.data_ptr(), device.capacity_nbytes, device.device.index)


def one_size(nbytes: int, config: Config) -> dict[str, Stats]:
    """Every implementation moving the same ``nbytes`` from the same source
    (torch copy_ into a host tensor, the others into one device buffer)."""
    src = torch.full((nbytes,), 0x5A, dtype=torch.uint8)
    dst = torch.zeros(nbytes, dtype=torch.uint8)  # zeros() touches every page
    device = et_copy.empty((nbytes,), torch.uint8)
    cases = {
        PY_H2D: python_sampler(lambda: et_copy.h2d_copy(src, out=device)),
        PY_D2H: python_sampler(lambda: et_copy.d2h_copy(device, out=dst)),
        KERNEL_H2D: lambda iters: _loops.bench_kernel(
            "et_copy_h2d", nbytes, iters, 1, src.data_ptr(), device.data_ptr()
        )[0],
        TORCH_COPY: python_sampler(lambda: dst.copy_(src)),
        TORCH_COPY_1T: _one_thread(python_sampler(lambda: dst.copy_(src))),
        # Into the device buffer h2d_copy writes: the same pages, so the
        # ratio is et_copy's overhead and not where the allocators put memory.
        MEMCPY: lambda iters: _loops.bench_memcpy(host_address(device), src.data_ptr(), nbytes, iters, 1)[0],
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
