"""et_copy.runtime's checks of what a call hands a method, at their edges and
on both sides: a device input on another device index than the plan names,
outputs= tensors on the wrong device or one element short, freed
DeviceTensors, and input and output counts one off. A refused call raises
the error that names the input or output, moves no byte and leaves the
given tensors as they were; the call just inside each edge runs and equals
eager."""

from __future__ import annotations

import et_copy
import pytest
import torch
from et_copy import runtime
from runtime_programs import device_programs, program_data  # noqa: F401 (fixtures)

COPY_COUNTERS = ("h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes")


@pytest.fixture
def two_devices():
    et_copy.use_simulated_device(2)
    yield
    et_copy.use_simulated_device(1)


def stage_a(data):
    a = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()).eval()
    a.load_state_dict(data["stage_a"])
    return a


def counters() -> dict:
    stats = et_copy.allocator_stats()
    return {k: stats[k] for k in COPY_COUNTERS + ("bytes_outstanding",)}


def refused(before: dict) -> None:
    """Nothing moved and nothing stayed allocated."""
    assert counters() == before


# ---- device inputs: the planned device index ----------------------------------


def test_a_device_input_on_another_device_index_than_planned_is_refused_naming_it(programs, data, two_devices):
    method = runtime.load(programs / "stage_a.pte").load_method()
    assert method.metadata.input_tensor_meta(0).device() == "cuda:0"
    on_1 = et_copy.h2d_copy(data["stage"], device="cuda:1")
    before = counters()
    with pytest.raises(ValueError, match=r"input 0 .*is planned on cuda:0, got a tensor on cuda:1"):
        method.execute([on_1])
    refused(before)
    assert torch.equal(on_1.cpu(), data["stage"])
    (hidden,) = method.execute([et_copy.h2d_copy(data["stage"], device="cuda:0")])
    torch.testing.assert_close(hidden.cpu(), stage_a(data)(data["stage"]))


def test_a_freed_device_input_is_refused_naming_it(programs, data):
    method = runtime.load(programs / "stage_a.pte").load_method()
    x = et_copy.h2d_copy(data["stage"])
    x.free()
    before = counters()
    with pytest.raises(ValueError, match=r"input 0 .*is a DeviceTensor whose memory was freed"):
        method.execute([x])
    refused(before)


# ---- outputs=: device, capacity, freed -------------------------------------------


def test_outputs_on_the_wrong_device_are_refused_naming_the_output(programs, data, two_devices):
    method = runtime.load(programs / "stage_a.pte").load_method()
    x = et_copy.h2d_copy(data["stage"])
    host = torch.full((2, 16), 7.0)
    on_1 = et_copy.empty((2, 16), torch.float32, "cuda:1")
    et_copy.h2d_copy(torch.full((2, 16), 3.0), out=on_1)
    for wrong, where in ((host, "cpu"), (on_1, "cuda:1")):
        before = counters()
        with pytest.raises(ValueError, match=rf"outputs\[0\] must be torch.float32 on cuda:0, got .* on {where}"):
            method.execute([x], outputs=[wrong])
        refused(before)
    assert torch.equal(host, torch.full((2, 16), 7.0))
    assert torch.equal(on_1.cpu(), torch.full((2, 16), 3.0))


def test_a_device_tensor_for_a_host_output_is_refused_naming_it(programs, data):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    wrong = et_copy.h2d_copy(torch.full((3, 4), 5.0))
    with pytest.raises(ValueError, match=r"outputs\[0\] must be torch.float32 on cpu, got .* on cuda:0"):
        method.execute([x, y], outputs=[wrong, None])
    assert torch.equal(wrong.cpu(), torch.full((3, 4), 5.0))


def test_an_output_that_is_not_a_tensor_takes_none_and_refuses_a_tensor(programs):
    method = runtime.load(programs / "constant.pte").load_method("rows")
    assert method.execute([]) == [3]
    assert method.execute([], outputs=[None]) == [3]
    given = torch.zeros(1, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"output 0 is not a tensor; pass None for it"):
        method.execute([], outputs=[given])
    assert torch.equal(given, torch.zeros(1, dtype=torch.int64))


