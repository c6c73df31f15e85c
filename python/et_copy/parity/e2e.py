"""End to end: programs exported with et_copy.export, loaded and run by
executorch.runtime on the simulated device.

This is the path a user's model takes: the AOT ops in an exported graph,
the device buffer planned by et-copy's DevicePlanningPass and allocated by
et-copy's allocator at method load, and the copies made by the kernels the
registry resolves (in this process, the executorch wheel's). Outputs must
equal eager's byte for byte, and the allocator's counters must show the
planned buffer and exactly the expected copies.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import torch

from .._dtypes import SUPPORTED_DTYPES
from .runners import CapturedStderr, Finding


@dataclass(frozen=True)
class Program:
    name: str
    description: str
    valid: bool = True  # for the shared selection code

    def describe(self) -> str:
        return self.description


PROGRAMS = [
    Program("e2e/copy_only/all_dtypes",
            "end to end: one [3, 5] input of every dtype to cuda:0 and back, in one exported program"),
    Program("e2e/copy_only/dynamic_5_of_16",
            "end to end: float32 [rows, 3], planned for 16 rows, run with 5"),
]


@dataclass
class ProgramResult:
    program: Program
    verdict: str = "ok"
    findings: list[Finding] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    log: str = ""

    def add(self, kind: str, message: str) -> None:
        self.findings.append(Finding(kind, message))
        self.verdict = "finding"

    def to_json(self) -> dict:
        return {"name": self.program.name, "description": self.program.description, "verdict": self.verdict,
                "findings": [f.to_json() for f in self.findings], "details": self.details, "log": self.log}


def _random(dtype: torch.dtype, shape: tuple[int, ...], seed: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(zlib.crc32(seed.encode()))
    n = int(torch.Size(shape).numel())
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).to(torch.bool)
    raw = torch.randint(0, 256, (n * dtype.itemsize,), generator=gen, dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)


class _Passthrough(torch.nn.Module):
    def forward(self, *xs: torch.Tensor):
        return tuple(xs)


def _setup(program: Program):
    """(module, example inputs, runtime inputs, dynamic_shapes)."""
    if program.name == "e2e/copy_only/all_dtypes":
        inputs = tuple(_random(d, (3, 5), f"{program.name}/{d}") for d in SUPPORTED_DTYPES)
        return _Passthrough(), tuple(torch.zeros(3, 5, dtype=d) for d in SUPPORTED_DTYPES), inputs, None
    rows = torch.export.Dim("rows", min=1, max=16)
    return (torch.nn.Identity(), (torch.zeros(8, 3),), (_random(torch.float32, (5, 3), program.name),),
            [{0: rows}])


def _delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def _bytes(t: torch.Tensor) -> bytes:
    return bytes(t.contiguous().reshape(-1).view(torch.uint8).numpy()) if t.numel() else b""


def run_program(program: Program) -> ProgramResult:
    """Exports, loads and runs ``program``; never raises."""
    import et_copy

    result = ProgramResult(program)
    capture = CapturedStderr()
    try:
        with capture:
            from executorch.runtime import Runtime

            from ..export import export_device_program

            module, example, inputs, dynamic_shapes = _setup(program)
            pte = export_device_program(module, example, dynamic_shapes=dynamic_shapes).buffer
            s0 = et_copy.allocator_stats()
            method = Runtime.get().load_program(pte).load_method("forward")
            s1 = et_copy.allocator_stats()
            outputs = method.execute(list(inputs))
            s2 = et_copy.allocator_stats()
    except Exception as e:
        result.log = capture.text
        result.add("end_to_end_failed", f"{type(e).__name__}: {e}")
        return result
    result.log = capture.text
    load, run = _delta(s1, s0), _delta(s2, s1)
    nbytes = sum(x.nbytes for x in inputs)
    result.details = {"inputs": len(inputs), "bytes_each_way": nbytes, "pte_bytes": len(pte),
                      "load": {k: load[k] for k in ("allocations", "bytes_outstanding")},
                      "execute": {k: run[k] for k in ("h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes",
                                                      "failed_calls")}}
    expected = module(*inputs)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    if len(outputs) != len(expected):
        result.add("wrong_outputs", f"returned {len(outputs)} outputs, eager returns {len(expected)}")
    for i, (got, want) in enumerate(zip(outputs, expected)):
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
            result.add("wrong_shape",
                       f"output {i} is {got.dtype}{list(got.shape)}, eager's {want.dtype}{list(want.shape)}")
        elif _bytes(got) != _bytes(want):
            result.add("wrong_bytes", f"output {i} ({want.dtype}{list(want.shape)}) differs from eager's")
    if load["allocations"] < 1:
        result.add("no_device_buffer", "method load allocated no planned device buffer through et-copy's allocator")
    want = {"h2d_copies": len(inputs), "h2d_bytes": nbytes, "d2h_copies": len(inputs), "d2h_bytes": nbytes,
            "failed_calls": 0}
    for key, value in want.items():
        if run[key] != value:
            result.add("wrong_copies", f"execute made {key}={run[key]}, expected {value}")
    return result
