"""The core's limits and names (runtime/include/et_copy/limits.h,
failure_report.h) as _C exposes them: the numbers are stated here on
purpose, since ExecuTorch's types fix them, and Python uses _C's values."""

from __future__ import annotations

import et_copy
import pytest
import torch
from et_copy import _C
from et_copy._device import CPU, CUDA, Device, parse_device


def test_the_limits_are_executorchs():
    assert _C.MAX_TENSOR_DIMS == 16  # kTensorDimensionLimit
    assert (_C.MIN_DEVICE_INDEX, _C.MAX_DEVICE_INDEX) == (torch.iinfo(torch.int8).min, torch.iinfo(torch.int8).max)
    assert _C.MAX_DEVICES == _C.MAX_DEVICE_INDEX
    assert _C.DEVICE_ALIGNMENT == 256  # cudaMalloc's
    assert _C.TENSOR_ALIGNMENT == 16  # a GPU kernel's widest vector load


def test_a_device_has_one_name_in_python_and_in_cpp():
    assert [str(Device(CPU, 0)), str(Device(CPU, -1)), str(Device(CUDA, 3))] == ["cpu", "cpu", "cuda:3"]
    assert _C.device_name(CUDA, 3) == "cuda:3"
    assert _C.device_name(2, 1) == "device type 2:1"


def test_the_device_count_limit_is_the_cores_and_the_message_names_op_and_argument():
    try:
        et_copy.use_simulated_device(_C.MAX_DEVICES)
        assert et_copy.allocator_info()["device_count"] == _C.MAX_DEVICES
        message = rf"et_copy.use_simulated_device: device_count must be in 1\.\.{_C.MAX_DEVICES}, got"
        with pytest.raises(ValueError, match=message):
            et_copy.use_simulated_device(_C.MAX_DEVICES + 1)
        assert et_copy.allocator_info()["device_count"] == _C.MAX_DEVICES, "a refused count changes nothing"
    finally:
        et_copy.use_simulated_device(1)


def test_device_strings_take_every_index_the_core_holds():
    assert parse_device(f"cuda:{_C.MAX_DEVICE_INDEX}", op="t") == Device(CUDA, _C.MAX_DEVICE_INDEX)
    with pytest.raises(ValueError, match="t: device has a bad device index"):
        parse_device(f"cuda:{_C.MAX_DEVICE_INDEX + 1}", op="t")


def test_a_tensor_beyond_the_dim_limit_is_refused_by_the_op_it_was_given_to():
    x = torch.zeros([1] * (_C.MAX_TENSOR_DIMS + 1))
    et_copy.use_simulated_device()
    with pytest.raises(et_copy.EtCopyError, match=rf"_h2d_copy.out: self has {_C.MAX_TENSOR_DIMS + 1} dims"):
        et_copy.h2d_copy(x)
    with pytest.raises(et_copy.EtCopyError, match=rf"at most {_C.MAX_TENSOR_DIMS}"):
        et_copy.empty(tuple(x.shape), torch.float32)
