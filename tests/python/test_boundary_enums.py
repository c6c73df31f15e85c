"""Enum values that cross the Python boundary, checked against ExecuTorch's
own schema rather than against et-copy's tables: each dtype's ScalarType
code, the device type codes a DeviceTensor carries, and the device type and
index a torch CUDA tensor is read with."""

from __future__ import annotations

import et_copy
import pytest
import torch
from et_copy import _C

schema = pytest.importorskip("executorch.exir.schema")
scalar_type = pytest.importorskip("executorch.exir.scalar_type")

# torch's name for a dtype -> ExecuTorch's ScalarType name, where they differ.
ET_NAMES = {
    "uint8": "BYTE",
    "int8": "CHAR",
    "int16": "SHORT",
    "int32": "INT",
    "int64": "LONG",
    "float16": "HALF",
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "float8_e4m3fn": "FLOAT8E4M3FN",
    "float8_e5m2": "FLOAT8E5M2",
    "float8_e4m3fnuz": "FLOAT8E4M3FNUZ",
    "float8_e5m2fnuz": "FLOAT8E5M2FNUZ",
}


def test_every_dtype_code_is_executorchs_scalar_type_value():
    codes = _C.dtype_codes()
    checked = 0
    for dtype, code in codes.items():
        name = str(dtype).removeprefix("torch.")
        et_name = ET_NAMES.get(name, name.upper())
        if et_name not in scalar_type.ScalarType.__members__:
            continue  # a code the schema's enum does not name (bits1x8 .. bits8)
        assert code == scalar_type.ScalarType[et_name].value, dtype
        checked += 1
    assert checked >= 20
    # The codes are distinct and run from 0 (uint8) to the last (uint64).
    assert len(set(codes.values())) == len(codes)
    assert codes[torch.uint8] == 0 and codes[torch.uint64] == max(codes.values())


def test_a_device_tensor_carries_executorchs_cuda_device_type_and_its_index():
    et_copy.use_simulated_device()
    for index in (-1, 0):
        t = et_copy.empty((3,), torch.float32, device="cuda:0" if index == 0 else "cuda")
        assert t.device[0] == schema.DeviceType.CUDA.value
        assert t.device[1] in (-1, 0)
    with pytest.raises(ValueError, match="must be a CUDA device \\(type 1\\)"):
        _C.DeviceTensor(et_copy.empty((3,), torch.uint8)._buffer, torch.uint8, (schema.DeviceType.CPU.value, 0), (3,),
                        None, False)  # fmt: skip


class _StorageLess(torch.Tensor):
    """A torch tensor whose device is whatever it was made with and that holds
    no memory (torch's wrapper subclass): how a CUDA tensor reaches the
    bindings on a machine without a GPU. Any torch op on it is refused."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{func} on a storage-less tensor")


def _on(device: str, numel: int) -> torch.Tensor:
    return torch.Tensor._make_wrapper_subclass(_StorageLess, (numel,), dtype=torch.float32, device=device)


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_a_torch_cuda_tensor_is_read_as_executorchs_cuda_device_in_either_direction(device):
    et_copy.use_simulated_device()
    host = torch.zeros(3)
    # ExecuTorch's CUDA (type 1), so each kernel sees a device tensor where it wants a host one ...
    with pytest.raises(et_copy.EtCopyError, match=r"_h2d_copy.out: self must be a host \(CPU\) tensor, got a CUDA"):
        _C.h2d_copy(_on(device, 3), et_copy.empty((3,), torch.float32), False)
    with pytest.raises(et_copy.EtCopyError, match=r"_d2h_copy.out: out must be a host \(CPU\) tensor, got a CUDA"):
        _C.d2h_copy(et_copy.empty((3,), torch.float32), _on(device, 3), False)
    # ... and takes it where it wants a device one: an empty one copies, one with no memory is refused.
    _C.d2h_copy(_on(device, 0), torch.zeros(0), False)
    with pytest.raises(et_copy.EtCopyError, match=r"_d2h_copy.out: self has no data"):
        _C.d2h_copy(_on(device, 3), host, False)
    assert torch.equal(host, torch.zeros(3))


@pytest.mark.parametrize("index", [1, 5, 127])
def test_a_torch_cuda_tensors_index_reaches_the_kernel_which_names_it(index):
    et_copy.use_simulated_device()
    missing = rf"is on CUDA device {index}, but the simulated allocator has 1 device"
    with pytest.raises(et_copy.EtCopyError, match=rf"_d2h_copy.out: self {missing}"):
        _C.d2h_copy(_on(f"cuda:{index}", 0), torch.zeros(0), False)
    with pytest.raises(et_copy.EtCopyError, match=rf"_h2d_copy.out: out {missing}"):
        _C.h2d_copy(torch.zeros(0), _on(f"cuda:{index}", 0), False)


# Every _C function that takes a device type code: ExecuTorch's DeviceType has
# CPU (0) and CUDA (1), and its registry holds kNumDeviceTypes (2) slots.
DEVICE_TYPE_TAKERS = {
    "describe_allocator": lambda t: _C.describe_allocator(t),
    "allocator_info": lambda t: _C.allocator_info(t),
    "allocator_stats": lambda t: _C.allocator_stats(t),
    "open_counting_scope": lambda t: _C.close_counting_scope(t, _C.open_counting_scope(t)),
    "DeviceBuffer": lambda t: _C.DeviceBuffer(64, t, 0, 64),
}


@pytest.mark.parametrize("taker", DEVICE_TYPE_TAKERS)
@pytest.mark.parametrize("code", [-1, len(schema.DeviceType), 127])
def test_a_device_type_code_past_executorchs_is_refused_by_every_function_that_takes_one(taker, code):
    et_copy.use_simulated_device()
    with pytest.raises(et_copy.EtCopyError, match=rf"unknown device type {code}\b"):
        DEVICE_TYPE_TAKERS[taker](code)


@pytest.mark.parametrize("taker", DEVICE_TYPE_TAKERS)
def test_the_last_device_type_code_executorch_has_is_taken(taker):
    et_copy.use_simulated_device()
    cuda = max(t.value for t in schema.DeviceType)
    DEVICE_TYPE_TAKERS[taker](cuda)  # CUDA, served by the simulated device: no refusal
