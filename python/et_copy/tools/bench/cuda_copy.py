"""Host<->device copy throughput on a real GPU: et-copy's CUDA allocator
against torch and raw cudaMemcpy, measured in one run.

    python -m et_copy.tools.bench.cuda_copy [--sizes 4K,1M,64M,1G] [--json OUT.json]

Prints GB/s (1e9 bytes per second, median of repeated copies) for H2D and
D2H from pinned and from pageable host memory. Columns:

  et-copy            et_copy.h2d_copy / d2h_copy with the default tuning
  et-copy direct     pageable memory left to the driver's own staging
  et-copy staged     pageable memory through et-copy's pinned double buffers
  et-copy registered the pageable buffer page-locked with cudaHostRegister
  torch .to/.cpu     x.to('cuda') / d.cpu() (new tensors each time; for
                     pinned D2H, .cpu() cannot give pinned memory, so copy_)
  torch copy_        into a preallocated tensor
  cudaMemcpy         one synchronous cudaMemcpy (et_copy's static cudart)

Then the staging chunk size sweep at 64 MiB, and what cudaHostRegister of a
buffer costs, to choose the defaults by measurement. Needs a GPU: registers
et_copy's CUDA allocator in this process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable

import torch

import et_copy
from et_copy import cuda as _cuda
from et_copy._C import loops as _loops

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def label(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def gbps(fn, nbytes: int, budget_s: float) -> float:
    """Median GB/s of fn() (synchronous) over repeats filling ~budget_s."""
    fn()  # warm-up: lanes, staging buffers, caching allocator
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = max(time.perf_counter() - t0, 1e-7)
    repeats = int(min(max(budget_s / once, 5), 200))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()  # et-copy's copies are complete already; torch's may not be
        times.append(time.perf_counter() - t0)
    return nbytes / statistics.median(times) / 1e9


def pageable_mode(mode: str | None, default: dict):
    """Runs a copy under one pageable-copy mode, restoring the default."""

    def wrap(fn):
        def run():
            if mode is None:
                return fn()
            _cuda.set_copy_config(
                mode,
                staging_threshold=0 if mode == "staged" else default["staging_threshold"],
                chunk_bytes=default["chunk_bytes"],
            )
            try:
                return fn()
            finally:
                _cuda.set_copy_config(**default)

        return run

    return wrap


def measure_size(n: int, budget_s: float, default: dict) -> list[dict]:
    src = torch.randint(0, 256, (n,), dtype=torch.uint8)
    pinned_src = src.pin_memory()
    pageable_out = torch.empty_like(src)
    pinned_out = torch.empty_like(src).pin_memory()
    dev = et_copy.empty((n,), torch.uint8)  # et-copy's allocator
    tdev = torch.empty(n, dtype=torch.uint8, device="cuda")  # torch's
    et_copy.h2d_copy(src, out=dev)
    assert torch.equal(et_copy.d2h_copy(dev, out=pageable_out), src), "round trip failed"
    raw = _loops.cuda_raw_memcpy
    rows: list[dict[str, Any]] = []
    for host, h_src, h_out in (("pinned", pinned_src, pinned_out), ("pageable", src, pageable_out)):
        h2d: dict[str, Callable[[], object]] = {"et-copy": lambda: et_copy.h2d_copy(h_src, out=dev)}
        d2h: dict[str, Callable[[], object]] = {"et-copy": lambda: et_copy.d2h_copy(dev, out=h_out)}
        if host == "pageable":
            for mode in ("direct", "staged"):
                h2d[f"et-copy {mode}"] = pageable_mode(mode, default)(h2d["et-copy"])
                d2h[f"et-copy {mode}"] = pageable_mode(mode, default)(d2h["et-copy"])
        h2d["torch .to/.cpu"] = lambda: h_src.to("cuda")
        d2h["torch .to/.cpu"] = (lambda: tdev.cpu()) if host == "pageable" else (lambda: h_out.copy_(tdev))
        h2d["torch copy_"] = lambda: tdev.copy_(h_src)
        d2h["torch copy_"] = lambda: h_out.copy_(tdev)
        h2d["cudaMemcpy"] = lambda: raw(dev.data_ptr(), h_src.data_ptr(), n, "h2d")
        d2h["cudaMemcpy"] = lambda: raw(h_out.data_ptr(), dev.data_ptr(), n, "d2h")
        for direction, cases in (("H2D", h2d), ("D2H", d2h)):
            row = {
                "nbytes": n,
                "host": host,
                "direction": direction,
                "gbps": {name: gbps(fn, n, budget_s) for name, fn in cases.items()},
            }
            rows.append(row)
        if host == "pageable":
            _cuda.register_host_memory(h_src)
            _cuda.register_host_memory(h_out)
            try:
                rows[-2]["gbps"]["et-copy registered"] = gbps(h2d["et-copy"], n, budget_s)
                rows[-1]["gbps"]["et-copy registered"] = gbps(d2h["et-copy"], n, budget_s)
            finally:
                _cuda.unregister_host_memory(h_src)
                _cuda.unregister_host_memory(h_out)
    assert torch.equal(et_copy.d2h_copy(dev, out=pageable_out), src), "data changed during the benchmark"
    dev.free()
    return rows


def chunk_sweep(n: int, budget_s: float, default: dict) -> list[dict]:
    src = torch.randint(0, 256, (n,), dtype=torch.uint8)
    out = torch.empty_like(src)
    dev = et_copy.empty((n,), torch.uint8)
    rows = []
    try:
        for chunk in (1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20):
            _cuda.set_copy_config("staged", staging_threshold=0, chunk_bytes=chunk)
            rows.append(
                {
                    "chunk_bytes": chunk,
                    "H2D": gbps(lambda: et_copy.h2d_copy(src, out=dev), n, budget_s),
                    "D2H": gbps(lambda: et_copy.d2h_copy(dev, out=out), n, budget_s),
                }
            )
    finally:
        _cuda.set_copy_config(**default)
    assert torch.equal(et_copy.d2h_copy(dev, out=out), src)
    dev.free()
    return rows


def register_cost(n: int) -> float:
    """Seconds for cudaHostRegister + cudaHostUnregister of n fresh bytes."""
    buf = torch.ones(n, dtype=torch.uint8)
    t0 = time.perf_counter()
    _cuda.register_host_memory(buf)
    _cuda.unregister_host_memory(buf)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m et_copy.tools.bench.cuda_copy", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--sizes", default="4K,1M,64M,1G")
    parser.add_argument("--budget", type=float, default=0.25, help="seconds of repeats per cell (at least 5)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]

    status = _cuda.cuda_status()
    if status["device_count"] is None:
        print(f"no CUDA device: {status['message']}", file=sys.stderr)
        return 2
    print(
        et_copy.use_cuda(),
        "et_copy's CUDA allocator;",
        "device:",
        status["devices"][0]["name"],
        "| torch",
        torch.__version__,
        "| CUDA runtime",
        status["runtime_version"],
        "driver",
        status["driver_version"],
    )
    default = _cuda.copy_config()
    print("default pageable tuning:", default)
    torch.empty(1, device="cuda")

    rows = []
    for n in sizes:
        rows += measure_size(n, args.budget, default)
    names = [
        "et-copy",
        "et-copy direct",
        "et-copy staged",
        "et-copy registered",
        "torch .to/.cpu",
        "torch copy_",
        "cudaMemcpy",
    ]
    print("\nGB/s (median)" + "".join(f"{name:>20}" for name in names))
    for r in rows:
        cells = "".join(f"{r['gbps'][k]:20.2f}" if k in r["gbps"] else f"{'-':>20}" for k in names)
        print(f"{label(r['nbytes']):>7} {r['host']:<8} {r['direction']}{cells}")

    sweep_n = 64 << 20
    sweep = chunk_sweep(sweep_n, args.budget, default)
    print(f"\nstaged pageable copies of {label(sweep_n)} by chunk size (GB/s):")
    for r in sweep:
        print(f"  chunk {label(r['chunk_bytes']):>7}  H2D {r['H2D']:7.2f}  D2H {r['D2H']:7.2f}")
    costs = {label(n): register_cost(n) for n in (1 << 20, 64 << 20, 1 << 30) if n <= max(sizes)}
    print("\ncudaHostRegister + cudaHostUnregister:", ", ".join(f"{k}: {v * 1e3:.2f} ms" for k, v in costs.items()))

    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {"status": status, "default": default, "rows": rows, "chunk_sweep": sweep, "register_seconds": costs},
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
