"""The one way tensors cross into the bindings (python/bindings/
tensor_reader.cpp): torch tensors through at::Tensor, DeviceTensors from the
C++ struct their type holds (device_tensor.h). Layouts, dtypes, shapes and
every argument error, as users meet them through
et_copy.h2d_copy/d2h_copy/run_registered."""

from __future__ import annotations

import itertools
import re
import warnings

import et_copy
import pytest
import torch
from et_copy import _C
from et_copy._dtypes import SCALAR_TYPE_CODES

SHAPES = [(), (0,), (3, 5), (2, 3, 1, 4), (2, 0, 3, 4), (5, 1, 0), (1, 1, 1, 1)]


@pytest.fixture(autouse=True)
def simulated_device():
    et_copy.use_simulated_device()


def host(shape, order):
    t = torch.empty_permuted(shape, order) if shape else torch.empty(())
    t.copy_(torch.arange(t.numel(), dtype=torch.float32).reshape(shape))
    return t


def test_the_dtype_table_is_executorchs():
    """et_copy's codes are ExecuTorch's ScalarType values, as executorch's own exporter writes them."""
    from executorch.exir.tensor import scalar_type_table

    for dtype, code in SCALAR_TYPE_CODES.items():
        if dtype in scalar_type_table:  # executorch's table omits the bits types
            assert scalar_type_table[dtype].value == code, dtype
    assert len(SCALAR_TYPE_CODES) == 28  # ExecuTorch's 30 but QUInt4x2 and QUInt2x4


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_every_layout_round_trips_or_is_refused_leaving_out_as_it_was(shape, dynamic):
    """Size-0 and size-1 dims make several dim orders describe one torch
    layout; whichever the reader derives, a copy either keeps every value
    and the layout, or fails naming the mismatch with out unchanged."""
    orders = list(itertools.permutations(range(len(shape))))[:4]
    for self_order, out_order in itertools.product(orders, orders[:3]):
        x = host(shape, self_order)
        dev = et_copy.empty(shape, torch.float32, dim_order=out_order, dynamic=dynamic)
        try:
            et_copy.h2d_copy(x, out=dev)
        except et_copy.EtCopyError as e:
            assert "dim order mismatch" in str(e), e
            continue
        back = host(shape, self_order).zero_()
        et_copy.d2h_copy(dev, out=back, dynamic_out=dynamic)
        assert torch.equal(back, x) and back.stride() == x.stride()


def test_a_dynamic_out_takes_the_copied_shape_torch_and_device_alike():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    dev = et_copy.empty((4, 3), torch.float32, dynamic=True)
    assert et_copy.h2d_copy(x, out=dev) is dev
    assert dev.shape == (2, 3) and dev.capacity == (4, 3)
    out = torch.zeros(4, 3)
    storage = out.data_ptr()
    assert et_copy.d2h_copy(dev, out=out, dynamic_out=True) is out
    assert out.shape == (2, 3) and out.stride() == (3, 1) and out.data_ptr() == storage
    assert torch.equal(out, x)


@pytest.mark.parametrize("dtype", [torch.qint8, torch.quint8, torch.qint32], ids=str)
def test_a_quantized_tensor_moves_its_bytes_and_keeps_its_quantizer_on_the_host(dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch 2.13 deprecates creating quantized tensors
        q = torch.quantize_per_tensor(torch.randn(4, 3), 0.25, 2, dtype)
        out = torch._empty_affine_quantized([4, 3], scale=0.25, zero_point=2, dtype=dtype)
    dev = et_copy.h2d_copy(q)
    assert dev.dtype == dtype
    et_copy.d2h_copy(dev, out=out)
    assert torch.equal(out.int_repr(), q.int_repr()) and out.q_scale() == 0.25
    # With no out, the bytes come back under the dtype, without a scale ExecuTorch never had.
    bare = et_copy.d2h_copy(dev)
    assert bare.dtype == dtype
    assert bytes(bare.view(torch.uint8).numpy()) == bytes(q.int_repr().view(torch.uint8).numpy())


def test_a_freed_device_tensor_is_refused_naming_the_argument():
    dev = et_copy.empty((4,), torch.float32)
    dev.free()
    with pytest.raises(ValueError, match=r"et_copy::_h2d_copy.out: out is a DeviceTensor whose memory was freed"):
        et_copy.h2d_copy(torch.zeros(4), out=dev)
    with pytest.raises(ValueError, match=r"et_copy::_d2h_copy.out: self is a DeviceTensor whose memory was freed"):
        et_copy.d2h_copy(dev)


def test_a_tensor_on_another_device_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"et_copy::_h2d_copy.out: self is on meta; et_copy moves CPU and CUDA"):
        et_copy.h2d_copy(torch.empty(4, device="meta"), out=et_copy.empty((4,), torch.float32))


