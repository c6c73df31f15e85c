"""Writes a real device-planned program and tampered copies of it.

    python tamper_programs.py OUT_DIR
    python tamper_programs.py --run-on-wheel OUT_DIR   (after the above)

Exports et_copy.models.RoundTrip (x -> _h2d_copy -> _d2h_copy) with
et_copy.export.export_device_program, then edits the program's flatbuffer
through executorch's own (de)serializer (executorch.exir._serialize), one
malformation per file. Run in a child process: it imports executorch.exir.
Prints the names of the files written, one per line.

--run-on-wheel runs each file on the executorch wheel's Python runtime (the
wheel's kernels, et_copy's simulated allocator for CUDA), one subprocess per
file since a file may crash it, and prints what happened: the comparison in
docs/reliability.md.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
from executorch.exir.schema import DeviceType, ScalarType

# value indices in RoundTrip's plan: 0 the input (host), 1 the device tensor
# (planned on CUDA), 2 the output (host); instruction 0 is _h2d_copy(0 -> 1),
# instruction 1 is _d2h_copy(1 -> 2).
INPUT, DEVICE, OUTPUT = 0, 1, 2


WHEEL_RUN = """
import sys, torch, et_copy
et_copy.use_simulated_device()
from executorch.runtime import Runtime
x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
try:
    out = Runtime.get().load_program(sys.argv[1]).load_method("forward").execute([x])[0]
except Exception as e:
    print("error:", str(e).splitlines()[0][:160])
    sys.exit(1)
raw = bytes(out.contiguous().view(torch.uint8).flatten().numpy())
same = raw == bytes(x.view(torch.uint8).flatten().numpy())[:len(raw)]
print(f"success: {out.dtype} {tuple(out.shape)} ({len(raw)} bytes), bytes {'equal' if same else 'differ from'} the input's")
"""


def run_on_wheel(out_dir: str) -> int:
    for pte in sorted(Path(out_dir).glob("*.pte")):
        proc = subprocess.run([sys.executable, "-c", WHEEL_RUN, str(pte)], capture_output=True, text=True,
                              timeout=600)
        said = (proc.stdout.strip().splitlines() or [""])[-1]
        print(f"{pte.stem:<28} exit {proc.returncode:>4}  {said}")
    return 0


def _plan(pte):
    return pte.program.execution_plan[0]


def _tensor(pte, i):
    return _plan(pte).values[i].val


def device_dtype_int(pte):  # same byte size, different dtype
    _tensor(pte, DEVICE).scalar_type = ScalarType.INT


def device_dtype_double(pte):  # twice the bytes of its planned slot
    _tensor(pte, DEVICE).scalar_type = ScalarType.DOUBLE


def output_dtype_half(pte):  # host output half the size of what d2h sends
    _tensor(pte, OUTPUT).scalar_type = ScalarType.HALF


def device_sizes_beyond_buffer(pte):
    _tensor(pte, DEVICE).sizes = [2, 3, 8]


def device_buffer_shrunk(pte):
    plan = _plan(pte)
    buffer = plan.non_const_buffer_device[0].buffer_idx
    plan.non_const_buffer_sizes[buffer] = 48


def output_sizes_smaller(pte):
    _tensor(pte, OUTPUT).sizes = [2, 3, 2]


def device_tensor_marked_cpu(pte):
    _tensor(pte, DEVICE).extra_tensor_info.device_type = DeviceType.CPU


def device_index_beyond(pte):
    _tensor(pte, DEVICE).extra_tensor_info.device_index = 5


def buffer_device_index_beyond(pte):
    _plan(pte).non_const_buffer_device[0].device_index = 5


def device_dim_order_swapped(pte):
    _tensor(pte, DEVICE).dim_order = [0, 2, 1]


def h2d_writes_host_output(pte):  # _h2d_copy(input -> output): wrong direction
    _plan(pte).chains[0].instructions[0].instr_args.args = [INPUT, OUTPUT, OUTPUT]


def d2h_reads_host_input(pte):  # _d2h_copy(input -> output): wrong direction
    _plan(pte).chains[0].instructions[1].instr_args.args = [INPUT, OUTPUT, OUTPUT]


def h2d_missing_argument(pte):
    _plan(pte).chains[0].instructions[0].instr_args.args = [INPUT, DEVICE]


TAMPERS = [device_dtype_int, device_dtype_double, output_dtype_half, device_sizes_beyond_buffer,
           device_buffer_shrunk, output_sizes_smaller, device_tensor_marked_cpu, device_index_beyond,
           buffer_device_index_beyond, device_dim_order_swapped, h2d_writes_host_output,
           d2h_reads_host_input, h2d_missing_argument]


def main(out_dir: str) -> int:
    from et_copy import export, models

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    module = models.RoundTrip()
    manager = export.export_device_program(module, module.example_inputs(), insert_copies=False)
    original = bytes(manager.buffer)
    (out / "original.pte").write_bytes(original)
    print("original")
    for tamper in TAMPERS:
        pte = deserialize_pte_binary(original)
        pte = copy.deepcopy(pte)
        tamper(pte)
        (out / f"{tamper.__name__}.pte").write_bytes(bytes(serialize_pte_binary(pte)))
        print(tamper.__name__)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--run-on-wheel":
        sys.exit(run_on_wheel(sys.argv[2]))
    sys.exit(main(sys.argv[1]))