def test_a_value_output_after_tensor_outputs_is_returned_as_its_value(programs, data):
    # helpers/program_edits.py appended an Int 7 to affine's outputs.
    method = runtime.load(programs / "affine_int_output.pte").load_method()
    x, y = data["affine"]
    given = torch.full((3, 4), -1.0)
    got = method.execute([x, y], outputs=[given, None, None])
    assert got[0] is given and got[2] == 7
    torch.testing.assert_close(given, x * 2.0 + y)
    torch.testing.assert_close(got[1], (x - y).sum())


def test_an_output_of_a_dtype_torch_cannot_represent_is_refused_at_load(programs):
    # Output 1 retyped (helpers/program_edits.py): to QUInt4x2, which torch has
    # no dtype for, the load is refused by name; to Bits16, which it has, the
    # load succeeds and the d2h copy into it refuses the dtype at run.
    program = runtime.load(programs / "affine_quint4x2.pte")
    with pytest.raises(
        et_copy.EtCopyError, match=r"^et_copy.runtime: method 'forward': output 1 has a dtype torch cannot represent"
    ) as info:
        program.load_method()
    assert info.value.error == "NotSupported"
    method = runtime.load(programs / "affine_bits16.pte").load_method()
    with pytest.raises(et_copy.EtCopyError, match="dtype mismatch: self has Float, out has Bits16"):
        method.execute([torch.zeros(3, 4), torch.zeros(3, 4)])


def test_value_inputs_take_a_python_scalar_of_their_kind_and_value(programs, data):
    # Inputs 2 to 5 appended (helpers/program_edits.py): an Int 3, a Double
    # 0.5, a Bool True and a None. ExecuTorch takes only the value the
    # program holds; anything else is refused by input, before anything runs.
    method = runtime.load(programs / "affine_value_inputs.pte").load_method()
    x, y = data["affine"]
    got = method.execute([x, y, 3, 0.5, True, None])
    torch.testing.assert_close(got[0], x * 2.0 + y)
    for i, wrong in ((2, 3.0), (2, None), (3, 1), (4, 1), (4, False), (5, 0)):
        values = [x, y, 3, 0.5, True, None]
        values[i] = wrong
        with pytest.raises(et_copy.EtCopyError, match=rf"setting input {i} failed with InvalidArgument"):
            method.execute(values)
    with pytest.raises(TypeError, match=r"method 'forward': input 2 is not a tensor input, got a tensor$"):
        method.execute([x, y, torch.tensor(3), 0.5, True, None])
    with pytest.raises(TypeError, match=r"method 'forward': input 3 must be an int, float, bool or None, got str$"):
        method.execute([x, y, 3, "0.5", True, None])


def test_a_device_output_planned_in_the_methods_memory_is_refused_at_load(programs):
    # stage_a.pte's device output, left to the caller's memory as exported, planned by helpers/program_edits.py.
    with pytest.raises(
        et_copy.EtCopyError,
        match=r"^et_copy.runtime: method 'forward': output 0 is memory-planned on cuda:0; et_copy.runtime returns "
        r"device outputs in memory the caller owns: export with alloc_graph_output=False$",
    ) as info:
        runtime.load(programs / "stage_a_planned_output.pte").load_method()
    assert info.value.error == "NotSupported"
    assert runtime.load(programs / "stage_a.pte").load_method().metadata.output_tensor_meta(0).device() == "cuda:0"


def test_a_freed_output_is_refused_naming_it(programs, data):
    method = runtime.load(programs / "stage_a.pte").load_method()
    x = et_copy.h2d_copy(data["stage"])
    out = et_copy.empty((2, 16), torch.float32)
    out.free()
    before = counters()
    with pytest.raises(ValueError, match=r"outputs\[0\] is a DeviceTensor whose memory was freed"):
        method.execute([x], outputs=[out])
    refused(before)


