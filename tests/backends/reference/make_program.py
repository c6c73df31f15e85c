"""Writes the program the reference backend's C++ test runs:

    python tests/backends/reference/make_program.py

- scale_add_relu.pte: relu(x * w + y) with a weight w, x and y float32[2, 3],
  exported with ReferencePartitioner (copies around the delegate from
  PropagateDevicePass, w in the program's named data);
- scale_add_relu.io: x, y, then the eager output, float32 bytes.

Committed, so the C++ test needs no Python; run this again only to change
them (test_reference_export.py checks that they still match this code).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from et_copy_reference.export import ReferencePartitioner  # noqa: E402


class ScaleAddRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]]))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.w + y)


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.tensor([[1.0, 2.0, 3.0], [-4.0, 5.0, 6.0]])
    y = torch.tensor([[0.5, 0.5, -7.0], [1.0, -2.0, 4.0]])
    return x, y


def program_bytes() -> bytes:
    from et_copy.export import export_device_program

    return bytes(export_device_program(ScaleAddRelu(), inputs(), partitioner=ReferencePartitioner()).buffer)


def io_bytes() -> bytes:
    x, y = inputs()
    with torch.no_grad():
        out = ScaleAddRelu()(x, y)
    return b"".join(t.contiguous().numpy().tobytes() for t in (x, y, out))


def main() -> None:
    out = Path(__file__).parent
    (out / "scale_add_relu.pte").write_bytes(program_bytes())
    (out / "scale_add_relu.io").write_bytes(io_bytes())


if __name__ == "__main__":
    main()
