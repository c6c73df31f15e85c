"""The device-planned programs the et_copy.runtime tests run
(test_runtime.py, test_runtime_checks.py), exported in a child process
(importing executorch.exir changes torch.library state).

With ET_COPY_PROGRAM_CACHE set (tools/mutation/mutation.py sets it), the programs
are exported once into that folder, keyed by the export script's hash, and
reused: exporting takes longer than the tests that run them, and a mutation
run reruns these tests once per mutant.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import et_copy
import pytest
import torch

EXPORT = r"""
import json, sys
from pathlib import Path
import torch
from et_copy.export import MethodInputs, export_device_methods, export_device_program, lower_to_device

out = Path(sys.argv[1])
torch.manual_seed(0)


class Affine(torch.nn.Module):
    def forward(self, x, y):
        return x * 2.0 + y, (x - y).sum()


x, y = torch.randn(3, 4), torch.randn(3, 4)
affine = bytes(export_device_program(Affine(), (x, y)).buffer)
(out / "affine.pte").write_bytes(affine)
# Outputs no exporter writes (helpers/program_edits.py): output 1 (the sum) of a
# dtype torch has none for (QUInt4x2) or of one it has (Bits16), and a third,
# Int output.
sys.path.insert(0, sys.argv[2])
from executorch.exir.schema import Int, ScalarType
from program_edits import append_value_output, edited, retype_output

for name, dtype in (("quint4x2", ScalarType.QUINT4x2), ("bits16", ScalarType.BITS16)):
    (out / f"affine_{name}.pte").write_bytes(edited(affine, retype_output("forward", 1, dtype)))
(out / "affine_int_output.pte").write_bytes(edited(affine, append_value_output("forward", Int(7))))
# Inputs 2 to 5: an Int 3, a Double 0.5, a Bool True and a None.
from executorch.exir.schema import Bool, Double, Null
from program_edits import append_value_input, plan_output_on_its_device

values = [append_value_input("forward", v) for v in (Int(3), Double(0.5), Bool(True), Null())]
(out / "affine_value_inputs.pte").write_bytes(edited(affine, *values))
# A method whose output is not a tensor (a constant method, as an LLM's get_max_seq_len).
(out / "constant.pte").write_bytes(export_device_methods(
    Affine(), {"forward": MethodInputs((x, y))}, constant_methods={"rows": 3}).buffer)


class Greater(torch.nn.Module):
    # A host output of 1-byte elements (bool).
    def forward(self, x, y):
        return x > y


(out / "greater.pte").write_bytes(export_device_program(Greater(), (x, y)).buffer)


class SlotWrite(torch.nn.Module):
    # A KV-cache style write, cache[:, pos] = v: index_put with a None index.

    def forward(self, cache, v, pos):
        cache = cache.clone()
        cache[:, pos] = v
        return cache


slot = (torch.zeros(2, 5, 3), torch.randn(2, 1, 3), torch.tensor([3]))
(out / "slot.pte").write_bytes(export_device_program(SlotWrite(), slot).buffer)

stage_a = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()).eval()
stage_b = torch.nn.Linear(16, 4).eval()
a = torch.randn(2, 8)
(out / "linear.pte").write_bytes(lower_to_device(stage_a, (a,)).buffer)
# Device in, device out: the caller passes and receives device tensors.
(out / "stage_a.pte").write_bytes(lower_to_device(
    stage_a, (a,), skip_h2d_for_method_inputs=True, skip_d2h_for_method_outputs=True,
    alloc_graph_output=False).buffer)
# The same with its device output planned in the method's memory (helpers/program_edits.py).
(out / "stage_a_planned_output.pte").write_bytes(
    edited(out.joinpath("stage_a.pte").read_bytes(), plan_output_on_its_device("forward", 0)))
# stage_a with its device input memory-planned (as alloc_graph_input would plan it; et_copy.export
# refuses to), for et_copy.runtime to refuse.
from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
from executorch.exir.schema import AllocationDetails

pte_file = deserialize_pte_binary(out.joinpath("stage_a.pte").read_bytes())
plan = pte_file.program.execution_plan[0]
plan.non_const_buffer_sizes = [0, 192]  # a [2, 8] input at 0 (float32)
plan.values[plan.inputs[0]].val.allocation_info = AllocationDetails(
    memory_id=1, memory_offset_low=0, memory_offset_high=0)
(out / "planned_device_input.pte").write_bytes(bytes(serialize_pte_binary(pte_file, extract_delegate_segments=True)))
# Device in, host out.
(out / "stage_b.pte").write_bytes(lower_to_device(
    stage_b, (stage_a(a),), skip_h2d_for_method_inputs=True).buffer)


class Scale(torch.nn.Module):
    # ExecuTorch's portable arithmetic takes contiguous or channels-last tensors only.
    def forward(self, x):
        return x.contiguous() * 2.0


# An input planned in dim order (1, 0) (the example is a transposed view); the output is contiguous.
transposed = torch.randn(4, 3).t()
(out / "transposed.pte").write_bytes(export_device_program(Scale(), (transposed,)).buffer)
# An input of ExecuTorch's largest rank, 16: 15 dims of size 1, then 4.
rank16 = torch.arange(4.0).reshape((1,) * 15 + (4,))
(out / "rank16.pte").write_bytes(export_device_program(Scale(), (rank16,)).buffer)


class Scalars(torch.nn.Module):
    # Python scalar inputs: torch.export keeps each as an input planned at its
    # example's value (ExecuTorch refuses any other), and returns them as outputs.
    def forward(self, x, n, f, b):
        return x * 2.0, n, f, b


(out / "scalars.pte").write_bytes(export_device_program(Scalars(), (x, 3, 1.5, True)).buffer)
torch.save({"slot": slot, "affine": (x, y), "transposed": transposed, "rank16": rank16,
            "stage": a, "stage_a": stage_a.state_dict(), "stage_b": stage_b.state_dict()},
           out / "data.pt")
"""


EDITS = Path(__file__).with_name("program_edits.py")


def export_programs(tmp_path_factory) -> Path:
    """A folder holding the programs of EXPORT and their inputs (data.pt)."""
    cache = os.environ.get("ET_COPY_PROGRAM_CACHE")
    if cache:
        out = Path(cache) / hashlib.sha256(EXPORT.encode() + EDITS.read_bytes()).hexdigest()[:16]
        if (out / "done").is_file():
            return out
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
    else:
        out = tmp_path_factory.mktemp("runtime_programs")
    proc = subprocess.run(
        [sys.executable, "-c", EXPORT, str(out), str(EDITS.parent)], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        pytest.fail(f"export failed:\n{proc.stderr[-6000:]}")
    (out / "done").write_text("")
    return out


# The fixtures of the modules that run these programs; a module imports them
# by these names, and each module gets its own (scope="module").
@pytest.fixture(scope="module", name="programs")
def device_programs(tmp_path_factory) -> Path:
    """EXPORT's folder, with one simulated device in use."""
    out = export_programs(tmp_path_factory)
    et_copy.use_simulated_device()
    return out


@pytest.fixture(scope="module", name="data")
def program_data(programs: Path) -> dict:
    """The programs' inputs and the eager modules' weights (data.pt)."""
    return torch.load(programs / "data.pt")
