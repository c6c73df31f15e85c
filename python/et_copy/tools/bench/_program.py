"""A whole program: a .pte whose inner tensors are planned on the
(simulated) device, through ``executorch.runtime`` (the wheel's kernels
serve its copies) and through ``et_copy.runtime`` (et-copy's, scoped to the
method), against the same model exported without device planning."""

from __future__ import annotations

import torch

from ..._quiet import wrap_log_hooks
from ._timing import Config, measure, python_sampler

DEVICE_PLANNED = "device-planned .pte (h2d, model, d2h)"
ET_COPY_RUNTIME = "the same .pte on et_copy.runtime"
HOST_ONLY = "same model, no device planning"
BASELINE = HOST_ONLY
DEFAULT_SHAPES = ((1024,), (1024, 1024))  # 4 KiB and 4 MiB of float32


class ScaleShift(torch.nn.Module):
    """The model: two elementwise ops, so the device side holds a real
    intermediate and not just a copy."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


def _host_only_program(module: torch.nn.Module, example: tuple) -> bytes:
    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.exir.passes import MemoryPlanningPass

    exported = torch.export.export(module, example, strict=False)
    # Same planning settings as export_device_program, minus the device.
    planner = MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=True)
    return to_edge(exported).to_executorch(ExecutorchBackendConfig(memory_planning_pass=planner)).buffer


def _load(runtime, pte: bytes):
    # The Program keeps its methods (and their planned buffers) alive.
    program = runtime.load_program(pte)
    return program, program.load_method("forward")


def program_level(config: Config, shapes=DEFAULT_SHAPES, progress=None) -> dict:
    """Seconds to export are not timed; each sample times Method.execute.
    Needs the simulated allocator registered (the device-planned buffer is
    allocated through it when the method loads) and executorch's AOT stack."""
    from executorch.runtime import Runtime

    wrap_log_hooks()  # its pybindings, first loaded here, hook the log too

    import et_copy
    from et_copy import runtime as et_copy_runtime
    from et_copy.export import export_device_program

    runtime = Runtime.get()
    module = ScaleShift().eval()
    rows = []
    for shape in shapes:
        x = torch.randn(shape)
        nbytes = x.numel() * x.element_size()
        if progress is not None:
            progress(f"program: exporting {list(shape)} float32 twice")
        device_pte = export_device_program(module, (x,), device="cuda:0").buffer
        host_pte = _host_only_program(module, (x,))
        with et_copy.counting() as loading:
            device_program, device_method = _load(runtime, device_pte)
            host_program, host_method = _load(runtime, host_pte)
            ours = et_copy_runtime.load(device_pte).load_method("forward")
        planned = loading.bytes_outstanding
        expected = module(x)
        for method in (device_method, host_method, ours):
            got = method.execute([x])[0]
            if not isinstance(got, torch.Tensor) or not torch.equal(got, expected):
                raise RuntimeError(f"et_copy bench: the {list(shape)} program returned wrong values; not timing it")
        with et_copy.counting() as one:
            device_method.execute([x])
        if progress is not None:
            progress(f"program: timing {list(shape)}")
        results = measure(
            {
                DEVICE_PLANNED: python_sampler(lambda: device_method.execute([x])),
                HOST_ONLY: python_sampler(lambda: host_method.execute([x])),
                ET_COPY_RUNTIME: python_sampler(lambda: ours.execute([x])),
            },
            config,
        )
        rows.append(
            {
                "shape": list(shape),
                "nbytes": nbytes,
                "device_planned_bytes": planned,
                "copies_per_execution": {
                    "h2d": one.h2d_copies,
                    "d2h": one.d2h_copies,
                },
                "results": results,
            }
        )
        del device_method, host_method, device_program, host_program, ours
    return {
        "baseline": BASELINE,
        "rows": rows,
        "runtimes": [DEVICE_PLANNED, ET_COPY_RUNTIME],
        "registry_kernels": {op: et_copy.kernel_owner(op) for op in (et_copy.H2D_COPY_OUT, et_copy.D2H_COPY_OUT)},
    }
