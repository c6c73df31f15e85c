"""A method's Python scalar inputs and outputs (scalars.pte: forward(x, n, f, b)
with n an int, f a float and b a bool, each planned at 3, 1.5 and True by
torch.export, and returned). et_copy.runtime hands each scalar to ExecuTorch
as its own kind, so ExecuTorch, as under executorch.runtime, takes the planned
value and refuses another value or kind; what is no scalar at all (a str, a
list, a tensor) the bindings refuse naming the input, before anything runs."""

from __future__ import annotations

import et_copy
import pytest
import torch
from et_copy import EtCopyError, runtime
from runtime_programs import device_programs  # noqa: F401 (fixtures)

PLANNED = (3, 1.5, True)
COPY_COUNTERS = ("h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes", "bytes_outstanding")


def counters() -> dict:
    stats = et_copy.allocator_stats()
    return {k: stats[k] for k in COPY_COUNTERS}


def test_each_scalar_kind_at_its_planned_value_runs_and_comes_back_as_its_own_type(programs):
    method = runtime.load(programs / "scalars.pte").load_method()
    x = torch.arange(12.0).reshape(3, 4)
    got = method.execute([x, *PLANNED])
    torch.testing.assert_close(got[0], x * 2.0)
    assert got[1:] == list(PLANNED)
    assert [type(v) for v in got[1:]] == [int, float, bool]


def test_executorch_runtime_agrees_on_the_scalars(programs):
    import executorch.runtime

    method = executorch.runtime.Runtime.get().load_program(programs / "scalars.pte").load_method("forward")
    x = torch.arange(12.0).reshape(3, 4)
    got = method.execute([x, *PLANNED])
    torch.testing.assert_close(got[0], x * 2.0)
    assert got[1:] == list(PLANNED)


@pytest.mark.parametrize(
    "index, value, problem",
    [
        (1, 4, "should have the same value as the input_evalue, but got 3 and 4"),
        (2, 2.5, "should have the same value as the input_evalue, but get 2.500000 and 1.500000"),
        (3, False, "should have the same value as the input_evalue, but got 1 and 0"),
        # Another kind: each reaches ExecuTorch as that kind (a bool is not an int, an int not a float).
        (1, False, "Input 1 was expected to have type Int but was Bool"),
        (1, None, "Input 1 was expected to have type Int but was None"),
        (2, 1, "Input 2 was expected to have type Double but was Int"),
        (3, 1, "Input 3 was expected to have type Bool but was Int"),
        (1, 3.0, "Input 1 was expected to have type Int but was Double"),
    ],
)
def test_another_value_or_scalar_kind_is_executorchs_to_refuse_naming_the_input(programs, index, value, problem):
    method = runtime.load(programs / "scalars.pte").load_method()
    args = [torch.arange(12.0).reshape(3, 4), *PLANNED]
    args[index] = value
    with pytest.raises(EtCopyError, match=rf"setting input {index} failed with InvalidArgument\n  .*{problem}"):
        method.execute(args)


@pytest.mark.parametrize(
    "index, value, problem",
    [
        (1, "3", "must be an int, float, bool or None, got str"),
        (3, [True], "must be an int, float, bool or None, got list"),
        (1, torch.tensor(3), "is not a tensor input, got a tensor"),
        (2, torch.tensor(1.5), "is not a tensor input, got a tensor"),
    ],
)
def test_what_is_no_scalar_is_refused_naming_the_input_before_anything_moves(programs, index, value, problem):
    method = runtime.load(programs / "scalars.pte").load_method()
    args = [torch.arange(12.0).reshape(3, 4), *PLANNED]
    args[index] = value
    before = counters()
    with pytest.raises(TypeError, match=rf"^et_copy.runtime: method 'forward': input {index} {problem}$"):
        method.execute(args)
    assert counters() == before


def test_a_device_tensor_where_a_scalar_is_planned_is_refused_naming_the_input(programs):
    method = runtime.load(programs / "scalars.pte").load_method()
    n = et_copy.h2d_copy(torch.tensor(3))
    with pytest.raises(TypeError, match=r"method 'forward': input 1 is not a tensor input, got a tensor$"):
        method.execute([torch.arange(12.0).reshape(3, 4), n, 1.5, True])
