"""Untrusted LLM programs: the delegate records and nested programs of a real
export (a tiny seeded Qwen3-MoE from et_copy.llm.export_llm) tampered with.

- Every operator our real exports call (a device MLP, a convnet, the copy
  program, the LLM's outer and nested programs) is in the argument-kind
  table (argument_kinds.h), so the load check sees their calls.
- A kernel argument retagged to another kind of value, in the outer program
  or in a delegate's nested program, is refused at load with EtCopyError
  naming the program, method, instruction, operator and argument.
- Byte flips, value retags and truncations aimed at the delegate records and
  nested programs: every method loaded and executed in a forked child, each
  either refused or run, and none killed by a signal. The CI run is small;
  the slow one is larger (ET_COPY_NESTED_FUZZ_MUTANTS sets its count, for
  runs by hand; docs/reliability.md gives the figures).

Each load runs in a forked child: a program that got past the checks could
abort the process (ExecuTorch's EValue accessors ET_CHECK), and the test
must see that as a signal, not die of it.
"""

from __future__ import annotations

import os
import random
import re
import struct

import pytest
import torch

pytest.importorskip("executorch.exir")
pytest.importorskip("transformers")

import et_copy  # noqa: E402
from et_copy import _C, runtime  # noqa: E402
from et_copy.export import export_device_program  # noqa: E402
from et_copy.tools.models import RoundTrip  # noqa: E402
from forked import in_child  # noqa: E402
from llm_programs import exported  # noqa: E402
from program_bytes import DOUBLE, INT, INT_LIST, TENSOR, ProgramView, nested_programs  # noqa: E402

ARCH = "qwen3_moe"


def run_every_method(data: bytes, verification=runtime.Verification.InternalConsistency) -> str:
    """Loads ``data`` and executes each of its methods once on zeros."""
    program = runtime.load(data, verification=verification)
    for name in sorted(program.method_names):
        meta = program.metadata(name)
        inputs: list = []
        for i in range(meta.num_inputs()):
            if meta.input_tag(i) is not None:
                inputs.append(0)
            else:
                m = meta.input_tensor_meta(i)
                inputs.append(torch.zeros(m.sizes(), dtype=m.torch_dtype()))
        program.load_method(name).execute(inputs)
    return "ran"


def outcome(data: bytes) -> str:
    """One of: ran, refused (EtCopyError), "other: <type>", "signal <n>"."""
    kind, value = in_child(run_every_method, data)
    if kind == "signal":
        return f"signal {value}"
    if kind == "returned":
        return value
    name, message, _ = value
    assert message, "an error with no words"
    return "refused" if name == "EtCopyError" else f"other: {name}: {message[:200]}"


@pytest.fixture(scope="module")
def llm_bytes() -> bytes:
    et_copy.use_simulated_device()
    return exported(ARCH)[1]


def test_every_operator_of_our_real_exports_is_in_the_table(llm_bytes):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    conv = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 4 * 4, 5),
    ).eval()
    programs = {
        "mlp": bytes(export_device_program(mlp, (torch.randn(2, 8),)).buffer),
        "convnet": bytes(export_device_program(conv, (torch.randn(1, 3, 8, 8),)).buffer),
        "copy": bytes(export_device_program(RoundTrip(), RoundTrip.example_inputs(), insert_copies=False).buffer),
        ARCH: llm_bytes,
    }
    assert _C.argument_kinds_operator_count() > 200
    seen: dict[str, set[str]] = {}
    for name, data in programs.items():
        views = [ProgramView(data)] + [ProgramView(data, n.payload) for n in nested_programs(data)]
        for view in views:
            for plan in view.plans():
                for call in view.kernel_calls(plan):
                    seen.setdefault(call.operator, set()).add(name)
        _C.check_argument_kinds(data)  # and every real program passes the check
    assert len(nested_programs(llm_bytes)) >= 2 and any("aten::" in op for op in seen), seen
    missing = {op: sorted(where) for op, where in seen.items() if not _C.has_argument_kinds(op)}
    assert not missing, f"operators our exports call that the argument-kind table lacks: {missing}"