def test_a_device_output_one_element_short_is_refused_and_exact_capacity_runs(programs, data):
    method = runtime.load(programs / "stage_a.pte").load_method()
    x = et_copy.h2d_copy(data["stage"])
    short = et_copy.empty((2, 15), torch.float32)
    et_copy.h2d_copy(torch.full((2, 15), 9.0), out=short)
    with pytest.raises(ValueError, match=r"outputs\[0\] must be dense with capacity \[2, 16\].*got \[2, 15\]"):
        method.execute([x], outputs=[short])
    assert torch.equal(short.cpu(), torch.full((2, 15), 9.0))
    exact = et_copy.empty((2, 16), torch.float32)
    (got,) = method.execute([x], outputs=[exact])
    assert got is exact
    torch.testing.assert_close(exact.cpu(), stage_a(data)(data["stage"]))


def test_host_outputs_of_exactly_their_size_are_filled_and_one_short_is_refused(programs, data):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    out, total = torch.empty(3, 4), torch.empty(())
    got = method.execute([x, y], outputs=[out, total])
    assert got[0] is out and got[1] is total
    torch.testing.assert_close(out, x * 2.0 + y)
    torch.testing.assert_close(total, (x - y).sum())
    short = torch.full((3, 3), 4.0)
    with pytest.raises(ValueError, match=r"outputs\[0\] must be dense with capacity \[3, 4\].*got \[3, 3\]"):
        method.execute([x, y], outputs=[short, None])
    assert torch.equal(short, torch.full((3, 3), 4.0))


def test_a_host_output_no_device_copy_fills_is_copied_out_into_a_tensor_of_exactly_its_size(data):
    # Without device planning the output is the planned memory add.out writes,
    # so the runtime copies it out (a d2h-filled output is written in place).
    from executorch.exir import to_edge

    class Affine(torch.nn.Module):
        def forward(self, x, y):
            return x * 2.0 + y

    x, y = data["affine"]
    pte = to_edge(torch.export.export(Affine(), (x, y), strict=False)).to_executorch().buffer
    method = runtime.load(pte).load_method()
    out = method.metadata.output_tensor_meta(0)
    assert out.is_memory_planned() and out.device() == "cpu"
    exact = torch.zeros(3, 4)
    (got,) = method.execute([x, y], outputs=[exact])
    assert got is exact
    torch.testing.assert_close(exact, x * 2.0 + y)


def test_a_strided_view_of_the_right_shape_is_refused_as_an_output(programs, data):
    # (3, 4) with a row stride of 8: a method writing 12 dense floats would
    # fill the first row and a half of the base, not the view's rows.
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    base = torch.full((3, 8), 4.0)
    view = base[:, :4]
    with pytest.raises(ValueError, match=r"outputs\[0\] must be dense with capacity \[3, 4\].*\(not dense\)"):
        method.execute([x, y], outputs=[view, None])
    assert torch.equal(base, torch.full((3, 8), 4.0))


# ---- counts: one fewer, exact, one more -------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_input_count_must_be_exact(programs, data, n):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    inputs = [x, y, y][:n]
    if n == 2:
        torch.testing.assert_close(method.execute(inputs)[0], x * 2.0 + y)
        return
    with pytest.raises(ValueError, match=rf"takes 2 inputs, got {n}"):
        method.execute(inputs)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_outputs_count_must_be_exact(programs, data, n):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    outputs = [None] * n
    if n == 2:
        torch.testing.assert_close(method.execute([x, y], outputs=outputs)[0], x * 2.0 + y)
        return
    with pytest.raises(ValueError, match=rf"has 2 outputs, got {n} in outputs="):
        method.execute([x, y], outputs=outputs)


def test_a_dynamic_device_output_holding_a_smaller_shape_is_bound_by_its_capacity(programs, data):
    # A reused output buffer: a copy left it at (1, 16) of its (2, 16) capacity.
    method = runtime.load(programs / "stage_a.pte").load_method()
    out = et_copy.empty((2, 16), torch.float32, dynamic=True)
    et_copy.h2d_copy(torch.zeros(1, 16), out=out)
    assert out.shape == (1, 16)
    (got,) = method.execute([et_copy.h2d_copy(data["stage"])], outputs=[out])
    assert got is out and out.shape == (2, 16) and out.capacity == (2, 16)
    torch.testing.assert_close(out.cpu(), stage_a(data)(data["stage"]))


