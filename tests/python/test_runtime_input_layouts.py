"""A method input's bytes, laid out as the method plans them: ExecuTorch
copies (or binds) an input's memory as it lies, in the dim order the program
planned, so et_copy.runtime takes a tensor only when its bytes are dense in
that order. A transposed view would be read in the wrong order and an
expanded one past its memory's end; each is refused naming the input, at
every position from the first input to the last, before a byte moves. A size-1
dim places no bytes, so its stride is free. A method planned in dim order
(1, 0) takes a tensor laid out so, and refuses a contiguous one; its
contiguous output, read after that input, is taken in its own order."""

from __future__ import annotations

import et_copy
import pytest
import torch
from et_copy import runtime
from runtime_programs import device_programs, program_data  # noqa: F401 (fixtures)

COPY_COUNTERS = ("h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes")


def counters() -> dict:
    stats = et_copy.allocator_stats()
    return {k: stats[k] for k in COPY_COUNTERS}


def transposed(t: torch.Tensor) -> torch.Tensor:
    """t's values, laid out with dim 0 innermost."""
    return t.t().contiguous().t()


@pytest.mark.parametrize("position", [0, 1])
@pytest.mark.parametrize("layout", ["transposed", "expanded", "every other column"])
def test_an_input_not_dense_in_the_planned_dim_order_is_refused_naming_it_and_nothing_moves(
    programs, data, position, layout
):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    bad = {
        "transposed": lambda t: transposed(t),
        "expanded": lambda t: t[:1].expand(3, 4),
        "every other column": lambda t: torch.stack([t, t], dim=2).reshape(3, 8)[:, ::2],
    }[layout]((x, y)[position])
    inputs = [x, y]
    inputs[position] = bad
    before = counters()
    refusal = rf"input {position} .*must be dense in dim order \[0, 1\], got sizes \[3, 4\] with strides"
    with pytest.raises(ValueError, match=refusal):
        method.execute(inputs)
    assert counters() == before
    # The same values laid out densely run and equal eager.
    inputs[position] = bad.contiguous()
    expected = inputs[0] * 2.0 + inputs[1]
    torch.testing.assert_close(method.execute(inputs)[0], expected)


def test_a_size_1_dims_stride_places_no_bytes_so_any_stride_there_is_taken(programs, data):
    method = runtime.load(programs / "slot.pte").load_method()
    cache, v, pos = data["slot"]
    # v is (2, 1, 3): its middle dim's stride says nothing about where its bytes are.
    odd_v = v.contiguous().as_strided(v.shape, (3, 99, 1))
    # pos is (1,): a view with stride 2.
    odd_pos = torch.tensor([int(pos), -1])[::2]
    assert odd_v.stride() != v.stride() and odd_pos.stride() == (2,)
    expected = cache.clone()
    expected[:, pos] = v
    (got,) = method.execute([cache, odd_v, odd_pos])
    torch.testing.assert_close(got, expected)


def test_a_method_planned_in_dim_order_1_0_takes_that_layout_and_refuses_a_contiguous_one(programs, data):
    method = runtime.load(programs / "transposed.pte").load_method()
    x = data["transposed"]
    assert method.metadata.input_tensor_meta(0).dim_order() == (1, 0)
    assert method.metadata.output_tensor_meta(0).dim_order() == (0, 1)
    (got,) = method.execute([x])
    torch.testing.assert_close(got, x * 2.0)
    assert got.stride() == (4, 1)
    # Twice, so that what the first call read cannot stand in for the second's.
    (again,) = method.execute([x * 3.0])
    torch.testing.assert_close(again, x * 6.0)
    before = counters()
    with pytest.raises(ValueError, match=r"input 0 .*must be dense in dim order \[1, 0\], got sizes \[3, 4\] with "
                                         r"strides \[4, 1\]"):  # fmt: skip
        method.execute([x.contiguous()])
    assert counters() == before


def test_a_sparse_input_is_refused_naming_it_and_its_layout(programs, data):
    method = runtime.load(programs / "affine.pte").load_method()
    x, y = data["affine"]
    with pytest.raises(ValueError, match=r"input 1 .*has layout torch.sparse_coo; et_copy moves strided tensors"):
        method.execute([x, y.to_sparse()])


def test_an_input_of_the_largest_rank_is_checked_on_every_dim_from_the_first_to_the_last(programs, data):
    method = runtime.load(programs / "rank16.pte").load_method()
    x = data["rank16"]
    assert x.dim() == 16 and method.metadata.input_tensor_meta(0).dim_order() == tuple(range(16))
    # Dim 0 (size 1) given stride 2: its own dim order starts at dim 1, yet its bytes are the planned ones.
    odd_first = x.as_strided(x.shape, (2,) + x.stride()[1:])
    (got,) = method.execute([odd_first])
    torch.testing.assert_close(got, x * 2.0)
    # The last dim (size 4) repeating one element: refused.
    with pytest.raises(ValueError, match=r"input 0 .*must be dense in dim order \[0, 1, .*, 15\], got sizes \[1, "):
        method.execute([x[..., :1].expand(x.shape)])
