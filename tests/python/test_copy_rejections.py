"""Every rejection et_copy's kernels make: the ExecuTorch error name, a
message naming the op, the argument and the problem, and `out` left exactly
as it was (bytes and shape) with no copy counted."""

from __future__ import annotations

import warnings

import et_copy
import pytest
import torch

H2D = "et_copy::_h2d_copy.out"
D2H = "et_copy::_d2h_copy.out"


@pytest.fixture(autouse=True)
def simulated_device():
    et_copy.use_simulated_device(device_count=1)


def pattern(shape, dtype):
    return (
        torch.arange(torch.Size(shape).numel() * dtype.itemsize, dtype=torch.int64)
        .remainder(251)
        .to(torch.uint8)
        .view(dtype)
        .reshape(shape)
    )


def device_state(out: et_copy.DeviceTensor):
    """(shape, bytes of the whole capacity) of a device tensor, read through
    a fresh uint8 view of its memory so a shape change can't hide bytes."""
    shape = tuple(out.shape)
    whole = et_copy.DeviceTensor(out._buffer, torch.uint8, out.device, (out.capacity_nbytes,), (0,), False)
    return shape, et_copy.d2h_copy(whole).numpy().tobytes()


def filled_device(shape, dtype, *, dynamic=False):
    out = et_copy.empty(shape, dtype, dynamic=dynamic)
    et_copy.h2d_copy(pattern(shape, dtype), out=out)
    return out


def expect_rejection(fn, error, *fragments):
    before = et_copy.allocator_stats()
    with pytest.raises(et_copy.EtCopyError) as info:
        fn()
    after = et_copy.allocator_stats()
    assert info.value.error == error
    for fragment in fragments:
        assert fragment in str(info.value)
    assert (after["h2d_copies"], after["d2h_copies"]) == (before["h2d_copies"], before["d2h_copies"])
    return info.value


def test_h2d_dtype_mismatch_is_rejected_and_out_is_untouched():
    out = filled_device((4,), torch.float32)
    before = device_state(out)
    expect_rejection(
        lambda: et_copy.h2d_copy(torch.ones(4, dtype=torch.float64), out=out),
        "InvalidArgument",
        H2D,
        "dtype mismatch",
        "self has Double",
        "out has Float",
    )
    assert device_state(out) == before


def test_d2h_dtype_mismatch_is_rejected_and_out_is_untouched():
    device = filled_device((4,), torch.float64)
    out = torch.full((4,), 7.0, dtype=torch.float32)
    expect_rejection(lambda: et_copy.d2h_copy(device, out=out), "InvalidArgument", D2H, "dtype mismatch")
    assert torch.equal(out, torch.full((4,), 7.0))


