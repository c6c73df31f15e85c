"""The argument checks of allocators.cpp's _C functions, both sides of each
edge: use_simulated_device's device count (saturated, never wrapped), the
device type each inspection takes (CPU has no allocator), DeviceBuffer's
CPU refusal and its slices' bounds (nested slices add their offsets), and
the hook's write of a buffer that is not contiguous. A refused call changes
nothing: the mode, the device bytes and the counters stay as they were."""

from __future__ import annotations

import gc

import et_copy
import pytest
import torch
from et_copy import _C
from et_copy._device import CPU, CUDA


@pytest.fixture(autouse=True)
def _simulated():
    et_copy.use_simulated_device()
    yield
    et_copy.use_simulated_device(1)


@pytest.mark.parametrize("count", [0, -1, _C.MAX_DEVICES + 1, 2**32 + 1, 2**32, -(2**32) + 1, 2**63 - 1, -(2**63)])
def test_a_device_count_outside_the_range_is_refused_as_given_and_changes_nothing(count):
    before = et_copy.allocator_info()
    message = rf"^et_copy.use_simulated_device: device_count must be in 1\.\.{_C.MAX_DEVICES}, got {count}$"
    with pytest.raises(ValueError, match=message):
        _C.use_simulated_device(count, not before["host_readable"])
    assert et_copy.allocator_info() == before, "neither the count nor the mode changed"


@pytest.mark.parametrize("count", [1, 2, _C.MAX_DEVICES])
def test_each_count_in_the_range_is_taken(count):
    assert _C.use_simulated_device(count, None) == "already et_copy"
    assert et_copy.allocator_info()["device_count"] == count


def test_the_mode_is_set_only_when_given():
    before = et_copy.allocator_info()["host_readable"]
    try:
        _C.use_simulated_device(1, not before)
        assert et_copy.allocator_info()["host_readable"] is (not before)
        _C.use_simulated_device(1, None)
        assert et_copy.allocator_info()["host_readable"] is (not before)
    finally:
        _C.use_simulated_device(1, before)


def test_the_cpu_has_no_allocator_and_cuda_has_et_copys():
    assert _C.allocator_info(CPU) is None
    assert _C.describe_allocator(CPU) == "none"
    assert _C.describe_allocator(CUDA) == "et_copy's simulated allocator"
    info = _C.allocator_info(CUDA)
    assert info == {
        "owner": "et_copy",
        "name": "simulated",
        "device_count": 1,
        "device_count_error": None,
        "host_readable": info["host_readable"],
    }
    assert isinstance(info["host_readable"], bool)


@pytest.mark.parametrize(
    "call",
    [
        lambda: _C.allocator_stats(CPU),
        lambda: _C.open_counting_scope(CPU),
        lambda: _C.counting_scope_stats(CPU, 0),
        lambda: _C.close_counting_scope(CPU, 0),
    ],
    ids=["allocator_stats", "open_counting_scope", "counting_scope_stats", "close_counting_scope"],
)
def test_counters_of_a_device_type_with_no_allocator_are_not_found(call):
    with pytest.raises(et_copy.EtCopyError, match="^no DeviceAllocator is registered for this device type") as info:
        call()
    assert info.value.error == "NotFound"


def test_the_counters_of_cuda_are_et_copys():
    stats = _C.allocator_stats(CUDA)
    assert {"allocations", "bytes_outstanding", "h2d_copies", "failed_calls"} <= stats.keys()
    scope = _C.open_counting_scope(CUDA)
    buffer = _C.DeviceBuffer(16, CUDA, 0, 256)
    assert _C.counting_scope_stats(CUDA, scope)["allocations"] == 1
    buffer.free()
    final = _C.close_counting_scope(CUDA, scope)
    assert (final["allocations"], final["deallocations"], final["live_allocations"]) == (1, 1, 0)


def test_a_device_buffer_on_the_cpu_is_refused():
    before = et_copy.allocator_stats()
    with pytest.raises(et_copy.EtCopyError, match="^device memory cannot be on the CPU device") as info:
        _C.DeviceBuffer(16, CPU, 0, 256)
    assert info.value.error == "InvalidArgument"
    assert et_copy.allocator_stats() == before


