"""Fixed cost of one call: et_copy from Python against torch ``copy_``, and
et_copy's kernel from C++ against a plain ``memcpy``."""

from __future__ import annotations

import torch

import et_copy

from ..._C import loops as _loops
from ._throughput import host_address
from ._timing import Config, Stats, measure, python_sampler

PY_NBYTES = 4096
CPP_NBYTES = 8

# Names used in the report and the JSON.
TORCH_COPY = "torch copy_ (CPU to CPU)"
PY_H2D = "et_copy.h2d_copy (out=DeviceTensor)"
PY_D2H = "et_copy.d2h_copy (out=torch tensor)"
MEMCPY = "memcpy (C++ loop)"
KERNEL_H2D = "et_copy h2d_copy_out_boxed (C++ loop)"
KERNEL_D2H = "et_copy d2h_copy_out_boxed (C++ loop)"


def python_overhead(config: Config, nbytes: int = PY_NBYTES) -> dict:
    """A ``nbytes`` float32 copy with preallocated outputs on every side."""
    numel = nbytes // 4
    host = torch.arange(numel, dtype=torch.float32)
    host_out = torch.empty(numel, dtype=torch.float32)
    device = et_copy.empty((numel,), torch.float32)
    cases = {
        TORCH_COPY: python_sampler(lambda: host_out.copy_(host)),
        PY_H2D: python_sampler(lambda: et_copy.h2d_copy(host, out=device)),
        PY_D2H: python_sampler(lambda: et_copy.d2h_copy(device, out=host_out)),
    }
    results = measure(cases, config)
    device.free()
    return {"nbytes": nbytes, "baseline": TORCH_COPY, "results": results}


def _registry_label(op: str) -> str:
    owner = et_copy.kernel_owner(op)
    if owner == "already et_copy":
        return "et_copy's kernel"
    if owner == "already other":
        return "another library's kernel (the executorch wheel's, when it is loaded)"
    return "absent"


def kernel_overhead(config: Config, nbytes: int = CPP_NBYTES) -> dict:
    """An ``nbytes`` byte copy in a C++ loop (no Python inside): et_copy's
    boxed kernel called directly, and whatever the ExecuTorch registry
    resolves for the op name (the executorch wheel's kernel, which checks
    less: its library is loaded here, as executorch.runtime loads it),
    against memcpy between the same buffers."""
    et_copy.register_kernels()  # loads the wheel's kernel library first; registers nothing over it

    def cpp(kind: str):
        return lambda iters: _loops.bench_kernel(kind, nbytes, iters, 1)[0]

    # memcpy reaches device bytes through the host alias, as the simulated
    # allocator's copies do: a host-unreadable device address would fault.
    host = torch.full((nbytes,), 0x5A, dtype=torch.uint8)
    device = et_copy.empty((nbytes,), torch.uint8)
    alias = host_address(device)
    cases = {
        MEMCPY: lambda iters: _loops.bench_kernel("memcpy", nbytes, iters, 1, host.data_ptr(), alias)[0],
        KERNEL_H2D: cpp("et_copy_h2d"),
        KERNEL_D2H: cpp("et_copy_d2h"),
    }
    registry = {}
    for direction, op in (("h2d", et_copy.H2D_COPY_OUT), ("d2h", et_copy.D2H_COPY_OUT)):
        label = _registry_label(op)
        registry[op] = label
        if label != "absent":
            cases[f"registry {op} = {label.split(' (')[0]} (C++ loop)"] = cpp(f"registry_{direction}")
    try:
        results = measure(cases, config)
    finally:
        device.free()
    return {"nbytes": nbytes, "baseline": MEMCPY, "registry": registry, "results": results}


def registry_case(section: dict, direction: str) -> str | None:
    """The registry row of ``direction`` ("h2d", "d2h"), when it ran."""
    op = et_copy.H2D_COPY_OUT if direction == "h2d" else et_copy.D2H_COPY_OUT
    return next((n for n in section["results"] if n.startswith(f"registry {op} ")), None)


def overhead_ns(results: dict[str, Stats], name: str, baseline: str) -> float:
    """Median nanoseconds per call above the baseline's median."""
    return results[name].median_ns - results[baseline].median_ns
