"""Writes the .pte files the C++ tests load (tests/cpp/programs/*.pte).

    python tests/cpp/programs/make_programs.py [OUT_DIR]

They are committed, so the C++ tests need no Python; run this again only to
change them. Imports executorch.exir (seconds).

- roundtrip.pte: et_copy.tools.models.RoundTrip (x -> _h2d_copy -> _d2h_copy),
  float32[2, 3, 4], the device tensor planned on CUDA.
- d2h_fails.pte: the same with its host output retyped to Half, so
  et-copy's d2h kernel (instruction 0:1) fails with a dtype mismatch.
- add_relu_xnnpack.pte: relu(a + b) on float32[4, 8] delegated to XNNPACK,
  with et_copy copies around the delegate: operators and a delegate to name.
- linear_relu_linear.pte: DeviceBoundary(Linear(8, 16), ReLU,
  Linear(16, 4)) exported copy-only (no backend) on float32[2, 8]: CPU kernels (aten::addmm.out...) on
  tensors planned on cuda:0, which check_device_access refuses.
- device_input.pte: export_device_program of the identity with input 0
  resident and alloc_graph_input=True: a method input planned on cuda:0
  (set_input would memcpy host bytes into it), copied out by one d2h copy.
- SimulatedDeviceBackend's delegate records (docs/design.md, "The delegate
  record"), made here until et_copy.backend writes them, each as NAME.record
  (the `processed` bytes), NAME.data (the named data the record refers to:
  each weight, then each initial state value, in record order) and NAME.io
  (float32 inputs, then the eager outputs, per step):
  - linear: relu(Linear(4, 3)(x)), x float32[2, 4]; one step.
  - acc: a buffer `acc` = arange(4) updated in place (acc += x), returning
    acc * w; two steps, from the start state.
  - acc8: the same with 8 elements (another arena size).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import torch
from et_copy.export import DeviceBoundary, export_device_program, lower_to_device
from et_copy.tools.parity.tamper import original_program, tampered_programs
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.schema import Tensor as SerializedTensor


class AddRelu(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b)


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


class Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.l(x))


class Acc(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.register_buffer("acc", torch.arange(n, dtype=torch.float32))
        self.w = torch.nn.Parameter(torch.linspace(0.5, 2.0, n))

    def forward(self, x):
        self.acc.add_(x)
        return self.acc * self.w


class ArenaPlanningPass(MemoryPlanningPass):
    """Plans the mutable buffers in a last planned buffer of their own (the
    state arena), the rest as usual; ``state_layout`` maps each buffer name
    to ``(arena buffer index as MethodMeta counts it, offset, nbytes)``."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.state_layout: dict[str, tuple[int, int, int]] = {}

    def run(self, graph_module, graph_signature=None):
        mutated = set(graph_signature.buffers_to_mutate.values())
        state = {p: b for p, b in graph_signature.inputs_to_buffers.items() if b in mutated}
        kept, self.alloc_mutable_buffers = self.alloc_mutable_buffers, False
        try:
            result = super().run(graph_module, graph_signature)
        finally:
            self.alloc_mutable_buffers = kept
        sizes = graph_module.meta["non_const_buffer_sizes"]
        mem_id, offset = len(sizes), 0
        for node in graph_module.graph.nodes:
            if node.op == "placeholder" and node.name in state:
                spec = node.meta["spec"]
                offset = -(-offset // 16) * 16
                spec.mem_id, spec.mem_offset = mem_id, offset
                self.state_layout[state[node.name]] = (mem_id - 1, offset, spec.allocated_memory)
                offset += spec.allocated_memory
        if state:
            sizes.append(-(-offset // 16) * 16)
        return result


def _bytes(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().numpy().tobytes()


def delegate_record(module: torch.nn.Module, args: tuple) -> tuple[bytes, bytes]:
    """(record, named data) for `module` as SimulatedDeviceBackend's preprocess will make them."""
    initial = {k: v.clone() for k, v in module.named_buffers()}
    ep = torch.export.export(module, args)
    planning = ArenaPlanningPass(alloc_graph_input=False, alloc_graph_output=False)
    nested = to_edge(ep).to_executorch(ExecutorchBackendConfig(external_constants=True, memory_planning_pass=planning))
    lines = ["et_copy.delegate 2", "device\tcuda\t0"]
    data = b""
    for value in nested.executorch_program.execution_plan[0].values:
        info = getattr(value.val, "extra_tensor_info", None) if isinstance(value.val, SerializedTensor) else None
        if info is not None and info.fully_qualified_name and info.location == 1:  # EXTERNAL
            blob = _bytes(ep.state_dict[info.fully_qualified_name])
            key = "et_copy.weight:" + hashlib.sha256(blob).hexdigest()[:32]
            lines.append(f"weight\t{info.fully_qualified_name}\t{key}\t{len(blob)}")
            data += blob
    arena = None
    for name, (buffer, offset, nbytes) in sorted(planning.state_layout.items()):
        lines.append(f"state\t{name}\t{offset}\t{nbytes}\tet_copy.initial_state:{name}")
        data += _bytes(initial[name])
        size = nested.executorch_program.execution_plan[0].non_const_buffer_sizes[buffer + 1]
        arena = f"arena\t{buffer}\t{size}"
    if arena:
        lines.append(arena)
    program = nested.buffer
    lines.append(f"payload\tprogram\t{len(program)}")
    return ("\n".join(lines) + "\n").encode() + program, data


def write_delegate_fixtures(out: Path) -> None:
    torch.manual_seed(0)
    linear, x = Linear(), torch.randn(2, 4)
    record, data = delegate_record(linear, (x,))
    (out / "linear.record").write_bytes(record)
    (out / "linear.data").write_bytes(data)
    (out / "linear.io").write_bytes(_bytes(x) + _bytes(linear(x)))
    for name, n in (("acc", 4), ("acc8", 8)):
        xs = [torch.randn(n), torch.randn(n)]
        record, data = delegate_record(Acc(n), (xs[0],))
        eager = Acc(n)  # a fresh module: export does not run forward, but stay clear of its state
        ys = [eager(x) for x in xs]
        (out / f"{name}.record").write_bytes(record)
        (out / f"{name}.data").write_bytes(data)
        (out / f"{name}.io").write_bytes(b"".join(_bytes(x) for x in xs) + b"".join(_bytes(y) for y in ys))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    original = original_program()
    (out / "roundtrip.pte").write_bytes(original)
    (out / "d2h_fails.pte").write_bytes(tampered_programs(original)["output_dtype_half"])
    inputs = (torch.randn(4, 8), torch.randn(4, 8))
    (out / "add_relu_xnnpack.pte").write_bytes(lower_to_device(AddRelu(), inputs, XnnpackPartitioner()).buffer)
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    # The pre-backend shape: DeviceBoundary's copies, the CPU kernels between them on device memory.
    leaky = export_device_program(DeviceBoundary(mlp), (torch.randn(2, 8),), insert_copies=False)
    (out / "linear_relu_linear.pte").write_bytes(leaky.buffer)
    resident = export_device_program(Identity(), (torch.randn(2, 3),), resident_inputs=(0,), alloc_graph_input=True)
    (out / "device_input.pte").write_bytes(resident.buffer)
    write_delegate_fixtures(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
