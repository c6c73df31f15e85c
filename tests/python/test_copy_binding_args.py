"""The argument checks of copies.cpp's _C functions, both sides of each edge:
the fast-call copies' argument count and dynamic_out's truth (a refused call
leaves out untouched), and dense_strides / dim_order_of at the largest rank
and one past it, with sizes and dim orders that do not match."""

from __future__ import annotations

import et_copy
import pytest
import torch
from et_copy import _C

MAX = _C.MAX_TENSOR_DIMS


@pytest.fixture(autouse=True)
def _simulated():
    et_copy.use_simulated_device()


class _Untruthy:
    def __bool__(self):
        raise RuntimeError("no truth here")


@pytest.mark.parametrize("name", ["h2d_copy", "d2h_copy"])
@pytest.mark.parametrize("nargs", [0, 2, 4])
def test_a_fast_call_copy_takes_exactly_three_arguments(name, nargs):
    x = torch.arange(4, dtype=torch.float32)
    out = torch.zeros(4)
    args = (x, out, False, False)[:nargs]
    with pytest.raises(TypeError, match=rf"^{name}\(self, out, dynamic_out\) takes 3 arguments$"):
        getattr(_C, name)(*args)
    assert torch.equal(out, torch.zeros(4))


def test_three_arguments_are_taken_and_out_is_returned_as_given():
    x = torch.arange(4, dtype=torch.float32)
    dev = et_copy.empty((4,), torch.float32)
    assert _C.h2d_copy(x, dev, False) is dev
    out = torch.zeros(4)
    assert _C.d2h_copy(dev, out, 0) is out  # any object with a truth value
    assert torch.equal(out, x)


@pytest.mark.parametrize("name", ["h2d_copy", "d2h_copy"])
def test_a_dynamic_out_without_a_truth_value_raises_its_error_and_copies_nothing(name):
    x = torch.arange(4, dtype=torch.float32)
    dev = et_copy.h2d_copy(x)
    host_out = torch.full((4,), 7.0)
    dev_out = et_copy.h2d_copy(torch.full((4,), 7.0))
    self_, out = (x, dev_out) if name == "h2d_copy" else (dev, host_out)
    with pytest.raises(RuntimeError, match="no truth here"):
        getattr(_C, name)(self_, out, _Untruthy())
    assert torch.equal(host_out, torch.full((4,), 7.0))
    assert torch.equal(dev_out.cpu(), torch.full((4,), 7.0))


def test_dense_strides_at_the_largest_rank_orders_every_dim_and_one_more_is_refused():
    sizes = [2] * MAX
    order = list(range(MAX))
    assert _C.dense_strides(sizes, order) == [2 ** (MAX - 1 - d) for d in range(MAX)]
    reverse = list(reversed(order))  # dim 0 innermost, the last dim outermost
    assert _C.dense_strides(sizes, reverse) == [2**d for d in range(MAX)]
    with pytest.raises(et_copy.EtCopyError, match=f"tensor has {MAX + 1} dims; ExecuTorch supports at most {MAX}"):
        _C.dense_strides([2] * (MAX + 1), list(range(MAX + 1)))


def test_dense_strides_of_rank_zero_and_one():
    assert _C.dense_strides([], []) == []
    assert _C.dense_strides([5], [0]) == [1]


@pytest.mark.parametrize(
    "sizes, order",
    [([2, 3], [0]), ([2, 3], [0, 1, 2]), ([2], [])],
    ids=["shorter_order", "longer_order", "empty_order"],
)
def test_dense_strides_refuses_a_dim_order_of_another_length(sizes, order):
    with pytest.raises(ValueError, match="^dense_strides: sizes and dim_order must have the same length$"):
        _C.dense_strides(sizes, order)


@pytest.mark.parametrize("order", [[0, 0, 1], [1, 2, 3], [-1, 0, 1], [2, 1, 1]])
def test_dense_strides_refuses_a_dim_order_that_is_not_a_permutation(order):
    with pytest.raises(ValueError, match="^dense_strides: dim_order is not a permutation of the dims$"):
        _C.dense_strides([2, 3, 4], order)


def test_dim_order_of_takes_rank_zero_one_and_the_largest_rank():
    assert _C.dim_order_of([]) == []
    assert _C.dim_order_of([1]) == [0]
    assert _C.dim_order_of([1] * MAX) == list(range(MAX))  # ties in natural order