def _first_call(view: ProgramView, plan: int, kind: int, operator: str | None = None):
    """The first kernel call (of ``operator``, when given) with an argument
    holding a value of ``kind``: (call, argument position, value)."""
    for call in view.kernel_calls(plan):
        if operator is not None and call.operator != operator:
            continue
        for a, v in enumerate(call.args[:-1]):  # not the result slot
            if view.value_type(plan, v) == kind:
                return call, a, v
    raise AssertionError(f"no call with a value of kind {kind}")


def test_an_outer_tensor_argument_retagged_int_is_refused_at_load(llm_bytes):
    data = bytearray(llm_bytes)
    view = ProgramView(data)
    plan = view.plan("decode")
    call, a, v = _first_call(view, plan, TENSOR, "et_copy::_d2h_copy.out")
    data[view.value_type_at(plan, v)] = INT
    # A Tensor table read as an Int fails ExecuTorch's own flatbuffer
    # verification; with Minimal verification only our check stands between
    # it and EValue::toTensor's abort.
    kind, value = in_child(run_every_method, bytes(data), runtime.Verification.Minimal)
    assert kind == "raised", (kind, value)
    name, message, error = value
    assert (name, error) == ("EtCopyError", "InvalidProgram"), value
    want = (
        f"method 'decode', instruction {call.chain}:{call.index}, operator et_copy::_d2h_copy.out: "
        f"argument {a} 'self' is value {v}, an Int; the schema takes a Tensor"
    )
    assert want in message, message


def test_a_nested_int_argument_retagged_double_is_refused_naming_the_delegate(llm_bytes):
    data = bytearray(llm_bytes)
    nested = nested_programs(data)[0]
    view = ProgramView(data, nested.payload)
    plan = view.plans()[0]
    call, a, v = _first_call(view, plan, INT)
    # Int and Double tables both hold one 8-byte scalar: this passes ExecuTorch's
    # verification, and the kernel would read the argument with toInt and abort.
    data[view.value_type_at(plan, v)] = DOUBLE
    kind, value = in_child(run_every_method, bytes(data))
    assert kind == "raised", (kind, value)
    name, message, error = value
    assert (name, error) == ("EtCopyError", "InvalidProgram"), value
    pattern = (
        r"nested program of delegate \d+ in method '(decode|prefill)': method 'forward', "
        + re.escape(f"instruction {call.chain}:{call.index}, operator {call.operator}: argument {a} '")
        + r"\w+"
        + re.escape(f"' is value {v}, a Double; the schema takes an Int")
    )
    assert re.search(pattern, message), message


def test_a_nested_list_item_retagged_is_refused(llm_bytes):
    data = bytearray(llm_bytes)
    view = ProgramView(data, nested_programs(data)[0].payload)
    plan = view.plans()[0]
    # An Int item of an IntList (a permute's dims, a view's sizes) retagged
    # Double: ExecuTorch reads list items with toInt, which aborts.
    lists = [v for v in range(view.value_count(plan)) if view.value_type(plan, v) == INT_LIST]
    v = next(v for v in lists if view.list_items(plan, v))
    item = view.list_items(plan, v)[0]
    assert view.value_type(plan, item) == INT
    data[view.value_type_at(plan, item)] = DOUBLE
    kind, value = in_child(run_every_method, bytes(data))
    assert kind == "raised", (kind, value)
    name, message, error = value
    assert (name, error) == ("EtCopyError", "InvalidProgram"), value
    want = f"method 'forward', value {v} (an IntList) item 0 is value {item}, a Double, not an Int"
    assert re.search(r"nested program of delegate \d+ in method '\w+': " + re.escape(want), message), message


