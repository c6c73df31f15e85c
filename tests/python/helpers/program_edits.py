"""Edits of a real exported program into shapes no exporter writes, through
executorch's own (de)serializer: an output of a dtype torch has no dtype
for, value (not tensor) inputs and outputs, a device output planned in
the method's memory, a method renamed away. For the load and run paths
that only such programs reach.

    edited(program_bytes, retype_value("forward", 2, ScalarType.QUINT4X2))

Imports executorch.exir (seconds), which changes torch.library state: use it
in the child process that exports the program (runtime_programs.EXPORT).
Each edit is a function of the deserialized schema.Program, so several
compose in one edited() call; the read and the write are
hand_made_programs.edit_program's (nested records and impossible sizes are
made there).
"""

from __future__ import annotations

from typing import Callable

from executorch.exir import schema
from hand_made_programs import edit_program

Edit = Callable[[schema.Program], None]


def edited(program: bytes, *edits: Edit) -> bytes:
    """``program`` with each of ``edits`` applied in turn."""

    def each(pte_file) -> None:
        for edit in edits:
            edit(pte_file.program)

    return edit_program(program, each)


def plan(program: schema.Program, method: str) -> schema.ExecutionPlan:
    return next(p for p in program.execution_plan if p.name == method)


def output_value(program: schema.Program, method: str, output: int) -> int:
    """The value index of a method's output."""
    return plan(program, method).outputs[output]


def retype_output(method: str, output: int, scalar_type: schema.ScalarType) -> Edit:
    """A tensor output's dtype becomes ``scalar_type`` (its sizes stay)."""

    def edit(program: schema.Program) -> None:
        value = plan(program, method).values[output_value(program, method, output)].val
        assert isinstance(value, schema.Tensor), f"output {output} of '{method}' is not a tensor"
        value.scalar_type = scalar_type

    return edit


def append_value_output(method: str, value: schema.Int | schema.Double | schema.Bool) -> Edit:
    """A new last output of ``method``: a new value holding ``value``."""

    def edit(program: schema.Program) -> None:
        p = plan(program, method)
        p.values.append(schema.EValue(value))
        p.outputs.append(len(p.values) - 1)

    return edit


Primitive = schema.Int | schema.Double | schema.Bool | schema.Null


def append_value_input(method: str, value: Primitive) -> Edit:
    """A new last input of ``method``: a new value holding ``value`` (an
    exporter bakes a Python scalar argument into the graph instead)."""

    def edit(program: schema.Program) -> None:
        p = plan(program, method)
        p.values.append(schema.EValue(value))
        p.inputs.append(len(p.values) - 1)

    return edit


ELEMENT_BYTES = {schema.ScalarType.FLOAT: 4, schema.ScalarType.HALF: 2, schema.ScalarType.LONG: 8}


def plan_output_on_its_device(method: str, output: int) -> Edit:
    """A tensor output left unplanned on a device (the caller's memory) gets
    a place at the end of the planned buffer of its device (a new one if
    there is none), 16-aligned: what
    an export with alloc_graph_output=True and the output on the device
    would plan (et_copy's exporters refuse that combination)."""

    def edit(program: schema.Program) -> None:
        p = plan(program, method)
        tensor = p.values[p.outputs[output]].val
        assert isinstance(tensor, schema.Tensor) and tensor.allocation_info is None, "an unplanned tensor output"
        info = tensor.extra_tensor_info
        assert info is not None and info.device_type != schema.DeviceType.CPU, "an output on a device"
        buffers = [
            d.buffer_idx
            for d in p.non_const_buffer_device or []
            if (d.device_type, d.device_index) == (info.device_type, info.device_index)
        ]
        if not buffers:  # the method plans nothing on that device yet: a new buffer
            buffers = [len(p.non_const_buffer_sizes)]
            p.non_const_buffer_sizes.append(0)
            p.non_const_buffer_device = [
                *(p.non_const_buffer_device or []),
                schema.NonConstBufferDevice(buffers[0], info.device_type, info.device_index),
            ]
        buffer = buffers[0]
        offset = (p.non_const_buffer_sizes[buffer] + 15) // 16 * 16
        nbytes = ELEMENT_BYTES[tensor.scalar_type]
        for size in tensor.sizes:
            nbytes *= size
        tensor.allocation_info = schema.AllocationDetails(
            memory_id=buffer, memory_offset_low=offset, memory_offset_high=0
        )
        p.non_const_buffer_sizes[buffer] = offset + nbytes

    return edit


def rename_method(method: str, name: str) -> Edit:
    def edit(program: schema.Program) -> None:
        plan(program, method).name = name

    return edit
