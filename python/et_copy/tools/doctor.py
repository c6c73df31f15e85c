"""``python -m et_copy doctor``: what this process can see.

Prints the executorch and torch versions, who provides the et_copy kernels
and the CUDA allocator in ExecuTorch's registries, and what the CUDA runtime
and driver report (or why there is no device). Registers nothing unless
``--register`` is given: the registries cannot undo a registration.
"""

from __future__ import annotations

import argparse
import json
import os
from importlib import metadata
from typing import Any

import torch

from .. import _C
from .._errors import EtCopyError
from .._ops import D2H_COPY_OUT, H2D_COPY_OUT
from .._registration import allocator_info, kernel_owner, register_kernels
from ..cuda import cuda_status, use_cuda

_OWNERS = {
    "already et_copy": "et_copy",
    "already other": "another library (e.g. the executorch wheel's kernels)",
    "absent": "nobody",
}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cuda_version(v: int | None) -> str | None:
    return None if not v else f"{v // 1000}.{v % 1000 // 10}"


def _register() -> dict[str, str]:
    done = {}
    try:
        for op, outcome in register_kernels().items():
            done[op] = outcome
    except EtCopyError as e:
        done["kernels"] = f"failed: {e}"
    try:
        done["cuda allocator"] = use_cuda()
    except EtCopyError as e:
        done["cuda allocator"] = f"not registered ({e.error}): {e}"
    return done


def report(*, register: bool = False) -> dict[str, Any]:
    """The doctor's findings as a dict (what ``--json`` prints)."""
    out: dict[str, Any] = {
        "et_copy": {
            "version": _version("et-copy"),
            "extension": os.path.abspath(_C.__file__),
            "built_with_cuda": bool(getattr(_C, "WITH_CUDA", False)),
        },
        "executorch": _version("executorch"),
        "torch": {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(),
        },
    }
    if register:
        out["registered_now"] = _register()
    owners = {op: kernel_owner(op) for op in (H2D_COPY_OUT, D2H_COPY_OUT)}
    out["kernels"] = {op: _OWNERS.get(owner, owner) for op, owner in owners.items()}
    out["cuda_allocator"] = allocator_info("cuda")
    out["cuda"] = cuda_status()
    return out


def _render(r: dict[str, Any]) -> str:
    lines = [
        f"et_copy      {r['et_copy']['version'] or '(not installed; running from a source tree)'}",
        f"  extension  {r['et_copy']['extension']}",
        "  CUDA       "
        + ("built in" if r["et_copy"]["built_with_cuda"] else "not built (no CUDA toolkit at build time)"),
        f"executorch   {r['executorch'] or 'not installed'}",
        f"torch        {r['torch']['version']} (CUDA build: {r['torch']['cuda'] or 'no'}; "
        f"CUDA available: {'yes' if r['torch']['cuda_available'] else 'no'})",
    ]
    if "registered_now" in r:
        lines.append("registered by --register:")
        lines += [f"  {k}: {v}" for k, v in r["registered_now"].items()]
    lines.append("kernels in ExecuTorch's registry:")
    lines += [f"  {op:<24} {who}" for op, who in r["kernels"].items()]
    alloc = r["cuda_allocator"]
    if alloc is None:
        lines.append(
            "CUDA allocator: none registered (et_copy.use_cuda() or et_copy.use_simulated_device() registers one)"
        )
    else:
        count = (
            alloc["device_count"] if alloc["device_count"] is not None else f"unknown ({alloc['device_count_error']})"
        )
        lines.append(f"CUDA allocator: {alloc['owner']}'s {alloc['name']} allocator, {count} device(s)")
    c = r["cuda"]
    if not c["built"]:
        lines.append(f"CUDA: {c['message']}")
    else:
        lines.append(
            f"CUDA runtime {_cuda_version(c['runtime_version'])} (linked statically), "
            f"driver {_cuda_version(c['driver_version']) or 'none'}"
        )
        if c["error"] is not None:
            lines.append(f"  no usable device: {c['message']}")
        for d in c["devices"]:
            cc = ".".join(str(x) for x in d["compute_capability"])
            lines.append(
                f"  cuda:{d['index']}  {d['name']}  sm_{cc.replace('.', '')}  "
                f"{d['total_memory'] / 2**30:.1f} GiB  {d['pci_bus_id']}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m et_copy doctor", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--register",
        action="store_true",
        help="first register et_copy's kernels (where absent) and its CUDA allocator (if a GPU is usable)",
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="show third-party warnings and log lines too")
    args = parser.parse_args(argv)
    r = report(register=args.register)
    print(json.dumps(r, indent=2) if args.json else _render(r))
    return 0
