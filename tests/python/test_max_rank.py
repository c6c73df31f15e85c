"""Every loop over a tensor's dims, from dim 0 to the last, at the largest rank
ExecuTorch holds (MAX_TENSOR_DIMS) and one past it: the bindings read,
order, copy and resize each dim of such a tensor, on the host-unreadable
simulated device. Odd sizes (1, 3) and a permuted layout make every dim
tell apart from its neighbours."""

from __future__ import annotations

import et_copy
import pytest
import torch
from et_copy import _C

MAX = _C.MAX_TENSOR_DIMS


@pytest.fixture(autouse=True)
def _simulated():
    et_copy.use_simulated_device()


def _shape(rank: int) -> tuple[int, ...]:
    # Sizes 1 and 3 alternating, the last dim 3: 3**ceil(rank/2) elements (6,561 at rank 16).
    return tuple(3 if (rank - 1 - d) % 2 == 0 else 1 for d in range(rank))


def _dense_strides(shape) -> tuple[int, ...]:
    return torch.empty(shape).stride()


def test_a_max_rank_permuted_tensor_round_trips_keeping_its_dim_order_and_values():
    # Size 2 everywhere (no size-1 dim, so no tie between strides): 65,536 elements.
    base = torch.arange(2**MAX, dtype=torch.int32).reshape((2,) * MAX)
    # Reverse the dims: the first dim becomes innermost, the last outermost.
    x = base.permute(*reversed(range(MAX)))
    dev = et_copy.h2d_copy(x)
    assert tuple(dev.shape) == x.shape
    assert tuple(dev.dim_order) == tuple(reversed(range(MAX)))
    back = et_copy.d2h_copy(dev)
    assert torch.equal(back, x) and back.stride() == x.stride()


def test_the_dim_order_of_max_rank_strides_names_each_dim_from_the_first_to_the_last():
    strides = list(range(1, MAX + 1))  # dim 0 innermost ... dim MAX-1 outermost
    assert _C.dim_order_of(strides) == list(reversed(range(MAX)))
    assert _C.dim_order_of(list(reversed(strides))) == list(range(MAX))
    with pytest.raises(Exception, match=f"tensor has {MAX + 1} dims; ExecuTorch supports at most {MAX}"):
        _C.dim_order_of(list(range(1, MAX + 2)))


@pytest.mark.parametrize("out_kind", ["torch", "device"])
def test_a_dynamic_out_of_max_rank_shrinks_to_selfs_shape_with_dense_strides(out_kind):
    small = _shape(MAX)
    big = small[:-1] + (small[-1] + 1,)  # the last dim one larger: every stride but the last changes
    x = torch.arange(3 ** ((MAX + 1) // 2), dtype=torch.uint8).reshape(small)
    if out_kind == "torch":
        dev = et_copy.h2d_copy(x)
        out = torch.full(big, 7, dtype=torch.uint8)
        got = et_copy.d2h_copy(dev, out=out, dynamic_out=True)
        assert got.shape == small and got.stride() == _dense_strides(small)
        assert torch.equal(got, x)
    else:
        out = et_copy.empty(big, torch.uint8, dynamic=True)
        got = et_copy.h2d_copy(x, out=out, dynamic_out=True)
        assert tuple(got.shape) == small
        # Reading it back goes through the strides the bindings kept for it.
        assert torch.equal(got.cpu(), x)


def test_one_dim_past_the_largest_rank_is_refused_by_each_copy():
    x = torch.zeros((1,) * (MAX + 1), dtype=torch.uint8)
    with pytest.raises(et_copy.EtCopyError, match=f"has {MAX + 1} dims; ExecuTorch supports at most {MAX}"):
        et_copy.h2d_copy(x)
    out = et_copy.empty((1,) * MAX, torch.uint8)
    with pytest.raises(et_copy.EtCopyError, match=f"{MAX + 1} dims"):
        et_copy.h2d_copy(x, out=out)
    with pytest.raises(et_copy.EtCopyError, match=f"{MAX + 1} dims"):
        et_copy.d2h_copy(out, out=torch.zeros((1,) * (MAX + 1), dtype=torch.uint8))
