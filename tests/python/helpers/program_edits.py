"""Edits of a real exported program into shapes no exporter writes, through
executorch's own (de)serializer: an output of a dtype torch has no dtype
for, a value (not a tensor) output, a method renamed away. For the load
and run paths that only such programs reach.

    edited(program_bytes, retype_value("forward", 2, ScalarType.QUINT4X2))

Imports executorch.exir (seconds), which changes torch.library state: use it
in the child process that exports the program (runtime_programs.EXPORT).
Each edit is a function of the deserialized schema.Program, so several
compose in one edited() call.
"""

from __future__ import annotations

import copy
from typing import Callable

from executorch.exir import schema
from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

Edit = Callable[[schema.Program], None]


def edited(program: bytes, *edits: Edit) -> bytes:
    """``program`` with each of ``edits`` applied in turn."""
    pte = copy.deepcopy(deserialize_pte_binary(program))
    for edit in edits:
        edit(pte.program)
    return bytes(serialize_pte_binary(pte))


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


def rename_method(method: str, name: str) -> Edit:
    def edit(program: schema.Program) -> None:
        plan(program, method).name = name

    return edit
