"""Writes the .pte files the C++ tests load (tests/cpp/programs/*.pte).

    python tests/cpp/programs/make_programs.py [OUT_DIR]

They are committed, so the C++ tests need no Python; run this again only to
change them. Imports executorch.exir (seconds).

- roundtrip.pte: et_copy.tools.models.RoundTrip (x -> _h2d_copy -> _d2h_copy),
  float32[2, 3, 4], the device tensor planned on CUDA.
- d2h_fails.pte: the same with its host output retyped to Half, so
  et-copy's d2h kernel (instruction 0:1) fails with a dtype mismatch.
- value_output.pte: the same with a second output, an Int 7 (a value, not a
  tensor; tests/python/helpers/program_edits.py).
- add_relu_xnnpack.pte: relu(a + b) on float32[4, 8] delegated to XNNPACK,
  with et_copy copies around the delegate: operators and a delegate to name.
- linear_relu_linear.pte: DeviceBoundary(Linear(8, 16), ReLU,
  Linear(16, 4)) exported copy-only (no backend) on float32[2, 8]: CPU kernels (aten::addmm.out...) on
  tensors planned on cuda:0, which check_device_access refuses.
- device_input.pte: export_device_program of the identity with input 0
  resident and alloc_graph_input=True: a method input planned on cuda:0
  (set_input would memcpy host bytes into it), copied out by one d2h copy.
- SimulatedDeviceBackend's delegate records (docs/design.md, "The delegate
  record"), written by et_copy.backends.simulated's preprocess (the one writer, with
  its state layout), each as NAME.record (the `processed` bytes), NAME.data
  (the named data the record refers to: each weight, then each non-zero
  initial state value, in record order) and NAME.io (float32 inputs, then
  the eager outputs, per step):
  - linear: relu(Linear(4, 3)(x)), x float32[2, 4]; one step.
  - acc: a buffer `acc` = arange(4) updated in place (acc += x), returning
    acc * w; two steps, from the start state.
  - acc8: the same with 8 elements (another arena size).
- roundtrip_huge_input.pte, roundtrip_huge_output.pte: roundtrip.pte with
  its input (output) sized [2^30] * 3 float32, more bytes than a size_t
  holds (hand_made_programs.py; only Minimal verification loads them).
- Records no exporter makes (tests/python/helpers/hand_made_programs.py),
  each read with its source fixture's .data:
  - linear_scalar_input.record: linear's nested method also takes addmm's
    alpha (an Int, 1) as input 1.
  - linear_two_methods.record: linear's nested program with a second
    method; linear_negative_buffer.record: its planned buffer of -1 bytes.
  - acc_state_from_w.record: acc's nested state `acc` loaded at method load
    from the weight `w` (load_data_into on the delegate's weight map);
    acc_state_from_nowhere.record: from a name no weight has.
  - nested_delegate.record: no weights; its nested program is
    relu(Linear(4, 5)) lowered to SimulatedDeviceBackend, its weights in
    that program's own named data. nested_delegate_bare.record: another
    such program with its named data dropped (the inner weights are
    nowhere).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from et_copy.backends.simulated import SimulatedDeviceBackend, SimulatedDevicePartitioner
from et_copy.export import DeviceBoundary, export_device_program, lower_to_device
from et_copy.tools.parity.tamper import original_program, tampered_programs
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge
from executorch.exir.schema import Int

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "helpers"))
from program_edits import append_value_output, edited  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from helpers import hand_made_programs  # noqa: E402


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


def _bytes(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().numpy().tobytes()


def delegate_record(module: torch.nn.Module, args: tuple) -> tuple[bytes, bytes]:
    """(record, named data) for `module`, from SimulatedDeviceBackend's preprocess."""
    edge = to_edge(torch.export.export(module, args))
    specs = SimulatedDevicePartitioner().delegation_spec.compile_specs
    result = SimulatedDeviceBackend.preprocess(edge.exported_program(), specs)
    store = result.data_store_output
    blobs = {key: bytes(store.buffers[entry.buffer_index]) for key, entry in store.pte_data.items()}
    header = result.processed_bytes.split(b"\npayload\t", 1)[0].decode().split("\n")
    fields = [line.split("\t") for line in header]
    keys = [f[2] for f in fields if f[0] == "weight"] + [f[4] for f in fields if f[0] == "state" and f[4] != "-"]
    return result.processed_bytes, b"".join(blobs[k] for k in keys)


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


def write_hand_made_fixtures(out: Path) -> None:
    roundtrip = (out / "roundtrip.pte").read_bytes()
    for end, output in (("input", False), ("output", True)):
        huge = hand_made_programs.with_io_sizes(roundtrip, [1 << 30] * 3, output=output)
        (out / f"roundtrip_huge_{end}.pte").write_bytes(huge)
    linear, acc = (out / "linear.record").read_bytes(), (out / "acc.record").read_bytes()
    (out / "linear_scalar_input.record").write_bytes(hand_made_programs.with_scalar_input(linear))
    two_methods = hand_made_programs.on_nested(linear, hand_made_programs.with_second_method)
    (out / "linear_two_methods.record").write_bytes(two_methods)
    (out / "linear_negative_buffer.record").write_bytes(
        hand_made_programs.on_nested(linear, lambda pte: hand_made_programs.with_planned_buffer_size(pte, -1))
    )
    (out / "acc_state_from_w.record").write_bytes(hand_made_programs.with_state_loaded_from(acc, "acc", "w"))
    (out / "acc_state_from_nowhere.record").write_bytes(
        hand_made_programs.with_state_loaded_from(acc, "acc", "nowhere")
    )
    for name, seed in (("nested_delegate", 1), ("nested_delegate_bare", 2)):
        torch.manual_seed(seed)  # weights (so content keys) of their own: no other test has them uploaded
        module = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU())
        # Its output left on the device, unplanned: the outer init binds nested outputs by pointer.
        inner = lower_to_device(
            module,
            (torch.randn(2, 4),),
            SimulatedDevicePartitioner(),
            alloc_graph_output=False,
            skip_d2h_for_method_outputs=True,
        ).buffer
        if name.endswith("_bare"):
            inner = hand_made_programs.without_named_data(inner)
        (out / f"{name}.record").write_bytes(hand_made_programs.nested_delegate_record(inner))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    original = original_program()
    (out / "roundtrip.pte").write_bytes(original)
    (out / "d2h_fails.pte").write_bytes(tampered_programs(original)["output_dtype_half"])
    (out / "value_output.pte").write_bytes(edited(original, append_value_output("forward", Int(7))))
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
    write_hand_made_fixtures(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
