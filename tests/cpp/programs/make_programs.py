"""Writes the .pte files the C++ tests load (tests/cpp/programs/*.pte).

    python tests/cpp/programs/make_programs.py [OUT_DIR]

They are committed, so the C++ tests need no Python; run this again only to
change them. Imports executorch.exir (seconds).

- roundtrip.pte: et_copy.models.RoundTrip (x -> _h2d_copy -> _d2h_copy),
  float32[2, 3, 4], the device tensor planned on CUDA.
- d2h_fails.pte: the same with its host output retyped to Half, so
  et-copy's d2h kernel (instruction 0:1) fails with a dtype mismatch.
- add_relu_xnnpack.pte: relu(a + b) on float32[4, 8] delegated to XNNPACK,
  with et_copy copies around the delegate: operators and a delegate to name.
- linear_relu_linear.pte: export_device_program(Linear(8, 16), ReLU,
  Linear(16, 4)) on float32[2, 8]: CPU kernels (aten::addmm.out...) on
  tensors planned on cuda:0, which check_device_access refuses.
- device_input.pte: export_device_program of the identity with input 0
  resident and alloc_graph_input=True: a method input planned on cuda:0
  (set_input would memcpy host bytes into it), copied out by one d2h copy.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from et_copy.export import export_device_program, lower_to_device
from et_copy.parity.tamper import original_program, tampered_programs
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner


class AddRelu(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b)


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    original = original_program()
    (out / "roundtrip.pte").write_bytes(original)
    (out / "d2h_fails.pte").write_bytes(tampered_programs(original)["output_dtype_half"])
    inputs = (torch.randn(4, 8), torch.randn(4, 8))
    (out / "add_relu_xnnpack.pte").write_bytes(lower_to_device(AddRelu(), inputs, XnnpackPartitioner()).buffer)
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    (out / "linear_relu_linear.pte").write_bytes(export_device_program(mlp, (torch.randn(2, 8),)).buffer)
    resident = export_device_program(Identity(), (torch.randn(2, 3),), resident_inputs=(0,), alloc_graph_input=True)
    (out / "device_input.pte").write_bytes(resident.buffer)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
