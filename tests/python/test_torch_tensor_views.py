"""The torch reader on views: a transposed, permuted or offset view moves
by its own sizes, strides and storage offset (first dim and last alike,
odd sizes), a view with gaps or overlaps (a slice with a step, an expanded
dim) is refused naming the op and argument, and a refused out is left as
it was."""

from __future__ import annotations

import et_copy
import pytest
import torch


@pytest.fixture(autouse=True)
def _simulated():
    et_copy.use_simulated_device()


def base(shape, fill=None):
    t = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    return t if fill is None else t.fill_(fill)


# Each: the base's shape, and the view of it.
DENSE_VIEWS = {
    "transposed": ((3, 5), lambda b: b.t()),
    "permuted, last dim first": ((2, 3, 5), lambda b: b.permute(2, 0, 1)),
    "permuted, first dim last": ((2, 3, 5), lambda b: b.permute(1, 2, 0)),
    "offset rows": ((5, 3), lambda b: b[2:]),
    "offset rows, transposed": ((5, 3), lambda b: b[1:].t()),
    "rank 1 offset": ((7,), lambda b: b[3:]),
    "rank 0 at an offset": ((7,), lambda b: b[5]),
    "sixteen dims, last first": ((1,) * 13 + (3, 1, 2), lambda b: b.permute(15, *range(15))),
    "sixteen dims at an offset": ((2,) + (1,) * 14 + (3,), lambda b: b[1:]),
}


@pytest.mark.parametrize("shape, view", DENSE_VIEWS.values(), ids=DENSE_VIEWS.keys())
def test_a_dense_view_moves_by_its_sizes_strides_and_offset(shape, view):
    v = view(base(shape))
    dev = et_copy.h2d_copy(v)
    assert dev.shape == v.shape and dev.nbytes == v.numel() * 4
    back = et_copy.d2h_copy(dev)
    assert torch.equal(back, v) and back.stride() == v.stride()


@pytest.mark.parametrize("shape, view", DENSE_VIEWS.values(), ids=DENSE_VIEWS.keys())
def test_a_dense_view_as_out_is_written_through_its_strides_and_nothing_else(shape, view):
    want = view(base(shape))
    dev = et_copy.h2d_copy(want)  # the device tensor takes its dim order
    target = base(shape, fill=-1.0)
    out = view(target)
    assert et_copy.d2h_copy(dev, out=out) is out
    assert torch.equal(out, want)
    outside = torch.ones_like(target, dtype=torch.bool)
    view(outside).fill_(False)
    assert torch.all(target[outside] == -1.0)  # what the view does not cover is untouched


GAPPY = {
    "a step in the last dim": ((3, 8), lambda b: b[:, ::2]),
    "a step in the first dim": ((6, 3), lambda b: b[::2]),
    "an expanded first dim": ((1, 5), lambda b: b.expand(3, 5)),
    "an expanded last dim": ((5, 1), lambda b: b.expand(5, 3)),
}


@pytest.mark.parametrize("shape, view", GAPPY.values(), ids=GAPPY.keys())
def test_a_view_with_gaps_or_overlaps_is_refused_as_self(shape, view):
    with pytest.raises(et_copy.EtCopyError) as info:
        et_copy.h2d_copy(view(base(shape)))
    assert str(info.value) == (
        "et_copy::_h2d_copy.out: self is not dense in its dim order (its strides leave gaps or overlap)"
    )


@pytest.mark.parametrize("shape, view", GAPPY.values(), ids=GAPPY.keys())
def test_a_view_with_gaps_or_overlaps_is_refused_as_out_and_left_untouched(shape, view):
    target = base(shape, fill=-1.0)
    out = view(target)
    dev = et_copy.h2d_copy(torch.zeros(out.shape))
    with pytest.raises(et_copy.EtCopyError) as info:
        et_copy.d2h_copy(dev, out=out)
    assert str(info.value) == (
        "et_copy::_d2h_copy.out: out is not dense in its dim order (its strides leave gaps or overlap)"
    )
    assert torch.all(target == -1.0)