@pytest.mark.parametrize("offset, nbytes", [(0, 16), (16, 0), (15, 1), (0, 0), (4, 8)])
def test_a_slice_inside_the_buffer_is_taken(offset, nbytes):
    buffer = _C.DeviceBuffer(16, CUDA, 0, 256)
    part = buffer.slice(offset, nbytes)
    assert (part.ptr, part.nbytes, part.device_index) == (buffer.ptr + offset, nbytes, 0)
    buffer.free()


@pytest.mark.parametrize("offset, nbytes", [(0, 17), (17, 0), (16, 1), (1, 16), (2**64 - 1, 2)])
def test_a_slice_past_the_end_is_refused_naming_its_bounds(offset, nbytes):
    buffer = _C.DeviceBuffer(16, CUDA, 0, 256)
    with pytest.raises(et_copy.EtCopyError, match=rf"^{nbytes} bytes at offset {offset} lie outside a 16-byte buffer"):
        buffer.slice(offset, nbytes)
    buffer.free()


def test_a_slice_of_a_slice_adds_the_offsets_and_is_bounded_by_its_parent_slice():
    buffer = _C.DeviceBuffer(32, CUDA, 0, 256)
    part = buffer.slice(4, 16)
    inner = part.slice(2, 14)
    assert (inner.ptr, inner.nbytes) == (buffer.ptr + 6, 14)
    with pytest.raises(et_copy.EtCopyError, match="^15 bytes at offset 2 lie outside a 16-byte buffer"):
        part.slice(2, 15)
    innermost = inner.slice(14, 0)
    assert innermost.ptr == buffer.ptr + 20
    buffer.free()
    assert part.freed and inner.freed
    with pytest.raises(et_copy.EtCopyError, match="^cannot slice a freed DeviceBuffer"):
        buffer.slice(0, 1)
    with pytest.raises(et_copy.EtCopyError, match="^cannot slice a freed DeviceBuffer"):
        part.slice(0, 1)


def test_the_hook_refuses_a_buffer_that_is_not_contiguous_and_writes_nothing():
    dev = et_copy.h2d_copy(torch.arange(8, dtype=torch.uint8))
    strided = memoryview(bytearray(b"\xff" * 8))[::2]
    with pytest.raises(et_copy.EtCopyError, match="^et_copy._C.simulated_device_write: data is not contiguous") as info:
        _C.simulated_device_write(dev.data_ptr(), strided, 0)
    assert info.value.error == "InvalidArgument"
    assert dev.cpu().tolist() == list(range(8))
    _C.simulated_device_write(dev.data_ptr(), memoryview(bytearray(b"\xff" * 8))[:4], 0)  # a contiguous slice
    assert dev.cpu().tolist() == [255] * 4 + [4, 5, 6, 7]


def test_the_hook_takes_the_current_device_and_the_last_byte_of_an_allocation():
    dev = et_copy.h2d_copy(torch.arange(8, dtype=torch.uint8))
    assert bytes(_C.simulated_device_read(dev.data_ptr() + 7, 1, -1)) == b"\x07"
    assert _C.simulated_device_host_alias(dev.data_ptr(), 8, 0) != 0
    _C.simulated_device_write(dev.data_ptr() + 7, b"", 0)  # nothing to write: the alias alone is checked
    assert dev.cpu().tolist() == list(range(8))


def test_a_slice_keeps_its_buffer_alive_after_the_last_reference_to_the_buffer_goes():
    before = et_copy.allocator_stats()["live_allocations"]
    buffer = _C.DeviceBuffer(16, CUDA, 0, 256)
    part = buffer.slice(4, 8)
    ptr = buffer.ptr
    del buffer
    gc.collect()
    assert not part.freed and part.ptr == ptr + 4
    assert et_copy.allocator_stats()["live_allocations"] == before + 1
    _C.simulated_device_write(part.ptr, b"\x01" * 8, 0)  # still live device memory
    del part
    gc.collect()
    assert et_copy.allocator_stats()["live_allocations"] == before
