"""A torch tensor's sizes and strides are int64, ExecuTorch's int32: the
copy narrows each, first dim to last, taking int32's largest value and
refusing the next by value, before anything moves (a refused out keeps
its bytes). Only expanded and as_strided views reach these values."""

from __future__ import annotations

import et_copy
import pytest
import torch

BIG = 2**31  # one past int32's largest


@pytest.fixture(autouse=True)
def _simulated():
    et_copy.use_simulated_device()


def one_byte():
    return torch.zeros(1, dtype=torch.uint8)


STRIDES = {
    "first dim's stride": ((1, 1), (BIG, 1)),
    "last dim's stride": ((1, 1), (1, BIG)),
    "a middle dim's stride": ((1, 1, 1), (1, BIG, 1)),
}


@pytest.mark.parametrize("shape, strides", STRIDES.values(), ids=STRIDES.keys())
def test_a_stride_beyond_int32_is_refused_as_self_and_as_out(shape, strides):
    x = one_byte().as_strided(shape, strides)
    with pytest.raises(et_copy.EtCopyError) as info:
        et_copy.h2d_copy(x)
    assert str(info.value) == f"stride value {BIG} does not fit ExecuTorch's tensor metadata"
    base = one_byte()
    out = base.as_strided(shape, strides)
    dev = et_copy.h2d_copy(torch.full(shape, 7, dtype=torch.uint8))
    with pytest.raises(et_copy.EtCopyError, match=f"stride value {BIG} does not fit"):
        et_copy.d2h_copy(dev, out=out)
    assert base.item() == 0  # nothing moved


@pytest.mark.parametrize("shape, strides", STRIDES.values(), ids=STRIDES.keys())
def test_a_stride_of_int32s_largest_moves(shape, strides):
    big = tuple(BIG - 1 if s == BIG else s for s in strides)
    x = torch.full((1,), 9, dtype=torch.uint8).as_strided(shape, big)
    dev = et_copy.h2d_copy(x)
    base = one_byte()
    assert et_copy.d2h_copy(dev, out=base.as_strided(shape, big)) is not None
    assert base.item() == 9


@pytest.mark.parametrize("shape", [(BIG,), (1, BIG), (BIG, 1)], ids=["rank 1", "last dim", "first dim"])
def test_an_out_with_a_size_beyond_int32_is_refused_by_value(shape):
    out = torch.zeros([1] * len(shape), dtype=torch.uint8).expand(shape)
    dev = et_copy.empty((1,) * len(shape), torch.uint8)
    with pytest.raises(et_copy.EtCopyError) as info:
        et_copy.d2h_copy(dev, out=out)
    assert str(info.value) == f"size value {BIG} does not fit ExecuTorch's tensor metadata"


@pytest.mark.parametrize("shape", [(BIG - 1,), (1, BIG - 1), (BIG - 1, 1)], ids=["rank 1", "last dim", "first dim"])
def test_an_out_of_int32s_largest_size_passes_the_narrowing_to_the_density_check(shape):
    out = torch.zeros([1] * len(shape), dtype=torch.uint8).expand(shape)
    dev = et_copy.empty((1,) * len(shape), torch.uint8)
    with pytest.raises(et_copy.EtCopyError) as info:
        et_copy.d2h_copy(dev, out=out)
    assert str(info.value) == (
        "et_copy::_d2h_copy.out: out is not dense in its dim order (its strides leave gaps or overlap)"
    )
