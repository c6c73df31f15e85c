"""``python -m et_copy demo``: move one tensor of every dtype to the
simulated device and back, and show what the allocator saw."""

from __future__ import annotations

import argparse

import torch

from .. import _registration
from .._counting import counting
from .._dtypes import SUPPORTED_DTYPES
from .._ops import d2h_copy, h2d_copy


def _sample(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    raw = torch.randint(0, 256, (torch.Size(shape).numel() * dtype.itemsize,), dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)


def _bytes(t: torch.Tensor) -> bytes:
    return bytes(t.view(torch.uint8).reshape(-1).numpy())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m et_copy demo", description=__doc__)
    parser.add_argument("--shape", type=int, nargs="*", default=[3, 5], help="tensor shape (default 3 5)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show third-party warnings and log lines too")
    args = parser.parse_args(argv)
    shape = tuple(args.shape)

    _registration.use_simulated_device()
    print(f"round trip of shape {shape} through the simulated CUDA device (et_copy kernels)")
    print(f"{'dtype':<16}{'bytes':>8}  {'h2d':>5} {'d2h':>5}  same bytes")
    ok = True
    with counting() as total:
        for dtype in SUPPORTED_DTYPES:
            host = _sample(dtype, shape)
            with counting() as trip:
                device = h2d_copy(host)
                back = d2h_copy(device)
            same = _bytes(host) == _bytes(back)
            ok &= same
            name = str(dtype).removeprefix("torch.")
            print(f"{name:<16}{host.nbytes:>8}  {trip.h2d_bytes:>5} {trip.d2h_bytes:>5}  {'yes' if same else 'NO'}")
            device.free()
    moved = {k: total.as_dict()[k] for k in ("allocations", "h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes")}
    print(
        "allocator: "
        + ", ".join(f"{k}={v}" for k, v in moved.items())
        + f", bytes_outstanding={_registration.allocator_stats()['bytes_outstanding']}"
    )
    print("all round trips returned the same bytes" if ok else "SOME ROUND TRIPS CHANGED BYTES")
    return 0 if ok else 1
