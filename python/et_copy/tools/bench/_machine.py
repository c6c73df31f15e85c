"""The machine and software a benchmark ran on, for the top of the report."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def describe() -> dict:
    """CPU model, cores, memory, load, and the versions that matter."""
    import torch

    import et_copy

    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    info = {
        "cpu": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "memory_gib": _memory_gib(),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "executorch": _version("executorch"),
        "et_copy": getattr(et_copy, "__version__", None),
        "cuda_available": bool(torch.cuda.is_available()),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    return info


def summary_lines(info: dict) -> list[str]:
    mem = f"{info['memory_gib']} GiB" if info["memory_gib"] is not None else "unknown memory"
    load = ", ".join(str(x) for x in info["load_average"]) if info["load_average"] else "n/a"
    gpu = info["gpu"] or "none (torch has no CUDA device)"
    return [
        f"machine : {info['cpu']}; {info['usable_cpus']} usable of {info['logical_cpus']} logical CPUs; "
        f"{mem}; load {load}",
        f"software: python {info['python']}, torch {info['torch']} ({info['torch_threads']} threads), "
        f"executorch {info['executorch']}, et_copy {info['et_copy']}; {info['os']}",
        f"gpu     : {gpu}",
    ]
