"""What a DeviceTensor shows of itself: its repr (static, dynamic with a
capacity, freed), its fields at rank 0, 1, 16 and odd sizes, first dim and
last read alike, and the argument checks of et_copy.empty and the
constructor at both sides of each edge (the exact buffer fit, the last
stride that fits int64), each naming the function, argument and problem."""

from __future__ import annotations

import et_copy
import pytest
import torch
from device_tensor_fields import fields_of
from et_copy import _C


@pytest.fixture(autouse=True)
def _simulated():
    et_copy.use_simulated_device()


def test_the_repr_of_a_static_tensor_names_shape_dtype_and_device():
    d = et_copy.empty((4, 3), torch.float32)
    assert repr(d) == "DeviceTensor(shape=(4, 3), dtype=torch.float32, device='cuda:0')"
    d.free()
    assert repr(d) == "DeviceTensor(shape=(4, 3), dtype=torch.float32, device='cuda:0', freed)"


def test_the_repr_of_a_dynamic_tensor_adds_its_capacity_after_a_smaller_copy():
    out = et_copy.empty((8, 5), torch.int16, dynamic=True)
    assert repr(out) == "DeviceTensor(shape=(8, 5), dtype=torch.int16, device='cuda:0', capacity=(8, 5))"
    et_copy.h2d_copy(torch.ones(3, 5, dtype=torch.int16), out=out)
    assert repr(out) == "DeviceTensor(shape=(3, 5), dtype=torch.int16, device='cuda:0', capacity=(8, 5))"
    assert out.shape == (3, 5) and out.capacity == (8, 5)
    assert out.nbytes == 3 * 5 * 2 and out.numel() == 15 and out.capacity_nbytes == 8 * 5 * 2
    out.free()
    assert repr(out).endswith(", capacity=(8, 5), freed)")


def test_a_rank_0_tensor_has_one_element_and_empty_tuples():
    z = et_copy.empty((), torch.float64)
    assert repr(z) == "DeviceTensor(shape=(), dtype=torch.float64, device='cuda:0')"
    assert z.dim() == 0 and z.numel() == 1 and z.nbytes == 8 and z.itemsize == 8
    assert z.shape == () and z.capacity == () and z.dim_order == ()
    assert isinstance(z.shape, torch.Size)


@pytest.mark.parametrize(
    "shape, dtype",
    [((7,), torch.uint8), ((3, 5, 7), torch.int16), ((3, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 5), torch.float64)],
)
def test_every_dim_is_read_first_to_last_at_ranks_1_3_and_16(shape, dtype):
    d = et_copy.empty(shape, dtype, dynamic=True)
    n = torch.Size(shape).numel()
    assert d.shape == shape and d.capacity == shape and d.dim() == len(shape)
    assert d.dim_order == tuple(range(len(shape)))
    assert d.numel() == n and d.itemsize == dtype.itemsize and d.nbytes == n * dtype.itemsize
    assert d.capacity_nbytes == n * dtype.itemsize
    x = torch.arange(n, dtype=torch.float64).to(dtype).reshape(shape)
    et_copy.h2d_copy(x, out=d)
    assert torch.equal(et_copy.d2h_copy(d), x)


def test_a_permuted_dim_order_reads_back_first_to_last():
    d = et_copy.empty((2, 3, 5), torch.int32, dim_order=(2, 0, 1))
    assert d.dim_order == (2, 0, 1)
    d16 = et_copy.empty((1,) * 15 + (2,), torch.uint8, dim_order=(15, *range(15)))
    assert d16.dim_order == (15, *range(15))


def test_a_shape_zero_has_no_bytes_and_no_elements():
    d = et_copy.empty((3, 0, 5), torch.float32)
    assert d.numel() == 0 and d.nbytes == 0 and d.shape == (3, 0, 5)
    last = et_copy.empty((3, 5, 0), torch.float32)
    assert last.numel() == 0 and last.nbytes == 0


