"""CUDA rows: et_copy's CUDA allocator against torch ``.to('cuda')`` /
``.cpu()`` and raw ``cudaMemcpy``, pageable and pinned host memory.

They run in a child process (``python -m et_copy.tools.bench._cuda OUT.json``):
ExecuTorch keeps one allocator per device type for the life of a process,
and the parent already gave CUDA to the simulated device."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile

from ._timing import Config, Stats, measure

CUDA_MEMCPY_HOST_TO_DEVICE = 1
CUDA_MEMCPY_DEVICE_TO_HOST = 2


def unavailable_reason() -> str | None:
    """Why there are no CUDA rows on this machine, or None when there are."""
    import torch

    import et_copy
    from et_copy import _C

    if not hasattr(et_copy, "use_cuda") or not getattr(_C, "WITH_CUDA", False):
        return "this et_copy was built without its CUDA allocator"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    return None


def run(sizes: tuple[int, ...], config: Config, timeout_s: float = 600) -> dict:
    """Runs the CUDA rows in a child process; raises RuntimeError with its
    output when it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cuda.json")
        args = [
            sys.executable,
            "-m",
            "et_copy.tools.bench._cuda",
            out,
            json.dumps({"sizes": list(sizes), "repeats": config.repeats, "sample_s": config.sample_s}),
        ]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"the CUDA benchmark process failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        with open(out, encoding="utf-8") as f:
            doc = json.load(f)
    for row in doc["rows"]:
        row["results"] = {name: Stats(**s) for name, s in row["results"].items()}
    return doc


def _cudart():
    """The CUDA runtime torch loaded, for raw cudaMemcpy (None if not found)."""
    with open("/proc/self/maps", encoding="utf-8") as f:
        paths = {line.split()[-1] for line in f if "libcudart" in line}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            lib.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            lib.cudaMemcpy.restype = ctypes.c_int
            return lib
        except (OSError, AttributeError):
            continue
    return None


def _worker(out_path: str, params: dict) -> int:
    import torch

    import et_copy

    from ..._C import loops as _loops

    et_copy.use_cuda()
    config = Config(repeats=params["repeats"], sample_s=params["sample_s"])
    torch.cuda.init()
    torch.empty(1, device="cuda")  # creates the context, loads cudart
    # Raw cudaMemcpy: et_copy's own binding (static cudart) when built with
    # it, else torch's libcudart through ctypes.
    raw = getattr(_loops, "cuda_raw_memcpy", None)
    cudart = None if raw is not None else _cudart()

    def synced(fn):
        def sample(iters: int) -> float:
            import time

            torch.cuda.synchronize()
            start = time.perf_counter_ns()
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()  # device-wide: covers et_copy's stream too
            return (time.perf_counter_ns() - start) / iters

        return sample

    def memcpy(dst, src, n, kind):
        if raw is not None:
            name = "h2d" if kind == CUDA_MEMCPY_HOST_TO_DEVICE else "d2h"
            return lambda: raw(dst, src, n, name)
        assert cudart is not None  # loaded whenever raw is None

        def call():
            err = cudart.cudaMemcpy(ctypes.c_void_p(dst), ctypes.c_void_p(src), n, kind)
            if err != 0:
                raise RuntimeError(f"cudaMemcpy failed with CUDA error {err}")

        return call

    rows = []
    for n in params["sizes"]:
        pageable = torch.full((n,), 7, dtype=torch.uint8)
        pinned = torch.full((n,), 7, dtype=torch.uint8).pin_memory()
        host_out = torch.zeros(n, dtype=torch.uint8)
        pinned_out = torch.zeros(n, dtype=torch.uint8).pin_memory()
        dev = et_copy.empty((n,), torch.uint8)  # et_copy's CUDA allocator
        tdev = torch.zeros(n, dtype=torch.uint8, device="cuda")  # torch's, for torch's D2H rows
        et_copy.h2d_copy(pageable, out=dev)
        if not torch.equal(et_copy.d2h_copy(dev, out=host_out), pageable):
            raise RuntimeError(f"et_copy round trip of {n} bytes through the GPU changed the bytes")
        cases = {
            "H2D et_copy, pageable": synced(lambda: et_copy.h2d_copy(pageable, out=dev)),
            "H2D et_copy, pinned": synced(lambda: et_copy.h2d_copy(pinned, out=dev)),
            "H2D torch .to('cuda'), pageable": synced(lambda: pageable.to("cuda")),
            "H2D torch .to('cuda'), pinned": synced(lambda: pinned.to("cuda")),
            "D2H et_copy, pageable": synced(lambda: et_copy.d2h_copy(dev, out=host_out)),
            "D2H et_copy, pinned": synced(lambda: et_copy.d2h_copy(dev, out=pinned_out)),
            "D2H torch .cpu(), pageable": synced(lambda: tdev.cpu()),
            "D2H torch copy_ to pinned": synced(lambda: pinned_out.copy_(tdev)),
        }
        if raw is not None or cudart is not None:
            cases["H2D cudaMemcpy, pageable"] = synced(
                memcpy(dev.data_ptr(), pageable.data_ptr(), n, CUDA_MEMCPY_HOST_TO_DEVICE)
            )
            cases["H2D cudaMemcpy, pinned"] = synced(
                memcpy(dev.data_ptr(), pinned.data_ptr(), n, CUDA_MEMCPY_HOST_TO_DEVICE)
            )
            cases["D2H cudaMemcpy, pageable"] = synced(
                memcpy(host_out.data_ptr(), dev.data_ptr(), n, CUDA_MEMCPY_DEVICE_TO_HOST)
            )
            cases["D2H cudaMemcpy, pinned"] = synced(
                memcpy(pinned_out.data_ptr(), dev.data_ptr(), n, CUDA_MEMCPY_DEVICE_TO_HOST)
            )
        results = measure(cases, config)
        rows.append(
            {
                "nbytes": n,
                "results": {k: v.to_json() for k, v in results.items()},
                "gb_per_s": {k: n / v.median_ns for k, v in results.items()},
            }
        )
        dev.free()
        del pageable, pinned, host_out, pinned_out, dev, tdev
    how = (
        "et_copy._C.loops.cuda_raw_memcpy (static cudart)"
        if raw is not None
        else "ctypes, torch's libcudart"
        if cudart is not None
        else "not measured: no cudaMemcpy binding and torch's libcudart was not found"
    )
    doc = {"gpu": torch.cuda.get_device_name(0), "cudaMemcpy": how, "rows": rows}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1], json.loads(sys.argv[2])))
