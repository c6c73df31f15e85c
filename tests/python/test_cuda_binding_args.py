"""The argument checks of cuda.cpp's _C functions that need no GPU, both
sides of each edge: the copy configuration's pageable mode and its two
sizes (zero taken, one below refused, naming both values, the configuration
left as it was), and the DLPack capsule's shape and strides (equal lengths
taken; the owner it keeps alive is released with the capsule, and a refused
call keeps no reference)."""

from __future__ import annotations

import ctypes
import sys

import et_copy
import pytest
from et_copy import _C
from et_copy import cuda as _cuda

pytestmark = pytest.mark.skipif(not _cuda.built_with_cuda(), reason="et_copy was built without the CUDA toolkit")


@pytest.fixture
def config():
    before = _C.cuda_copy_config()
    yield before
    _C.set_cuda_copy_config(before["pageable"], before["staging_threshold"], before["chunk_bytes"])
    assert _C.cuda_copy_config() == before


@pytest.mark.parametrize("pageable", ["staged", "direct"])
def test_both_pageable_modes_and_a_zero_threshold_are_taken(config, pageable):
    _C.set_cuda_copy_config(pageable, 0, config["chunk_bytes"])
    assert _C.cuda_copy_config() == {**config, "pageable": pageable, "staging_threshold": 0}


@pytest.mark.parametrize("pageable", ["Staged", "", "direct "])
def test_another_pageable_mode_is_refused_naming_it(config, pageable):
    with pytest.raises(et_copy.EtCopyError, match=f"^pageable must be 'staged' or 'direct', got '{pageable}'$") as e:
        _C.set_cuda_copy_config(pageable, 0, config["chunk_bytes"])
    assert e.value.error == "InvalidArgument"
    assert _C.cuda_copy_config() == config


@pytest.mark.parametrize("threshold, chunk", [(-1, None), (0, -1), (-1, -1), (-(2**63), None)])
def test_a_negative_size_is_refused_naming_both(config, threshold, chunk):
    chunk = config["chunk_bytes"] if chunk is None else chunk
    message = f"^staging_threshold and chunk_bytes must not be negative, got {threshold} and {chunk}$"
    with pytest.raises(et_copy.EtCopyError, match=message) as e:
        _C.set_cuda_copy_config("staged", threshold, chunk)
    assert e.value.error == "InvalidArgument"
    assert _C.cuda_copy_config() == config


@pytest.mark.parametrize("shape, strides", [([], []), ([2, 3], [3, 1])])
def test_a_capsule_of_equal_lengths_holds_its_owner_until_it_goes(shape, strides):
    owner = object()
    refs = sys.getrefcount(owner)
    capsule = _C.cuda_dlpack(owner, 0, 0, shape, strides, 2, 32)
    assert type(capsule).__name__ == "PyCapsule" and "dltensor" in repr(capsule)
    assert sys.getrefcount(owner) == refs + 1
    del capsule
    assert sys.getrefcount(owner) == refs


@pytest.mark.parametrize("shape, strides", [([2, 3], [3]), ([2], [1, 1]), ([], [1])])
def test_a_capsule_whose_shape_and_strides_differ_in_length_is_refused(shape, strides):
    owner = object()
    refs = sys.getrefcount(owner)
    with pytest.raises(et_copy.EtCopyError, match="^__dlpack__: shape and strides differ in length$") as e:
        _C.cuda_dlpack(owner, 0, 0, shape, strides, 2, 32)
    assert e.value.error == "InvalidArgument"
    assert sys.getrefcount(owner) == refs


class _DLTensor(ctypes.Structure):
    # DLPack's DLTensor, as the capsule holds it (the consumer's view).
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def test_the_capsule_names_cuda_its_device_dtype_shape_and_strides_as_dlpack_spells_them():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    capsule = _C.cuda_dlpack(object(), 0x1000, 3, [2, 5], [5, 1], 2, 32)
    t = _DLTensor.from_address(get(capsule, b"dltensor"))
    assert (t.data, t.device_type, t.device_id) == (0x1000, 2, 3)  # kDLCUDA is 2 in DLPack
    assert (t.ndim, t.code, t.bits, t.lanes, t.byte_offset) == (2, 2, 32, 1, 0)
    assert [t.shape[i] for i in range(2)] == [2, 5] and [t.strides[i] for i in range(2)] == [5, 1]