@pytest.mark.parametrize("edit", ["scalar type -1", "scalar type 127", "negative size", "size 2**31-1"])
def test_a_nested_external_constant_with_an_impossible_layout_is_refused(llm_bytes, edit):
    """The backend sizes each weight from the nested program's layout before
    ExecuTorch reads it. Found by fuzz/fuzz_program_load.cpp: a scalar type
    of -1 made elementSize() abort the process."""
    data = bytearray(llm_bytes)
    view = ProgramView(data, nested_programs(data)[0].payload)
    constants = view.external_constants(view.plans()[0])
    dtype_at, size_at = next((d, s) for d, s in constants.values() if d and s)
    if edit.startswith("scalar type"):
        data[dtype_at] = int(edit.split()[-1]) & 0xFF
    else:
        struct.pack_into("<i", data, size_at, -3 if edit == "negative size" else 2**31 - 1)
    kind, value = in_child(run_every_method, bytes(data))
    assert kind == "raised", (kind, value)
    name, message, error = value
    assert name == "EtCopyError" and error in ("InvalidProgram", "DelegateInvalidCompatibility"), value
    assert re.search(r"method '\w+'", message), message


# ---- fuzzing the delegate records and nested programs ----------------------


def mutants(original: bytes, count: int, seed: int):
    """(what, bytes): ``count`` mutants aimed at the delegate records and
    their nested programs. Byte flips (1 to 4 bits) inside a record's text
    or its nested program, a value of a nested program retagged to another
    kind (the flip that reaches ExecuTorch's aborting accessors), and the
    file cut short inside a record."""
    rng = random.Random(seed)
    records = nested_programs(original)
    views = [(n, ProgramView(original, n.payload)) for n in records]
    for _ in range(count):
        n, view = rng.choice(views)
        data = bytearray(original)
        how = rng.choice(("record", "nested", "nested", "retag", "retag", "cut"))
        if how == "record":
            for _ in range(rng.choice((1, 1, 2, 4))):
                data[rng.randrange(n.record, n.payload)] ^= 1 << rng.randrange(8)
        elif how == "nested":
            for _ in range(rng.choice((1, 1, 2, 4))):
                data[rng.randrange(n.payload, n.payload + n.size)] ^= 1 << rng.randrange(8)
        elif how == "retag":
            plan = view.plans()[0]
            data[view.value_type_at(plan, rng.randrange(view.value_count(plan)))] = rng.randrange(1, 12)
        else:
            data = data[: rng.randrange(n.record, n.payload + n.size)]
        yield how, bytes(data)


def sweep(original: bytes, count: int, seed: int) -> dict[str, int]:
    """Outcome counts, overall ("ran", "refused", "killed", "other") and per
    mutation ("retag ran", ...); fails on any kill or other exception."""
    tally: dict[str, int] = {}
    bad = []
    for how, data in mutants(original, count, seed):
        o = outcome(data)
        key = o if o in ("ran", "refused") else ("killed" if o.startswith("signal") else "other")
        for k in (key, f"{how} {key}"):
            tally[k] = tally.get(k, 0) + 1
        if key not in ("ran", "refused"):
            bad.append((how, o))
    assert not bad, f"{tally}: {bad[:5]}"
    return tally


def test_mutated_delegate_records_and_nested_programs_are_refused_or_run(llm_bytes):
    tally = sweep(llm_bytes, 60, 20261204)
    assert tally.get("refused", 0) > 0 and tally.get("ran", 0) > 0, tally


# costly: the larger sweep, for the slow tier; CI runs the 60-mutant one above.
@pytest.mark.costly
def test_a_larger_sweep_of_mutated_nested_programs_finds_nothing(llm_bytes):
    count = int(os.environ.get("ET_COPY_NESTED_FUZZ_MUTANTS", "400"))
    seed = int(os.environ.get("ET_COPY_NESTED_FUZZ_SEED", "5"))
    tally = sweep(llm_bytes, count, seed)
    print(f"nested-program sweep, {count} mutants, seed {seed}: {tally}")
    assert sum(tally.get(k, 0) for k in ("ran", "refused")) == count