class _Doubled(torch.nn.Module):
    def forward(self, x):
        return x * 2.0


def test_a_dynamic_output_torch_will_not_reshape_is_refused_before_the_run_and_left_unwritten():
    from et_copy.export import export_device_program
    from torch.export import Dim

    rows = Dim("rows", min=1, max=16)
    exported = export_device_program(_Doubled(), (torch.randn(8, 3),), dynamic_shapes=({0: rows},))
    method = runtime.load(exported.buffer).load_method()
    x = torch.randn(5, 3)
    out = torch.zeros(16, 3, requires_grad=True)  # a leaf: autograd refuses its in-place as_strided_
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        method.execute([x], outputs=[out])
    # Refused before the run: not a byte written, and the same shape.
    assert out.shape == (16, 3) and torch.equal(out.detach(), torch.zeros(16, 3))
    with torch.no_grad():  # where autograd allows it, the output takes the shape the method ran with
        (got,) = method.execute([x], outputs=[out])
    assert got is out and out.shape == (5, 3)
    torch.testing.assert_close(out.detach(), x * 2.0)


def test_a_host_output_of_one_byte_elements_one_element_short_is_refused(programs, data):
    method = runtime.load(programs / "greater.pte").load_method()
    x, y = data["affine"]
    # Same rank and dim order, 11 bytes where 12 are needed.
    short = torch.zeros(11, 1, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"outputs\[0\] must be dense with capacity \[3, 4\].*got \[11, 1\]"):
        method.execute([x, y], outputs=[short])
    assert not short.any()
    exact = torch.zeros(3, 4, dtype=torch.bool)
    (got,) = method.execute([x, y], outputs=[exact])
    assert got is exact and torch.equal(exact, x > y)


def test_a_program_with_no_state_has_no_arena_its_planned_buffer_is_scratch(programs):
    # A copy-only program's record keeps its state out of the delegates, and it
    # has no state: its one planned buffer is scratch, not a state arena.
    from et_copy.export import export_device_program

    x = torch.randn(4, 3)
    program = runtime.load(export_device_program(torch.nn.Identity(), (x,)).buffer)
    session = program.new_session()
    method = session.load_method("forward")
    assert (session.state_nbytes, session.device_nbytes) == (0, x.nbytes)
    assert torch.equal(method.execute([x])[0], x)


def test_a_kernel_failing_inside_the_device_backend_fails_the_method_and_the_next_call_runs(programs, data):
    # The nested method's index_put refuses position 7 of a 5-slot cache: the
    # delegate returns that error, and nothing reports success.
    cache, v, pos = data["slot"]
    method = runtime.load(str(programs / "slot.pte")).load_method("forward")
    with pytest.raises(et_copy.EtCopyError, match="Index 7 is out of bounds for input dimension 1") as info:
        method.execute([cache, v, torch.tensor([7])])
    assert info.value.error == "InvalidArgument"
    (got,) = method.execute([cache, v, torch.tensor([4])])  # the slot just inside the edge
    expected = cache.clone()
    expected[:, 4] = v[:, 0]
    assert torch.equal(got, expected)


def test_a_methods_non_tensor_outputs_come_back_as_python_values():
    """A method may return None and scalars beside its tensors (ExecuTorch
    emits them as values): each comes back as its Python value, in place."""
    from executorch.exir import to_edge

    class Mixed(torch.nn.Module):
        def forward(self, x):
            return x + 1, None, 3, x * 2

    x = torch.arange(4.0)
    program = to_edge(torch.export.export(Mixed(), (x,))).to_executorch()
    got = runtime.load(program.buffer).load_method("forward").execute([x])
    assert got[1] is None and got[2] == 3 and type(got[2]) is int
    torch.testing.assert_close(got[0], x + 1)
    torch.testing.assert_close(got[3], x * 2)
