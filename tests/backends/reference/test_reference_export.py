"""The reference backend's ahead-of-time side (reference.py): the program its
C++ test runs (scale_add_relu.pte, .io) is what make_program.py writes now,
preprocess refuses a graph it cannot lower, naming the op, and its word,
added to et-copy's table, exports through et-copy's own routes.

    python -m pytest tests/backends/reference
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest
import torch

pytest.importorskip("executorch.exir")

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import make_program  # noqa: E402
from et_copy.backends import BACKENDS, Backend, add_backend, partitioner_for  # noqa: E402
from et_copy_reference import BACKEND as REFERENCE  # noqa: E402
from et_copy_reference.export import ReferencePartitioner  # noqa: E402


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


@pytest.fixture
def reference_word() -> Iterator[Backend]:
    """The backend's word in et-copy's table while the test runs."""
    added = add_backend(REFERENCE)
    yield added
    del BACKENDS["reference"]


def test_its_word_exports_through_et_copys_own_routes(reference_word: Backend) -> None:
    from et_copy.export import export_device_program

    assert add_backend(REFERENCE) is reference_word, "adding it again is idempotent"
    x, y = make_program.inputs()
    by_word = export_device_program(make_program.ScaleAddRelu(), (x, y), backend="reference")
    assert bytes(by_word.buffer) == (HERE / "scale_add_relu.pte").read_bytes()
    assert isinstance(partitioner_for("reference"), ReferencePartitioner)


def test_its_word_and_id_keep_one_meaning(reference_word: Backend) -> None:
    with pytest.raises(ValueError, match="add_backend: the word 'reference' is taken by ReferenceDeviceBackend"):
        add_backend(replace(REFERENCE, summary="another"))
    with pytest.raises(ValueError, match="backend id 'ReferenceDeviceBackend' is taken by the word 'reference'"):
        add_backend(replace(REFERENCE, word="reference2"))
    with pytest.raises(ValueError, match="backend.word must be one word"):
        add_backend(replace(REFERENCE, word="two words"))
    with pytest.raises(TypeError, match="add_backend: backend must be an et_copy.backends.Backend, got dict"):
        add_backend({"word": "x"})  # type: ignore[arg-type]
    assert sorted(BACKENDS) == ["aoti", "reference", "simulated"]


def test_a_load_before_its_registration_names_the_call_that_registers_it(reference_word: Backend) -> None:
    """Its runtime side is another package's extension, not loaded here: the
    load check refuses the delegate, and the refusal says which word's
    use_backend registers it (the C++ runtime cannot: nothing described it)."""
    import et_copy
    from et_copy import runtime
    from et_copy.export import export_device_program

    et_copy.use_simulated_device()
    program = export_device_program(make_program.ScaleAddRelu(), make_program.inputs(), backend="reference")
    with pytest.raises(et_copy.EtCopyError, match="checking the program failed") as refused:
        runtime.load(bytes(program.buffer))
    assert refused.value.error == "InvalidProgram"
    assert str(refused.value).endswith(
        "backend 'ReferenceDeviceBackend' (the word 'reference') is not registered: "
        "call et_copy.backends.use_backend('reference') before loading"
    )
