"""The C++ timing loops of `python -m et_copy bench` (et_copy._C.loops): every
bound on what they take, on both sides, and the kinds of kernel they name.
Nothing here is timed: each loop runs once or is refused before it runs."""

from __future__ import annotations

import et_copy
import pytest
import torch
from et_copy import _C
from et_copy._C import loops as _loops
from et_copy._device import CUDA


@pytest.fixture(autouse=True)
def _simulated():
    et_copy.use_simulated_device()


VALID_KINDS = ("et_copy_h2d", "et_copy_d2h", "registry_h2d", "registry_d2h")
# Each breaks one part of the rule: the prefix, the direction, or both.
BAD_KINDS = (
    "foo_h2d",  # a valid direction after an unknown prefix
    "et_copy_h2x",
    "registry_h2x",  # the registry prefix with an unknown direction
    "registry_",
    "registry_et_copy_h2d",
    "h2d",
    "et_copy_h2d ",
    "",
)


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_a_kind_outside_the_five_is_refused_naming_them(kind):
    with pytest.raises(ValueError, match="kind must be memcpy, et_copy_h2d, et_copy_d2h, registry_h2d or registry_d2h"):
        _loops.kernel_address(kind)
    with pytest.raises(ValueError, match="kind must be memcpy"):
        _loops.bench_kernel(kind, 8, 1, 1)


def test_each_valid_kind_names_a_kernel_and_each_direction_its_own():
    h2d, d2h = _loops.kernel_address("et_copy_h2d"), _loops.kernel_address("et_copy_d2h")
    assert h2d and d2h and h2d != d2h
    for kind in ("registry_h2d", "registry_d2h"):
        try:  # the registry may not hold et_copy's kernels in this process: not a refusal of the kind
            assert _loops.kernel_address(kind)
        except RuntimeError as e:
            assert "no kernel is registered" in str(e)


@pytest.mark.parametrize("kind", ("et_copy_h2d", "et_copy_d2h"))
def test_one_call_of_each_direction_moves_its_bytes_once(kind):
    before = et_copy.allocator_stats()
    ns = _loops.bench_kernel(kind, 3, 1, 2)  # an odd size, two repeats of one iteration
    assert len(ns) == 2 and all(t >= 0 for t in ns)
    after = et_copy.allocator_stats()
    field = "h2d_bytes" if kind.endswith("h2d") else "d2h_bytes"
    assert after[field] - before[field] == 3 * 2


def test_nbytes_runs_from_1_to_2_31_minus_1():
    with pytest.raises(ValueError, match=r"nbytes must be in 1..2\^31-1"):
        _loops.bench_kernel("et_copy_h2d", 0, 1, 1)
    assert len(_loops.bench_kernel("et_copy_h2d", 1, 1, 1)) == 1
    # The largest is past the nbytes check: the next check (one buffer without
    # the other) refuses it, before anything is allocated.
    with pytest.raises(ValueError, match="give both buffers or neither"):
        _loops.bench_kernel("et_copy_h2d", 2**31 - 1, 1, 1, host=1)
    with pytest.raises(ValueError, match=r"nbytes must be in 1..2\^31-1"):
        _loops.bench_kernel("et_copy_h2d", 2**31, 1, 1, host=1)


@pytest.mark.parametrize("iters, repeats", [(0, 1), (1, 0), (-1, 1), (1, -1)])
def test_iterations_and_repeats_must_be_at_least_one(iters, repeats):
    with pytest.raises(ValueError, match="iters and repeats must be at least 1"):
        _loops.bench_kernel("et_copy_h2d", 8, iters, repeats)
    src = torch.zeros(8, dtype=torch.uint8)
    dst = torch.ones(8, dtype=torch.uint8)
    with pytest.raises(ValueError, match="iters and repeats must be at least 1"):
        _loops.bench_memcpy(dst.data_ptr(), src.data_ptr(), 8, iters, repeats)
    assert torch.equal(dst, torch.ones(8, dtype=torch.uint8))  # nothing ran


def test_memcpy_with_one_iteration_copies_and_a_null_pointer_is_refused():
    src = torch.arange(7, dtype=torch.uint8)
    dst = torch.zeros(7, dtype=torch.uint8)
    assert len(_loops.bench_memcpy(dst.data_ptr(), src.data_ptr(), 7, 1, 3)) == 3
    assert torch.equal(dst, src)
    for d, s in ((0, src.data_ptr()), (dst.data_ptr(), 0)):
        with pytest.raises(ValueError, match="null pointer"):
            _loops.bench_memcpy(d, s, 7, 1, 1)


def test_device_to_device_takes_device_indices_from_minus_one_to_the_largest():
    a, b = et_copy.empty((5,), torch.uint8), et_copy.empty((5,), torch.uint8)
    for bad in (-2, _C.MAX_DEVICE_INDEX + 1):
        with pytest.raises(ValueError, match=f"device index {bad} is out of range"):
            _loops.device_to_device(a.data_ptr(), b.data_ptr(), 5, bad)
    for good in (-1, 0):
        _loops.device_to_device(a.data_ptr(), b.data_ptr(), 5, good)
    # The largest index passes the range check and reaches the allocator, which has no such device.
    with pytest.raises(RuntimeError, match="InvalidArgument: device-to-device copy failed"):
        _loops.device_to_device(a.data_ptr(), b.data_ptr(), 5, _C.MAX_DEVICE_INDEX)


@pytest.mark.parametrize("kind", ("et_copy_h2d", "et_copy_d2h"))
def test_a_kernel_refusing_the_callers_buffers_fails_the_loop_naming_the_kind_and_error(kind):
    host = torch.arange(8, dtype=torch.uint8)
    not_device = torch.zeros(8, dtype=torch.uint8)  # host memory given as the device buffer: the kernel refuses it
    before = et_copy.allocator_stats()
    with pytest.raises(RuntimeError, match=f"^bench_kernel: the {kind} kernel failed with Error::InvalidArgument$"):
        _loops.bench_kernel(kind, 8, 1, 1, host=host.data_ptr(), device=not_device.data_ptr())
    assert torch.equal(host, torch.arange(8, dtype=torch.uint8)) and not not_device.any(), "nothing was written"
    after = et_copy.allocator_stats()
    assert (after["h2d_bytes"], after["d2h_bytes"]) == (before["h2d_bytes"], before["d2h_bytes"])
    # The same loop over memory from the allocator runs, and moves its bytes once.
    device = _C.DeviceBuffer(8, CUDA, 0, 256)
    assert len(_loops.bench_kernel(kind, 8, 1, 1, host=host.data_ptr(), device=device.ptr)) == 1
    field = "h2d_bytes" if kind.endswith("h2d") else "d2h_bytes"
    assert et_copy.allocator_stats()[field] - after[field] == 8


def test_the_memcpy_kind_copies_the_callers_host_buffer_into_its_device_buffer_once_per_iteration():
    host = torch.arange(7, dtype=torch.uint8)
    device = torch.zeros(7, dtype=torch.uint8)  # memcpy takes the device buffer as its host alias
    assert len(_loops.bench_kernel("memcpy", 7, 1, 2, host=host.data_ptr(), device=device.data_ptr())) == 2
    assert torch.equal(device, host)
