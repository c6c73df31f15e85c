"""Programs and delegate records no exporter makes, made by hand from real
exported ones: executorch's own serializer reads the flatbuffer into its
dataclasses, one field is changed, and it writes the program back (a real
program read and written unchanged comes back byte for byte). They reach the
runtime's guards that only a forged or damaged program meets:

- a nested method with a scalar input (SimulatedDeviceBackend passes a
  non-tensor argument to the nested method's set_input, which refuses one of
  another kind or value);
- a nested state tensor loaded at method load from the parent's weight map
  (NamedDataMap::load_data_into on the delegate's own map);
- a nested program that holds a delegate of its own, whose weights are in
  the nested program's named data and not in its parent's weight map (the
  inner init asks the parent's map first: ExecuTorch merges the two);
- a planned buffer of impossible size (the session's state buffer);
- a method input or output whose byte size overflows (ExecuTorch's
  verification refuses it; Minimal verification lets it load, and
  MethodMeta then cannot describe it).

Used by tests/cpp/programs/make_programs.py (the C++ tests' fixtures) and by
pytest. Imports executorch.exir's serializer only (no export)."""

from __future__ import annotations

import copy
from collections.abc import Callable

from executorch.exir._serialize._program import PTEFile, deserialize_pte_binary, serialize_pte_binary
from executorch.exir.schema import ExtraTensorInfo, TensorDataLocation

PAYLOAD_LINE = b"\npayload\t"


def edit_program(pte: bytes, edit: Callable[[PTEFile], None]) -> bytes:
    """``pte`` with ``edit`` applied to its deserialized form."""
    pte_file = deserialize_pte_binary(pte)
    edit(pte_file)
    return bytes(serialize_pte_binary(pte_file))


def split_record(record: bytes) -> tuple[list[str], bytes]:
    """A delegate record's header lines (before the payload line) and its payload."""
    head, rest = record.split(PAYLOAD_LINE, 1)
    line, payload = rest.split(b"\n", 1)
    nbytes = int(line.split(b"\t")[1])
    assert len(payload) == nbytes, "a record's payload is the rest of it"
    return head.decode().split("\n"), payload


def program_record(header: list[str], payload: bytes) -> bytes:
    """A record with ``header`` lines and a nested-program payload (et_copy.backends.simulated's layout)."""
    return ("\n".join([*header, f"payload\tprogram\t{len(payload)}"]) + "\n").encode() + payload


def edit_nested(record: bytes, edit: Callable[[PTEFile], None]) -> bytes:
    """``record`` with ``edit`` applied to its nested program."""
    header, payload = split_record(record)
    return program_record(header, edit_program(payload, edit))


def on_nested(record: bytes, change: Callable[[bytes], bytes]) -> bytes:
    """``record`` with its nested program replaced by ``change(nested program)``."""
    header, payload = split_record(record)
    return program_record(header, change(payload))


def _plan(pte_file: PTEFile):
    (plan,) = pte_file.program.execution_plan
    return plan


def with_scalar_input(record: bytes) -> bytes:
    """``record`` whose nested method takes, after its inputs, the first Int
    value a kernel reads as a scalar (addmm's alpha in linear.record): the
    nested method then has a non-tensor input, which set_input accepts only
    as an Int of the value traced."""

    def edit(pte_file: PTEFile) -> None:
        plan = _plan(pte_file)
        ints = [i for i, v in enumerate(plan.values) if type(v.val).__name__ == "Int"]
        plan.inputs.append(ints[-1])

    return edit_nested(record, edit)


def with_state_loaded_from(record: bytes, state: str, weight: str) -> bytes:
    """``record`` whose nested state tensor ``state`` (planned, in the arena)
    is marked external under the weight's name ``weight``: Method loads it at
    load time with the delegate's weight map's load_data_into, so the state
    starts as the weight's value (the two must share a layout)."""

    def edit(pte_file: PTEFile) -> None:
        plan = _plan(pte_file)
        (value,) = [
            v
            for v in plan.values
            if type(v.val).__name__ == "Tensor"
            and v.val.extra_tensor_info is not None
            and v.val.extra_tensor_info.fully_qualified_name == state
        ]
        assert value.val.allocation_info is not None, "a planned state"
        value.val.extra_tensor_info = ExtraTensorInfo(fully_qualified_name=weight, location=TensorDataLocation.EXTERNAL)

    return edit_nested(record, edit)


