"""The reference backend's ahead-of-time side (reference.py): the program its
C++ test runs (scale_add_relu.pte, .io) is what make_program.py writes now,
and preprocess refuses a graph it cannot lower, naming the op.

    python -m pytest tests/backends/reference
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("executorch.exir")

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import make_program  # noqa: E402
from reference import ReferencePartitioner  # noqa: E402


def test_the_committed_program_and_eager_io_are_what_make_program_writes() -> None:
    assert make_program.program_bytes() == (HERE / "scale_add_relu.pte").read_bytes()
    assert make_program.io_bytes() == (HERE / "scale_add_relu.io").read_bytes()


def test_the_delegate_is_one_reference_record_with_its_weight_and_steps() -> None:
    blob = (HERE / "scale_add_relu.pte").read_bytes()
    at = blob.index(b"et_copy.delegate 2\n")
    head, _, rest = blob[at:].partition(b"payload\treference\t")
    size, _, payload = rest.partition(b"\n")
    lines = head.decode().split("\n")
    assert lines[1] == "device\tcuda\t0"
    assert lines[2].startswith("weight\tw\tet_copy.weight:") and lines[2].endswith("\t24")
    assert payload[: int(size)].decode() == "inputs 2\nmul %0 @w\nadd %2 %1\nrelu %3\noutputs %4\n"


def test_preprocess_refuses_an_op_that_is_not_a_reference_step() -> None:
    from et_copy.export import export_device_program

    class Sigmoid(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(x) + x

    with pytest.raises(Exception, match="sigmoid.* is not one of the reference steps"):
        export_device_program(Sigmoid(), (torch.ones(2),), partitioner=ReferencePartitioner())
