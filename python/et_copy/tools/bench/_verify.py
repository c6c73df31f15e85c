"""What ``verify_data=True`` costs at load (docs/runtime.md, "Untrusted
programs"): a program with large weights loaded with and without
verification, interleaved, against hashlib's SHA-256 over the same bytes."""

from __future__ import annotations

import gc
import hashlib
import tempfile
import time
from pathlib import Path

import torch

from ._timing import Config, Stats, measure

PLAIN = "load + load_method"
VERIFIED = "the same, verify_data=True"
HASHLIB = "hashlib.sha256 over the weights"
DEFAULT_WIDTH, DEFAULT_LAYERS = 2048, 8  # 8 float32 2048x2048 weights: 128 MiB
QUICK_WIDTH, QUICK_LAYERS = 128, 2  # 128 KiB
MAX_ROUNDS = 7  # each sample is one load of every weight: a few are enough


class Layers(torch.nn.Module):
    """``layers`` bias-free square Linear layers: their weights are nearly
    all of the program."""

    def __init__(self, width: int, layers: int) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(*(torch.nn.Linear(width, width, bias=False) for _ in range(layers)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def _load_sampler(path: str, verify: bool):
    """One sample: loads the program and its method (every weight uploaded,
    and hashed when ``verify``), then frees both, so no weight stays cached
    for the next sample."""
    from et_copy import runtime

    def sample(iters: int) -> float:
        clock = time.perf_counter_ns
        total = 0
        for _ in range(iters):
            start = clock()
            method = runtime.load(path, verify_data=verify).load_method("forward")
            total += clock() - start
            del method
            gc.collect()
        return total / iters

    return sample


def _hash_sampler(weights: list[bytes]):
    def sample(iters: int) -> float:
        clock = time.perf_counter_ns
        start = clock()
        for _ in range(iters):
            for w in weights:
                hashlib.sha256(w).digest()
        return (clock() - start) / iters

    return sample


def verify_cost(config: Config, *, quick: bool = False, progress=None) -> dict:
    """Median load times with and without verification, their ratio, and
    hashlib's SHA-256 throughput on the weights' bytes. The export is not
    timed. Needs the simulated device registered and executorch's AOT stack."""
    import et_copy
    from et_copy import runtime
    from et_copy.export import export_device_program

    width, layers = (QUICK_WIDTH, QUICK_LAYERS) if quick else (DEFAULT_WIDTH, DEFAULT_LAYERS)
    torch.manual_seed(0)
    model = Layers(width, layers).eval()
    example = (torch.randn(1, width),)
    weights = [p.detach().contiguous().numpy().tobytes() for p in model.parameters()]
    nbytes = sum(len(w) for w in weights)
    if progress is not None:
        progress(f"verify: exporting {layers} float32 {width}x{width} weights ({nbytes / 2**20:.1f} MiB)")
    rounds = Config(repeats=min(config.repeats, MAX_ROUNDS), sample_s=config.sample_s)
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "layers.pte")
        Path(path).write_bytes(export_device_program(model, example).buffer)
        before = et_copy.allocator_stats()["bytes_outstanding"]
        expected = model(*example)
        got = runtime.load(path, verify_data=True).load_method("forward").execute(list(example))[0]
        if not isinstance(got, torch.Tensor) or not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
            raise RuntimeError("et_copy bench: the verify program returned wrong values; not timing it")
        gc.collect()
        if progress is not None:
            progress(f"verify: {rounds.repeats} loads each way, interleaved, and hashlib on the same bytes")
        results: dict[str, Stats] = measure(
            {
                PLAIN: _load_sampler(path, False),
                VERIFIED: _load_sampler(path, True),
                HASHLIB: _hash_sampler(weights),
            },
            rounds,
        )
        left = et_copy.allocator_stats()["bytes_outstanding"] - before
        if left != 0:  # a cached weight would make later loads skip the upload
            raise RuntimeError(f"et_copy bench: {left} device bytes outlived the verify loads; the figures are void")
    plain, verified, hashed = (results[k].median_ns for k in (PLAIN, VERIFIED, HASHLIB))
    return {
        "width": width,
        "layers": layers,
        "weights_nbytes": nbytes,
        "results": results,
        "ratio": verified / plain,
        "extra_ns_per_mib": (verified - plain) / (nbytes / 2**20),
        "hashlib_gb_per_s": nbytes / hashed,  # bytes per ns = GB/s
    }
