"""The loops over a method's inputs and outputs, from the first to the last:
a program of three inputs (slot.pte) and one of two outputs (affine.pte),
with the first and then the last one wrong. A refused call names that input
or output, moves no byte and leaves every given tensor as it was; binding
only the last output, or every output, runs and equals eager."""

from __future__ import annotations

import re

import et_copy
import pytest
import torch
from et_copy import runtime
from runtime_programs import device_programs, program_data  # noqa: F401 (fixtures)

COPY_COUNTERS = ("h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes", "bytes_outstanding")


def counters() -> dict:
    stats = et_copy.allocator_stats()
    return {k: stats[k] for k in COPY_COUNTERS}


def slot_write(cache, v, pos):
    cache = cache.clone()
    cache[:, pos] = v
    return cache


@pytest.mark.parametrize(
    "index, wrong",
    [(0, lambda c, v, p: [c.double(), v, p]), (2, lambda c, v, p: [c, v, p.int()])],
    ids=["first", "last"],
)
def test_a_wrong_dtype_in_the_first_or_the_last_of_three_inputs_is_refused_naming_it(programs, data, index, wrong):
    method = runtime.load(programs / "slot.pte").load_method()
    cache, v, pos = data["slot"]
    args = wrong(cache, v, pos)
    kept = [a.clone() for a in args]
    before = counters()
    expected = {0: "torch.float32, got torch.float64", 2: "torch.int64, got torch.int32"}[index]
    with pytest.raises(TypeError, match=rf"method 'forward': input {index} must have dtype {expected}$"):
        method.execute(args)
    assert counters() == before
    assert all(torch.equal(a, k) for a, k in zip(args, kept))
    (got,) = method.execute([cache, v, pos])
    torch.testing.assert_close(got, slot_write(cache, v, pos))


def test_a_python_scalar_for_the_last_tensor_input_is_refused_naming_it(programs, data):
    method = runtime.load(programs / "slot.pte").load_method()
    cache, v, _ = data["slot"]
    with pytest.raises(TypeError, match=r"input 2 must be a torch.Tensor or an et_copy.DeviceTensor, got int"):
        method.execute([cache, v, 3])


def test_binding_only_the_last_output_fills_it_and_returns_the_first(programs, data):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    total = torch.zeros(())
    first, last = method.execute([x, y], outputs=[None, total])
    assert last is total
    torch.testing.assert_close(total, (x - y).sum())
    torch.testing.assert_close(first, x * 2.0 + y)


def test_binding_every_output_fills_each_from_the_first_to_the_last(programs, data):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    outs = [torch.zeros(3, 4), torch.zeros(())]
    got = method.execute([x, y], outputs=outs)
    assert got[0] is outs[0] and got[1] is outs[1]
    torch.testing.assert_close(outs[0], x * 2.0 + y)
    torch.testing.assert_close(outs[1], (x - y).sum())


@pytest.mark.parametrize(
    "index, outs, message",
    [
        (
            0,
            lambda: [torch.zeros(3, 4, dtype=torch.float64), torch.full((), 5.0)],
            r"outputs\[0\] must be torch.float32 on cpu, got torch.float64 on cpu",
        ),
        (
            1,
            lambda: [torch.full((3, 4), 5.0), torch.zeros(2)],
            r"outputs\[1\] must be dense with capacity \[\] in dim order \[\], got \[2\] in \[0\]",
        ),
    ],
    ids=["first", "last"],
)
def test_a_wrong_first_or_last_output_is_refused_naming_it_writing_none(programs, data, index, outs, message):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    given = outs()
    kept = [o.clone() for o in given]
    before = counters()
    with pytest.raises(ValueError, match=rf"method 'forward': {message}$"):
        method.execute([x, y], outputs=given)
    assert counters() == before
    assert all(torch.equal(o, k) for o, k in zip(given, kept))


def test_the_metadata_describes_every_input_and_output_from_the_first_to_the_last(programs):
    meta = runtime.load(programs / "slot.pte").load_method().metadata
    assert meta.num_inputs() == 3
    inputs = [meta.input_tensor_meta(i) for i in range(3)]
    # ExecuTorch's ScalarType codes: 6 float32, 4 int64.
    assert [(list(t.sizes()), t.dtype(), t.device()) for t in inputs] == [
        ([2, 5, 3], 6, "cpu"),
        ([2, 1, 3], 6, "cpu"),
        ([1], 4, "cpu"),
    ]
    meta = runtime.load(programs / "affine.pte").metadata("forward")
    assert meta.num_outputs() == 2
    outputs = [meta.output_tensor_meta(i) for i in range(2)]
    assert [(list(t.sizes()), t.device()) for t in outputs] == [([3, 4], "cpu"), ([], "cpu")]
    device_out = runtime.load(programs / "stage_a.pte").load_method().metadata
    assert device_out.output_tensor_meta(0).device() == "cuda:0"


def test_a_device_input_the_method_plans_is_refused_naming_it_before_anything_moves(programs, data):
    method = runtime.load(programs / "planned_device_input.pte").load_method()  # its weights move to the device here
    x = et_copy.h2d_copy(data["stage"])
    before = counters()
    message = (
        "input 0 is memory-planned on cuda:0, which ExecuTorch fills with a host memcpy; "
        "export with alloc_graph_input=False"
    )
    with pytest.raises(et_copy.EtCopyError, match=f"method 'forward': {re.escape(message)}$") as info:
        method.execute([x])
    assert info.value.error == "NotSupported"
    # No copy ran (the outputs execute() allocated stay alive in the traceback, so their bytes are not compared).
    moved = ("h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes")
    assert {k: counters()[k] for k in moved} == {k: before[k] for k in moved}
