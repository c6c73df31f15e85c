"""Reads and edits a .pte's flatbuffer in place, byte by byte, without
executorch's serializer (which would rewrite the whole file): where each
value's kind is stored, what each kernel call calls and with which values,
and where each delegate record and its nested program lie. For tampering
with real programs the way a flipped byte does (test_argument_kinds.py,
test_nested_program_fuzz.py). Field slots are executorch's
schema/program.fbs's; the bytes are trusted (a real export)."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

# KernelTypes tags (the EValue union), program.fbs.
NONE, INT, BOOL, DOUBLE, TENSOR, STRING, INT_LIST, DOUBLE_LIST, BOOL_LIST, TENSOR_LIST, OPT_TENSOR_LIST = range(1, 12)
KERNEL_CALL = 1


@dataclass
class KernelCall:
    chain: int
    index: int
    operator: str  # "name.overload", as the kernel registry names it
    args: list[int]  # value indices


class ProgramView:
    """The program whose flatbuffer starts at ``base`` in ``data``."""

    def __init__(self, data: bytes | bytearray, base: int = 0) -> None:
        self.data, self.base = data, base

    def _u32(self, at: int) -> int:
        return struct.unpack_from("<I", self.data, at)[0]

    def _i32(self, at: int) -> int:
        return struct.unpack_from("<i", self.data, at)[0]

    def _field(self, table: int, f: int) -> int:
        vt = table - self._i32(table)
        vsize = struct.unpack_from("<H", self.data, vt)[0]
        if 4 + 2 * f + 2 > vsize:
            return 0
        off = struct.unpack_from("<H", self.data, vt + 4 + 2 * f)[0]
        return 0 if off == 0 else table + off

    def _follow(self, at: int) -> int:
        return at + self._u32(at)

    def _vector(self, table: int, f: int) -> list[int]:
        """Where each 4-byte element of a vector field is."""
        at = self._field(table, f)
        if at == 0:
            return []
        v = self._follow(at)
        return [v + 4 + 4 * i for i in range(self._u32(v))]

    def _string(self, table: int, f: int) -> str:
        at = self._field(table, f)
        if at == 0:
            return ""
        s = self._follow(at)
        return bytes(self.data[s + 4 : s + 4 + self._u32(s)]).split(b"\0")[0].decode()

    def plans(self) -> list[int]:
        return [self._follow(e) for e in self._vector(self.base + self._u32(self.base), 1)]

    def plan(self, name: str) -> int:
        return next(p for p in self.plans() if self._string(p, 0) == name)

    def method_names(self) -> list[str]:
        return [self._string(p, 0) for p in self.plans()]

    def value_count(self, plan: int) -> int:
        return len(self._vector(plan, 2))

    def planned_buffer_sizes_at(self, plan: int) -> list[int]:
        """Where each int64 of the plan's non_const_buffer_sizes is (buffer 0
        is reserved and always 0)."""
        at = self._field(plan, 8)
        if at == 0:
            return []
        v = self._follow(at)
        return [v + 4 + 8 * i for i in range(self._u32(v))]

    def value_type_at(self, plan: int, value: int) -> int:
        """Where value ``value``'s kind (its union type byte) is."""
        at = self._field(self._follow(self._vector(plan, 2)[value]), 0)
        assert at != 0, f"value {value} has no kind stored"
        return at

    def value_type(self, plan: int, value: int) -> int:
        return self.data[self.value_type_at(plan, value)]

    def list_items(self, plan: int, value: int) -> list[int]:
        """The value indices a list value (IntList, TensorList, OptionalTensorList) holds."""
        kind = self.value_type(plan, value)
        assert kind in (INT_LIST, TENSOR_LIST, OPT_TENSOR_LIST), kind
        table = self._follow(self._field(self._follow(self._vector(plan, 2)[value]), 1))
        at = self._field(table, 0)
        if at == 0:
            return []
        v = self._follow(at)
        width, fmt = (8, "<q") if kind == INT_LIST else (4, "<i")
        return [struct.unpack_from(fmt, self.data, v + 4 + width * i)[0] for i in range(self._u32(v))]

    def external_constants(self, plan: int) -> dict[str, tuple[int, int]]:
        """Each tensor constant stored outside the program (its extra info's
        location EXTERNAL): its name -> (where its scalar_type byte is, where
        its sizes vector's first int32 is); 0 for a field left at its default."""
        found = {}
        for e in self._vector(plan, 2):
            value = self._follow(e)
            type_at = self._field(value, 0)
            if type_at == 0 or self.data[type_at] != TENSOR:
                continue
            tensor = self._follow(self._field(value, 1))
            extra_at = self._field(tensor, 9)
            if extra_at == 0:
                continue
            extra = self._follow(extra_at)
            location = self._field(extra, 2)
            if location == 0 or self.data[location] != 1:  # TensorDataLocation.EXTERNAL
                continue
            sizes = self._vector(tensor, 2)
            found[self._string(extra, 1)] = (self._field(tensor, 0), sizes[0] if sizes else 0)
        return found

    def kernel_calls(self, plan: int) -> list[KernelCall]:
        ops = []
        for e in self._vector(plan, 6):
            op = self._follow(e)
            name, overload = self._string(op, 0), self._string(op, 1)
            ops.append(name + ("." + overload if overload else ""))
        calls = []
        for c, chain in enumerate(self._follow(e) for e in self._vector(plan, 5)):
            for i, instr in enumerate(self._follow(e) for e in self._vector(chain, 2)):
                type_at = self._field(instr, 0)
                if type_at == 0 or self.data[type_at] != KERNEL_CALL:
                    continue
                call = self._follow(self._field(instr, 1))
                args = [self._i32(a) for a in self._vector(call, 1)]
                op_at = self._field(call, 0)  # absent: the default, 0
                calls.append(KernelCall(c, i, ops[self._i32(op_at) if op_at else 0], args))
        return calls


@dataclass
class NestedProgram:
    record: int  # where the delegate record starts in the file
    payload: int  # where its nested program starts
    size: int  # the nested program's bytes


def nested_programs(data: bytes | bytearray) -> list[NestedProgram]:
    """Every et-copy delegate record with a program payload in the file, in
    file order (its text lines, then the payload; delegate_record.h)."""
    found = []
    for m in re.finditer(rb"et_copy\.delegate 2\n", data):
        line = re.compile(rb"payload\tprogram\t(\d+)\n").search(data, m.end())
        if line is not None:
            found.append(NestedProgram(m.start(), line.end(), int(line.group(1))))
    return found