@pytest.mark.parametrize("shape, got", [(5, "int"), (None, "NoneType"), ((2, "3"), "(2, '3')"), (("2", 3), "('2', 3)")])
def test_a_shape_that_is_no_sequence_of_ints_is_refused_showing_it(shape, got):
    with pytest.raises(TypeError) as info:
        et_copy.empty(shape, torch.uint8)
    assert str(info.value) == f"et_copy.empty: shape must be a sequence of ints, got {got}"


def test_a_dim_order_that_is_no_sequence_is_refused_naming_its_type():
    with pytest.raises(TypeError) as info:
        et_copy.empty((2, 3), torch.uint8, dim_order=7)
    assert str(info.value) == "et_copy.empty: dim_order must be a sequence of ints, got int"


def test_ints_of_any_index_type_are_taken():
    d = et_copy.empty([torch.tensor(2), True], torch.uint8, dim_order=[False, 1])
    assert d.shape == (2, 1) and d.dim_order == (0, 1)


def test_strides_that_fit_int64_are_taken_and_one_past_is_refused():
    # uint8 (1, 2**31-1, 2**31-1, 3): 3 * (2**31-1)**2 bytes fit 64 bits, but dim 0's
    # stride is that many elements, beyond int64; its last dim first keeps it small.
    shape = (1, 2**31 - 1, 2**31 - 1, 3)
    with pytest.raises(ValueError) as info:
        et_copy.empty(shape, torch.uint8)
    assert str(info.value) == (
        "et_copy.empty: shape (1, 2147483647, 2147483647, 3) laid out in dim_order (0, 1, 2, 3)"
        " has strides beyond int64"
    )
    # (1, 2**31-1, 2**31-1, 2): dim 0's stride is 2**63 - 2**33 + 2, within int64; the
    # allocator then refuses so many bytes, naming the size (nothing is laid out wrong).
    with pytest.raises(et_copy.EtCopyError, match=f"could not allocate {2 * (2**31 - 1) ** 2} bytes"):
        et_copy.empty((1, 2**31 - 1, 2**31 - 1, 2), torch.uint8)


def test_a_buffer_that_fits_exactly_is_taken_and_one_element_more_is_refused():
    dev = et_copy.empty((5, 3), torch.int16)  # 30 bytes
    same = _C.DeviceTensor(**fields_of(dev))
    assert same.capacity_nbytes == 30 and same.nbytes == 30
    small = _C.DeviceTensor(**fields_of(dev, shape=(29,), dim_order=(0,), dtype=torch.uint8))
    assert small.nbytes == 29 and small.capacity_nbytes == 30
    _C.DeviceTensor(**fields_of(dev, shape=(30,), dim_order=(0,), dtype=torch.uint8))
    with pytest.raises(ValueError) as info:
        _C.DeviceTensor(**fields_of(dev, shape=(31,), dim_order=(0,), dtype=torch.uint8))
    assert str(info.value) == (
        "et_copy.DeviceTensor: shape (31,) of torch.uint8 needs 31 bytes, more than the buffer's 30"
    )
    with pytest.raises(ValueError, match=r"shape \(16,\) of torch.int16 needs 32 bytes, more than the buffer's 30"):
        _C.DeviceTensor(**fields_of(dev, shape=(16,), dim_order=(0,)))


def test_a_slice_of_a_buffer_is_taken_up_to_its_own_size():
    dev = et_copy.empty((16,), torch.uint8)
    part = dev._buffer.slice(4, 8)
    t = _C.DeviceTensor(**fields_of(dev, buffer=part, shape=(8,)))
    assert t.data_ptr() == dev.data_ptr() + 4 and t.capacity_nbytes == 8
    with pytest.raises(ValueError, match=r"needs 9 bytes, more than the buffer's 8"):
        _C.DeviceTensor(**fields_of(dev, buffer=part, shape=(9,)))


def test_a_freed_buffer_is_refused_by_name_even_when_it_fits():
    dev = et_copy.empty((4,), torch.uint8)
    buf = dev._buffer
    dev.free()
    with pytest.raises(ValueError) as info:
        _C.DeviceTensor(**fields_of(dev, buffer=buf, shape=(0,)))
    assert str(info.value) == "et_copy.DeviceTensor: buffer was freed"
