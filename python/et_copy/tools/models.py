"""Tiny modules for tests, benchmarks and examples of device-boundary programs.

Each calls ``torch.ops.et_copy`` itself, so export it with
``export_device_program(module, inputs, insert_copies=False)`` (or with
plain ``torch.export``). ``example_inputs()`` gives inputs that fit.
"""

from __future__ import annotations

import torch

from .. import aot


class RoundTrip(torch.nn.Module):
    """``D2H(H2D(x))``: a copy-only program; its only operators are the two
    et_copy kernels, so a C++ executor runs it with no kernel library."""

    def __init__(self) -> None:
        super().__init__()
        aot.ensure_registered()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.et_copy._d2h_copy(torch.ops.et_copy._h2d_copy(x))

    @staticmethod
    def example_inputs() -> tuple[torch.Tensor]:
        return (torch.arange(24, dtype=torch.float32).reshape(2, 3, 4),)


class AffineOnDevice(torch.nn.Module):
    """``D2H(H2D(x) * scale + shift)``: compute between the copies. Its
    arithmetic runs on device-planned memory through CPU kernels, which
    works with the simulated device (host memory) only."""

    def __init__(self, scale: float = 2.0, shift: float = 0.5) -> None:
        super().__init__()
        aot.ensure_registered()
        self.scale = scale
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        on_device = torch.ops.et_copy._h2d_copy(x)
        return torch.ops.et_copy._d2h_copy(on_device * self.scale + self.shift)

    @staticmethod
    def example_inputs() -> tuple[torch.Tensor]:
        return (torch.linspace(-1.0, 1.0, 12).reshape(3, 4),)


class TwoInputs(torch.nn.Module):
    """Two inputs copied to the device, summed there, one output copied back."""

    def __init__(self) -> None:
        super().__init__()
        aot.ensure_registered()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        h2d = torch.ops.et_copy._h2d_copy
        return torch.ops.et_copy._d2h_copy(h2d(a) + h2d(b))

    @staticmethod
    def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.ones(5), torch.arange(5, dtype=torch.float32))