def test_h2d_dim_order_mismatch_is_rejected():
    out = filled_device((2, 3, 4, 5), torch.float32)
    before = device_state(out)
    self = torch.ones(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    expect_rejection(lambda: et_copy.h2d_copy(self, out=out), "InvalidArgument", H2D, "dim order mismatch")
    assert device_state(out) == before


def test_d2h_dim_order_mismatch_is_rejected():
    device = filled_device((2, 3, 4, 5), torch.float32)
    out = torch.zeros(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    expect_rejection(lambda: et_copy.d2h_copy(device, out=out), "InvalidArgument", D2H, "dim order mismatch")
    assert not out.any()


def test_h2d_into_static_out_of_another_shape_is_rejected():
    out = filled_device((4,), torch.int32)
    before = device_state(out)
    expect_rejection(
        lambda: et_copy.h2d_copy(torch.ones(5, dtype=torch.int32), out=out),
        "InvalidArgument",
        H2D,
        "out has static shape [4]",
        "self has shape [5]",
    )
    assert device_state(out) == before


@pytest.mark.parametrize("shape", [(3,), (5,), (8,)])  # one smaller, one larger, twice as large
def test_d2h_into_a_torch_out_of_another_shape_is_rejected_as_static_and_out_is_untouched(shape):
    # A torch tensor passed as out without dynamic_out is a static out: its
    # shape is the one the copy must produce, never a capacity to shrink within.
    dev = et_copy.h2d_copy(torch.arange(4, dtype=torch.int32))
    out = pattern(shape, torch.int32)
    before = out.clone()
    expect_rejection(
        lambda: et_copy.d2h_copy(dev, out=out),
        "InvalidArgument",
        D2H,
        f"out has static shape {list(shape)}",
        "self has shape [4]",
    )
    assert out.shape == shape and torch.equal(out, before)


def test_h2d_beyond_dynamic_capacity_is_rejected_and_shape_kept():
    out = filled_device((6,), torch.int64, dynamic=True)
    et_copy.h2d_copy(pattern((2,), torch.int64), out=out)
    before = device_state(out)
    assert before[0] == (2,)
    expect_rejection(
        lambda: et_copy.h2d_copy(torch.ones(7, dtype=torch.int64), out=out),
        "InvalidArgument",
        H2D,
        "beyond the capacity of out",
    )
    assert device_state(out) == before


def test_d2h_beyond_dynamic_host_capacity_is_rejected_and_shape_kept():
    device = filled_device((9,), torch.int8)
    out = torch.zeros(4, dtype=torch.int8)
    expect_rejection(
        lambda: et_copy.d2h_copy(device, out=out, dynamic_out=True),
        "InvalidArgument",
        D2H,
        "beyond the capacity of out",
    )
    assert out.shape == (4,) and not out.any()


def test_h2d_rank_mismatch_is_rejected():
    out = filled_device((2, 2), torch.float32)
    before = device_state(out)
    expect_rejection(lambda: et_copy.h2d_copy(torch.ones(4), out=out), "InvalidArgument", H2D, "rank mismatch")
    assert device_state(out) == before


def test_h2d_from_a_device_tensor_is_the_wrong_direction():
    device = filled_device((3,), torch.float32)
    out = filled_device((3,), torch.float32)
    before = device_state(out)
    expect_rejection(
        lambda: et_copy.h2d_copy(device, out=out), "InvalidArgument", H2D, "self must be a host (CPU) tensor"
    )
    assert device_state(out) == before


def test_h2d_into_a_cpu_out_is_the_wrong_direction():
    out = torch.full((3,), 5.0)
    expect_rejection(
        lambda: et_copy.h2d_copy(torch.ones(3), out=out), "InvalidArgument", H2D, "out must be a device tensor"
    )
    assert torch.equal(out, torch.full((3,), 5.0))


def test_d2h_from_a_cpu_tensor_is_the_wrong_direction():
    out = torch.full((3,), 5.0)
    expect_rejection(
        lambda: et_copy.d2h_copy(torch.ones(3), out=out), "InvalidArgument", D2H, "self must be a device tensor"
    )
    assert torch.equal(out, torch.full((3,), 5.0))


def test_d2h_into_a_device_out_is_the_wrong_direction():
    device = filled_device((3,), torch.float32)
    out = filled_device((3,), torch.float32)
    before = device_state(out)
    expect_rejection(
        lambda: et_copy.d2h_copy(device, out=out), "InvalidArgument", D2H, "out must be a host (CPU) tensor"
    )
    assert device_state(out) == before


def test_device_index_the_allocator_does_not_have_is_rejected():
    out = filled_device((3,), torch.float32)
    before = device_state(out)
    bad = et_copy.DeviceTensor(out._buffer, out.dtype, et_copy._device.Device(1, 1), (3,), (0,), False)
    expect_rejection(
        lambda: et_copy.h2d_copy(torch.ones(3), out=bad),
        "InvalidArgument",
        H2D,
        "out is on CUDA device 1",
        "1 device(s)",
    )
    assert device_state(out) == before
    host = torch.full((3,), 2.0)
    expect_rejection(lambda: et_copy.d2h_copy(bad, out=host), "InvalidArgument", D2H, "self is on CUDA device 1")
    assert torch.equal(host, torch.full((3,), 2.0))


def test_allocating_on_a_missing_device_is_rejected():
    with pytest.raises(et_copy.EtCopyError) as info:
        et_copy.empty((3,), torch.float32, device="cuda:5")
    assert info.value.error == "InvalidArgument"


def test_non_dense_self_is_rejected():
    out = filled_device((4,), torch.float32)
    before = device_state(out)
    strided = torch.arange(8, dtype=torch.float32)[::2]
    expect_rejection(lambda: et_copy.h2d_copy(strided, out=out), "InvalidArgument", H2D, "self is not dense")
    assert device_state(out) == before


@pytest.mark.parametrize(
    "dtype",
    # Packed two or four to a byte by torch, one byte per element to ExecuTorch; and one ExecuTorch lacks.
    [torch.quint4x2, torch.quint2x4, torch.float8_e8m0fnu],
    ids=str,
)
def test_unsupported_dtype_is_a_type_error_naming_op_and_argument(dtype):
    odd = torch.zeros(4, dtype=torch.uint8).view(dtype)
    with pytest.raises(TypeError, match=rf"et_copy::_h2d_copy.out: self has dtype {dtype}, which et_copy does not"):
        et_copy.h2d_copy(odd)
    out = filled_device((4,), torch.uint8)
    before = device_state(out)
    with pytest.raises(TypeError, match=rf"et_copy::_d2h_copy.out: out has dtype {dtype}"):
        et_copy.d2h_copy(out, out=odd)
    assert device_state(out) == before


def test_non_tensor_arguments_are_type_errors():
    with pytest.raises(TypeError, match="self must be a torch.Tensor"):
        et_copy.h2d_copy([1, 2, 3])
    with pytest.raises(TypeError, match="out must be a torch.Tensor or an et_copy.DeviceTensor"):
        et_copy.h2d_copy(torch.ones(3), out="nope")


def test_freed_device_tensor_is_rejected_before_any_copy():
    out = et_copy.empty((3,), torch.float32)
    out.free()
    with pytest.raises(ValueError, match="freed"):
        et_copy.h2d_copy(torch.ones(3), out=out)


def test_more_than_16_dims_is_rejected():
    with pytest.raises(et_copy.EtCopyError, match="at most 16"):
        et_copy.h2d_copy(torch.ones([1] * 17))


class DtypeRaises(torch.Tensor):
    """A tensor subclass whose dtype attribute raises."""

    @property
    def dtype(self):
        raise LookupError("this tensor has no dtype to show")


def test_an_unsupported_dtype_that_cannot_be_named_raises_the_tensors_own_error_and_allocates_nothing():
    # An out given, so the kernel's reader, not h2d_copy's default out, meets the dtype first.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch deprecates creating quantized tensors
        x = torch.quantize_per_tensor(torch.zeros(2), 0.1, 0, torch.quint4x2).as_subclass(DtypeRaises)
    out = et_copy.empty((2,), torch.float32)
    before = et_copy.allocator_stats()
    with pytest.raises(LookupError, match="this tensor has no dtype to show"):
        et_copy.h2d_copy(x, out=out)
    assert et_copy.allocator_stats() == before


def test_a_dynamic_out_torch_will_not_restride_raises_torchs_error():
    # The copy fits the capacity; giving out the copy's shape is an in-place as_strided_, which
    # autograd refuses on a leaf that requires grad.
    dev = et_copy.h2d_copy(torch.ones(2, 3))
    out = torch.zeros(4, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        et_copy.d2h_copy(dev, out=out, dynamic_out=True)
    assert out.shape == (4, 3)
    plain = torch.zeros(4, 3)
    assert et_copy.d2h_copy(dev, out=plain, dynamic_out=True) is plain
    assert torch.equal(plain, torch.ones(2, 3))