def nested_delegate_record(pte: bytes, device: str = "cuda\t0") -> bytes:
    """A record with no weights whose nested program is ``pte``, itself a
    program with a delegate (its weights in ``pte``'s own named data)."""
    return program_record(["et_copy.delegate 2", f"device\t{device}"], pte)


def without_named_data(pte: bytes) -> bytes:
    """``pte`` with its named data dropped: a delegate in it finds its weights nowhere."""

    def edit(pte_file: PTEFile) -> None:
        pte_file.named_data = None
        pte_file.program.named_data = []

    return edit_program(pte, edit)


def with_second_method(pte: bytes, name: str = "again") -> bytes:
    """``pte`` with a copy of its one method under another name."""

    def edit(pte_file: PTEFile) -> None:
        plan = copy.deepcopy(_plan(pte_file))
        plan.name = name
        pte_file.program.execution_plan.append(plan)

    return edit_program(pte, edit)


def with_planned_buffer_size(pte: bytes, nbytes: int, method: str = "forward", buffer: int = -1) -> bytes:
    """``pte`` whose method ``method`` plans its planned buffer ``buffer``
    (MethodMeta's index; -1, the last, is where another exporter's named
    state lies) as ``nbytes`` (negative, or more than any host has)."""

    def edit(pte_file: PTEFile) -> None:
        (plan,) = [p for p in pte_file.program.execution_plan if p.name == method]
        sizes = plan.non_const_buffer_sizes  # entry 0 is reserved: MethodMeta's buffer i is entry i + 1
        sizes[buffer if buffer < 0 else buffer + 1] = nbytes

    return edit_program(pte, edit)


def with_io_sizes(pte: bytes, sizes: list[int], output: bool = False) -> bytes:
    """``pte`` whose one method's input 0 (or output 0) has ``sizes``, in
    contiguous dim order: [1 << 30] * 3 float32 is more bytes than a size_t
    holds."""

    def edit(pte_file: PTEFile) -> None:
        plan = _plan(pte_file)
        tensor = plan.values[(plan.outputs if output else plan.inputs)[0]].val
        tensor.sizes, tensor.dim_order = list(sizes), list(range(len(sizes)))

    return edit_program(pte, edit)


def with_state_sizes(pte: bytes, name: str, sizes: list[int]) -> bytes:
    """``pte`` whose named state tensor ``name`` (every method's) has ``sizes``."""

    def edit(pte_file: PTEFile) -> None:
        for plan in pte_file.program.execution_plan:
            for value in plan.values:
                info = getattr(value.val, "extra_tensor_info", None)
                if info is not None and info.fully_qualified_name == name:
                    value.val.sizes, value.val.dim_order = list(sizes), list(range(len(sizes)))

    return edit_program(pte, edit)


def with_output_offset(pte: bytes, offset: int) -> bytes:
    """``pte`` whose one method's output 0 lies at ``offset`` in its planned
    buffer (past the buffer's end: Method's load refuses it, after the
    runtime has allocated the planned buffers)."""

    def edit(pte_file: PTEFile) -> None:
        plan = _plan(pte_file)
        plan.values[plan.outputs[0]].val.allocation_info.memory_offset_low = offset

    return edit_program(pte, edit)


def with_scratch_buffer_first(pte: bytes, nbytes: int) -> bytes:
    """``pte`` whose every method plans one more buffer, of ``nbytes``,
    before its others (MethodMeta's buffer 0; the old ones move up one): an
    unused scratch buffer ahead of another exporter's named state."""

    def edit(pte_file: PTEFile) -> None:
        for plan in pte_file.program.execution_plan:
            plan.non_const_buffer_sizes.insert(1, nbytes)  # entry 0 is reserved
            for value in plan.values:
                info = getattr(value.val, "allocation_info", None)
                if info is not None and info.memory_id >= 1:
                    info.memory_id += 1

    return edit_program(pte, edit)
