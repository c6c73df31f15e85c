"""Tampered device-planned programs: a real export of et_copy.tools.models.RoundTrip
(x -> _h2d_copy -> _d2h_copy) with one malformation each, made through
executorch's own (de)serializer. They are what an untrusted .pte can hold;
a runtime must reject each cleanly. Imports executorch.exir (seconds).
"""

from __future__ import annotations

import copy

from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
from executorch.exir.schema import DeviceType, ScalarType

# value indices in RoundTrip's plan: 0 the input (host), 1 the device tensor
# (planned on CUDA), 2 the output (host); instruction 0 is _h2d_copy(0 -> 1),
# instruction 1 is _d2h_copy(1 -> 2).
INPUT, DEVICE, OUTPUT = 0, 1, 2


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


TAMPERS = [
    device_dtype_int,
    device_dtype_double,
    output_dtype_half,
    device_sizes_beyond_buffer,
    device_buffer_shrunk,
    output_sizes_smaller,
    device_tensor_marked_cpu,
    device_index_beyond,
    buffer_device_index_beyond,
    device_dim_order_swapped,
    h2d_writes_host_output,
    d2h_reads_host_input,
    h2d_missing_argument,
]


def original_program() -> bytes:
    """The untampered program: RoundTrip exported by export_device_program."""
    from ... import export
    from .. import models

    module = models.RoundTrip()
    return bytes(export.export_device_program(module, module.example_inputs(), insert_copies=False).buffer)


def tampered_programs(original: bytes) -> dict[str, bytes]:
    """{tamper name: program bytes}, one per entry of TAMPERS."""
    out = {}
    for tamper in TAMPERS:
        pte = copy.deepcopy(deserialize_pte_binary(original))
        tamper(pte)
        out[tamper.__name__] = bytes(serialize_pte_binary(pte))
    return out