LAYOUTS = {
    "sparse_coo": lambda t: t.to_sparse(),
    "sparse_csr": lambda t: t.to_sparse_csr(),
    "sparse_bsr": lambda t: t.to_sparse_bsr((1, 1)),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_tensor_that_is_not_strided_is_refused_naming_the_argument_and_its_layout(layout):
    # A sparse tensor has no dense bytes to copy: each copy refuses it as self and as out.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Sparse (CSR|BSR) tensor support is in beta state", UserWarning)
        t = LAYOUTS[layout](torch.eye(2))
    dev = et_copy.h2d_copy(torch.ones(2, 2))
    name = rf"layout torch\.{layout}; et_copy moves strided tensors \(to_dense\(\) first\)"
    with pytest.raises(ValueError, match=rf"et_copy::_h2d_copy.out: self has {name}"):
        et_copy.h2d_copy(t, out=dev)
    with pytest.raises(ValueError, match=rf"et_copy::_d2h_copy.out: out has {name}"):
        et_copy.d2h_copy(dev, out=t)
    assert torch.equal(dev.cpu(), torch.ones(2, 2)) and torch.equal(t.to_dense(), torch.eye(2))


def test_a_nested_tensor_is_refused_naming_the_argument():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The PyTorch API of nested tensors is in prototype stage", UserWarning)
        t = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    with pytest.raises(ValueError, match=r"_h2d_copy.out: self is a nested tensor; et_copy moves strided tensors"):
        et_copy.h2d_copy(t, out=et_copy.empty((5,), torch.float32))


@pytest.mark.parametrize("kind", ["sparse_coo", "sparse_csr", "nested_strided", "nested_jagged"])
def test_h2d_copy_without_out_refuses_a_tensor_with_no_strides_as_it_does_with_one(kind):
    """With no out, the new DeviceTensor takes self's dim order, which such a
    tensor has none of: the refusal is the one a given out gets, not torch's
    error about strides (or pybind's about symbolic ones)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*(nested tensors is in prototype|Sparse CSR).*", UserWarning)
        if kind.startswith("nested"):
            layout = torch.jagged if kind == "nested_jagged" else torch.strided
            t = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(4, 3)], layout=layout)
            want = r"self is a nested tensor; et_copy moves strided tensors \(to_padded_tensor\(\) first\)"
        else:
            t = LAYOUTS[kind](torch.eye(2))
            want = rf"self has layout torch\.{kind}; et_copy moves strided tensors \(to_dense\(\) first\)"
    before = et_copy.allocator_stats()
    with pytest.raises(ValueError, match=rf"^et_copy::_h2d_copy.out: {want}$"):
        et_copy.h2d_copy(t)
    assert et_copy.allocator_stats()["allocations"] == before["allocations"]  # refused before allocating


def test_a_tensor_without_storage_copies_only_when_it_has_no_elements():
    # Inside torch.func.vmap a tensor is a batched view with no storage of its own.
    seen = []

    def copy(x):
        dev = et_copy.empty(tuple(x.shape), torch.float32)
        try:
            _C.h2d_copy(x, dev, False)
            seen.append("copied")
        except ValueError as e:
            seen.append(str(e))
        return x

    torch.func.vmap(copy)(torch.zeros(2, 0))
    torch.func.vmap(copy)(torch.zeros(2, 3))
    assert seen[0] == "copied"
    assert re.fullmatch(r"et_copy::_h2d_copy.out: self has elements but no storage \(such as a batched tensor inside "
                        r"torch.func.vmap\); et_copy moves tensors whose memory torch holds", seen[1])  # fmt: skip


def test_a_device_tensor_cannot_be_edited_by_hand_so_the_reader_reads_what_et_copy_made():
    dev = et_copy.empty((4,), torch.float32)
    with pytest.raises(AttributeError):
        dev.shape = [4, 1]
    with pytest.raises(AttributeError):
        dev._shape = [4, 1]  # the slot the reader once read by name
    et_copy.h2d_copy(torch.arange(4.0), out=dev)
    assert torch.equal(dev.cpu(), torch.arange(4.0))


def test_registry_runner_reads_and_refuses_tensors_before_looking_up_a_kernel():
    x = torch.arange(4, dtype=torch.float32)
    with pytest.raises(TypeError, match=r"et_copy::_h2d_copy.out: out must be a torch.Tensor or an et_copy.Device"):
        et_copy.run_registered(et_copy.H2D_COPY_OUT, x, "nope")


def test_a_negative_size_given_by_hand_is_refused_not_an_abort():
    """Found by the tampering fuzz test: ExecuTorch's TensorImpl aborts the
    process on a negative size, so the bindings must refuse it first (now
    when the DeviceTensor is made)."""
    dev = et_copy.empty((2, 3), torch.float32, dynamic=True)
    with pytest.raises(ValueError, match=r"et_copy.DeviceTensor: shape \(2147483647, -1\) has a negative size"):
        et_copy.DeviceTensor(dev._buffer, torch.float32, dev.device, (2147483647, -1), (0, 1), True)


def test_a_device_tensor_over_a_slice_of_a_buffer_reads_those_bytes_and_is_freed_with_it():
    whole = et_copy.empty((16,), torch.uint8)
    et_copy.h2d_copy(torch.arange(16, dtype=torch.uint8), out=whole)
    part = et_copy.DeviceTensor(whole._buffer.slice(4, 8), torch.uint8, whole.device, (8,), (0,), False)
    assert part.data_ptr() == whole.data_ptr() + 4 and part.capacity_nbytes == 8
    assert torch.equal(part.cpu(), torch.arange(4, 12, dtype=torch.uint8))
    part.free()  # a slice's memory is its parent's
    assert not whole.freed
    whole.free()
    assert part.freed
    with pytest.raises(ValueError, match="freed"):
        part.cpu()


def test_a_slice_outside_its_buffer_or_of_a_freed_one_is_refused():
    whole = et_copy.empty((16,), torch.uint8)
    with pytest.raises(et_copy.EtCopyError, match="8 bytes at offset 12 lie outside a 16-byte buffer"):
        whole._buffer.slice(12, 8)
    whole.free()
    with pytest.raises(et_copy.EtCopyError, match="freed"):
        whole._buffer.slice(0, 4)


def test_a_device_tensor_over_a_duck_typed_buffer_is_refused():
    """The bindings take DeviceBuffers (and slices of them) only: an object
    with a ``ptr`` and ``freed`` could point anywhere."""

    class Duck:
        ptr, freed, nbytes = 0, False, 24

    with pytest.raises(TypeError, match=r"et_copy.DeviceTensor: buffer must be an et_copy._C.DeviceBuffer .* got Duck"):
        et_copy.DeviceTensor(Duck(), torch.float32, et_copy._device.Device(1, 0), (2, 3), (0, 1), False)


class _DtypeRaises(torch.Tensor):
    """A subclass whose dtype attribute cannot be read."""

    @property
    def dtype(self):
        raise KeyError("no dtype for you")


def test_a_refused_dtype_that_cannot_be_read_raises_the_tensors_own_error_and_the_next_call_works():
    # torch.uint1: a dtype et_copy does not move, so the refusal reads the dtype to name it.
    t = torch.Tensor._make_subclass(_DtypeRaises, torch.zeros(2, dtype=torch.uint1))
    dev = et_copy.h2d_copy(torch.ones(2))
    with pytest.raises(KeyError, match="no dtype for you"):
        et_copy.h2d_copy(t, out=dev)
    assert torch.equal(dev.cpu(), torch.ones(2)), "out untouched"
    with pytest.raises(TypeError, match=r"_h2d_copy.out: self has dtype torch\.uint1, which et_copy does not move"):
        et_copy.h2d_copy(torch.zeros(2, dtype=torch.uint1), out=dev)


def test_a_dynamic_out_torch_refuses_to_resize_raises_torchs_error_and_keeps_its_shape_and_bytes():
    dev = et_copy.h2d_copy(torch.arange(4.0))
    out = torch.zeros(8, requires_grad=True)  # a leaf: autograd refuses its in-place as_strided_
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        et_copy.d2h_copy(dev, out=out, dynamic_out=True)
    # Refused before the kernel ran: not a byte written.
    assert out.shape == (8,) and torch.equal(out.detach(), torch.zeros(8))
    with torch.no_grad():  # where autograd allows it, the same copy takes self's shape
        et_copy.d2h_copy(dev, out=out, dynamic_out=True)
    assert out.shape == (4,) and torch.equal(out.detach(), torch.arange(4.0))
