"""Writes the seed programs of fuzz_program_load (fuzz/fuzz_program_load.cpp).

    python fuzz/make_program_seeds.py OUT_DIR

Real exports, made with the installed et_copy: a device MLP and a convnet
(computed in the simulated device backend's delegates), a copy-only round
trip, a tiny seeded Qwen3-MoE from et_copy.llm.export_llm, whose
delegate records carry nested programs, and an MLP with state compiled by
the compiled backend (backend="aoti", an AOTInductor .so in its record,
1.5 MB; a compile-cache hit after the first). They are made, not committed: the
LLM alone is most of a megabyte, and a program made by today's exporter is
the one worth mutating. fuzz/run.sh keeps them in its build folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

import et_copy
import torch
from et_copy import llm
from et_copy.export import export_device_program
from et_copy.tools.models import RoundTrip


class CountingMlp(torch.nn.Module):
    """An MLP that adds its output to a state tensor that starts non-zero."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)
        self.register_buffer("total", torch.linspace(0.25, 1.0, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total.add_(self.b(torch.relu(self.a(x))).sum(0))
        return self.total * 1.0


def seeds() -> dict[str, bytes]:
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    conv = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 5)
    ).eval()
    return {
        "device_mlp.pte": bytes(export_device_program(mlp, (torch.randn(2, 8),)).buffer),
        "device_convnet.pte": bytes(export_device_program(conv, (torch.randn(1, 3, 8, 8),)).buffer),
        "roundtrip.pte": bytes(
            export_device_program(RoundTrip(), RoundTrip.example_inputs(), insert_copies=False).buffer
        ),
        "qwen3_moe.pte": bytes(llm.export_llm(llm.tiny_model("qwen3_moe")).buffer),
        "aoti_mlp.pte": bytes(export_device_program(CountingMlp(), (torch.randn(2, 8),), backend="aoti").buffer),
    }


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    et_copy.use_simulated_device()
    et_copy.use_aoti_backend()
    for name, data in seeds().items():
        (out / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
