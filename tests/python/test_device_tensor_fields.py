"""The edges of what a DeviceTensor may hold and what et_copy.empty accepts,
each tested on both sides: fields given to the constructor whose lengths
disagree with the rank, dim orders that repeat a dim, shapes beyond the
memory, device indices beyond int, the stride torch gives a size-0 dim, ties
between equal strides, the 16-dim limit, and empty()'s largest dim and
64-bit byte bound. The bindings check a DeviceTensor's fields once, when it
is made (python/bindings/device_tensor.cpp), and they are read-only after.

A refused call raises the error a user can act on, names the op and the
argument, and leaves the device memory and any host `out` as they were."""

from __future__ import annotations

import re
import warnings
import weakref

import et_copy
import pytest
import torch
from device_tensor_fields import fields_of
from et_copy._device import Device
from et_copy._tensors import contiguous_strides


@pytest.fixture(autouse=True)
def simulated_device():
    et_copy.use_simulated_device()


def filled(shape, dynamic=False) -> tuple[et_copy.DeviceTensor, torch.Tensor]:
    x = torch.arange(1, 1 + torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    return et_copy.h2d_copy(x, out=et_copy.empty(shape, torch.float32, dynamic=dynamic)), x


# ---- the constructor: every field checked once, read-only after -------------------


def permutation(order, rank=2):
    return rf"et_copy.DeviceTensor: dim_order {re.escape(str(order))} is not a permutation of the {rank} dims of shape"


NOT_A_DEVICE = r"et_copy.DeviceTensor: device must be a \(type, index\) tuple of ints, such as et_copy's Device"
BAD_DEVICE = r"et_copy.DeviceTensor: device .* must be a CUDA device \(type 1\) with an index ExecuTorch can hold"


class Untruthy:
    """A dynamic flag whose truth cannot be told: its own error is what the caller sees."""

    def __bool__(self):
        raise RuntimeError("no truth here")


REFUSED = {
    "shape longer than the memory": (
        {"shape": (2, 3, 2), "dim_order": (0, 1, 2)},
        ValueError,
        r"et_copy.DeviceTensor: shape \(2, 3, 2\) of torch.float32 needs 48 bytes, more than the buffer's 24",
    ),
    "shape beyond the memory": ({"shape": (2, 4)}, ValueError, r"needs 32 bytes, more than the buffer's 24"),
    "shape shorter than the dim order": ({"shape": (6,)}, ValueError, permutation((0, 1), 1)),
    "shape negative": ({"shape": (2, -3)}, ValueError, r"et_copy.DeviceTensor: shape \(2, -3\) has a negative size"),
    # Python ints beyond int64 at either end keep their sign (each clamps to its own end, never to -1).
    "shape beyond int64": ({"shape": (2, 2**64)}, ValueError, r"shape \(2, 18446744073709551616\) does not fit Exec"),
    "shape below int64": ({"shape": (2, -(2**64))}, ValueError, r"shape \(2, -18446744073709551616\) has a negative"),
    "shape of 17 dims": (
        {"shape": (1,) * 17, "dim_order": tuple(range(17))},
        et_copy.EtCopyError,
        r"et_copy.DeviceTensor: shape .* has 17 dims; ExecuTorch supports at most 16",
    ),
    # Every element of each sequence is checked, the first and the last alike.
    "shape not ints": ({"shape": (2.0, 3)}, TypeError, r"et_copy.DeviceTensor: shape must be a sequence of ints"),
    "shape's last not an int": ({"shape": (2, "3")}, TypeError, r"et_copy.DeviceTensor: shape must be a sequence of"),
    "dim order's first not an int": ({"dim_order": (0.0, 1)}, TypeError, r"DeviceTensor: dim_order must be a sequence"),
    "dim order's last not an int": ({"dim_order": (0, 1.0)}, TypeError, r"DeviceTensor: dim_order must be a sequence"),
    "dim order longer": ({"dim_order": (0, 1, 2)}, ValueError, permutation((0, 1, 2))),
    "dim order shorter": ({"dim_order": (0,)}, ValueError, permutation((0,))),
    "dim order repeats a dim": ({"dim_order": (0, 0)}, ValueError, permutation((0, 0))),
    "dim order repeats the other dim": ({"dim_order": (1, 1)}, ValueError, permutation((1, 1))),
    "dim order negative": ({"dim_order": (-1, 0)}, ValueError, permutation((-1, 0))),
    "dim order beyond int": ({"dim_order": (2**64, 0)}, ValueError, permutation((2**64, 0))),
    "dtype et_copy does not move": (
        {"dtype": torch.quint4x2},
        TypeError,
        r"et_copy.DeviceTensor: the tensor has dtype torch.quint4x2, which et_copy does not move \(supported: uint8,",
    ),
    "dtype not a dtype": ({"dtype": "float32"}, TypeError, r"the tensor has dtype float32, which et_copy does not"),
    "device index beyond int": ({"device": Device(1, 2**32)}, ValueError, BAD_DEVICE),
    "device index beyond int64": ({"device": Device(1, 2**64)}, ValueError, BAD_DEVICE),
    "device index below int64": ({"device": Device(1, -(2**64))}, ValueError, BAD_DEVICE),
    "device index just beyond int": ({"device": Device(1, 2**31)}, ValueError, BAD_DEVICE),
    "device type beyond int": ({"device": Device(2**32 + 1, 0)}, ValueError, BAD_DEVICE),
    "device on the CPU": ({"device": Device(0, 0)}, ValueError, BAD_DEVICE),
    "device not a pair": ({"device": (1,)}, TypeError, r"et_copy.DeviceTensor: device must be a \(type, index\) tuple"),
    "device a string": ({"device": "cuda:0"}, TypeError, r"et_copy.DeviceTensor: device must be a \(type, index\)"),
    "device of three": ({"device": (1, 0, 0)}, TypeError, NOT_A_DEVICE),
    "device a list": ({"device": [1, 0]}, TypeError, NOT_A_DEVICE),
    "device type not an int": ({"device": (1.0, 0)}, TypeError, NOT_A_DEVICE),
    "device index not an int": ({"device": (1, 0.0)}, TypeError, NOT_A_DEVICE),
    "buffer not a DeviceBuffer": (
        {"buffer": b"24 bytes, but host ones!"},
        TypeError,
        r"et_copy.DeviceTensor: buffer must be an et_copy._C.DeviceBuffer \(or a slice of one\), got bytes",
    ),
    "dynamic whose truth raises": ({"dynamic": Untruthy()}, RuntimeError, "^no truth here$"),
}


@pytest.mark.parametrize("changes, error, message", REFUSED.values(), ids=REFUSED.keys())
def test_the_constructor_refuses_fields_et_copy_would_not_make_and_nothing_moves(changes, error, message):
    dev, x = filled((2, 3), dynamic=True)
    before = et_copy.allocator_stats()
    with pytest.raises(error, match=message):
        et_copy.DeviceTensor(**fields_of(dev, **changes))
    after = et_copy.allocator_stats()
    assert (after["h2d_copies"], after["d2h_copies"]) == (before["h2d_copies"], before["d2h_copies"])
    assert torch.equal(dev.cpu(), x), "the device memory changed"


def test_the_constructor_refuses_a_freed_buffer():
    dev, _ = filled((2, 3))
    fields = fields_of(dev)
    dev.free()
    with pytest.raises(ValueError, match=r"et_copy.DeviceTensor: buffer was freed"):
        et_copy.DeviceTensor(**fields)


@pytest.mark.parametrize(
    "changes",
    [{}, {"device": (1, 0)}, {"device": Device(1, 0)}, {"dim_order": [0, 1]}, {"shape": [2, 3]}, {"dynamic": 1}],
)
def test_a_tensor_built_from_the_fields_et_copy_made_is_read(changes):
    dev, x = filled((2, 3), dynamic=True)
    again = et_copy.DeviceTensor(**fields_of(dev, **changes))
    assert torch.equal(et_copy.d2h_copy(again), x)
    assert again.device == (1, 0) and again.dim_order == (0, 1) and again.shape == (2, 3) and again.dynamic is True


FIELDS = ("shape", "capacity", "dtype", "device", "dim_order", "dynamic", "itemsize", "nbytes", "capacity_nbytes")


@pytest.mark.parametrize("field", [*FIELDS, "freed", "_buffer"])
def test_every_field_is_read_only(field):
    dev, x = filled((2, 3), dynamic=True)
    kept = getattr(dev, field)
    with pytest.raises(AttributeError):
        setattr(dev, field, kept)
    with pytest.raises(AttributeError):
        delattr(dev, field)
    assert getattr(dev, field) == kept
    assert torch.equal(et_copy.d2h_copy(dev), x)


def test_a_device_tensor_takes_no_new_attributes_and_its_type_none_either():
    dev, _ = filled((2, 3))
    with pytest.raises(AttributeError):
        dev._shape = (4,)
    with pytest.raises(AttributeError):
        dev.__dict__
    with pytest.raises(TypeError):
        et_copy._C.DeviceTensor.shape = property(lambda self: (4,))


def test_a_device_tensor_is_a_fixed_size_object_so_a_subclass_may_add_slots_and_weak_references_reach_it():
    # A type with items (tp_itemsize) would refuse a subclass's slots.
    assert et_copy._C.DeviceTensor.__itemsize__ == 0

    class Tagged(et_copy.DeviceTensor):
        __slots__ = ("tag",)

    dev, x = filled((2, 3))
    tagged = Tagged(**fields_of(dev))
    tagged.tag = "kept"
    assert tagged.tag == "kept"
    assert torch.equal(et_copy.d2h_copy(tagged), x)
    assert weakref.ref(tagged)() is tagged


@pytest.mark.parametrize("device", [Device(1, 128), Device(1, -129), Device(128, 0), Device(-1, 0)])
def test_a_device_beyond_executorchs_8_bit_codes_is_refused_by_argument(device):
    dev, _ = filled((2, 3))
    with pytest.raises(ValueError, match=BAD_DEVICE):
        et_copy.DeviceTensor(**fields_of(dev, device=device))


def test_device_indices_within_8_bits_reach_the_kernel_which_names_a_missing_device():
    dev, _ = filled((2, 3))
    far = et_copy.DeviceTensor(**fields_of(dev, device=Device(1, 127)))
    with pytest.raises(et_copy.EtCopyError, match=r"_d2h_copy.out: self is on CUDA device 127, but the simulated"):
        et_copy.d2h_copy(far)
    below = et_copy.DeviceTensor(**fields_of(dev, device=Device(1, -128)))
    with pytest.raises(et_copy.EtCopyError, match=r"_d2h_copy.out: self is on CUDA device -128"):
        et_copy.d2h_copy(below)


def test_empty_takes_device_indices_up_to_127_and_the_allocator_names_a_missing_one():
    with pytest.raises(et_copy.EtCopyError, match=r"on device 127") as info:
        et_copy.empty((2,), torch.float32, device="cuda:127")
    assert info.value.error == "InvalidArgument"
    with pytest.raises(ValueError, match=r"et_copy.empty: device has a bad device index in 'cuda:128'"):
        et_copy.empty((2,), torch.float32, device="cuda:128")


def test_empty_with_a_dynamic_flag_whose_truth_raises_raises_that_and_allocates_nothing():
    before = et_copy.allocator_stats()["allocations"]
    with pytest.raises(RuntimeError, match="^no truth here$"):
        et_copy.empty((2, 3), torch.float32, dynamic=Untruthy())
    assert et_copy.allocator_stats()["allocations"] == before
    assert et_copy.empty((2, 3), torch.float32, dynamic=True).dynamic is True


def test_the_dynamic_flag_decides_whether_out_takes_a_smaller_shape():
    dynamic, _ = filled((4, 3), dynamic=True)
    et_copy.h2d_copy(torch.ones(2, 3), out=dynamic)
    assert dynamic.shape == (2, 3) and dynamic.capacity == (4, 3)
    static, x = filled((4, 3))
    with pytest.raises(et_copy.EtCopyError, match=r"_h2d_copy.out: out has static shape \[4, 3\] but self has shape"):
        et_copy.h2d_copy(torch.ones(2, 3), out=static)
    assert static.shape == (4, 3) and torch.equal(static.cpu(), x)


def test_a_dynamic_flag_with_no_truth_value_is_its_own_error_and_allocates_nothing():
    # A two-element tensor has no truth value: its own RuntimeError reaches the caller, from both makers.
    ambiguous = torch.tensor([True, False])
    before = et_copy.allocator_stats()["allocations"]
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        et_copy.empty((2,), torch.float32, dynamic=ambiguous)
    assert et_copy.allocator_stats()["allocations"] == before
    d = et_copy.empty((2,), torch.float32)
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        et_copy.DeviceTensor(**fields_of(d, dynamic=ambiguous))
    assert not et_copy.DeviceTensor(**fields_of(d, dynamic=torch.tensor([False]))).dynamic
    assert et_copy.DeviceTensor(**fields_of(d, dynamic=torch.tensor([True]))).dynamic


# ---- dim orders and strides ----------------------------------------------------


@pytest.mark.parametrize("order", [(0, 0), (1, 1), (0, 2), (-1, 0), (0,), (0, 1, 2)])
def test_empty_and_the_strides_helper_refuse_a_dim_order_that_is_not_a_permutation(order):
    with pytest.raises(ValueError, match=r"et_copy.empty: dim_order .* is not a permutation"):
        et_copy.empty((2, 3), torch.float32, dim_order=order)
    if len(order) == 2:
        with pytest.raises(ValueError, match="not a permutation"):
            contiguous_strides((2, 3), order)


def test_a_dim_order_that_repeats_a_dim_but_covers_every_dim_is_refused():
    with pytest.raises(ValueError, match=r"dim_order \(0, 1, 1, 2\) is not a permutation"):
        et_copy.empty((2, 3, 4), torch.float32, dim_order=(0, 1, 1, 2))


SIZE_ZERO_SHAPES = [(0,), (2, 0), (0, 3), (2, 0, 3), (0, 0, 5), (4, 1, 0, 2)]


@pytest.mark.parametrize("shape", SIZE_ZERO_SHAPES)
def test_a_size_zero_dim_takes_torchs_contiguous_strides(shape):
    order = tuple(range(len(shape)))
    assert tuple(contiguous_strides(shape, order)) == torch.empty(shape).stride()
    # A dynamic torch out resized to the empty shape: strides as torch makes them.
    dev = et_copy.h2d_copy(torch.empty(shape))
    out = torch.full((5, 5, 5, 5)[: len(shape)], 7.0)
    et_copy.d2h_copy(dev, out=out, dynamic_out=True)
    assert out.shape == shape and out.stride() == torch.empty(shape).stride()


def test_a_size_zero_dim_in_a_permuted_order_counts_as_one():
    assert tuple(contiguous_strides((2, 0, 3), (2, 0, 1))) == torch.empty_permuted((2, 0, 3), (2, 0, 1)).stride()


@pytest.mark.parametrize("shape", [(2, 1, 3), (1, 1), (1, 4), (3, 1), (2, 1, 1, 3)])
def test_equal_strides_keep_the_natural_dim_order(shape):
    x = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    dev = et_copy.h2d_copy(x)
    assert dev.dim_order == tuple(range(len(shape)))
    out = torch.zeros(shape)
    assert et_copy.d2h_copy(dev, out=out) is out and torch.equal(out, x)


# ---- the 16-dim limit ------------------------------------------------------------


def test_sixteen_dims_move_and_seventeen_are_refused():
    x = torch.arange(4, dtype=torch.float32).reshape((2, 2) + (1,) * 14)
    dev = et_copy.h2d_copy(x)
    assert dev.dim() == 16
    assert torch.equal(dev.cpu(), x)
    assert torch.equal(et_copy.d2h_copy(dev), x)
    empty16 = et_copy.empty((1,) * 16, torch.float32)
    et_copy.h2d_copy(torch.ones((1,) * 16), out=empty16)
    assert torch.equal(empty16.cpu(), torch.ones((1,) * 16))
    with pytest.raises(et_copy.EtCopyError, match=r"_h2d_copy.out: self has 17 dims; ExecuTorch supports at most 16"):
        et_copy.h2d_copy(torch.ones((1,) * 17))
    with pytest.raises(et_copy.EtCopyError, match=r"et_copy.empty: shape \(1, .*\) has 17 dims; ExecuTorch supports"):
        et_copy.empty((1,) * 17, torch.float32)


# ---- et_copy.empty: largest dim, 64-bit byte bound, negative sizes ----------------

MAX_DIM = 2**31 - 1  # ExecuTorch's sizes are int32


def test_the_largest_dim_is_accepted_and_the_next_is_refused():
    dev = et_copy.empty((MAX_DIM, 0), torch.uint8)
    assert dev.shape == (MAX_DIM, 0) and dev.nbytes == 0
    assert et_copy.d2h_copy(dev).shape == (MAX_DIM, 0)
    with pytest.raises(ValueError, match=r"et_copy.empty: shape \(2147483648, 0\) does not fit ExecuTorch's tensor"):
        et_copy.empty((MAX_DIM + 1, 0), torch.uint8)


def test_a_byte_count_of_2_64_is_refused_and_one_less_reaches_the_allocator():
    # 65535 * 42009217 * 6700417 == 2**64 - 1: the largest size_t, which the
    # allocator refuses by itself; 2**64 bytes no longer fits one.
    assert 65535 * 42009217 * 6700417 == 2**64 - 1
    before = et_copy.allocator_stats()
    with pytest.raises(et_copy.EtCopyError) as info:
        et_copy.empty((65535, 42009217, 6700417), torch.uint8)
    assert info.value.error == "MemoryAllocationFailed"
    after = et_copy.allocator_stats()
    assert after["allocations"] == before["allocations"] and after["bytes_outstanding"] == before["bytes_outstanding"]
    with pytest.raises(ValueError, match=r"needs 18446744073709551616 bytes, beyond a 64-bit size"):
        et_copy.empty((2**22, 2**21, 2**21), torch.uint8)
    with pytest.raises(ValueError, match="beyond a 64-bit size"):
        et_copy.empty((65535, 42009217, 6700417), torch.int16)


@pytest.mark.parametrize("shape", [(-1, 3), (3, -1), (-2,)])
def test_a_negative_size_is_refused(shape):
    with pytest.raises(ValueError, match=r"et_copy.empty: shape .* has a negative size"):
        et_copy.empty(shape, torch.float32)


def test_a_zero_size_is_accepted():
    dev = et_copy.empty((0, 3), torch.float32)
    assert dev.shape == (0, 3) and dev.nbytes == 0


# ---- quantized tensors in a permuted layout ---------------------------------------


@pytest.mark.parametrize("order", [(1, 2, 0), (2, 0, 1), (1, 0, 2)])
def test_a_quantized_tensor_in_a_permuted_layout_comes_back_with_its_shape_and_bytes(order):
    # A qint8 tensor of shape (2, 3, 4) laid out in `order` (outermost first).
    shape = (2, 3, 4)
    physical = torch.randint(-100, 100, [shape[d] for d in order], dtype=torch.int8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch 2.13 deprecates creating quantized tensors
        x = torch._make_per_tensor_quantized_tensor(physical, 0.1, 0).permute([order.index(d) for d in range(3)])
    assert x.shape == shape
    dev = et_copy.h2d_copy(x)
    assert dev.dim_order == order
    back = dev.cpu()
    assert back.shape == shape and back.dtype == torch.qint8
    laid_out = back.permute(order)
    assert laid_out.is_contiguous()
    assert bytes(laid_out.view(torch.uint8).numpy()) == bytes(physical.view(torch.uint8).numpy())


def test_device_codes_are_executorchs_and_name_the_device_in_method_metadata():
    # TensorMetadata.device() (et_copy.runtime) is str(Device(type, index)) of a program's codes.
    from et_copy import _device
    from executorch.exir.schema import DeviceType

    assert (_device.CPU, _device.CUDA) == (DeviceType.CPU.value, DeviceType.CUDA.value)
    assert str(Device(DeviceType.CPU.value, -1)) == "cpu"
    assert str(Device(DeviceType.CUDA.value, 0)) == "cuda:0"
    assert str(_device.parse_device("cuda:3", op="t")) == "cuda:3"


def test_cuda_without_an_index_is_device_0_as_in_torch():
    from et_copy import _device

    assert _device.parse_device("cuda", op="t") == Device(_device.CUDA, 0)
    assert str(et_copy.empty((2,), torch.float32, device="cuda").device) == "cuda:0"
